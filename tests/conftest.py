from __future__ import annotations

from pathlib import Path

import pytest

from sigmap_lib.studies._paths import shared_data_dir


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes more than ~20 s (run by CI, skip with -m 'not slow')"
    )
    config.addinivalue_line("markers", "realdata: needs ../shared/data (skips when absent)")
    config.addinivalue_line("markers", "browser: drives Chromium through Playwright")
    config.addinivalue_line("markers", "postgres: needs a PostgreSQL server (SIGMAP_TEST_PG_URL)")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test with a clear message when absent."""
    path = shared_data_dir()
    if not path.exists():
        pytest.skip(
            f"real data folder {path} is absent (set SIGMAP_SHARED_DATA to point at shared/data)"
        )
    return path

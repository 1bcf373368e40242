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
    config.addinivalue_line("markers", "slurm: needs a Slurm cluster (SIGMAP_TEST_SLURM)")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test with a clear message when absent."""
    path = shared_data_dir()
    if not path.exists():
        pytest.skip(
            f"real data folder {path} is absent (set SIGMAP_SHARED_DATA to point at shared/data)"
        )
    return path


#: Test files that take minutes, longest first. They are collected first, so that with
#: `make test`'s workers (pytest-xdist, whole files per worker) they start at once and the
#: short files fill the other worker meanwhile, instead of one of them starting last.
LONGEST_FIRST = (
    "tests/assets/test_daemon.py",
    "tests/assets/test_small_world.py",
    # xdist's file scheduler tops each worker up to a second file at the start: the
    # real-daemon test's worker gets this quick one (4 tests, seconds) instead of the next
    # long file, which would otherwise wait behind the daemon test (the automation flow
    # waited 42 min there); the long files below go to the other worker as it asks.
    "tests/assets/test_layout.py",
    "tests/assets/test_automation.py",
    "tests/assets/test_skips.py",
    "tests/assets/test_shards.py",
    "tests/lib/studies/test_realdata_overlap.py",
    "tests/lib/nll/test_real_model.py",
    "tests/assets/test_run_shapes.py",
    "tests/lib/worlds/test_zoo.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = Path(str(config.rootpath))

    def key(item: pytest.Item) -> int:
        rel = Path(str(item.path)).relative_to(root).as_posix()
        return rank.get(rel, len(rank))

    items.sort(key=key)  # stable: the order within a file and among the others is kept

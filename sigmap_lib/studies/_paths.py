"""Well-known locations: the repository root and the shared real-data folder."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """Folder with the real public data (``../shared/data`` beside the checkout).

    Overridden by the environment variable ``SIGMAP_SHARED_DATA``. The folder may be
    absent (tests that need it skip); callers check ``.exists()``.
    """
    env = os.environ.get("SIGMAP_SHARED_DATA")
    if env:
        return Path(env).expanduser().resolve()
    return (REPO_ROOT.parent / "shared" / "data").resolve()

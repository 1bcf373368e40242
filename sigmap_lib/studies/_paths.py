"""Well-known locations: the repository root and the shared real-data folder."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """Folder with the real public data (``../shared/data`` beside the checkout).

    Overridden by the environment variable ``SIGMAP_SHARED_DATA``. The folder may be
    absent (tests that need it skip); callers check ``.exists()``.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> from sigmap_lib.studies import shared_data_dir
    >>> with mock.patch.dict(os.environ, {"SIGMAP_SHARED_DATA": "/data/sigmap"}):
    ...     shared_data_dir()  # the environment variable wins
    PosixPath('/data/sigmap')
    >>> env = {k: v for k, v in os.environ.items() if k != "SIGMAP_SHARED_DATA"}
    >>> with mock.patch.dict(os.environ, env, clear=True):
    ...     shared_data_dir().parts[-2:]  # default: ../shared/data beside the checkout
    ('shared', 'data')
    """
    env = os.environ.get("SIGMAP_SHARED_DATA")
    if env:
        return Path(env).expanduser().resolve()
    return (REPO_ROOT.parent / "shared" / "data").resolve()

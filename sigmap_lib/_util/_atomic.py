"""Atomic writes: a file or a whole folder appears complete or not at all.

Every writer here writes to a temporary sibling of the destination (same folder, so the
final ``os.replace`` is a rename on one file system) and renames it into place; if the
body raises (disk full, a bad value, an interrupt) the temporary is deleted and the old
destination is left untouched. Readers therefore never see half a file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_dir(dest: str | os.PathLike[str], *, keep_unchanged: bool = False) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``dest``; on success it replaces ``dest``.

    Readers see either the old folder or the complete new one: the new folder is renamed
    into place (the old one is moved aside first and deleted afterwards). If the body
    raises, the temporary folder is deleted and ``dest`` is untouched.

    With ``keep_unchanged=True`` an existing ``dest`` is updated file by file instead: a
    file whose bytes are unchanged is kept as it is (its modification time too, so what
    watches the folder sees no change), a changed or new one replaces atomically, one the
    body did not write is removed. Each file is atomic; the folder as a whole is not.

    Examples
    --------
    >>> from sigmap_lib._util import atomic_dir
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_dir(root / "fit") as tmp:
    ...     _ = (tmp / "params.json").write_text("{}")
    >>> sorted(p.name for p in (root / "fit").iterdir())
    ['params.json']
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
        if keep_unchanged and dest.is_dir():
            _update_tree(tmp, dest)
            shutil.rmtree(tmp, ignore_errors=True)
        elif dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            os.replace(dest, old)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _same_bytes(a: Path, b: Path) -> bool:
    import filecmp

    return b.is_file() and filecmp.cmp(a, b, shallow=False)


def _update_tree(src: Path, dest: Path) -> None:
    """``dest`` made equal to ``src``, touching only the files that differ."""
    wanted = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    for rel in sorted(wanted):
        if not _same_bytes(src / rel, dest / rel):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(src / rel, dest / rel)
    for p in sorted(dest.rglob("*"), reverse=True):
        if p.is_file() and p.relative_to(dest) not in wanted:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()


@contextmanager
def atomic_file(
    dest: str | os.PathLike[str],
    *,
    suffix: str = ".tmp",
    fsync: bool = False,
    keep_unchanged: bool = False,
) -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; on success it replaces ``dest``.

    The body writes the temporary path however it likes (``df.write_parquet(tmp)``,
    ``fig.savefig(tmp, format="png")``). The temporary is named ``.<dest name>.<random>``
    plus ``suffix`` (``".tmp.npz"`` for ``np.savez``, which appends ``.npz`` otherwise).
    With ``fsync=True`` the file's data is flushed to disk before the rename (for stores
    that must survive a power cut). With ``keep_unchanged=True`` a ``dest`` whose bytes equal
    the new ones is left as it is (its modification time too).

    Examples
    --------
    >>> from sigmap_lib._util import atomic_file
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "table.csv"
    >>> with atomic_file(out) as tmp:
    ...     _ = tmp.write_text("a,b\\n1,2\\n")
    >>> out.read_text()
    'a,b\\n1,2\\n'
    >>> try:
    ...     with atomic_file(out) as tmp:
    ...         _ = tmp.write_text("half")
    ...         raise OSError("disk full")
    ... except OSError:
    ...     pass
    >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
    ('a,b\\n1,2\\n', ['table.csv'])
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix, dir=dest.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if keep_unchanged and _same_bytes(tmp, dest):
            tmp.unlink()
            return
        if fsync:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(
    dest: str | os.PathLike[str], data: bytes, *, fsync: bool = False, keep_unchanged: bool = False
) -> Path:
    """Write ``data`` to ``dest`` atomically (see :func:`atomic_file`, also for
    ``keep_unchanged``); returns ``dest``.

    Examples
    --------
    >>> from sigmap_lib._util import atomic_write_bytes
    >>> import tempfile, pathlib
    >>> p = atomic_write_bytes(pathlib.Path(tempfile.mkdtemp()) / "x.bin", b"abc")
    >>> p.read_bytes()
    b'abc'
    """
    dest = Path(dest)
    with atomic_file(dest, keep_unchanged=keep_unchanged) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    return dest


def atomic_write_text(
    dest: str | os.PathLike[str], text: str, *, fsync: bool = False, keep_unchanged: bool = False
) -> Path:
    """Write ``text`` (UTF-8) to ``dest`` atomically (see :func:`atomic_file`); returns
    ``dest``.

    Examples
    --------
    >>> from sigmap_lib._util import atomic_write_text
    >>> import tempfile, pathlib
    >>> atomic_write_text(pathlib.Path(tempfile.mkdtemp()) / "a.txt", "héllo").read_text()
    'héllo'
    """
    return atomic_write_bytes(
        dest, text.encode("utf-8"), fsync=fsync, keep_unchanged=keep_unchanged
    )


def json_default(o: Any) -> Any:
    """``json.dumps(default=...)`` for NumPy scalars and arrays and paths.

    Examples
    --------
    >>> from sigmap_lib._util import json_default
    >>> import json, numpy as np
    >>> json.dumps({"n": np.int64(3), "x": np.float32(0.5), "v": np.arange(2)}, default=json_default)
    '{"n": 3, "x": 0.5, "v": [0, 1]}'
    """
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def atomic_write_json(
    dest: str | os.PathLike[str], obj: Any, *, indent: int | None = 1, **kwargs: Any
) -> Path:
    """Write ``obj`` as JSON to ``dest`` atomically (NumPy values allowed); returns ``dest``.

    Examples
    --------
    >>> from sigmap_lib._util import atomic_write_json
    >>> import tempfile, pathlib, numpy as np
    >>> p = atomic_write_json(pathlib.Path(tempfile.mkdtemp()) / "s.json", {"k": np.int8(2)})
    >>> p.read_text()
    '{\\n "k": 2\\n}'
    """
    kwargs.setdefault("default", json_default)
    return atomic_write_text(dest, json.dumps(obj, indent=indent, **kwargs))

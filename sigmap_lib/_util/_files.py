"""The files users name: a file or a folder of them, the first bytes of a file, and a cheap
identity of files (names, sizes, modification times) that sensors compare.

Every error is a :class:`SigmapInputError` naming ``what`` and the path.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sigmap_lib.errors import SigmapInputError


def files_in(path: str | Path, pattern: str, what: str) -> list[Path]:
    """``[path]`` when it is a file, else the files below the folder ``path`` whose names
    match ``pattern`` (recursive, sorted); may be empty. A missing path is an error.

    Examples
    --------
    >>> from sigmap_lib._util import files_in
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b/results_2.json", "a/results_1.json", "a/notes.txt"):
    ...     (root / name).parent.mkdir(exist_ok=True)
    ...     _ = (root / name).write_text("{}")
    >>> [p.name for p in files_in(root, "results*.json", "lm-eval results")]
    ['results_1.json', 'results_2.json']
    >>> files_in(root / "a" / "notes.txt", "results*.json", "lm-eval results") == [root / "a" / "notes.txt"]
    True
    >>> files_in(root / "absent", "*.json", "lm-eval results")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: lm-eval results .../absent: no such file or folder
    """
    root = Path(path)
    if root.is_file():
        return [root]
    if root.is_dir():
        return sorted(root.rglob(pattern))
    raise SigmapInputError(f"{what} {root}: no such file or folder")


def read_head(path: Path, n: int, what: str) -> bytes:
    """The first ``n`` bytes of the file ``path`` (fewer when it is shorter); a missing
    path, a folder or an unreadable file is an error naming ``what`` and the path.

    Examples
    --------
    >>> from sigmap_lib._util import read_head
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "model.gguf"
    >>> _ = p.write_bytes(b"GGUF\\x03\\x00")
    >>> read_head(p, 4, "GGUF file")
    b'GGUF'
    >>> read_head(p.parent, 4, "GGUF file")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: GGUF file ... is not a file
    """
    if not path.exists():
        raise SigmapInputError(f"{what} {path} does not exist")
    if not path.is_file():
        raise SigmapInputError(f"{what} {path} is not a file")
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError as exc:
        raise SigmapInputError(f"{what} {path} cannot be read ({exc})") from exc


def read_folder_json(folder: str | Path, name: str, what: str) -> tuple[Path, Any]:
    """``(path, content)`` of the JSON file ``name`` that marks ``folder`` as a ``what``;
    a :class:`SigmapInputError` ``"<folder> is not a <what> (missing <name>)"`` when the
    file is absent.

    Examples
    --------
    >>> from sigmap_lib._util import read_folder_json
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "truth.json").write_text('{"world": "synthetic"}')
    >>> path, truth = read_folder_json(root, "truth.json", "synthetic world")
    >>> path.name, truth["world"]
    ('truth.json', 'synthetic')
    >>> read_folder_json(root, "models.json", "rank store")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: ... is not a rank store (missing models.json)
    """
    folder = Path(folder)
    path = folder / name
    if not path.exists():
        raise SigmapInputError(f"{folder} is not a {what} (missing {name})")
    return path, json.loads(path.read_text())


def files_stamp(files: Iterable[str | Path], root: str | Path | None = None) -> str:
    """A cheap identity of files (names, sizes, modification times; nothing is read): what a
    sensor compares to notice that a model, a corpus or a folder of logs changed.

    Parameters
    ----------
    files : iterable of path
        The files, in the order they are stamped (sort them for an order-free stamp).
    root : path, optional
        Names are taken relative to ``root`` (so a moved folder keeps its stamp); by
        default as given.

    Returns
    -------
    str
        16 hex digits of the sha256 of ``name|size|mtime_ns`` lines.

    Examples
    --------
    >>> import os
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import files_stamp
    >>> _ = Path("w.bin").write_bytes(b"abc")
    >>> a = files_stamp(["w.bin"])
    >>> os.utime("w.bin", ns=(0, 10**9))  # touched (e.g. rewritten in place)
    >>> a == files_stamp(["w.bin"]), len(a)
    (False, 16)
    >>> files_stamp([Path.cwd() / "w.bin"], root=Path.cwd()) == files_stamp(["w.bin"])
    True
    """
    h = hashlib.sha256()
    for f in files:
        st = os.stat(f)
        name = f if root is None else Path(f).relative_to(root)
        h.update(f"{name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]

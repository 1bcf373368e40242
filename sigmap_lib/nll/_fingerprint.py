"""What a model's per-unit NLL depends on, as one key (issue #17: caching keyed by what was
computed).

A ``token_nll`` cell is stored under the fingerprint of its model: the content (sha256) of
every file of the model's folder or GGUF file — weights, tokenizer, configs — its id and
revision, and the scoring settings (dtype, context length, stride). The shard is the other
half of the key (shard keys are content-addressed). A model whose weights are overwritten in
place, re-tokenized or scored with other settings gets a new fingerprint, so only its cells
are recomputed and old values are never read as new. A hub id without a local folder is keyed
by id and revision (pin ``revision`` to a commit hash to make that exact).

Hashing a multi-GB weight file takes seconds; the sha256 of each file is cached by (path,
size, modification time) in a small JSON file, so it is computed once per file version.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util import atomic_write_json

FINGERPRINT_VERSION = "sigmap-model-fingerprint/1"
_BLOCK = 1 << 22


def model_files(spec: Any) -> list[Path]:
    """The files a model's NLL depends on: its GGUF file, or every file of its local folder
    (hidden files and ``.git`` left out), sorted; empty for a hub id or imported NLL.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import ModelSpec
    >>> from sigmap_lib.nll import model_files
    >>> Path("m").mkdir()
    >>> _ = Path("m/config.json").write_text("{}")
    >>> _ = Path("m/.cache").write_text("x")
    >>> [p.name for p in model_files(ModelSpec(id="m", key="m", path=Path("m")))]
    ['config.json']
    """
    if getattr(spec, "gguf", None) is not None:
        return [Path(spec.gguf)]
    path = getattr(spec, "path", None)
    if path is None or getattr(spec, "nll_source", None) is not None:
        return []
    root = Path(path)
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append(p)
    return out


def file_sha256(path: str | Path, cache: dict[str, Any] | None = None) -> str:
    """sha256 hex of a file's bytes, reusing ``cache[path]`` while size and mtime match.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.nll import file_sha256
    >>> _ = Path("w.bin").write_bytes(b"abc")
    >>> cache = {}
    >>> file_sha256("w.bin", cache)[:12], len(cache)
    ('ba7816bf8f01', 1)
    """
    p = Path(path)
    st = p.stat()
    key = str(p.resolve())
    stamp = [st.st_size, st.st_mtime_ns]
    if cache is not None and cache.get(key, {}).get("stamp") == stamp:
        return str(cache[key]["sha256"])
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    digest = h.hexdigest()
    if cache is not None:
        cache[key] = {"stamp": stamp, "sha256": digest}
    return digest


def model_fingerprint(
    spec: Any,
    *,
    settings: dict[str, Any] | None = None,
    cache_path: str | Path | None = None,
) -> str:
    """16-hex key of everything a model's per-unit NLL depends on besides the corpus.

    Parameters
    ----------
    spec : ModelSpec
        A registry entry (``id``, ``revision``, ``dtype``, ``path`` / ``gguf`` /
        ``nll_source``).
    settings : dict, optional
        Scoring settings that change the values (e.g. ``{"dtype": "bfloat16",
        "max_length": 2048, "stride": 1024}``); JSON-serializable.
    cache_path : path, optional
        JSON file caching each model file's sha256 by (path, size, mtime).

    Returns
    -------
    str
        16 hex digits; equal exactly when the files' bytes, id, revision, registry dtype and
        settings are equal.

    Examples
    --------
    A GGUF model (a folder works the same way, over every file of it):

    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import ModelSpec
    >>> from sigmap_lib.nll import model_fingerprint
    >>> _ = Path("smol.gguf").write_bytes(b"weights v1")
    >>> spec = ModelSpec(id="local/smol", key="local__smol", gguf=Path("smol.gguf"))
    >>> a = model_fingerprint(spec, cache_path="fp.json")
    >>> a == model_fingerprint(spec, cache_path="fp.json")  # the file's sha256 is cached
    True
    >>> _ = Path("smol.gguf").write_bytes(b"weights v2")  # overwritten in place
    >>> a == model_fingerprint(spec, cache_path="fp.json")
    False
    >>> a == model_fingerprint(spec, settings={"dtype": "bfloat16"}, cache_path="fp.json")
    False
    """
    cache: dict[str, Any] = {}
    cp = Path(cache_path) if cache_path is not None else None
    if cp is not None and cp.exists():
        try:
            cache = json.loads(cp.read_text())
        except (OSError, json.JSONDecodeError):
            cache = {}
    before = json.dumps(cache, sort_keys=True)
    h = hashlib.sha256(FINGERPRINT_VERSION.encode())
    ident = {
        "id": spec.id,
        "revision": getattr(spec, "revision", None),
        "dtype": getattr(spec, "dtype", None),
        "settings": settings or {},
    }
    h.update(json.dumps(ident, sort_keys=True, default=str).encode())
    files = model_files(spec)
    base = Path(spec.gguf).parent if getattr(spec, "gguf", None) is not None else None
    for f in files:
        rel = f.name if base is not None else f.relative_to(Path(spec.path)).as_posix()
        h.update(f"{rel}|{file_sha256(f, cache)}\n".encode())
    if cp is not None and json.dumps(cache, sort_keys=True) != before:
        atomic_write_json(cp, cache, sort_keys=True)
    return h.hexdigest()[:16]


def imported_fingerprint(
    model_id: str, source: str | Path, unit_offset: int | None = None, n_units: int = 0
) -> str:
    """16-hex key of one shard's slice of imported per-unit NLL (a registry entry with
    ``nll_source``): the model id, the source's file name and the slice's values.

    Parameters
    ----------
    model_id : str
        The registry id of the model.
    source : str or Path
        The imported NLL (anything :func:`open_nll_source` reads).
    unit_offset : int, optional
        Global number of the shard's first unit; None (shard not in the plan) or a
        missing source hashes the id and name alone.
    n_units : int
        Units of the shard.

    Returns
    -------
    str
        16 hex characters.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import imported_fingerprint
    >>> np.save("nll.npy", np.arange(10.0, dtype=np.float32))
    >>> a = imported_fingerprint("m", "nll.npy", 0, 5)
    >>> a == imported_fingerprint("m", "nll.npy", 5, 5), len(a)
    (False, 16)
    """
    from sigmap_lib.nll._store import open_nll_source

    source = Path(source)
    h = hashlib.sha256(f"import|{model_id}|{source.name}".encode())
    if unit_offset is not None and source.exists():
        values = open_nll_source(source)
        h.update(np.ascontiguousarray(values[unit_offset : unit_offset + n_units]).tobytes())
    return h.hexdigest()[:16]

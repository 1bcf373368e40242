"""Per-unit ranks of the models' perplexities, and the on-disk rank store.

Conventions
-----------
* Arrays are unit-major: ``values`` has shape ``(n_units, n_models)``; row ``j`` holds
  the ``m`` models' perplexity-like values (NLL, bits-per-byte, ...) on corpus unit ``j``.
* Ranks are taken *within a row* (across models), ascending: the least perplexed model
  has rank 1; tied models share the average of the ranks they span (``scipy.stats.rankdata``
  ``method="average"``).

Exact integer rank encoding
---------------------------
Average ranks are half-integers under ties. The store keeps the **doubled zero-based
average rank**::

    code_k = 2 * rank_k - 2 = 2 * #{l : p_l < p_k} + #{l != k : p_l == p_k}

an integer in ``[0, 2m - 2]``, stored as ``uint8`` while ``m <= 128`` and ``uint16`` up to
``m <= 32768`` (the usual "uint8 for <= 255 models" rule is halved because of the factor 2;
this is what keeps every statistic computed from stored ranks *exactly* equal to the
average-rank statistic: ``rank = code / 2 + 1``). The Thrush statistic only needs
``sum_k c_k * code_k`` because ``sum_k c_k = 0`` (see :mod:`sigmap_lib.signatures`).

Store layout (``RankStore``)
----------------------------
``<dir>/ranks.zarr``  zarr v3 array ``(n_units, n_models)`` of the codes above, chunked
                     ``(chunk_units, n_models)``, uncompressed (stores written with a
                     codec by earlier versions are read through zarr);
``<dir>/models.json`` ``{"format": "sigmap.ranks/1", "model_keys": [...], "n_units": d,
                     "encoding": "doubled_zero_based_average_rank", "dtype": "uint8",
                     "bpb_mean": [...], "bpb_sd": [...], "chunk_units": ...}``;
bits-per-byte of unit ``j`` for a model is ``NLL_j / (n_bytes_j * ln 2)``; its mean and
(population, ``ddof=0``) standard deviation over all ``d`` units are streamed with
Chan's pairwise update in float64.
The directory is written under a temporary name beside ``dir`` and renamed at the end.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_dir
from sigmap_lib._util._checks import array_like
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll._moments import BpbMoments, RunningMoments

RANK_ENCODING = "doubled_zero_based_average_rank"
STORE_FORMAT = "sigmap.ranks/1"
MAX_MODELS_UINT8 = 128
MAX_MODELS_UINT16 = 32768

# integer inputs ranked as they are (rank codes themselves, counts); others go to float64
EXACT_INT_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.int16, np.int32, np.int64))


def rank_dtype(n_models: int) -> np.dtype:
    """Smallest unsigned dtype holding the doubled rank codes of ``n_models`` models.

    Parameters
    ----------
    n_models : int
        Number of models ``m`` (>= 1).

    Returns
    -------
    numpy.dtype
        ``uint8`` for ``m <= 128``, ``uint16`` for ``m <= 32768``.

    Examples
    --------
    >>> from sigmap_lib.nll import rank_dtype
    >>> rank_dtype(128), rank_dtype(129)  # codes go up to 2m - 2
    (dtype('uint8'), dtype('uint16'))
    """
    if n_models < 1:
        raise SigmapInputError(f"need at least one model to rank, got n_models={n_models}")
    if n_models <= MAX_MODELS_UINT8:
        return np.dtype(np.uint8)
    if n_models <= MAX_MODELS_UINT16:
        return np.dtype(np.uint16)
    raise SigmapInputError(f"at most {MAX_MODELS_UINT16} models can be ranked, got {n_models}")


def numba_kernels() -> Any:
    """The numba kernels of :mod:`sigmap_lib.nll` and :mod:`sigmap_lib.signatures` (the
    module ``sigmap_lib.nll._kernels``, imported on first use: importing numba costs ~0.5 s).

    Examples
    --------
    >>> from sigmap_lib.nll import numba_kernels
    >>> k = numba_kernels()
    >>> k.BLOCK_UNITS, k.MAX_CHUNKS
    (256, 64)
    """
    from sigmap_lib.nll import _kernels as _rank_kernels

    return _rank_kernels


def _encode_into(v: np.ndarray, out: np.ndarray) -> int:
    """Codes of ``v`` (any strides; float32/float64/int) into ``out``; returns the number
    of NaN values met (then the codes of their rows are meaningless)."""
    if v.shape[0] == 0:
        return 0
    k = numba_kernels()
    if v.shape[1] <= MAX_MODELS_UINT8:
        return int(k.encode_blocked(v, out, k.BLOCK_UNITS))
    k.encode_rowwise(v, out)
    return int(np.isnan(v).sum()) if v.dtype.kind == "f" else 0


def as_2d_values(values: Any, name: str = "values") -> np.ndarray:
    """``values`` checked as unit-major ``(n_units, n_models)`` real values without NaN
    (±inf allowed), in their own dtype; errors name ``name``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import as_2d_values
    >>> as_2d_values([[1.0, 2.0], [3.0, np.inf]]).shape
    (2, 2)
    >>> as_2d_values(np.array([[1.0, np.nan]]), "nll")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: nll contains NaN (first at unit 0, model column 1); per-unit perplexities must be finite or +/-inf
    """
    arr = array_like(values, name, ndim=2, dtype=None, shape="unit-major (n_units, n_models)")
    if arr.shape[1] < 1:
        raise SigmapInputError(f"{name} has no model columns (shape {arr.shape})")
    arr = array_like(arr, name, dtype=None, real=True)
    if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
        bad = np.argwhere(np.isnan(arr))[0]
        raise SigmapInputError(
            f"{name} contains NaN (first at unit {int(bad[0])}, model column {int(bad[1])}); "
            "per-unit perplexities must be finite or +/-inf"
        )
    return arr


def encode_ranks(values: Any, out: np.ndarray | None = None) -> np.ndarray:
    """Doubled zero-based average ranks of each row, as exact integers.

    Parameters
    ----------
    values : array_like, shape (n_units, n_models)
        Unit-major perplexity-like values (any real dtype; NaN is rejected).
    out : numpy.ndarray, optional
        Preallocated ``(n_units, n_models)`` output of dtype ``rank_dtype(n_models)``.

    Returns
    -------
    numpy.ndarray, shape (n_units, n_models), dtype ``rank_dtype(n_models)``
        ``code = 2 * average_rank - 2`` (0 = least perplexed model, no ties).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import encode_ranks
    >>> values = np.array([[3.0, 1.0, 2.0], [1.0, 1.0, 5.0]])  # (n_units, n_models)
    >>> codes = encode_ranks(values)
    >>> codes.tolist(), codes.dtype  # the tie in row 1 shares code 1 (= rank 1.5)
    ([[4, 0, 2], [1, 1, 4]], dtype('uint8'))
    """
    arr = as_2d_values(values)
    d, m = arr.shape
    dt = rank_dtype(m)
    if out is None:
        out = np.empty((d, m), dtype=dt)
    elif out.shape != (d, m) or out.dtype != dt:
        raise SigmapInputError(
            f"out must have shape {(d, m)} and dtype {dt}, got {out.shape} {out.dtype}"
        )
    if d == 0:
        return out
    if arr.dtype not in (np.float32, np.float64) and arr.dtype not in EXACT_INT_DTYPES:
        arr = arr.astype(np.float64)
    _encode_into(arr, out)
    return out


def decode_ranks(codes: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, float64) from doubled zero-based codes.

    Examples
    --------
    >>> from sigmap_lib.nll import decode_ranks
    >>> decode_ranks([[4, 0, 2], [1, 1, 4]]).tolist()  # rank = code / 2 + 1
    [[3.0, 1.0, 2.0], [1.5, 1.5, 3.0]]
    """
    return np.asarray(codes, dtype=np.float64) / 2.0 + 1.0


def rank_rows(values: Any) -> np.ndarray:
    """Average ranks (1..m, ties averaged) of each unit's values across models.

    Parameters
    ----------
    values : array_like, shape (n_units, n_models)
        Unit-major perplexity-like values; NaN is rejected.

    Returns
    -------
    numpy.ndarray, shape (n_units, n_models), float64
        Row-wise ``scipy.stats.rankdata(..., method="average")``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import rank_rows
    >>> rank_rows(np.array([[3.0, 1.0, 2.0], [1.0, 1.0, 5.0]])).tolist()
    [[3.0, 1.0, 2.0], [1.5, 1.5, 3.0]]
    """
    return decode_ranks(encode_ranks(values))


# ----------------------------------------------------------------------------------------
# reading per-model arrays chunk by chunk


def open_model_array(source: Any) -> Any:
    """Open one model's per-unit array: a zarr array, numpy array, ``.npy`` or zarr path."""
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.exists():
            raise SigmapInputError(f"per-model array {p} does not exist")
        if p.suffix == ".npy":
            return np.load(p, mmap_mode="r")
        import zarr

        try:
            return zarr.open_array(str(p), mode="r")
        except Exception as exc:
            raise SigmapInputError(f"cannot open per-model zarr array {p}: {exc}") from exc
    if hasattr(source, "shape") and hasattr(source, "__getitem__"):
        return source
    raise SigmapInputError(f"unsupported per-model array source of type {type(source).__name__}")


def check_model_arrays(
    arrays: Sequence[Any], model_keys: Sequence[str] | None = None
) -> tuple[list[Any], int]:
    """Open every per-model array and check they are 1-D with one common length.

    Each of ``arrays`` is a numpy or zarr array or a path to a ``.npy`` file / zarr array;
    ``model_keys`` name them in error messages. Returns the opened arrays and their
    common length; raises ``SigmapInputError`` otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import check_model_arrays
    >>> np.save("b.npy", np.ones(5, dtype=np.float32))
    >>> arrays, n_units = check_model_arrays([np.zeros(5), "b.npy"], ["a", "b"])
    >>> len(arrays), n_units
    (2, 5)
    >>> check_model_arrays([np.zeros(5), np.ones(4)], ["a", "b"])
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: model b: has 4 units but model a has 5
    """
    if len(arrays) == 0:
        raise SigmapInputError("no per-model arrays given")
    keys = list(model_keys) if model_keys is not None else [f"#{i}" for i in range(len(arrays))]
    if len(keys) != len(arrays):
        raise SigmapInputError(f"{len(arrays)} per-model arrays but {len(keys)} model keys")
    opened = [open_model_array(a) for a in arrays]
    n = None
    for key, arr in zip(keys, opened):
        if len(arr.shape) != 1:
            raise SigmapInputError(f"model {key}: per-unit array must be 1-D, got {arr.shape}")
        if n is None:
            n = int(arr.shape[0])
        elif int(arr.shape[0]) != n:
            raise SigmapInputError(
                f"model {key}: has {arr.shape[0]} units but model {keys[0]} has {n}"
            )
    assert n is not None
    return opened, n


def values_dtype(arrays: Sequence[Any]) -> np.dtype:
    """float32 when every array is float32 or narrower, else float64 (no tie is created).

    Integers up to 16 bits count as narrow (float32 holds them exactly).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import values_dtype
    >>> values_dtype([np.zeros(3, np.float32), np.zeros(3, np.float16)])
    dtype('float32')
    >>> values_dtype([np.zeros(3, np.float32), np.zeros(3, np.float64)])
    dtype('float64')
    """
    for a in arrays:
        dt = np.dtype(a.dtype)
        if dt.kind not in "fiu":
            raise SigmapInputError(f"per-unit arrays must be numeric, got dtype {dt}")
        if dt.itemsize > 4 or (dt.kind in "iu" and dt.itemsize > 2):
            return np.dtype(np.float64)
    return np.dtype(np.float32)


def _read_block(arrays: Sequence[Any], start: int, stop: int, dtype: Any) -> np.ndarray:
    # model-major in memory (each model's slice is one contiguous copy), returned as the
    # unit-major (n, m) view; the ranking kernels read either layout
    block = np.empty((len(arrays), stop - start), dtype=dtype)
    for j, arr in enumerate(arrays):
        if not _read_into(arr, start, stop, block[j]):
            block[j] = np.asarray(arr[start:stop])
    return block.T


def _read_into(arr: Any, start: int, stop: int, row: np.ndarray) -> bool:
    """Read ``arr[start:stop]`` straight into ``row`` (no temporary); False if unsupported.

    Uncompressed zarr v3 arrays on a local disk (how :mod:`sigmap_lib.nll` writes NLL)
    are read chunk file by chunk file with ``readinto`` (one copy from the page cache,
    several times faster than zarr's decode path); other zarr v3 arrays are decoded by
    zarr into ``row``.
    """
    if np.dtype(getattr(arr, "dtype", None) or "O") != row.dtype or not hasattr(
        arr, "get_basic_selection"
    ):
        return False
    raw = _raw_chunks(arr)
    if raw is not None:
        _read_raw(raw, start, stop, row)
        return True
    try:
        from zarr.core.buffer import default_buffer_prototype
    except ImportError:  # pragma: no cover - zarr v2
        return False
    out = default_buffer_prototype().nd_buffer.from_numpy_array(row)
    arr.get_basic_selection(slice(start, stop), out=out)
    return True


@dataclass(frozen=True)
class _RawChunks:
    """Where the chunks of an uncompressed, local zarr v3 array live on disk (chunked
    along the first axis only; ``itemsize`` is the bytes of one row)."""

    root: Path
    chunk_len: int
    itemsize: int
    fill_value: Any
    key: Any  # chunk grid coordinates -> relative key ("c/0", "c/0/0")
    ndim: int


def _raw_chunks(arr: Any) -> _RawChunks | None:
    """A :class:`_RawChunks` when ``arr`` can be read as raw chunk files, else None."""
    try:
        from zarr.codecs import BytesCodec
        from zarr.core.chunk_grids import RegularChunkGrid
        from zarr.storage import LocalStore
    except ImportError:  # pragma: no cover - zarr v2
        return None
    meta = getattr(arr, "metadata", None)
    store = getattr(arr, "store", None)
    if (
        meta is None
        or getattr(meta, "zarr_format", None) != 3
        or not isinstance(store, LocalStore)
        or len(arr.shape) < 1
        or not isinstance(meta.chunk_grid, RegularChunkGrid)
        or tuple(meta.chunk_grid.chunk_shape[1:]) != tuple(arr.shape[1:])
    ):
        return None
    codecs = tuple(meta.codecs)
    dt = np.dtype(arr.dtype)
    native = dt.byteorder in ("=", "|") or (dt.byteorder == "<") == (sys.byteorder == "little")
    endian_ok = (
        len(codecs) == 1
        and isinstance(codecs[0], BytesCodec)
        and (dt.itemsize == 1 or getattr(codecs[0].endian, "value", None) == sys.byteorder)
    )
    if not (native and endian_ok):
        return None
    fill = meta.fill_value
    return _RawChunks(
        root=Path(str(store.root)) / arr.path,
        chunk_len=int(meta.chunk_grid.chunk_shape[0]),
        itemsize=dt.itemsize * math.prod(arr.shape[1:]),
        fill_value=fill,
        key=meta.chunk_key_encoding.encode_chunk_key,
        ndim=len(arr.shape),
    )


def _read_raw(raw: _RawChunks, start: int, stop: int, row: np.ndarray) -> None:
    """Fill the C-contiguous ``row`` with rows ``[start, stop)`` from the raw chunk files."""
    c = raw.chunk_len
    for i in range(start // c, (stop - 1) // c + 1 if stop > start else start // c):
        lo, hi = max(start, i * c), min(stop, (i + 1) * c)
        dest = row[lo - start : hi - start]
        path = raw.root / raw.key((i,) + (0,) * (raw.ndim - 1))
        try:
            f = open(path, "rb", buffering=0)
        except FileNotFoundError:
            dest[...] = raw.fill_value  # a chunk never written holds the fill value
            continue
        with f:
            f.seek((lo - i * c) * raw.itemsize)
            view = memoryview(dest).cast("B")
            got = 0
            while got < view.nbytes:
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
        if got != view.nbytes:
            raise SigmapInputError(
                f"zarr chunk {path} is truncated: read {got} of {view.nbytes} bytes at "
                f"elements [{lo}, {hi})"
            )


def read_points(arr: Any, indices: Any) -> np.ndarray:
    """``arr[indices]`` for sorted, unique ``indices``, reading only those elements.

    Uncompressed zarr v3 arrays on a local disk are read with one ``pread`` per element
    from each chunk file (opened once); an array of parts with ``parts`` / ``offsets``
    (:class:`sigmap_lib.nll.ConcatArray`, the shards of one model) is read part by part;
    anything else by zarr's orthogonal selection or NumPy fancy indexing. Zarr's own path
    costs about a millisecond per call, which dominated gathering a few thousand signature
    candidates spread over thousands of shard arrays.

    Parameters
    ----------
    arr : 1-D array_like (zarr, NumPy, memory map, ConcatArray)
    indices : array_like of int, shape (k,)
        Sorted, unique, in range.

    Returns
    -------
    numpy.ndarray, shape (k,)
        In ``arr``'s dtype.

    Examples
    --------
    >>> import numpy as np
    >>> import zarr
    >>> from sigmap_lib.nll import ConcatArray, read_points
    >>> z = zarr.create_array("points.zarr", shape=(10,), chunks=(4,), dtype="f4",
    ...                       compressors=None)
    >>> z[:] = np.arange(10, dtype="f4")
    >>> read_points(z, [1, 5, 9]).tolist()
    [1.0, 5.0, 9.0]
    >>> read_points(ConcatArray([z, np.arange(10, 13, dtype="f4")]), [0, 9, 12]).tolist()
    [0.0, 9.0, 12.0]
    """
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    parts, offsets = getattr(arr, "parts", None), getattr(arr, "offsets", None)
    if parts is not None and offsets is not None:
        out = np.empty(idx.size, dtype=np.dtype(arr.dtype))
        part = np.searchsorted(offsets, idx, side="right") - 1
        bounds = np.searchsorted(part, np.arange(len(parts) + 1))
        for j in range(len(parts)):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            if hi > lo:
                out[lo:hi] = read_points(parts[j], idx[lo:hi] - int(offsets[j]))
        return out
    raw = _raw_chunks(arr) if hasattr(arr, "get_basic_selection") else None
    if raw is not None and raw.ndim == 1:
        return _read_raw_points(raw, idx, np.dtype(arr.dtype))
    if hasattr(arr, "get_orthogonal_selection"):
        return np.asarray(arr.get_orthogonal_selection((idx,)))
    return np.asarray(arr[idx])


def _read_raw_points(raw: _RawChunks, idx: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.empty(idx.size, dtype=dtype)
    if not idx.size:
        return out
    c, size = raw.chunk_len, raw.itemsize
    chunk = idx // c
    starts = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]]).tolist()
    ends = [*starts[1:], idx.size]
    for a, b in zip(starts, ends, strict=True):
        i = int(chunk[a])
        path = raw.root / raw.key((i,))
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            out[a:b] = raw.fill_value  # a chunk never written holds the fill value
            continue
        try:
            buf = memoryview(out[a:b]).cast("B")
            for n, u in enumerate(idx[a:b].tolist()):
                got = os.preadv(fd, [buf[n * size : (n + 1) * size]], (u - i * c) * size)
                if got != size:
                    raise SigmapInputError(
                        f"zarr chunk {path} is truncated: no element {u - i * c} "
                        f"(read {got} of {size} bytes)"
                    )
        finally:
            os.close(fd)
    return out


def iter_value_chunks(
    arrays: Sequence[Any],
    chunk_units: int,
    *,
    dtype: Any = np.float32,
    prefetch: bool = True,
    n_units: int | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(start, block)`` with ``block`` unit-major ``(n, n_models)``.

    The block is a transposed view of a model-major buffer (``block.T`` is C-contiguous).

    Parameters
    ----------
    arrays : sequence of opened 1-D arrays (zarr / numpy)
    chunk_units : int
        Units per block; memory is ``O(chunk_units * n_models)`` (two blocks in flight
        when ``prefetch``: a background thread reads the next block while the caller
        works on the current one).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import iter_value_chunks
    >>> arrays = [np.arange(5.0), 10 * np.arange(5.0)]  # two models, five units
    >>> for start, block in iter_value_chunks(arrays, 2, dtype=np.float64):
    ...     print(start, block.tolist())
    0 [[0.0, 0.0], [1.0, 10.0]]
    2 [[2.0, 20.0], [3.0, 30.0]]
    4 [[4.0, 40.0]]
    """
    if chunk_units < 1:
        raise SigmapInputError(f"chunk_units must be >= 1, got {chunk_units}")
    d = int(arrays[0].shape[0]) if n_units is None else n_units
    starts = list(range(0, d, chunk_units))
    if not prefetch or len(starts) <= 1:
        for s in starts:
            yield s, _read_block(arrays, s, min(s + chunk_units, d), dtype)
        return
    result: dict[str, Any] = {}

    def load(s: int) -> None:
        try:
            result["block"] = _read_block(arrays, s, min(s + chunk_units, d), dtype)
        except BaseException as exc:  # re-raised in the consumer thread
            result["error"] = exc

    thread = threading.Thread(target=load, args=(starts[0],), daemon=True)
    thread.start()
    for i, s in enumerate(starts):
        thread.join()
        if "error" in result:
            raise result["error"]
        block = result.pop("block")
        if i + 1 < len(starts):
            thread = threading.Thread(target=load, args=(starts[i + 1],), daemon=True)
            thread.start()
        yield s, block


# ----------------------------------------------------------------------------------------
# ----------------------------------------------------------------------------------------
# the store


@dataclass(frozen=True)
class RankStore:
    """Unit-major doubled-rank matrix on disk (see module docstring for the layout).

    Attributes
    ----------
    path : Path
        The store directory.
    model_keys : list[str]
        Column order of the rank matrix.
    n_units : int
    bpb_mean, bpb_sd : numpy.ndarray, shape (n_models,)
        Per-model mean and population sd of bits-per-byte over all units.
    """

    path: Path
    model_keys: list[str]
    n_units: int
    bpb_mean: np.ndarray
    bpb_sd: np.ndarray
    chunk_units: int

    @property
    def n_models(self) -> int:
        return len(self.model_keys)

    @property
    def dtype(self) -> np.dtype:
        return rank_dtype(self.n_models)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> RankStore:
        """Open a store written by :func:`build_rank_store`."""
        p = Path(path)
        meta_path = p / "models.json"
        if not meta_path.exists():
            raise SigmapInputError(f"{p} is not a rank store (missing models.json)")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != STORE_FORMAT or meta.get("encoding") != RANK_ENCODING:
            raise SigmapInputError(
                f"{meta_path}: unsupported rank store format {meta.get('format')!r} / "
                f"encoding {meta.get('encoding')!r}"
            )
        return cls(
            path=p,
            model_keys=list(meta["model_keys"]),
            n_units=int(meta["n_units"]),
            bpb_mean=np.asarray(meta["bpb_mean"], dtype=np.float64),
            bpb_sd=np.asarray(meta["bpb_sd"], dtype=np.float64),
            chunk_units=int(meta["chunk_units"]),
        )

    def array(self) -> Any:
        """The zarr array of codes, opened read-only."""
        import zarr

        return zarr.open_array(str(self.path / "ranks.zarr"), mode="r")

    def iter_chunks(self, chunk_units: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(start, codes)`` with ``codes`` of shape ``(n, n_models)`` (doubled ranks)."""
        cu = self.chunk_units if chunk_units is None else int(chunk_units)
        if cu < 1:
            raise SigmapInputError(f"chunk_units must be >= 1, got {cu}")
        arr = self.array()
        raw = _raw_chunks(arr)
        for s in range(0, self.n_units, cu):
            e = min(s + cu, self.n_units)
            if raw is None:
                yield s, np.asarray(arr[s:e])
            else:
                block = np.empty((e - s, self.n_models), dtype=self.dtype)
                _read_raw(raw, s, e, block)
                yield s, block

    def ranks(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Average ranks (float64, 1-based) of units ``[start, stop)``."""
        stop = self.n_units if stop is None else stop
        return decode_ranks(np.asarray(self.array()[start:stop]))

    def moments(self) -> BpbMoments | None:
        """The per-model bits-per-byte moments (:class:`~sigmap_lib.nll.BpbMoments`) of
        the store's units, for exact merges across shards (``None`` for stores written
        before the counts were kept)."""
        meta = json.loads((self.path / "models.json").read_text())
        if "bpb_m2" not in meta:
            return None
        n = int(meta["bpb_count"])
        return BpbMoments(
            self.model_keys, np.full(self.n_models, n), meta["bpb_total"], meta["bpb_m2"]
        )


def rank_store_identity(
    corpus_fingerprint: str, model_keys: Sequence[str], checksums: Sequence[Mapping[str, str]]
) -> str:
    """A 16-hex-digit identity of the rank codes of these models on this corpus.

    Which models (in order) and what their NLL stores hold (per-shard checksums): a model
    that is rescored (a new revision) gives a new identity even when the set of models is
    the same, so a rank store is rebuilt exactly when its inputs changed.

    Parameters
    ----------
    corpus_fingerprint : str
    model_keys : sequence of str
        Model keys in rank-store column order.
    checksums : sequence of mappings
        Each model's ``NLLStore.checksums`` (shard -> sha256).

    Examples
    --------
    >>> from sigmap_lib.nll import rank_store_identity
    >>> a = rank_store_identity("fp", ["m1", "m2"], [{"0": "aa"}, {"0": "bb"}])
    >>> len(a), a == rank_store_identity("fp", ["m1", "m2"], [{"0": "aa"}, {"0": "bb"}])
    (16, True)
    >>> a == rank_store_identity("fp", ["m1", "m2"], [{"0": "aa"}, {"0": "cc"}])
    False
    """
    import hashlib
    import json

    h = hashlib.sha256(corpus_fingerprint.encode())
    for key, sums in zip(model_keys, checksums, strict=True):
        h.update(key.encode())
        h.update(json.dumps(dict(sums), sort_keys=True).encode())
    return h.hexdigest()[:16]


def build_rank_store(
    nll_arrays: Sequence[Any],
    model_keys: Sequence[str],
    unit_nbytes: Any,
    out_dir: str | os.PathLike[str],
    *,
    chunk_units: int = 1 << 20,
    overwrite: bool = True,
) -> RankStore:
    """Rank every unit's NLL across models and store codes + bits-per-byte moments.

    Parameters
    ----------
    nll_arrays : sequence of length n_models
        Per-model NLL arrays ``(n_units,)`` (nats): zarr arrays, numpy arrays, or paths
        to zarr arrays / ``.npy`` files. Read ``chunk_units`` units at a time, so memory
        is bounded by ``O(chunk_units * n_models)`` whatever ``n_units``.
    model_keys : sequence of str
        One key per array (column order of the store).
    unit_nbytes : array_like of int, shape (n_units,)
        UTF-8 bytes per unit (> 0), for bits-per-byte ``NLL / (n_bytes * ln 2)``.
    out_dir : path
        Store directory; written to a temporary folder beside it (``.<name>.tmp-*``),
        then renamed into place (atomic).
    chunk_units : int
        Units per chunk (also the zarr chunk length).
    overwrite : bool
        Replace an existing store at ``out_dir``.

    Returns
    -------
    RankStore

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import RankStore, build_rank_store
    >>> nll = [np.array([2.0, 1.0, 3.0]), np.array([1.0, 1.0, 4.0])]  # per model, nats
    >>> store = build_rank_store(nll, ["m1", "m2"], [1, 2, 2], "ranks")
    >>> store.n_units, store.model_keys, store.dtype
    (3, ['m1', 'm2'], dtype('uint8'))
    >>> store.ranks().tolist()  # (n_units, n_models) average ranks
    [[2.0, 1.0], [1.5, 1.5], [1.0, 2.0]]
    >>> RankStore.open("ranks").n_models
    2
    """
    import zarr

    keys = [str(k) for k in model_keys]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise SigmapInputError(f"duplicate model keys for the rank store: {dup}")
    arrays, d = check_model_arrays(nll_arrays, keys)
    m = len(arrays)
    dt = rank_dtype(m)
    if isinstance(unit_nbytes, (str, os.PathLike)) or hasattr(unit_nbytes, "shape"):
        nbytes_arr = open_model_array(unit_nbytes)
    else:
        nbytes_arr = np.asarray(unit_nbytes)
    if len(nbytes_arr.shape) != 1 or int(nbytes_arr.shape[0]) != d:
        raise SigmapInputError(
            f"unit_nbytes must have shape ({d},) to match the NLL arrays, got {nbytes_arr.shape}"
        )
    if chunk_units < 1:
        raise SigmapInputError(f"chunk_units must be >= 1, got {chunk_units}")
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise SigmapInputError(f"rank store {out} exists and overwrite=False")
    with atomic_dir(out) as tmp:
        z = zarr.create_array(
            store=str(tmp / "ranks.zarr"),
            shape=(d, m),
            chunks=(max(1, min(chunk_units, max(d, 1))), m),
            dtype=dt,
            fill_value=0,
            zarr_format=3,
            # rank codes are near-incompressible (permutations); raw chunks are read back
            # with one copy (see _read_into)
            compressors=None,
        )
        moments = RunningMoments(m)
        codes = np.empty((min(chunk_units, max(d, 1)), m), dtype=dt)
        vdt = values_dtype(arrays)
        for start, block in iter_value_chunks(arrays, chunk_units, n_units=d, dtype=vdt):
            n = block.shape[0]
            nb_chunk = np.asarray(nbytes_arr[start : start + n], dtype=np.float64)
            if not (nb_chunk > 0).all():
                bad = start + int(np.argmax(~(nb_chunk > 0)))
                raise SigmapInputError(
                    f"unit_nbytes must be > 0; unit {bad} has {nb_chunk[bad - start]}"
                )
            out_codes = codes[:n]
            if _encode_into(block, out_codes):  # NaN values were read
                r, c = np.argwhere(np.isnan(block))[0]
                raise SigmapInputError(f"model {keys[int(c)]}: NLL is NaN at unit {start + int(r)}")
            z[start : start + n] = out_codes
            # bits per byte = NLL / (n_bytes · ln 2), merged into running moments
            moments.update(block, 1.0 / (nb_chunk * math.log(2.0)))
        meta = {
            "format": STORE_FORMAT,
            "encoding": RANK_ENCODING,
            "dtype": dt.name,
            "model_keys": keys,
            "n_units": d,
            "chunk_units": int(chunk_units),
            "bpb_mean": moments.mean.tolist(),
            "bpb_sd": moments.sd.tolist(),
            # count / sum / M2 per model: the shard's part of an exact merge (BpbMoments)
            "bpb_count": moments.n,
            "bpb_total": (moments.mean * moments.n).tolist(),
            "bpb_m2": moments.m2.tolist(),
        }
        (tmp / "models.json").write_text(json.dumps(meta, indent=1))
    return RankStore.open(out)

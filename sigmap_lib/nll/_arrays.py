"""Reading per-model per-unit arrays (numpy, ``.npy``, zarr) chunk by chunk and by unit:
the unit-major ``(n_units, n_models)`` blocks the rank store and the screens read.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError


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

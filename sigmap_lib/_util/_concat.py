"""A read-only concatenation of arrays along their first axis, read lazily.

The sharded stores (one NLL array per model × shard cell, one rank store per shard) are
presented to the code that reads "all units" as one array: slices and integer index
arrays are served by the parts they touch, so nothing is copied until it is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class ConcatArray:
    """``parts`` concatenated along axis 0, indexed like a NumPy array (read only).

    Parameters
    ----------
    parts : sequence of array-likes
        Each with ``shape``, ``dtype`` and ``__getitem__`` (NumPy, zarr, memory maps, or
        other ``ConcatArray``); all share their trailing shape and dtype.

    Supports ``a[i]``, ``a[start:stop]`` (step 1) and ``a[int_array]`` on axis 0, then any
    further indices on the result; ``np.asarray(a)`` reads everything.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib._util import ConcatArray
    >>> a = ConcatArray([np.arange(3), np.arange(10, 12), np.arange(20, 24)])
    >>> a.shape, a[2:6].tolist(), a[[8, 0, 3]].tolist(), int(a[-1])
    ((9,), [2, 10, 11, 20], [23, 0, 10], 23)
    """

    def __init__(self, parts: Sequence[Any]) -> None:
        if not parts:
            raise ValueError("ConcatArray needs at least one part")
        self.parts = list(parts)
        tails = {tuple(p.shape[1:]) for p in self.parts}
        dtypes = {np.dtype(p.dtype) for p in self.parts}
        if len(tails) != 1 or len(dtypes) != 1:
            raise ValueError(
                f"ConcatArray parts differ in trailing shape or dtype: {tails} / {dtypes}"
            )
        lengths = np.array([int(p.shape[0]) for p in self.parts], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])
        self.dtype = dtypes.pop()
        self.shape = (int(self.offsets[-1]), *tails.pop())

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self._slice(0, self.shape[0])
        return out if dtype is None else out.astype(dtype)

    def _slice(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((max(0, stop - start), *self.shape[1:]), dtype=self.dtype)
        if stop <= start:
            return out
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        for j in range(first, len(self.parts)):
            lo, hi = int(self.offsets[j]), int(self.offsets[j + 1])
            if lo >= stop:
                break
            a, b = max(start, lo), min(stop, hi)
            if b > a:
                out[a - start : b - start] = np.asarray(self.parts[j][a - lo : b - lo])
        return out

    def _take(self, idx: np.ndarray) -> np.ndarray:
        n = self.shape[0]
        idx = np.where(idx < 0, idx + n, idx)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"index out of range for an array of {n} rows")
        out = np.empty((idx.size, *self.shape[1:]), dtype=self.dtype)
        part = np.searchsorted(self.offsets, idx, side="right") - 1
        for j in np.unique(part).tolist():
            sel = np.flatnonzero(part == j)
            local = idx[sel] - self.offsets[j]
            arr = self.parts[j]
            if hasattr(arr, "get_orthogonal_selection"):
                order = np.argsort(local, kind="stable")
                u, inv = np.unique(local[order], return_inverse=True)
                vals = np.asarray(
                    arr.get_orthogonal_selection((u,) + (slice(None),) * (self.ndim - 1))
                )
                got = np.empty_like(vals[inv])
                got[order] = vals[inv]
                out[sel] = got
            else:
                out[sel] = np.asarray(arr[local])
        return out

    def __getitem__(self, key: Any) -> Any:
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                out = self._take(np.arange(start, stop, step))
            else:
                out = self._slice(start, stop)
        elif isinstance(key, (int, np.integer)):
            i = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"index {key} out of range for an array of {self.shape[0]} rows")
            out = self._slice(i, i + 1)[0]
        else:
            idx = np.asarray(key)
            if idx.dtype == bool:
                idx = np.flatnonzero(idx)
            out = self._take(idx.astype(np.int64).reshape(-1)).reshape(idx.shape + self.shape[1:])
        return out[(slice(None), *rest)] if rest else out

    def __repr__(self) -> str:
        return f"ConcatArray(shape={self.shape}, dtype={self.dtype}, parts={len(self.parts)})"

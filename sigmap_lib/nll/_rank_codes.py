"""Per-unit ranks of the models' perplexities, as exact integer codes.

Conventions
-----------
* Arrays are unit-major: ``values`` has shape ``(n_units, n_models)``; row ``j`` holds
  the ``m`` models' perplexity-like values (NLL, bits-per-byte, ...) on corpus unit ``j``.
* Ranks are taken *within a row* (across models), ascending: the least perplexed model
  has rank 1; tied models share the average of the ranks they span (``scipy.stats.rankdata``
  ``method="average"``).

Exact integer rank encoding
---------------------------
Average ranks are half-integers under ties. The codes are the **doubled zero-based
average rank**::

    code_k = 2 * rank_k - 2 = 2 * #{l : p_l < p_k} + #{l != k : p_l == p_k}

an integer in ``[0, 2m - 2]``, stored as ``uint8`` while ``m <= 128`` and ``uint16`` up to
``m <= 32768`` (the usual "uint8 for <= 255 models" rule is halved because of the factor 2;
this is what keeps every statistic computed from stored ranks *exactly* equal to the
average-rank statistic: ``rank = code / 2 + 1``). The Thrush statistic only needs
``sum_k c_k * code_k`` because ``sum_k c_k = 0`` (see :mod:`sigmap_lib.signatures`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sigmap_lib._util._checks import array_like
from sigmap_lib.errors import SigmapInputError

RANK_ENCODING = "doubled_zero_based_average_rank"
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

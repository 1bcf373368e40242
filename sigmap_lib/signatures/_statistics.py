"""Stage-1 rank statistics of a benchmark signature (METHODS.md §2): Thrush and pre-select
correlations of every unit's per-model values with the benchmark scores, and the blockwise
passes that compute them (used by :func:`sigmap_lib.signatures.screen`).

Conventions
-----------
``values`` are unit-major ``(n_units, n_models)`` perplexity-like numbers (NLL,
bits-per-byte, any per-unit monotone transform gives the same result); ``scores`` are
``(n_models,)`` or ``(n_models, n_benchmarks)``, higher = better. ``rank_j(p_k)`` is model
``k``'s average rank (ties averaged) among the ``m`` models' values on unit ``j``.

* **Thrush correlation** ``γ_j = Σ_{k<l} sign(y_k − y_l)·(rank_j(p_l) − rank_j(p_k))``
  = ``−Σ_k c_k rank_j(p_k)`` with ``c_k = Σ_l sign(y_k − y_l)``, divided by its maximum
  over all rank vectors for that ``y`` (pair the largest ``c_k`` with the smallest rank;
  rearrangement inequality). In ``[−1, 1]``; ``+1`` = the better a model, the less
  perplexed it is on the unit.
* **Pre-select correlation** ``η_j = (1/Z) Σ_{k<l, y_k≠y_l} [1{(y_k−y_l)(p_kj−p_lj) > 0}
  + ½·1{p_kj = p_lj}]`` with ``Z = #{k<l : y_k ≠ y_l}``; in ``[0, 1]``, 0 = perfect order,
  ½ = random, 1 = reversed. Computed as ``η = ½ + S/(2Z)`` with
  ``S = Σ_{k<l} sign(y_k−y_l)·sign(p_kj−p_lj)`` (the two are algebraically identical).

Both statistics use only the within-unit ranks, so the ``*_from_codes`` variants take the
stored doubled rank codes of :mod:`sigmap_lib.nll` and give exactly the same numbers.

Missing scores (NaN) are allowed per benchmark: each benchmark is screened on the models
that have a score for it. The within-unit ranks are recomputed on that subset of models
(ranking the stored codes of the subset is exact, because codes are a monotone,
tie-preserving transform of the values); benchmarks sharing the same set of models are
processed together. A benchmark needs at least 3 scored models and non-constant scores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sigmap_lib._util._checks import array_like
from sigmap_lib._util._threads import single_blas_thread
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import (
    EXACT_INT_DTYPES,
    MAX_MODELS_UINT8,
    as_2d_values,
    encode_ranks,
)

STATISTICS = ("thrush", "preselect")


# ----------------------------------------------------------------------------------------
# score-side quantities


def as_scores(scores: Any, n_models: int | None = None) -> tuple[np.ndarray, bool]:
    squeeze = np.ndim(scores) == 1
    y = array_like(
        scores, "scores", ndim=2, promote_1d=True, shape="(n_models,) or (n_models, n_benchmarks)"
    )
    if n_models is not None and y.shape[0] != n_models:
        raise SigmapInputError(
            f"scores have {y.shape[0]} model rows but the perplexity data has {n_models} models"
        )
    return array_like(y, "scores", no_inf="; use NaN for a missing score"), squeeze


def score_coefficients(y: np.ndarray) -> np.ndarray:
    """``c_k = Σ_l sign(y_k − y_l)`` for every column of ``y``.

    Parameters
    ----------
    y : numpy.ndarray, shape (m,) or (m, B), finite

    Returns
    -------
    numpy.ndarray of int64, same shape (sums to zero per column).

    Examples
    --------
    >>> from sigmap_lib.signatures import score_coefficients
    >>> score_coefficients([0.9, 0.5, 0.5, 0.1]).tolist()  # ties score 0 against each other
    [3, 0, 0, -3]
    >>> score_coefficients([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]).tolist()  # (m, B): per column
    [[-2, 2], [0, 0], [2, -2]]
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        return score_coefficients(y[:, None])[:, 0]
    # rank-based O(m log m): c_k = #{l: y_l < y_k} - #{l: y_l > y_k}
    s = np.sort(y, axis=0)
    m = y.shape[0]
    out = np.empty(y.shape, dtype=np.int64)
    for b in range(y.shape[1]):
        less = np.searchsorted(s[:, b], y[:, b], side="left")
        greater = m - np.searchsorted(s[:, b], y[:, b], side="right")
        out[:, b] = less - greater
    return out


def thrush_max(y: np.ndarray) -> np.ndarray:
    """Largest attainable un-normalized Thrush statistic ``−Σ c_k r_k`` for each column.

    The maximum over rank vectors is reached by giving the smallest rank to the largest
    ``c_k`` (rearrangement inequality); average ranks under ties cannot exceed it.

    Parameters
    ----------
    y : numpy.ndarray, shape (m,) or (m, B), finite

    Returns
    -------
    numpy.ndarray of float64, shape (B,)
        One value per column (``(1,)`` for a 1-D ``y``).

    Examples
    --------
    >>> from sigmap_lib.signatures import thrush_max
    >>> thrush_max([0.9, 0.5, 0.1]).tolist()  # c = [2, 0, -2] against ranks [1, 2, 3]
    [4.0]
    >>> thrush_max([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]).tolist()
    [4.0, 4.0]
    """
    c = score_coefficients(y)
    if c.ndim == 1:
        c = c[:, None]
    c_desc = -np.sort(-c, axis=0)
    r = np.arange(1, c.shape[0] + 1, dtype=np.float64)[:, None]
    return -(c_desc * r).sum(axis=0).astype(np.float64)


def check_benchmark(y: np.ndarray, name: str) -> None:
    yy = y[~np.isnan(y)]
    if yy.size < 3:
        raise SigmapInputError(f"benchmark {name}: only {yy.size} scored models; need >= 3")
    if np.all(yy == yy[0]):
        raise SigmapInputError(f"benchmark {name}: all scores are equal ({yy[0]}); nothing to rank")


def _pair_signs(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sign(y_k − y_l)`` over pairs ``k < l`` as ``(P, B)`` float32 and ``Z`` (B,)."""
    m = y.shape[0]
    ku, lu = np.triu_indices(m, 1)
    ys = np.sign(y[ku, :] - y[lu, :]).astype(np.float32)
    return np.ascontiguousarray(ys), np.abs(ys).sum(axis=0).astype(np.float64)


# ----------------------------------------------------------------------------------------
# kernels (numba, in sigmap_lib.nll._kernels; see its docstring for the layout)

# uint8 codes (<= 2m - 2) times |c_k| <= m - 1 summed over m <= 128 models stay below
# 2**24, so a float32 GEMM over a block of codes is exact
_GEMM_BLOCK = 1 << 13


def kernels() -> Any:
    """The numba kernels of :mod:`sigmap_lib.nll._kernels` (compiled on first use)."""
    from sigmap_lib.nll import numba_kernels

    return numba_kernels()


def rankable(x: np.ndarray) -> np.ndarray:
    """Values the kernels compare exactly as they are (float32/64, integer codes)."""
    if x.dtype in (np.float32, np.float64) or x.dtype in EXACT_INT_DTYPES:
        return x
    return x.astype(np.float64)


def _codes_gemm_thrush(
    codes: np.ndarray, cneg: np.ndarray, den: np.ndarray | None = None
) -> np.ndarray:
    """``codes (n, m) @ cneg (m, B)`` as exact float32, block by block (uint8 codes);
    with ``den (B,)``: that product divided by ``den`` in float64 (``raw / den``).

    Each block is cast to float32 (L2-sized), multiplied by single-threaded BLAS and, with
    ``den``, divided while still in cache; the blocks are shared among a few Python threads
    (the casts, GEMMs and divisions release the GIL). Multi-threaded BLAS on such skinny
    products spin-waits and collapses under load.
    """
    from concurrent.futures import ThreadPoolExecutor

    n, m = codes.shape
    nbm = cneg.shape[1]
    out = np.empty((n, nbm), dtype=np.float32 if den is None else np.float64)
    cf = np.ascontiguousarray(cneg, dtype=np.float32)
    starts = list(range(0, n, _GEMM_BLOCK))

    def work(part: int, nparts: int) -> None:
        buf = np.empty((min(n, _GEMM_BLOCK), m), dtype=np.float32)
        raw = np.empty((min(n, _GEMM_BLOCK), nbm), dtype=np.float32)
        for s in starts[part::nparts]:
            e = min(n, s + _GEMM_BLOCK)
            blk = buf[: e - s]
            np.copyto(blk, codes[s:e], casting="unsafe")
            if den is None:
                np.matmul(blk, cf, out=out[s:e])
            else:
                np.matmul(blk, cf, out=raw[: e - s])
                np.divide(raw[: e - s], den, out=out[s:e])

    nparts = max(1, min(os.cpu_count() or 1, len(starts) // 4))
    with single_blas_thread():
        if nparts == 1:
            work(0, 1)
        else:
            with ThreadPoolExecutor(nparts) as ex:
                for f in [ex.submit(work, i, nparts) for i in range(nparts)]:
                    f.result()
    return out


@dataclass
class _Pass:
    """One streaming pass of the screening statistic over a block of units."""

    stat: np.ndarray  # (n, B) float64
    hist: np.ndarray | None  # (B, n_bins) int64, when edges were given
    n_nan: int  # NaN values read (the caller raises)
    codes: np.ndarray | None  # (n, m) rank codes, when asked for and produced on the way


def _hist_buffer(nbm: int, n_bins: int) -> np.ndarray:
    MAX_CHUNKS = kernels().MAX_CHUNKS

    return np.zeros((MAX_CHUNKS, nbm, n_bins), dtype=np.int64)


def _finish_hist(
    stat: np.ndarray, edges: tuple[float, float, int] | None, part: np.ndarray | None = None
) -> np.ndarray | None:
    if edges is None:
        return None
    if part is not None:
        return part.sum(axis=0)
    lo, hi, n_bins = edges
    counts = np.zeros((stat.shape[1], n_bins), dtype=np.int64)
    kernels().histogram(stat, lo, hi, counts)
    return counts


def _buffer(
    buffers: dict[str, np.ndarray] | None, key: str, shape: tuple[int, int], dtype: Any
) -> np.ndarray:
    """An uninitialised ``shape`` array, carved from ``buffers[key]`` when it is big enough."""
    if buffers is None:
        return np.empty(shape, dtype=dtype)
    have = buffers.get(key)
    if have is None or have.shape[0] < shape[0] or have.shape[1:] != shape[1:]:
        have = buffers[key] = np.empty(shape, dtype=dtype)
    return have[: shape[0]]


def thrush_pass(
    x: np.ndarray,
    y: np.ndarray,
    is_codes: bool,
    edges: tuple[float, float, int] | None = None,
    want_codes: bool = False,
    buffers: dict[str, np.ndarray] | None = None,
) -> _Pass:
    """Normalized Thrush for all columns of finite ``y (m, B)`` on the rows of ``x``.

    ``x`` is ``(n, m)`` values (ranked here, fused with the product, the histogram over
    ``edges = (lo, hi, n_bins)`` and the NaN check) or, when ``is_codes``, doubled rank
    codes of exactly these ``m`` models. ``buffers``: a dict reused across calls for the
    statistic and code arrays (a streaming caller saves the page faults of fresh
    allocations; the returned arrays are views into it, valid until the next call).
    """
    cneg = -score_coefficients(y)  # (m, B)
    den = 2.0 * thrush_max(y)
    n, m = x.shape
    nbm = y.shape[1]
    if n == 0:
        stat = np.empty((0, nbm), dtype=np.float64)
        return _Pass(stat, _finish_hist(stat, edges), 0, None)
    if m > MAX_MODELS_UINT8 and not is_codes and x.dtype.kind == "f" and np.isnan(x.min()):
        return _Pass(np.empty((0, nbm)), None, int(np.isnan(x).sum()), None)
    if m > MAX_MODELS_UINT8:
        codes = x if is_codes else encode_ranks(x)
        stat = (codes.astype(np.int64) @ cneg) / den
        return _Pass(stat, _finish_hist(stat, edges), 0, codes if want_codes else None)
    if is_codes and x.dtype == np.uint8:
        stat = _codes_gemm_thrush(x, cneg, den)
        return _Pass(stat, _finish_hist(stat, edges), 0, x if want_codes else None)
    k = kernels()
    cn = np.ascontiguousarray(cneg, dtype=np.int32)
    stat = _buffer(buffers, "stat", (n, nbm), np.float64)
    lo, hi, n_bins = edges if edges is not None else (0.0, 1.0, 0)
    hist = _hist_buffer(nbm, n_bins)
    nan = np.zeros(hist.shape[0], dtype=np.int64)
    codes = _buffer(buffers, "codes", (n if want_codes else 0, m), np.uint8)
    k.rank_thrush(
        rankable(x), cn, np.ascontiguousarray(den), stat, k.BLOCK_UNITS, lo, hi, hist, nan, codes
    )
    n_nan = int(nan.sum())
    return _Pass(
        stat, _finish_hist(stat, edges, hist), n_nan, codes if want_codes and not n_nan else None
    )


def preselect_pass(
    x: np.ndarray,
    y: np.ndarray,
    is_codes: bool = False,
    edges: tuple[float, float, int] | None = None,
    want_codes: bool = False,
    buffers: dict[str, np.ndarray] | None = None,
) -> _Pass:
    """Pre-select for all columns of finite ``y (m, B)``; ``x`` values or codes (n, m).

    Only the signs of within-unit differences matter, so values and codes (of any subset
    of the models) give the same result; ``is_codes`` and ``want_codes`` (never produced
    here) are accepted for symmetry with :func:`thrush_pass`.
    """
    ys, z = _pair_signs(y)
    n = x.shape[0]
    nbm = y.shape[1]
    stat = _buffer(buffers, "stat", (n, nbm), np.float64)
    if n == 0:
        return _Pass(stat, _finish_hist(stat, edges), 0, None)
    k = kernels()
    lo, hi, n_bins = edges if edges is not None else (0.0, 1.0, 0)
    hist = _hist_buffer(nbm, n_bins)
    nan = np.zeros(hist.shape[0], dtype=np.int64)
    k.pair_sign_sum(rankable(x), ys, z, stat, k.BLOCK_UNITS, lo, hi, hist, nan)
    return _Pass(stat, _finish_hist(stat, edges, hist), int(nan.sum()), None)


def _thrush_block(x: np.ndarray, y: np.ndarray, is_codes: bool) -> np.ndarray:
    return thrush_pass(x, y, is_codes).stat


def _preselect_block(x: np.ndarray, y: np.ndarray, is_codes: bool = False) -> np.ndarray:
    return preselect_pass(x, y, is_codes).stat


def codes_thrush(codes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Normalized Thrush for all columns of finite ``y`` (m, B) from codes (n, m)."""
    return _thrush_block(codes, y, True)


def codes_preselect(codes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pre-select for all columns of finite ``y`` (m, B) from codes (n, m)."""
    return _preselect_block(codes, y, True)


def per_mask_groups(y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Group benchmark columns by the set of models that have a score."""
    avail = ~np.isnan(y)
    groups: dict[bytes, list[int]] = {}
    for b in range(y.shape[1]):
        groups.setdefault(avail[:, b].tobytes(), []).append(b)
    return [(avail[:, cols[0]], np.asarray(cols)) for cols in groups.values()]


def _apply_by_mask(x: np.ndarray, y: np.ndarray, fn: Any, is_codes: bool) -> np.ndarray:
    """``fn`` per group of benchmarks sharing their scored models.

    A strict subset of the models is ranked afresh from the columns of ``x`` (exact for
    codes too: they are a monotone, tie-preserving transform of the values).
    """
    out = np.empty((x.shape[0], y.shape[1]), dtype=np.float64)
    for mask, cols in per_mask_groups(y):
        if mask.all():
            out[:, cols] = fn(x, y[:, cols], is_codes)
        else:
            out[:, cols] = fn(x[:, mask], y[np.ix_(mask, cols)], False)
    return out


def _prepare(values: Any, scores: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    arr = as_2d_values(values)
    y, squeeze = as_scores(scores, arr.shape[1])
    for b in range(y.shape[1]):
        check_benchmark(y[:, b], f"#{b}")
    return arr, y, squeeze


def _check_codes(codes: Any) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.dtype.kind not in "iu":
        raise SigmapInputError(
            f"rank codes must be an integer (n_units, n_models) array, got {arr.dtype} {arr.shape}"
        )
    return arr


def thrush_correlation(values: Any, scores: Any) -> np.ndarray:
    """Normalized Thrush rank correlation of every unit with the benchmark scores.

    Parameters
    ----------
    values : array_like, shape (n_units, n_models)
        Unit-major perplexity-like values (NaN rejected).
    scores : array_like, shape (n_models,) or (n_models, n_benchmarks)
        Higher = better; NaN = model not scored on that benchmark (excluded for it).

    Returns
    -------
    numpy.ndarray, shape (n_units,) or (n_units, n_benchmarks), float64 in [−1, 1]
        Positive when better models are less perplexed on the unit.

    Examples
    --------
    Three units (rows) by three models (columns); the first model is the best:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import thrush_correlation
    >>> values = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    >>> scores = np.array([0.9, 0.5, 0.1])
    >>> thrush_correlation(values, scores).tolist()
    [1.0, -1.0, 0.75]
    >>> both = np.column_stack([scores, -scores])  # (n_models, n_benchmarks)
    >>> thrush_correlation(values, both).tolist()
    [[1.0, -1.0], [-1.0, 1.0], [0.75, -0.75]]
    """
    arr, y, squeeze = _prepare(values, scores)
    out = _apply_by_mask(arr, y, _thrush_block, False)
    return out[:, 0] if squeeze else out


def preselect_correlation(values: Any, scores: Any) -> np.ndarray:
    """Pre-select correlation: fraction of model pairs put in the wrong order.

    Parameters
    ----------
    values : array_like, shape (n_units, n_models)
    scores : array_like, shape (n_models,) or (n_models, n_benchmarks)

    Returns
    -------
    numpy.ndarray, shape (n_units,) or (n_units, n_benchmarks), float64 in [0, 1]
        0 = better models always less perplexed, ½ = random, ties in the values count ½.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import preselect_correlation
    >>> values = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    >>> scores = np.array([0.9, 0.5, 0.1])
    >>> np.round(preselect_correlation(values, scores), 3).tolist()  # last row: one tie
    [0.0, 1.0, 0.167]
    """
    arr, y, squeeze = _prepare(values, scores)
    out = _apply_by_mask(arr, y, _preselect_block, False)
    return out[:, 0] if squeeze else out


def thrush_from_codes(codes: Any, scores: Any) -> np.ndarray:
    """:func:`thrush_correlation` from stored doubled rank codes ``(n_units, n_models)``.

    Examples
    --------
    >>> from sigmap_lib.nll import encode_ranks
    >>> from sigmap_lib.signatures import thrush_from_codes
    >>> codes = encode_ranks([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    >>> codes.tolist()
    [[0, 2, 4], [4, 2, 0], [1, 1, 4]]
    >>> thrush_from_codes(codes, [0.9, 0.5, 0.1]).tolist()  # = thrush_correlation(values, ...)
    [1.0, -1.0, 0.75]
    """
    return _from_codes(codes, scores, _thrush_block)


def preselect_from_codes(codes: Any, scores: Any) -> np.ndarray:
    """:func:`preselect_correlation` from stored doubled rank codes ``(n_units, n_models)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import encode_ranks
    >>> from sigmap_lib.signatures import preselect_correlation, preselect_from_codes
    >>> values, scores = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 1.0, 2.0]]), [0.9, 0.5, 0.1]
    >>> out = preselect_from_codes(encode_ranks(values), scores)
    >>> np.round(out, 3).tolist(), bool(np.allclose(out, preselect_correlation(values, scores)))
    ([0.0, 1.0, 0.167], True)
    """
    return _from_codes(codes, scores, _preselect_block)


def _from_codes(codes: Any, scores: Any, block: Any) -> np.ndarray:
    """A screening statistic (``block``) of every unit from its doubled rank codes."""
    arr = _check_codes(codes)
    y, squeeze = as_scores(scores, arr.shape[1])
    for b in range(y.shape[1]):
        check_benchmark(y[:, b], f"#{b}")
    out = _apply_by_mask(arr, y, block, True)
    return out[:, 0] if squeeze else out


# ----------------------------------------------------------------------------------------
# streaming screening


def strength_of(stat: np.ndarray, statistic: str, two_sided: bool) -> np.ndarray:
    """Candidate strength (larger = stronger) of a statistic.

    thrush: ``|γ|`` (two-sided) or ``γ``; preselect: ``|η − ½|·2`` (two-sided) or
    ``(½ − η)·2``; both in [−1, 1] / [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import strength_of
    >>> strength_of(np.array([-0.8, 0.2]), "thrush", two_sided=True).tolist()
    [0.8, 0.2]
    >>> strength_of(np.array([-0.8, 0.2]), "thrush", two_sided=False).tolist()
    [-0.8, 0.2]
    >>> np.round(strength_of(np.array([0.1, 0.5, 0.9]), "preselect", two_sided=True), 3).tolist()
    [0.8, 0.0, 0.8]
    """
    if statistic == "thrush":
        return np.abs(stat) if two_sided else stat
    return np.abs(stat - 0.5) * 2.0 if two_sided else (0.5 - stat) * 2.0


def unscreenable_reason(y: Any, min_models: int = 3) -> str | None:
    """Why one benchmark's scores cannot be screened, or ``None`` when they can.

    Rank statistics need at least ``min_models`` (and never fewer than 3) scored models
    whose scores are not all equal — and still not all equal when any one model is left out
    (the leave-one-model-out R² of the two-stage procedure refits without each model).

    Parameters
    ----------
    y : array_like, shape (n_models,)
        Scores; NaN = not scored.
    min_models : int, default 3
        The world's minimum (``minimums: signature_models``); values below 3 count as 3.

    Returns
    -------
    str or None

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import unscreenable_reason
    >>> unscreenable_reason(np.array([1.0, 2.0, 3.0, np.nan])) is None
    True
    >>> unscreenable_reason(np.array([1.0, np.nan]))
    'only 1 scored model(s) with NLL (need >= 3)'
    >>> unscreenable_reason(np.array([1.0, 2.0, 3.0]), min_models=4)
    'only 3 scored model(s) with NLL (need >= 4, minimum signature_models)'
    >>> unscreenable_reason(np.array([5.0, 5.0, 5.0, 6.0]))
    'scores are (almost) constant: 3 of 4 models share one value'
    """
    v = np.asarray(y, dtype=np.float64)
    v = v[np.isfinite(v)]
    need = max(3, int(min_models))
    if v.size < need:
        which = ", minimum signature_models" if need > 3 else ""
        return f"only {v.size} scored model(s) with NLL (need >= {need}{which})"
    _, counts = np.unique(v, return_counts=True)
    if counts.max() > v.size - 2:
        return f"scores are (almost) constant: {counts.max()} of {v.size} models share one value"
    return None


def split_screenable(
    scores: Any, names: Sequence[str], min_models: int = 3
) -> tuple[list[int], dict[str, str]]:
    """Columns of ``scores`` that can be screened, and why the others cannot.

    Parameters
    ----------
    scores : array_like, shape (n_models, B)
    names : sequence of str, length B
    min_models : int, default 3
        Passed to :func:`unscreenable_reason`.

    Returns
    -------
    valid : list of int
        Column indices that pass :func:`unscreenable_reason`.
    skipped : dict
        ``name -> reason`` for the others.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import split_screenable
    >>> y = np.array([[1.0, 7.0], [2.0, 7.0], [3.0, 7.0], [4.0, 7.0]])
    >>> split_screenable(y, ["mmlu", "flat"])
    ([0], {'flat': 'scores are (almost) constant: 4 of 4 models share one value'})
    """
    y = np.asarray(scores, dtype=np.float64)
    valid, skipped = [], {}
    for j, name in enumerate(names):
        reason = unscreenable_reason(y[:, j], min_models)
        if reason is None:
            valid.append(j)
        else:
            skipped[name] = reason
    return valid, skipped

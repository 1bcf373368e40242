"""The streaming max-T pass of the calibrated signatures: general quality ``ĝ`` (minus the
mean per-unit value), the quality basis and permutation columns per scored-model set, and one
pass over all units that residualizes each block of values on the basis, ranks the residuals
and computes the observed statistics, a running top-K and the permutation-null column maxima
(``MaxTPartial``, merged by :func:`merge_max_t` across chunks and shards).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np

from sigmap_lib._util._threads import single_blas_thread
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import MAX_MODELS_UINT8, encode_ranks
from sigmap_lib.signatures._screening import (
    RunningTopK,
    finite_column_sums,
    raise_on_nan,
    select_topk,
    source_chunks,
)
from sigmap_lib.signatures._statistics import (
    kernels,
    rankable,
    score_coefficients,
    strength_of,
    thrush_max,
)

# rows per GEMM block and permutation columns per product (L2-sized blocks)
_ROWS = 1024
_COLS = 128
# histogram of the strength per benchmark: its bins bound the running K-th strength from
# below, so a chunk only hands over the units that can still enter the buffer
_BINS = 512
_FLOOR_MARGIN = 1e-9
# bins of the pooled permutation null of every unit's statistic (the FDR mode): equal bins
# over [0, 1] (two-sided) or [-1, 1]
NULL_BINS = 4096


@dataclass
class MaxTPartial:
    """Partial result of the max-T pass over some units (a chunk or a shard).

    Two partials over disjoint sets of units merge with :func:`merge_max_t` into the
    partial of their union; the result does not depend on how the units were split.

    Attributes
    ----------
    null_max : numpy.ndarray, shape (C,)
        Running maximum of the strength of each permutation column (``0`` / ``−inf`` when
        no unit was seen, two- / one-sided).
    observed_max : numpy.ndarray, shape (B,)
        Running maximum strength of each benchmark's real statistic.
    top_units, top_values : list of numpy.ndarray, one per benchmark
        Running top-``buffer_units`` units by strength (ties: smaller unit index) and
        their signed statistics, strongest first.
    buffer_units : int
    two_sided : bool
    n_units : int
        Units seen.
    null_hist : numpy.ndarray of int64, shape (B, NULL_BINS), or None
        FDR mode: per benchmark, the histogram of every unit's statistic under every one
        of its permutations (equal bins over ``[0, 1]``, or ``[−1, 1]`` one-sided).
    observed_hist : numpy.ndarray of int64, shape (B, n_bins), or None
        FDR mode: per benchmark, the histogram of every unit's real statistic.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import MaxTPartial, merge_max_t
    >>> a = MaxTPartial(np.array([0.4, 0.7]), np.array([0.8]), [np.array([3, 1])],
    ...                 [np.array([0.8, -0.5])], buffer_units=2, two_sided=True, n_units=5)
    >>> b = MaxTPartial(np.array([0.6, 0.2]), np.array([0.6]), [np.array([9])],
    ...                 [np.array([0.6])], buffer_units=2, two_sided=True, n_units=5)
    >>> ab = merge_max_t(a, b)
    >>> ab.null_max.tolist(), ab.observed_max.tolist(), ab.n_units
    ([0.6, 0.7], [0.8], 10)
    >>> ab.top_units[0].tolist(), ab.top_values[0].tolist()  # the 2 strongest of 3
    ([3, 9], [0.8, 0.6])
    """

    null_max: np.ndarray
    observed_max: np.ndarray
    top_units: list[np.ndarray]
    top_values: list[np.ndarray]
    buffer_units: int
    two_sided: bool
    n_units: int
    null_hist: np.ndarray | None = None
    observed_hist: np.ndarray | None = None

    def strength(self, b: int) -> np.ndarray:
        """Strength of benchmark ``b``'s buffered units (``|value|`` two-sided)."""
        return strength_of(self.top_values[b], "thrush", self.two_sided)


def merge_max_t(a: MaxTPartial, b: MaxTPartial) -> MaxTPartial:
    """Merge two partial max-T results over disjoint units (a pure function).

    Permutation and observed maxima merge by ``max``; the buffered top units by keeping
    the ``buffer_units`` strongest of both (ties: smaller unit index), so merging
    per-chunk or per-shard partials in any order gives the partial of all their units.

    Parameters
    ----------
    a, b : MaxTPartial
        From the same design (same columns, benchmarks, buffer and sidedness).

    Returns
    -------
    MaxTPartial
        The partial of the units of ``a`` and ``b`` together.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import MaxTPartial, merge_max_t
    >>> def part(null, units, vals):
    ...     vals = np.asarray(vals)
    ...     return MaxTPartial(np.asarray(null), np.abs(vals).max(keepdims=True),
    ...                        [np.asarray(units)], [vals], 1, True, len(units))
    >>> ab = merge_max_t(part([0.3], [0], [0.5]), part([0.4], [7], [-0.9]))
    >>> ab.null_max.tolist(), ab.top_units[0].tolist(), ab.top_values[0].tolist()
    ([0.4], [7], [-0.9])
    """
    if (
        a.null_max.shape != b.null_max.shape
        or a.observed_max.shape != b.observed_max.shape
        or a.buffer_units != b.buffer_units
        or a.two_sided != b.two_sided
    ):
        raise SigmapInputError(
            "max-T partials from different designs cannot be merged: "
            f"{a.null_max.shape}/{a.observed_max.shape}/K={a.buffer_units} vs "
            f"{b.null_max.shape}/{b.observed_max.shape}/K={b.buffer_units}"
        )
    units, values = [], []
    for ua, va, ub, vb in zip(a.top_units, a.top_values, b.top_units, b.top_values):
        u = np.concatenate([ua, ub]).astype(np.int64)
        v = np.concatenate([va, vb]).astype(np.float64)
        st = strength_of(v, "thrush", a.two_sided)
        keep = select_topk(st, u, a.buffer_units)
        order = keep[np.lexsort((u[keep], -st[keep]))]
        units.append(u[order])
        values.append(v[order])
    hists = {}
    for name in ("null_hist", "observed_hist"):
        ha, hb = getattr(a, name), getattr(b, name)
        if (ha is None) != (hb is None):
            raise SigmapInputError(f"max-T partials with and without {name} cannot be merged")
        hists[name] = None if ha is None else ha + hb
    return MaxTPartial(
        null_max=np.maximum(a.null_max, b.null_max),
        observed_max=np.maximum(a.observed_max, b.observed_max),
        top_units=units,
        top_values=values,
        buffer_units=a.buffer_units,
        two_sided=a.two_sided,
        n_units=a.n_units + b.n_units,
        **hists,
    )


# ----------------------------------------------------------------------------------------
# pass 1: general quality


def value_sums(source: Any, chunk_units: int) -> tuple[np.ndarray, int]:
    """``Σ_j v_jk`` over all units per model (float64, shape (n_models,)) and ``d``.

    One streamed pass over per-unit values (NLL or bits per byte, not rank codes); a NaN
    value is named by its unit and model.
    """
    d, m, chunks, is_codes = source_chunks(source, chunk_units)
    if is_codes:
        raise SigmapInputError(
            "general quality is estimated from the per-unit values (NLL), not from rank "
            "codes: pass the per-model NLL arrays (nll_arrays=) or a values matrix"
        )
    tot = np.zeros(m, dtype=np.float64)
    for start, block in chunks:
        if block.shape[0] == 0:
            continue
        tot += finite_column_sums(block, start)
    return tot, d


def general_quality(source: Any, models: Any = None, *, chunk_units: int = 1 << 20) -> np.ndarray:
    """General quality ``ĝ``: each model's negated mean per-unit value over all units.

    With per-unit NLL this is minus the model's corpus bits per byte up to one positive
    constant (``Σ_j NLL_jk / d = ln 2 · (Σ_j n_bytes_j / d) · bpb_k``), so higher = less
    perplexed = better. It is not ranked: the calibrated statistic regresses on a smooth
    basis of ``ĝ`` itself (:func:`quality_basis`). Its noise is that of a mean over ``d``
    units (``sd/√d`` per model: ~1 % of the between-model spread at ``d = 1e4`` for unit
    noise of the size of that spread, and shrinking with ``d``).

    Parameters
    ----------
    source : (n_units, n_models) array | sequence of per-model 1-D arrays
        Per-unit values (NLL in nats, or bits per byte). Rank codes are refused.
    models : array_like of bool, shape (n_models,), optional
        The model set (default: all).
    chunk_units : int
        Units read at a time.

    Returns
    -------
    numpy.ndarray of float64, shape (n_selected_models,)

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import general_quality
    >>> values = np.array([[1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [2.0, 1.0, 6.0]])
    >>> general_quality(values).tolist()  # model 0 is least perplexed on average
    [-1.3333333333333333, -2.0, -3.6666666666666665]
    >>> general_quality(values, models=[False, True, True]).tolist()
    [-2.0, -3.6666666666666665]
    """
    tot, d = value_sums(source, chunk_units)
    m = tot.size
    mask = np.ones(m, dtype=bool) if models is None else np.asarray(models, dtype=bool)
    if mask.shape != (m,) or mask.sum() < 1:
        raise SigmapInputError(f"models must be a boolean mask over the {m} models")
    return -tot[mask] / max(d, 1)


# The smallest number of scored models at which the calibrated test holds its level and
# can detect anything (measured: `sigmap bench recovery`, docs/RESULTS.md): below 12 the
# permutation maximum over 1e4 units is close to 1 (|Spearman| reaches 1 at m <= 10).
MIN_MODELS_CALIBRATED = 12
# residual degrees of freedom left after the quality basis and the strata
MIN_RESIDUAL_DF = 9
# The fewest units whose mean stands for general quality (measured on fresh null worlds,
# m = 32, scores g + noise, units loading 0.3-0.9 on g; 300-600 runs each; docs/RESULTS.md):
# with ĝ from d units the claims on pure null are 11 % at d = 8, 8.7 % at 16, 4-6 % from
# 32 on. A noisy ĝ leaves part of g in both residuals, so units that load more on quality
# than the average track any score that depends on it.
MIN_UNITS_CALIBRATED = 64


def basis_shape(m: int) -> tuple[int, int]:
    """``(n_knots, degree)`` of the B-spline basis of ``ĝ`` for ``m`` models: a quadratic
    (2 knots, degree 2: 3 columns with the intercept) below 16 models, a cubic spline
    with one interior knot (3 knots, degree 3: 5 columns) from 16 on.

    Examples
    --------
    >>> from sigmap_lib.signatures import basis_shape
    >>> basis_shape(12), basis_shape(32)
    ((2, 2), (3, 3))
    """
    return (2, 2) if m < 16 else (3, 3)


def quality_basis(ghat: Any, strata: Any = None) -> np.ndarray:
    """Orthonormal basis of what the calibrated statistic regresses out: ``[1, spline(ĝ)]``
    and, with ``strata``, one indicator per stratum.

    The spline is scikit-learn's :class:`~sklearn.preprocessing.SplineTransformer` on the
    standardized ``ĝ`` (quantile knots, linear extrapolation), sized by
    :func:`basis_shape`; the columns are orthonormalized by an SVD (rank-revealing, so
    collinear strata or a constant ``ĝ`` lose their redundant columns).

    Parameters
    ----------
    ghat : array_like, shape (m,)
        General quality of the scored models.
    strata : array_like, shape (m,), optional
        One label per model (e.g. its family).

    Returns
    -------
    numpy.ndarray of float64, shape (m, q)
        ``QᵀQ = I``; ``q`` is the rank of the basis.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_basis
    >>> g = np.linspace(-1.0, 1.0, 20)
    >>> q = quality_basis(g)
    >>> q.shape, bool(np.allclose(q.T @ q, np.eye(5)))
    ((20, 5), True)
    >>> quality_basis(g, strata=["a", "b"] * 10).shape  # one more column: the stratum
    (20, 6)
    """
    from sklearn.preprocessing import SplineTransformer

    g = np.asarray(ghat, dtype=np.float64).reshape(-1)
    m = g.size
    cols = [np.ones((m, 1))]
    sd = g.std()
    if m >= 3 and sd > 1e-12 * max(1.0, float(np.abs(g).max())):
        n_knots, degree = basis_shape(m)
        z = ((g - g.mean()) / sd)[:, None]
        st = SplineTransformer(
            n_knots=n_knots, degree=degree, knots="quantile", extrapolation="linear"
        )
        cols.append(st.fit_transform(z))
    if strata is not None:
        lab = np.asarray(strata).reshape(-1)
        if lab.size != m:
            raise SigmapInputError(f"strata: {lab.size} labels for {m} models")
        _, codes = np.unique(lab, return_inverse=True)
        cols.append((codes[:, None] == np.arange(codes.max() + 1)[None, :]).astype(float))
    z = np.hstack(cols)
    u, s, _ = np.linalg.svd(z, full_matrices=False)
    return np.ascontiguousarray(u[:, s > 1e-10 * s[0]])


#: Models per permutation block: the calibrated test permutes score residuals only among
#: models of similar general quality (consecutive in ``ĝ``), so that any function of ``ĝ``
#: the basis misses, and any spread that changes with ``ĝ``, stays (nearly) in place.
BLOCK_MODELS = 4
#: A stratum (e.g. a model family) with fewer models than this is pooled with the other
#: small strata: one or two models cannot be permuted within, and one effect per singleton
#: family would use up the degrees of freedom.
MIN_STRATUM_MODELS = 3
POOLED_STRATUM = "(small strata)"


def pooled_strata(strata: Any, min_models: int = MIN_STRATUM_MODELS) -> np.ndarray | None:
    """The strata the calibrated test uses: each stratum of at least ``min_models`` models
    as it is, all smaller ones pooled into one (labelled ``"(small strata)"``).

    Parameters
    ----------
    strata : array_like, shape (m,), or None
        One label per model (e.g. its family).
    min_models : int
        Smallest stratum kept on its own.

    Returns
    -------
    numpy.ndarray of str, shape (m,), or None

    Examples
    --------
    >>> from sigmap_lib.signatures import pooled_strata
    >>> pooled_strata(["pythia"] * 3 + ["opt", "mpt", "phi"]).tolist()
    ['pythia', 'pythia', 'pythia', '(small strata)', '(small strata)', '(small strata)']
    """
    if strata is None:
        return None
    lab = np.asarray(strata).reshape(-1).astype(str)
    _names, codes, counts = np.unique(lab, return_inverse=True, return_counts=True)
    small = counts[codes] < min_models
    return np.where(small, POOLED_STRATUM, lab)


def quality_blocks(
    ghat: Any, strata: Any = None, size: int = BLOCK_MODELS, scores: Any = None
) -> np.ndarray:
    """Permutation blocks: within each stratum, the models sorted by general quality and cut
    into ``K = max(1, round(n / size))`` runs of consecutive models.

    Without ``scores`` the runs have near-equal sizes. With ``scores`` the cuts fall where the
    scores jump: among all cuts into ``K`` runs of ``size − 1 .. 2·size − 1`` models, the one
    with the least within-run sum of squares of the standardized scores (summed over the
    score columns), found exactly by dynamic programming. A score that steps along ``ĝ``
    (accuracy bands, a capability that switches on) then keeps each model in the band it
    came from under the null, where runs of fixed size would straddle the jump.

    Parameters
    ----------
    ghat : array_like, shape (m,)
        General quality of the models.
    strata : array_like, shape (m,), optional
        Labels (already pooled, :func:`pooled_strata`); blocks never cross them.
    size : int
        Target models per block.
    scores : array_like, shape (m,) or (m, n_bench), optional
        The benchmark scores the blocks are cut for.

    Returns
    -------
    numpy.ndarray of int, shape (m,)
        The block of each model (``0 .. n_blocks − 1``), numbered in quality order within
        each stratum.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_blocks
    >>> quality_blocks(np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4])).tolist()
    [1, 0, 1, 0, 1, 0, 1, 0]
    >>> quality_blocks(np.arange(6.0), strata=["a", "b"] * 3, size=3).tolist()
    [0, 1, 0, 1, 0, 1]
    >>> step = np.array([0, 0, 0, 1, 1, 1, 1, 1.0])  # jumps after the third model
    >>> quality_blocks(np.arange(8.0), scores=step).tolist()
    [0, 0, 0, 1, 1, 1, 1, 1]
    """
    g = np.asarray(ghat, dtype=np.float64).reshape(-1)
    m = g.size
    if strata is None:
        groups = [np.arange(m)]
    else:
        lab = np.asarray(strata).reshape(-1)
        if lab.size != m:
            raise SigmapInputError(f"strata: {lab.size} labels for {m} models")
        _, codes = np.unique(lab, return_inverse=True)
        groups = [np.flatnonzero(codes == c) for c in range(int(codes.max()) + 1)]
    y = None
    if scores is not None:
        y = np.asarray(scores, dtype=np.float64).reshape(m, -1)
        sd = y.std(axis=0)
        y = (y - y.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    out = np.empty(m, dtype=np.int64)
    nxt = 0
    for idx in groups:
        order = idx[np.argsort(g[idx], kind="stable")]
        k = max(1, round(order.size / size))
        if y is None:
            runs = np.array_split(np.arange(order.size), k)
        else:
            runs = _least_squares_runs(y[order], k, size)
        for run in runs:
            out[order[run]] = nxt
            nxt += 1
    return out


def _least_squares_runs(y: np.ndarray, k: int, size: int) -> list[np.ndarray]:
    """The cut of the rows of ``y (n, c)`` into ``k`` runs of ``size − 1 .. 2·size − 1`` rows
    (widened when ``n`` needs it) with the least total within-run sum of squares."""
    n = y.shape[0]
    lo = min(max(2, size - 1), n // k)
    hi = max(2 * size - 1, -(-n // k))
    c1 = np.vstack([np.zeros((1, y.shape[1])), np.cumsum(y, axis=0)])
    c2 = np.concatenate([[0.0], np.cumsum((y * y).sum(axis=1))])
    best = np.full((k + 1, n + 1), np.inf)
    best[0, 0] = 0.0
    start = np.zeros((k + 1, n + 1), dtype=np.int64)
    for j in range(1, k + 1):
        for b in range(j * lo, n + 1):
            a = np.arange(max(0, b - hi), b - lo + 1)
            if a.size == 0:
                continue
            s = c1[b] - c1[a]
            cost = best[j - 1, a] + c2[b] - c2[a] - (s * s).sum(axis=1) / (b - a)
            i = int(np.argmin(cost))
            best[j, b], start[j, b] = cost[i], a[i]
    runs: list[np.ndarray] = []
    b = n
    for j in range(k, 0, -1):
        a = int(start[j, b])
        runs.append(np.arange(a, b))
        b = a
    return runs[::-1]


def distinct_permutations(blocks: Any) -> int:
    """How many distinct permutations exchange models only within their blocks
    (``Π_b n_b!``).

    Examples
    --------
    >>> from sigmap_lib.signatures import distinct_permutations
    >>> distinct_permutations([0, 0, 0, 0, 1, 1, 1, 1])  # 4! * 4!
    576
    """
    _, counts = np.unique(np.asarray(blocks).reshape(-1), return_counts=True)
    return int(np.prod([math.factorial(int(c)) for c in counts], dtype=object))


def score_scale(e: Any, ghat: Any) -> np.ndarray:
    """The spread of score residuals as a smooth function of general quality:
    ``exp(a + b·z(ĝ))`` fitted by least squares to ``log |e|`` (one fit per column).

    Real benchmark errors spread more among weak models than among strong ones (ARC-Easy:
    3× in the weakest fifth); dividing the residuals by this fit makes them exchangeable
    across quality before they are permuted.

    Parameters
    ----------
    e : array_like, shape (m,) or (m, c)
        Residuals (each column centred on the quality basis).
    ghat : array_like, shape (m,)

    Returns
    -------
    numpy.ndarray, the shape of ``e``; positive.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import score_scale
    >>> g = np.linspace(-1.0, 1.0, 9)
    >>> s = score_scale(np.exp(-g) * np.array([1, -1] * 4 + [1]), g)
    >>> bool(np.allclose(s, np.exp(-g)))
    True
    """
    e = np.asarray(e, dtype=np.float64)
    one = e.ndim == 1
    ee = e[:, None] if one else e
    g = np.asarray(ghat, dtype=np.float64).reshape(-1)
    sd = g.std()
    z = (g - g.mean()) / sd if sd > 0 else np.zeros_like(g)
    x = np.column_stack([np.ones_like(z), z])
    a = np.abs(ee)
    floor = 1e-9 * np.maximum(a.max(axis=0, keepdims=True), 1e-300)
    coef = np.linalg.lstsq(x, np.log(a + floor), rcond=None)[0]
    s = np.exp(x @ coef)
    return s[:, 0] if one else s


#: Knots of the cubic spline a benchmark's quality basis may gain (chosen per benchmark by
#: the BIC of its scores' fit; the base basis is always a candidate).
SCORE_KNOTS = (3, 5, 8, 12)


def _widened(basis: np.ndarray, ghat: np.ndarray, n_knots: int) -> np.ndarray:
    """``basis`` and a cubic spline of ``ĝ`` with ``n_knots`` quantile knots,
    orthonormalized (``basis`` itself for ``n_knots = 0``)."""
    from sklearn.preprocessing import SplineTransformer

    if n_knots == 0:
        return basis
    g = np.asarray(ghat, dtype=np.float64).reshape(-1)
    z = ((g - g.mean()) / g.std())[:, None]
    st = SplineTransformer(n_knots=n_knots, degree=3, knots="quantile", extrapolation="linear")
    u, sv, _ = np.linalg.svd(np.hstack([basis, st.fit_transform(z)]), full_matrices=False)
    return np.ascontiguousarray(u[:, sv > 1e-10 * sv[0]])


def score_knots(basis: np.ndarray, ghat: Any, y: Any) -> int:
    """How many knots the quality spline of one benchmark's scores gets (``0``: none beyond
    ``basis``): the candidate of :data:`SCORE_KNOTS` with the smallest BIC
    ``m·ln(RSS/m) + ln(m)·q`` of the least-squares fit, among those leaving
    :data:`MIN_RESIDUAL_DF` degrees of freedom (see :func:`score_basis`).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_basis, score_knots
    >>> g = np.linspace(-2.0, 2.0, 40)
    >>> noise = 0.05 * np.random.default_rng(3).standard_normal(40)
    >>> score_knots(quality_basis(g), g, 0.5 * g + noise)  # smooth: nothing added
    0
    >>> score_knots(quality_basis(g), g, (g > 0.3) + noise) > 0  # a step
    True
    """
    g = np.asarray(ghat, dtype=np.float64).reshape(-1)
    yy = np.asarray(y, dtype=np.float64).reshape(-1)
    m = g.size

    def bic(q: np.ndarray) -> float:
        r = yy - q @ (q.T @ yy)
        return m * float(np.log(max(float(r @ r), 1e-300) / m)) + np.log(m) * q.shape[1]

    best, best_bic = 0, bic(basis)
    if g.std() <= 1e-12 * max(1.0, float(np.abs(g).max())):
        return best
    for n in SCORE_KNOTS:
        if m - (basis.shape[1] + n + 2) < MIN_RESIDUAL_DF:
            break
        q = _widened(basis, g, n)
        if q.shape[1] <= basis.shape[1]:  # the same span (3 knots: the base spline)
            continue
        v = bic(q) if q.shape[1] < m - 1 else np.inf
        if v < best_bic:
            best, best_bic = n, v
    return best


def score_basis(basis: np.ndarray, ghat: Any, y: Any) -> np.ndarray:
    """The quality basis of one benchmark: ``basis`` widened by a cubic spline of ``ĝ``
    with as many knots as the BIC of the scores' fit chooses (:func:`score_knots`).

    Scores can bend where units do not (a hinge where a benchmark leaves chance, a step, a
    sharp logistic): what the basis misses of them is a function of ``ĝ`` that stays in the
    residual and, against units that miss their own shapes, shifts every statistic. The
    candidates are ``basis`` itself and ``basis`` plus a cubic spline (quantile knots) with
    ``n`` knots for ``n`` in :data:`SCORE_KNOTS`. The result contains ``basis`` (nested),
    so score residuals on it are orthogonal to the units' residuals' basis too. Only the
    scores use it: the units stay on ``basis``, one pass for every benchmark of a model set
    (residualizing the units on each benchmark's own basis recovers a little power — recall
    0.757 against 0.713 at m = 32, ρ = 0.8 — but each distinct basis costs another pass over
    the units: 4.5× the paper's pass instead of 2.6× at d = 2e7).

    Parameters
    ----------
    basis : numpy.ndarray, shape (m, q0)
        Orthonormal quality basis (:func:`quality_basis`).
    ghat : array_like, shape (m,)
    y : array_like, shape (m,)
        The benchmark's scores over the same models.

    Returns
    -------
    numpy.ndarray, shape (m, q)
        Orthonormal, ``q ≥ q0``.

    Examples
    --------
    A step in the scores widens the basis, and the result still spans the base basis:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_basis, score_basis
    >>> g = np.linspace(-2.0, 2.0, 40)
    >>> q = quality_basis(g)
    >>> qb = score_basis(q, g, (g > 0.3) + 0.05 * np.sin(7.0 * g))
    >>> qb.shape[1] > q.shape[1], bool(np.allclose(qb @ (qb.T @ q), q))
    (True, True)
    """
    g = np.asarray(ghat, dtype=np.float64).reshape(-1)
    return _widened(basis, g, score_knots(basis, g, y))


def studentized(e: np.ndarray, basis: np.ndarray, ghat: np.ndarray) -> np.ndarray:
    """Columns of ``e (m, c)`` divided by :func:`score_scale` and projected off the
    orthonormal ``basis`` again (so they stay orthogonal to it).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_basis, studentized
    >>> g = np.linspace(-1.0, 1.0, 12)
    >>> q = quality_basis(g)
    >>> t = studentized(np.random.default_rng(0).standard_normal((12, 2)), q, g)
    >>> bool(np.allclose(q.T @ t, 0.0))
    True
    """
    t = e / score_scale(e, ghat)
    return t - basis @ (basis.T @ t)


def stratified_permutations(
    rng: np.random.Generator, p: int, m: int, strata: Any = None
) -> np.ndarray:
    """``P`` permutations of ``m`` models, each within the strata (``(P, m)`` int).

    Row ``p`` maps position ``i`` to ``perm[p, i]``, always a model of ``i``'s stratum
    (any model when ``strata`` is None); ``e[perm[p]]`` is the permuted vector.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import stratified_permutations
    >>> lab = np.array(["a", "a", "b", "b", "b"])
    >>> perms = stratified_permutations(np.random.default_rng(0), 50, 5, lab)
    >>> bool((lab[perms] == lab).all()), perms.shape
    (True, (50, 5))
    """
    if strata is None:
        return np.argsort(rng.random((p, m)), axis=1)
    _, codes = np.unique(np.asarray(strata).reshape(-1), return_inverse=True)
    home = np.argsort(codes, kind="stable")  # positions grouped by stratum
    out = np.empty((p, m), dtype=np.int64)
    for i in range(p):
        out[i, home] = np.lexsort((rng.random(m), codes))
    return out


def _pearson_cols(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The columns of ``e (m, c)`` as they are (residuals, centred) and their norms."""
    ne = np.sqrt((e * e).sum(axis=0))
    return e.copy(), np.where(ne > 0, ne, 1.0)


def _crank2(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Doubled centred average ranks ``2·rank − (m + 1)`` of each column of ``e (m, c)``
    (integers, exact in float32 products with rank codes up to m = 128) and each column's
    norm (``1`` for a constant column, which is all zeros)."""
    from scipy.stats import rankdata

    r = 2.0 * rankdata(e, axis=0, method="average") - (e.shape[0] + 1.0)
    nr = np.sqrt((r * r).sum(axis=0))
    return r, np.where(nr > 0, nr, 1.0)


def residuals(x: Any, basis: np.ndarray) -> np.ndarray:
    """Each row of ``x (n, m)`` minus its projection on the orthonormal ``basis (m, q)``
    (float64); a row whose residual is below ``1e-9`` of its centred norm (constant, or in
    the span of the basis up to rounding) is set to exactly 0.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_basis, residuals
    >>> g = np.arange(12.0)
    >>> x = np.vstack([3.0 + 2.0 * g, np.r_[1.0, np.zeros(11)]])
    >>> r = residuals(x, quality_basis(g))
    >>> r[0].tolist() == [0.0] * 12, bool(abs(r[1].sum()) < 1e-12)  # in the span; centred
    (True, True)
    """
    xb = np.asarray(x)
    if xb.dtype not in (np.float32, np.float64):
        xb = xb.astype(np.float64)
    r = np.empty(xb.shape, dtype=np.float64)
    kernels().residualize_rows(xb, np.ascontiguousarray(basis, dtype=np.float64), r)
    return r


def residual_codes(x: Any, basis: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rank codes (doubled zero-based average ranks) of each row's :func:`residuals`.

    ``x (n, m)`` per-unit values, ranked across the models after the projection on the
    orthonormal ``basis (m, q)``; a row with no residual gets all-tied codes (so its
    statistic is 0). Rows are processed 65,536 at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import quality_basis, residual_codes
    >>> g = np.arange(12.0)
    >>> x = np.vstack([3.0 + 2.0 * g, np.r_[1.0, np.zeros(11)], np.ones(12)])
    >>> c = residual_codes(x, quality_basis(g))
    >>> c[0].tolist() == [11] * 12, c[2].tolist() == [11] * 12  # in the span: all tied
    (True, True)
    >>> int(c[1, 0]) == 22  # the one model above the fitted quality curve ranks last
    True
    """
    n, m = x.shape
    if out is None:
        out = np.empty((n, m), dtype=np.uint8 if m <= MAX_MODELS_UINT8 else np.uint16)
    k = kernels()
    step = 65536
    for r0 in range(0, n, step):
        r = residuals(x[r0 : r0 + step], basis)
        if m > MAX_MODELS_UINT8:
            out[r0 : r0 + r.shape[0]] = encode_ranks(r)
        else:
            k.encode_blocked(r, out[r0 : r0 + r.shape[0]], k.BLOCK_UNITS)
    return out


# ----------------------------------------------------------------------------------------
# the design: score columns and permutation columns, fixed before the pass


@dataclass
class Group:
    """Benchmarks scored by the same models, with their score and permutation columns."""

    mask: np.ndarray  # (m,) bool
    cols: np.ndarray  # benchmark indices
    a_obs: np.ndarray  # (m_g, B_g) float64 score columns
    den_obs: np.ndarray  # (B_g,) divisor of each score column's products (Thrush) or 1
    null: InitVar[np.ndarray]  # (m_g, n_null) permutation columns, kept as ``e_null``
    null_start: int  # first column of this group in the global null array
    den_null: np.ndarray  # (n_null,) divisor of each permutation column's maximum
    ghat: np.ndarray | None  # (m_g,) general quality (calibrated)
    basis: np.ndarray | None = None  # (m_g, q) orthonormal quality basis (calibrated)
    strata: np.ndarray | None = None  # (m_g,) stratum labels (calibrated, optional)
    blocks: list[np.ndarray] | None = None  # per benchmark: (m_g,) permutation blocks
    pearson: bool = False  # calibrated: Pearson of the residuals (else Spearman)
    reasons: list[str | None] = field(default_factory=list)
    # per benchmark of the group: (start, stop) of its null columns (global), permutations
    null_span: list[tuple[int, int]] = field(default_factory=list)
    perms: list[np.ndarray] = field(default_factory=list)
    # derived: all models?, m_g, float64 null (m_g > 128: integer Thrush products may pass
    # 2**24), the null's column blocks (m_g, ≤ _COLS), and m_g (m_g − 1)² (0 for Pearson)
    full: bool = field(init=False)
    m: int = field(init=False)
    null64: bool = field(init=False)
    n_null: int = field(init=False)
    e_null: list[np.ndarray] = field(init=False, repr=False)
    offset: float = field(init=False)

    def __post_init__(self, null: np.ndarray) -> None:
        self.full = bool(self.mask.all())
        self.m = int(self.mask.sum())
        self.null64 = self.m > 128
        self.n_null = int(null.shape[1])
        dtype = np.float64 if self.null64 else np.float32
        self.e_null = [
            np.ascontiguousarray(null[:, c0 : c0 + _COLS], dtype=dtype)
            for c0 in range(0, self.n_null, _COLS)
        ]
        self.offset = 0.0 if self.pearson else float(self.m * (self.m - 1) ** 2)


@dataclass
class _Design:
    groups: list[Group]
    n_bench: int
    n_null: int
    method: str
    two_sided: bool
    shared: bool
    n_permutations: int
    pooled_null: bool = False  # histograms of every permuted statistic (the FDR mode)


def _residualize(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Columns of ``v (m, c)`` minus their projections on the orthonormal ``q (m, k)``."""
    return v - q @ (q.T @ v)


def _normal_scores(m: int) -> np.ndarray:
    """``Φ⁻¹(i / (m + 1))``, ``i = 1..m``: an untied, normal-shaped stand-in for a residual."""
    from scipy.stats import norm

    return norm.ppf(np.arange(1.0, m + 1.0) / (m + 1.0))


def build_design(
    y: np.ndarray,
    sums: np.ndarray | None,
    groups: list[tuple[np.ndarray, np.ndarray]],
    *,
    method: str,
    two_sided: bool,
    n_permutations: int,
    shared: bool,
    rng: np.random.Generator,
    strata: np.ndarray | None = None,
    n_units: int = 1,
    fwer: str = "benchmark",
    partial_statistic: str = "spearman",
) -> _Design:
    """Score and permutation columns of every group of benchmarks, fixed before the pass.

    ``sums`` are the per-model value sums over the ``n_units`` units (calibrated: ĝ);
    ``fwer="all"`` draws one set of permutations shared by every benchmark.
    """
    pearson = partial_statistic == "pearson"
    partial = method == "calibrated"
    p = int(n_permutations)
    out: list[Group] = []
    null_at = 0
    shared_perms: np.ndarray | None = None
    for mask, cols in groups:
        mg = int(mask.sum())
        yg = y[np.ix_(mask, cols)]
        ghat = q = lab = blocks = None
        if partial:
            assert sums is not None
            ghat = -sums[mask] / max(n_units, 1)
            lab = None if strata is None else strata[mask]
            pooled = pooled_strata(lab)
            q = quality_basis(ghat, pooled)
            if shared or fwer == "all":  # one set of permutations: one cut for all scores
                blocks = [quality_blocks(ghat, pooled, scores=yg)] * len(cols)
            else:  # each benchmark's permutations within blocks cut for its own scores
                blocks = [quality_blocks(ghat, pooled, scores=yg[:, j]) for j in range(len(cols))]
        obs = np.zeros((mg, len(cols)))
        den = np.ones(len(cols))
        reasons: list[str | None] = [None] * len(cols)
        bases: list[np.ndarray] = []
        scales: list[np.ndarray] = []
        score_bases: list[np.ndarray] = []  # each benchmark's basis (⊇ q)
        for j in range(len(cols)):
            if partial:
                assert q is not None
                qj = score_basis(q, ghat, yg[:, j])
                score_bases.append(qj)
                e = _residualize(yg[:, j : j + 1], qj)[:, 0]
                yc = yg[:, j] - yg[:, j].mean()
                if float(e @ e) <= 1e-18 * max(float(yc @ yc), 1e-300):
                    reasons[j] = (
                        "the scores are a smooth function of general quality"
                        + (" and the strata" if lab is not None else "")
                        + ": nothing is left to correlate once it is regressed out"
                    )
                    e = np.zeros(mg)
                # the residual, studentized by its spread along ĝ; the permutations move
                # the studentized residual and put the fitted spread back (Freedman–Lane)
                s0 = score_scale(e, ghat)
                t = studentized(e[:, None], qj, ghat)
                r2, nr = _pearson_cols(t) if pearson else _crank2(t)
                obs[:, j], den[j] = -r2[:, 0], nr[0]
                bases.append(e / s0)
                scales.append(s0)
            else:
                # integer columns: the products are exact (float32 too) and divided once
                obs[:, j] = -score_coefficients(yg[:, j]).astype(np.float64)
                den[j] = 2.0 * thrush_max(yg[:, j])[0]
                bases.append(obs[:, j])
        perm_labs = blocks if partial else [lab] * len(cols)
        if fwer == "all" and shared_perms is None:
            shared_perms = stratified_permutations(rng, p, mg, perm_labs[0])
        if shared:
            r0 = np.arange(1.0, mg + 1.0)
            if partial:
                shared_base = _normal_scores(mg)
                den_null = np.ones(p)
            else:
                shared_base = -score_coefficients(r0).astype(np.float64)
                den_null = np.full(p, 2.0 * thrush_max(r0)[0])
            perm_sets = [
                shared_perms
                if shared_perms is not None
                else stratified_permutations(rng, p, mg, perm_labs[0])
            ]
            if partial:
                # normal scores in a random order: the blocks then shuffle a generic
                # residual (the stored permutations include that order)
                perm_sets = [rng.permutation(mg)[perm_sets[0]]]
            null_cols = [shared_base[perm_sets[0]].T]
            scales = [np.ones(mg)]
        else:
            perm_sets = [
                shared_perms
                if shared_perms is not None
                else stratified_permutations(rng, p, mg, perm_labs[j])
                for j in range(len(cols))
            ]
            null_cols = [base[ps].T for base, ps in zip(bases, perm_sets)]
            if not partial:
                scales = [np.ones(mg) for _ in cols]
            den_null = np.repeat(den, p)
        if partial:
            # exact integer columns, each product divided once by the column's norm (so a
            # unit's statistic and a permutation maximum of the same ranks are equal floats)
            assert q is not None
            col = _pearson_cols if pearson else _crank2
            ranked = [
                col(studentized(_residualize(sc[:, None] * v, qj), qj, ghat))
                for v, sc, qj in zip(null_cols, scales, score_bases if not shared else [q])
            ]
            null_cols = [-r2 for r2, _ in ranked]
            den_null = np.concatenate([nr for _, nr in ranked])
        grp = Group(
            np.asarray(mask),
            np.asarray(cols),
            np.ascontiguousarray(obs),
            den,
            np.concatenate(null_cols, axis=1),
            null_at,
            den_null,
            ghat,
            basis=q,
            strata=lab,
            blocks=blocks,
            pearson=partial and pearson,
            reasons=reasons,
        )
        for j in range(len(cols)):
            s = null_at if shared else null_at + j * p
            grp.null_span.append((s, s + p))
            grp.perms.append(perm_sets[0] if shared else perm_sets[j])
        null_at += grp.n_null
        out.append(grp)
    return _Design(
        groups=out,
        n_bench=y.shape[1],
        n_null=null_at,
        method=method,
        two_sided=two_sided,
        shared=shared,
        n_permutations=p,
    )


# ----------------------------------------------------------------------------------------
# pass 2: statistics, permutation maxima and running top-K in one streaming pass


class _Worker:
    """Per-thread buffers and running permutation maxima of one group."""

    def __init__(self, g: Group, two_sided: bool, with_null: bool, pooled: bool) -> None:
        self.x = np.empty((_ROWS, g.m), dtype=np.float64)
        n32 = _ROWS if with_null and g.n_null and not g.null64 else 0
        self.x32 = np.empty((n32, g.m), dtype=np.float32)
        self.sq = np.empty(_ROWS)
        self.o = np.empty((_ROWS, g.a_obs.shape[1]))
        self.inv = np.empty(_ROWS)
        self.prod = np.empty(
            (_ROWS, min(_COLS, max(g.n_null, 1))), dtype=np.float64 if g.null64 else np.float32
        )
        self.colmax = np.full(g.n_null, 0.0 if two_sided else -np.inf)
        self.obsmax = np.full(len(g.cols), 0.0 if two_sided else -np.inf)
        self.hist = np.zeros((len(g.cols), _BINS), dtype=np.int64)
        # the pooled null: one row per set of permutation columns (shared: one set)
        self.nullhist = np.zeros((len(g.null_span) if pooled else 0, NULL_BINS), dtype=np.int64)


def _group_codes(block: np.ndarray, g: Group, is_codes: bool, start: int) -> np.ndarray:
    """Rank codes of the group's models for one block (re-ranked for a strict subset;
    calibrated: the ranks of each unit's residual on the quality basis)."""
    if g.basis is not None:
        x = block if g.full else block[:, g.mask]
        if x.dtype.kind == "f" and np.isnan(x.min()):
            raise_on_nan(block, start)
        return residuals(x, g.basis) if g.pearson else residual_codes(x, g.basis)
    if g.full and is_codes:
        return block
    x = block if g.full else block[:, g.mask]
    if g.m > MAX_MODELS_UINT8:
        return encode_ranks(x)
    k = kernels()
    codes = np.empty((x.shape[0], g.m), dtype=np.uint8)
    if k.encode_blocked(rankable(x), codes, k.BLOCK_UNITS):
        raise_on_nan(block, start)
    return codes


def _group_stats(
    codes: np.ndarray,
    g: Group,
    stat: np.ndarray,
    workers: list[_Worker],
    pool: ThreadPoolExecutor | None,
    two_sided: bool,
    normalize: bool,
    with_null: bool,
    col_set: np.ndarray | None = None,
) -> None:
    """Observed statistics of every row into ``stat (n, B_g)`` and, ``with_null``, the
    permutation columns' running maxima into the workers (rows split among threads)."""
    k = kernels()
    n = codes.shape[0]
    starts = list(range(0, n, _ROWS))
    kind = 1 if two_sided else 0
    lo = 0.0 if two_sided else -1.0

    def work(part: int, nparts: int) -> None:
        w = workers[part]
        for r0 in starts[part::nparts]:
            r1 = min(n, r0 + _ROWS)
            nr = r1 - r0
            x = w.x[:nr]
            if codes.dtype.kind == "f":  # residual values (Pearson): sq = Σ r², offset 0
                x[:] = codes[r0:r1]
                np.einsum("ij,ij->i", x, x, out=w.sq[:nr])
                if w.x32.shape[0]:
                    w.x32[:nr] = x
            else:
                k.cast_codes(codes, r0, r1, w.x32, x, w.sq)
            o = w.o[:nr]
            np.matmul(x, g.a_obs, out=o)
            k.partial_scale(
                o,
                w.sq,
                g.offset,
                normalize,
                g.den_obs,
                kind,
                w.inv,
                stat,
                r0,
                w.obsmax,
                w.hist,
                lo,
                1.0,
            )
            if with_null:
                c0 = 0
                for e in g.e_null:
                    c1 = c0 + e.shape[1]
                    prod = w.prod[:nr, : e.shape[1]]
                    np.matmul(x if g.null64 else w.x32[:nr], e, out=prod)
                    if col_set is None:
                        k.scaled_colmax(prod, w.inv[:nr], w.colmax[c0:c1], two_sided)
                    else:
                        k.scaled_colmax_hist(
                            prod, w.inv[:nr], w.colmax[c0:c1], two_sided,
                            g.den_null[c0:c1], col_set[c0:c1], w.nullhist, lo,
                        )  # fmt: skip
                    c0 = c1

    nparts = min(len(workers), len(starts))
    if pool is None or nparts <= 1:
        work(0, 1)
        return
    for f in [pool.submit(work, i, nparts) for i in range(nparts)]:
        f.result()


def max_t_pass(
    source: Any,
    design: _Design,
    *,
    buffer_units: int,
    chunk_units: int,
    collect: dict[int, float] | None = None,
) -> tuple[MaxTPartial, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """The streaming pass. With ``collect = {benchmark: t}`` it only collects, for those
    benchmarks, every unit whose strength is above ``t`` (no permutation columns)."""
    kern = kernels()
    d, _, chunks, is_codes = source_chunks(source, chunk_units)
    two_sided = design.two_sided
    normalize = design.method == "calibrated"
    groups = design.groups
    if collect is not None:
        groups = [g for g in groups if any(int(b) in collect for b in g.cols)]
    nthreads = max(1, min(os.cpu_count() or 1, 8))
    pooled = design.pooled_null and collect is None
    workers = {
        id(g): [_Worker(g, two_sided, collect is None, pooled) for _ in range(nthreads)]
        for g in groups
    }
    # FDR mode: each null column's set (its benchmark's; shared columns: one set)
    col_sets = {
        id(g): np.concatenate(
            [np.full(s1 - s0, j, dtype=np.int64) for j, (s0, s1) in enumerate(g.null_span)]
            if not design.shared
            else [np.zeros(g.n_null, dtype=np.int64)]
        )
        for g in groups
        if pooled
    }
    tops = [RunningTopK(buffer_units) for _ in range(design.n_bench)]
    edges = np.linspace(0.0 if two_sided else -1.0, 1.0, _BINS + 1)
    found: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {b: [] for b in collect or {}}
    kind = 1 if two_sided else 0
    # a value block whose groups all read a strict subset of the models is checked here
    check_nan = not is_codes and not any(g.full for g in groups)
    stat_bufs: dict[int, np.ndarray] = {}
    sel_buf = np.empty((0, 0), dtype=np.int32)
    with (
        single_blas_thread(),
        ThreadPoolExecutor(nthreads) if nthreads > 1 else _NoPool() as pool,
    ):
        for start, block in chunks:
            n = block.shape[0]
            if n == 0:
                continue
            if check_nan:
                raise_on_nan(block, start, check=True)
            for g in groups:
                codes = _group_codes(block, g, is_codes, start)
                buf = stat_bufs.get(id(g))
                if buf is None or buf.shape[0] < n:
                    buf = stat_bufs[id(g)] = np.empty((max(n, chunk_units), len(g.cols)))
                stat = buf[:n]
                _group_stats(
                    codes,
                    g,
                    stat,
                    workers[id(g)],
                    pool if isinstance(pool, ThreadPoolExecutor) else None,
                    two_sided,
                    normalize,
                    collect is None,
                    col_sets.get(id(g)),
                )
                if collect is not None:
                    for j, b in enumerate(g.cols.tolist()):
                        if b in collect:
                            st = np.abs(stat[:, j]) if two_sided else stat[:, j]
                            hit = np.flatnonzero(st > collect[b])
                            found[b].append((start + hit, stat[hit, j].copy()))
                    continue
                # candidates: stronger than the running K-th (strict: earlier units win
                # ties) and not below the histogram floor (>= K units seen are that strong)
                counts = sum(w.hist for w in workers[id(g)])
                t_strict = np.array(
                    [tops[b].threshold if tops[b].full else -np.inf for b in g.cols]
                )
                cum = np.cumsum(counts[:, ::-1], axis=1)
                t_weak = np.full(len(g.cols), -np.inf)
                for j in range(len(g.cols)):
                    pos = int(np.searchsorted(cum[j], buffer_units))
                    if pos < _BINS:
                        t_weak[j] = edges[_BINS - 1 - pos] - _FLOOR_MARGIN
                if sel_buf.shape[0] < len(g.cols) or sel_buf.shape[1] < n:
                    sel_buf = np.empty((design.n_bench, max(n, chunk_units)), dtype=np.int32)
                nparts = max(1, min(64, n // 16384))
                nsel = np.zeros((nparts, len(g.cols)), dtype=np.int64)
                kern.select_candidates(stat, kind, t_strict, t_weak, sel_buf, nsel)
                bounds = [c * n // nparts for c in range(nparts)]
                for j, b in enumerate(g.cols.tolist()):
                    sel = np.concatenate(
                        [sel_buf[j, r0 : r0 + nsel[c, j]] for c, r0 in enumerate(bounds)]
                    ).astype(np.int64)
                    if sel.size == 0:
                        continue
                    st = strength_of(stat[sel, j], "thrush", two_sided)
                    if sel.size > buffer_units:
                        keep = select_topk(st, sel, buffer_units)
                        sel, st = sel[keep], st[keep]
                    tops[b].push(start + sel, st, stat[sel, j], np.empty((sel.size, 0), np.uint8))
    null_max = np.full(design.n_null, 0.0 if two_sided else -np.inf)
    obs_max = np.full(design.n_bench, 0.0 if two_sided else -np.inf)
    null_hist = np.zeros((design.n_bench, NULL_BINS), dtype=np.int64) if pooled else None
    obs_hist = np.zeros((design.n_bench, _BINS), dtype=np.int64) if pooled else None
    for g in groups:
        if null_hist is not None and obs_hist is not None:
            sets = sum(w.nullhist for w in workers[id(g)])
            null_hist[g.cols] = sets[0] if design.shared else sets[: len(g.cols)]
            obs_hist[g.cols] = sum(w.hist for w in workers[id(g)])
        span = slice(g.null_start, g.null_start + g.n_null)
        for w in workers[id(g)]:
            np.maximum(null_max[span], w.colmax, out=null_max[span])
            obs_max[g.cols] = np.maximum(obs_max[g.cols], w.obsmax)
        null_max[span] /= g.den_null  # Thrush: the maximum integer product, divided once
    units, values = [], []
    for t in tops:
        idx, _, st, _ = t.result(0)
        units.append(idx)
        values.append(st)
    partial = MaxTPartial(
        null_max=null_max,
        observed_max=obs_max,
        top_units=units,
        top_values=values,
        buffer_units=buffer_units,
        two_sided=two_sided,
        n_units=d,
        null_hist=null_hist,
        observed_hist=obs_hist,
    )
    collected = {
        b: (
            np.concatenate([u for u, _ in parts]) if parts else np.zeros(0, np.int64),
            np.concatenate([v for _, v in parts]) if parts else np.zeros(0),
        )
        for b, parts in found.items()
    }
    return partial, collected


class _NoPool:
    """Stands in for a thread pool on one core."""

    def __enter__(self) -> _NoPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

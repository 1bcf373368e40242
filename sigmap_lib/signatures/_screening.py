"""Stage 1 of a benchmark signature (METHODS.md §2): the streaming screening pass over all
corpus units for all benchmarks at once -- statistics (:mod:`._statistics`), a bounded-memory
running top-K per benchmark and the histogram of all correlations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import (
    RankStore,
    check_model_arrays,
    encode_ranks,
    iter_value_chunks,
    values_dtype,
)
from sigmap_lib.signatures._statistics import (
    STATISTICS,
    as_scores,
    check_benchmark,
    codes_preselect,
    codes_thrush,
    kernels,
    per_mask_groups,
    preselect_pass,
    strength_of,
    thrush_pass,
)


@dataclass
class ScreenResult:
    """Stage-1 result for one benchmark.

    Attributes
    ----------
    benchmark : int
        Column of ``scores``.
    indices : numpy.ndarray of int64, shape (K,)
        Candidate unit indices, strongest first (ties broken by smaller unit index).
    thrush, preselect : numpy.ndarray of float64, shape (K,)
        Both statistics of the candidates.
    strength : numpy.ndarray, shape (K,)
        The ranking key (see :func:`strength_of`).
    hist_edges : numpy.ndarray, shape (n_bins + 1,)
        Fixed bin edges of the screening statistic (``[−1, 1]`` thrush, ``[0, 1]`` pre-select).
    hist_counts : numpy.ndarray of int64, shape (n_bins,)
        Histogram of the screening statistic over ALL ``n_units`` units (last bin closed).
    n_units : int
    models_used : numpy.ndarray of bool, shape (n_models,)
        Models with a score on this benchmark (the ones screened).
    statistic, two_sided, k : as requested.
    """

    benchmark: int
    indices: np.ndarray
    thrush: np.ndarray
    preselect: np.ndarray
    strength: np.ndarray
    hist_edges: np.ndarray
    hist_counts: np.ndarray
    n_units: int
    models_used: np.ndarray
    statistic: str
    two_sided: bool
    k: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> float:
        """Strength of the strongest unit (NaN when no candidate)."""
        return float(self.strength[0]) if self.strength.size else float("nan")


class RunningTopK:
    """Running top-K by (strength desc, index asc) with bounded memory (≤ 3K rows).

    Keeps, per candidate, the statistic and the (possibly subset-re-ranked) rank codes.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.idx = np.empty(0, dtype=np.int64)
        self.strength = np.empty(0, dtype=np.float64)
        self.stats = np.empty(0, dtype=np.float64)
        self.codes: np.ndarray | None = None
        self.threshold = -np.inf
        self.full = False

    def push(
        self, idx: np.ndarray, strength: np.ndarray, stats: np.ndarray, codes: np.ndarray
    ) -> None:
        if idx.size == 0:
            return
        self.idx = np.concatenate([self.idx, idx])
        self.strength = np.concatenate([self.strength, strength])
        self.stats = np.concatenate([self.stats, stats])
        self.codes = codes.copy() if self.codes is None else np.concatenate([self.codes, codes])
        if self.idx.size >= 2 * self.k:
            self._shrink()

    def _shrink(self) -> None:
        if self.idx.size > self.k:
            keep = select_topk(self.strength, self.idx, self.k)
            self.idx, self.strength, self.stats = (
                self.idx[keep],
                self.strength[keep],
                self.stats[keep],
            )
            assert self.codes is not None
            self.codes = self.codes[keep]
        if self.idx.size >= self.k:
            self.full = True
            self.threshold = float(self.strength.min())

    def result(self, n_models: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        self._shrink()
        order = np.lexsort((self.idx, -self.strength))
        codes = self.codes if self.codes is not None else np.zeros((0, n_models), np.uint8)
        return self.idx[order], self.strength[order], self.stats[order], codes[order]


# strength of a unit sits at most this far below its histogram bin's floor (rounding)
_FLOOR_MARGIN = 1e-9


def _strength_floor(edges: np.ndarray, statistic: str, two_sided: bool) -> np.ndarray:
    """Smallest strength of a statistic value in each histogram bin (per bin)."""
    a = strength_of(edges[:-1], statistic, two_sided)
    c = strength_of(edges[1:], statistic, two_sided)
    floor = np.minimum(a, c)
    if two_sided:
        kink = 0.0 if statistic == "thrush" else 0.5
        inside = (edges[:-1] <= kink) & (edges[1:] >= kink)
        floor[inside] = 0.0
    return floor


def select_topk(strength: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest strengths, ties broken by smaller index."""
    n = strength.size
    if k >= n:
        return np.arange(n)
    part = np.argpartition(-strength, k - 1)
    kth = strength[part[k - 1]]
    above = np.flatnonzero(strength > kth)
    tied = np.flatnonzero(strength == kth)
    tied = tied[np.argsort(idx[tied], kind="stable")][: k - above.size]
    return np.concatenate([above, tied])


def source_chunks(source: Any, chunk_units: int) -> tuple[int, int, Any, bool]:
    """(n_units, n_models, iterator of (start, block), block_is_codes)."""
    if isinstance(source, RankStore):
        return source.n_units, source.n_models, source.iter_chunks(chunk_units), True
    if isinstance(source, np.ndarray) or (hasattr(source, "shape") and len(source.shape) == 2):
        arr = source
        if len(arr.shape) != 2:
            raise SigmapInputError(f"values must be (n_units, n_models), got {arr.shape}")
        d, m = int(arr.shape[0]), int(arr.shape[1])

        def it() -> Any:
            for s in range(0, d, chunk_units):
                yield s, np.asarray(arr[s : s + chunk_units])

        return d, m, it(), False
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        arrays, d = check_model_arrays(source)
        dt = values_dtype(arrays)
        return d, len(arrays), iter_value_chunks(arrays, chunk_units, dtype=dt, n_units=d), False
    raise SigmapInputError(
        "screen() takes a RankStore, a unit-major (n_units, n_models) array, or a sequence "
        f"of per-model 1-D arrays; got {type(source).__name__}"
    )


def raise_on_nan(block: np.ndarray, start: int, check: bool = False) -> None:
    """Raise naming the first NaN of a value block (``check``: only if there is one)."""
    if block.dtype.kind != "f" or (check and not np.isnan(block.min())):
        return
    r, c = np.argwhere(np.isnan(block))[0]
    raise SigmapInputError(f"model column {int(c)}: value is NaN at unit {start + int(r)}")


def finite_column_sums(block: np.ndarray, start: int) -> np.ndarray:
    """``(n_models,)`` float64 column sums of a value block whose first unit is ``start``;
    one line naming the model column and unit of a NaN, or the column of an infinite value."""
    s = block.sum(axis=0, dtype=np.float64)
    if not np.isfinite(s).all():
        raise_on_nan(block, start, check=True)
        bad = int(np.flatnonzero(~np.isfinite(s))[0])
        raise SigmapInputError(f"model column {bad}: an infinite value in units {start}..")
    return s


def screen(
    source: Any,
    scores: Any,
    *,
    q: float = 0.01,
    k: int | None = None,
    two_sided: bool = True,
    statistic: str = "thrush",
    chunk_units: int = 1 << 20,
    n_bins: int = 200,
    benchmark_names: Sequence[str] | None = None,
) -> list[ScreenResult]:
    """Screen all units for all benchmarks in ONE streaming pass.

    Parameters
    ----------
    source : RankStore | array (n_units, n_models) | sequence of per-model 1-D arrays
        Stored rank codes, in-memory values, or per-model NLL arrays (zarr / numpy /
        paths), read ``chunk_units`` units at a time.
    scores : array_like, shape (n_models,) or (n_models, B)
        Columns aligned with the source's model order; NaN = not scored (see module doc).
    q : float
        Fraction of units kept per benchmark (``K = ceil(q · n_units)``), used when ``k`` is None.
    k : int, optional
        Fixed number of candidates per benchmark.
    two_sided : bool
        Rank candidates by ``|γ|`` / ``|η − ½|`` (default) or one-sided (predictive direction).
    statistic : {"thrush", "preselect"}
        Statistic that ranks the candidates and is histogrammed. The other statistic is
        computed only for the units that enter the running top-K.
    chunk_units : int
        Units per chunk; memory is ``O(chunk_units · (n_models + B) + B · K)``.
    n_bins : int
        Histogram bins (fixed edges over the statistic's range).
    benchmark_names : sequence of str, optional
        One per score column, for error messages (default ``#0``, ``#1``, ...).

    Returns
    -------
    list[ScreenResult]
        One per benchmark column, in column order.

    Examples
    --------
    200 random units by 6 models, with unit 17 planted to track the scores:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import screen
    >>> rng = np.random.default_rng(0)
    >>> values = rng.standard_normal((200, 6))  # (n_units, n_models)
    >>> scores = np.arange(6.0)
    >>> values[17] = -scores  # the better the model, the less perplexed
    >>> [res] = screen(values, scores, k=3)
    >>> res.indices.tolist(), np.round(res.thrush, 3).tolist()
    ([17, 73, 80], [1.0, -0.886, 0.886])
    >>> res.k, int(res.hist_counts.sum()), res.hist_edges.shape  # histogram over all units
    (3, 200, (201,))
    """
    if statistic not in STATISTICS:
        raise SigmapInputError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    if chunk_units < 1:
        raise SigmapInputError(f"chunk_units must be >= 1, got {chunk_units}")
    d, m, chunks, is_codes = source_chunks(source, chunk_units)
    y, _ = as_scores(scores, m)
    nbm = y.shape[1]
    names = list(benchmark_names) if benchmark_names is not None else [f"#{b}" for b in range(nbm)]
    if len(names) != nbm:
        raise SigmapInputError(f"{len(names)} benchmark names for {nbm} score columns")
    for b in range(nbm):
        check_benchmark(y[:, b], names[b])
    if k is None:
        if not 0 < q <= 1:
            raise SigmapInputError(f"q must be in (0, 1], got {q}")
        kk = max(1, math.ceil(q * d))
    else:
        if k < 1:
            raise SigmapInputError(f"k must be >= 1, got {k}")
        kk = int(k)
    kk = min(kk, max(d, 1))
    lo, hi = (-1.0, 1.0) if statistic == "thrush" else (0.0, 1.0)
    edges = np.linspace(lo, hi, n_bins + 1)
    counts = np.zeros((nbm, n_bins), dtype=np.int64)
    tops = [RunningTopK(kk) for _ in range(nbm)]
    groups = per_mask_groups(y)
    # a strict-subset group reads only its own columns: check the others for NaN here
    check_nan_here = not any(bool(mask.all()) for mask, _ in groups)
    main_pass, other_fn = (
        (thrush_pass, codes_preselect) if statistic == "thrush" else (preselect_pass, codes_thrush)
    )
    kern = kernels()
    kind = {("thrush", False): 0, ("thrush", True): 1, ("preselect", False): 2}.get(
        (statistic, two_sided), 3
    )
    floor = _strength_floor(edges, statistic, two_sided)
    floor_order = np.argsort(-floor, kind="stable")
    floor_sorted = floor[floor_order]
    sel_buf = np.empty((0, 0), dtype=np.int32)
    bufs: dict[int, dict[str, np.ndarray]] = {}  # per model group, reused chunk after chunk
    for start, block in chunks:
        if block.shape[0] == 0:
            continue
        if check_nan_here and not is_codes:
            raise_on_nan(block, start, check=True)
        for gi, (mask, cols) in enumerate(groups):
            full = bool(mask.all())
            # values are ranked inside the fused kernels; a strict subset of the models is
            # ranked afresh from its columns (codes included)
            x = block if full else block[:, mask]
            x_is_codes = is_codes and full
            yg = y[np.ix_(mask, cols)]
            res = main_pass(x, yg, x_is_codes, (lo, hi, n_bins), True, bufs.setdefault(gi, {}))
            if res.n_nan:
                raise_on_nan(block, start)
            stat = res.stat  # (n, len(cols))
            assert res.hist is not None
            counts[cols] += res.hist
            # candidates: stronger than the running K-th (strict: earlier units win ties)
            # and not below the histogram floor (>= K units seen are at least that strong)
            t_strict = np.array([tops[b].threshold if tops[b].full else -np.inf for b in cols])
            t_weak = np.full(len(cols), -np.inf)
            for j, b in enumerate(cols):
                cum = np.cumsum(counts[b][floor_order])
                pos = int(np.searchsorted(cum, kk))
                if pos < cum.size:
                    t_weak[j] = floor_sorted[pos] - _FLOOR_MARGIN
            n = stat.shape[0]
            if sel_buf.shape[0] < len(cols) or sel_buf.shape[1] < n:
                sel_buf = np.empty((nbm, max(n, chunk_units)), dtype=np.int32)
            nparts = max(1, min(64, n // 16384))
            nsel = np.zeros((nparts, len(cols)), dtype=np.int64)
            kern.select_candidates(stat, kind, t_strict, t_weak, sel_buf, nsel)
            bounds = [c * n // nparts for c in range(nparts)]
            for j, b in enumerate(cols):
                sel = np.concatenate(
                    [sel_buf[j, r0 : r0 + nsel[c, j]] for c, r0 in enumerate(bounds)]
                ).astype(np.int64)
                if sel.size == 0:
                    continue
                st_sel = strength_of(stat[sel, j], statistic, two_sided)
                if sel.size > kk:
                    keep = select_topk(st_sel, sel, kk)
                    sel, st_sel = sel[keep], st_sel[keep]
                # keep the candidates' rank codes (among the benchmark's models; produced
                # by the Thrush pass on the way); the other statistic is computed once, for
                # the final K only
                if res.codes is not None:
                    cand = res.codes[sel]
                else:
                    cand = x[sel] if x_is_codes else encode_ranks(x[sel])
                tops[b].push(start + sel, st_sel, stat[sel, j], cand)
    results = []
    for b in range(nbm):
        idx, st, main_stat, cand_codes = tops[b].result(int((~np.isnan(y[:, b])).sum()))
        mask_b = ~np.isnan(y[:, b])
        other = other_fn(cand_codes, y[mask_b, b : b + 1])[:, 0]
        both = np.column_stack([main_stat, other] if statistic == "thrush" else [other, main_stat])
        results.append(
            ScreenResult(
                benchmark=b,
                indices=idx,
                thrush=both[:, 0].copy(),
                preselect=both[:, 1].copy(),
                strength=st,
                hist_edges=edges,
                hist_counts=counts[b].copy(),
                n_units=d,
                models_used=~np.isnan(y[:, b]),
                statistic=statistic,
                two_sided=two_sided,
                k=kk,
            )
        )
    return results

"""The authors' published stage 2 (METHODS.md §2b): Thrush tails, then a fixed-α Lasso.

What ``siyangwu1/Benchmark-Signature-Repository`` (``regression/regression_run.py``) does,
on sigmap's streamed data:

1. **Thrush score** of every unit, ``2·Rᵀv`` with ``R`` the unit's ranks across the
   benchmark's scored models and ``v = 2·rank(y) − (m + 1)``. The authors' features are
   per-token log-probabilities, sigmap's per-unit NLL, so ``R`` ranks the *negated* NLL:
   the "top" tail holds the units where better models are less perplexed (positive
   :func:`~sigmap_lib.signatures.thrush_correlation`). ``ranking="average"`` (default)
   gives tied values and scores their average rank — then the score is exactly
   ``den · thrush_correlation`` — and ``ranking="first"`` is the authors'
   ``rank(method="first")``: ties broken by model order (the source's column order; the
   authors' matrix has its models sorted by name).
2. **Candidates**: ``n = max(1, floor(min(tail_fraction, 0.5) · d))`` units from each tail
   (``nlargest`` / ``nsmallest``; ties: smaller unit index first), deduplicated; when fewer
   than ``max(2m, 50)``, padded from the remaining extremes with ``ceil(need / 2)`` more from
   the top and ``floor(need / 2)`` from the bottom. Both tails come from ONE streaming
   screening pass (the one-sided top-K of ``y`` and of ``−y``).
3. **Lasso**: candidate columns (per-model NLL, in unit order) with a non-finite value or
   zero variance are dropped; ``X`` is standardized (scikit-learn ``StandardScaler``:
   population sd), ``y`` centred, not scaled (``alpha`` acts on ``y`` in the units given;
   the authors' scores are accuracies in [0, 1]); ``Lasso(alpha=0.01,
   fit_intercept=False, max_iter=10000, random_state=42)``; the signature is the units with
   a non-zero coefficient, sorted by ``|coef|`` (stable: equal ``|coef|`` keep unit order).
   Coefficients are on standardized NLL (the authors' log-probability features give the
   same fit with every coefficient negated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import RankStore, check_model_arrays, encode_ranks
from sigmap_lib.signatures._calibration import (
    Calibration,
    DesignOptions,
    adjusted_p_values,
    calibrated_signatures,
)
from sigmap_lib.signatures._method import Interval, Options, Pass, SignatureMethod
from sigmap_lib.signatures._result import Signature, gather_units, values_source
from sigmap_lib.signatures._screening import raise_on_nan, screen, source_chunks
from sigmap_lib.signatures._statistics import check_benchmark, strength_of, thrush_correlation

RANKINGS = ("average", "first")


@dataclass
class LassoResult:
    """One benchmark's Lasso fit (internal to :class:`AuthorsLasso`)."""

    units: np.ndarray
    coef: np.ndarray
    candidates: np.ndarray
    usable: np.ndarray  # candidates that entered the fit (finite, non-zero variance)
    models_used: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


class _FirstRanked:
    """A ``(n_units, n_models)`` view of a source whose values rank like the authors'
    ``rank(method="first")`` of the negated NLL, reversed: ``code·m + (m − 1 − k)``.

    Ranking these integers (average ranks, no ties) gives model ``k`` the rank
    ``m + 1 − R_first(−NLL)_k``, so the Thrush pass on them yields the authors' score.
    Subsets of the models keep the property (a monotone transform per unit).
    """

    def __init__(self, source: Any) -> None:
        self.source = source
        d, m, _, self.is_codes = source_chunks(source, 1)
        self.shape = (d, m)
        self.arrays: list[Any] | None = None
        if isinstance(source, RankStore):
            self.reader: Any = source.array()
        elif isinstance(source, Sequence) and not isinstance(source, np.ndarray):
            self.arrays, _ = check_model_arrays(list(source))
            self.reader = None
        else:
            self.reader = source

    def __getitem__(self, rows: slice) -> np.ndarray:
        if self.arrays is not None:
            block = np.stack([np.asarray(a[rows]) for a in self.arrays], axis=1)
        else:
            block = np.asarray(self.reader[rows])
        if self.is_codes:
            codes = block
        else:
            raise_on_nan(block, rows.start or 0, check=True)
            codes = encode_ranks(block)
        m = codes.shape[1]
        return codes.astype(np.int32) * m + (m - 1 - np.arange(m, dtype=np.int32))


def _tail_candidates(top: np.ndarray, bottom: np.ndarray, n_tail: int, min_c: int) -> np.ndarray:
    """The authors' ``select_candidates_by_thrush`` on the two sorted tails."""
    top_l, bot_l = top.tolist(), bottom.tolist()
    top_idx, bot_idx = top_l[:n_tail], bot_l[:n_tail]
    cand = list(dict.fromkeys(bot_idx + top_idx))
    if len(cand) < min_c:
        taken = set(cand)
        need = min_c - len(cand)
        extra_top = [u for u in top_l if u not in taken][: (need + 1) // 2]
        extra_bot = [u for u in bot_l if u not in taken][: need // 2]
        cand = list(dict.fromkeys(bot_idx + extra_bot + top_idx + extra_top))
    return np.asarray(cand, dtype=np.int64)


def lasso_signatures(
    source: Any,
    y: np.ndarray,
    values_of: Any,
    *,
    tail_fraction: float,
    ranking: str,
    lasso_alpha: float,
    chunk_units: int,
    names: Sequence[str],
) -> list[LassoResult]:
    """Lasso signatures of every column of ``y (m, B)``; ``values_of(units) -> (m, k)``
    gives the per-model values (NLL) of the candidate units."""
    from scipy.stats import rankdata
    from sklearn.linear_model import Lasso
    from sklearn.preprocessing import StandardScaler

    if ranking not in RANKINGS:
        raise SigmapInputError(f"ranking must be one of {RANKINGS}, got {ranking!r}")
    if not tail_fraction >= 0:
        raise SigmapInputError(f"tail_fraction must be >= 0, got {tail_fraction}")
    if not lasso_alpha > 0:
        raise SigmapInputError(f"lasso_alpha must be > 0, got {lasso_alpha}")
    m, nb = y.shape
    d = source_chunks(source, 1)[0]
    avail = ~np.isnan(y)
    n_tail = max(1, math.floor(min(float(tail_fraction), 0.5) * d))
    min_c = [max(2 * int(avail[:, b].sum()), 50) for b in range(nb)]
    k_fetch = max(1, min(d, 2 * n_tail + max(min_c)))
    ys = y.copy()
    if ranking == "first":
        for b in range(nb):
            ys[avail[:, b], b] = rankdata(y[avail[:, b], b], method="ordinal")
        src: Any = _FirstRanked(source)
    else:
        src = source
    cols = np.empty((m, 2 * nb))
    cols[:, 0::2] = ys
    cols[:, 1::2] = -ys
    col_names = [f"{n}{s}" for n in names for s in ("", " (bottom tail)")]
    res = screen(
        src,
        cols,
        k=k_fetch,
        two_sided=False,
        statistic="thrush",
        chunk_units=chunk_units,
        benchmark_names=col_names,
    )
    cands = [
        _tail_candidates(res[2 * b].indices, res[2 * b + 1].indices, n_tail, min_c[b])
        for b in range(nb)
    ]
    union = np.unique(np.concatenate(cands)) if cands else np.zeros(0, np.int64)
    vals = values_of(union) if union.size else np.zeros((m, 0))
    out = []
    for b in range(nb):
        models = avail[:, b]
        cand = np.sort(cands[b])  # the authors fit the candidates in feature-row order
        x = vals[np.ix_(models, np.searchsorted(union, cand))]
        finite = np.isfinite(x).all(axis=0)
        keep = finite.copy()
        keep[finite] = np.var(x[:, finite], axis=0) > 0
        usable = cand[keep]
        extra: dict[str, Any] = {
            "tail_fraction": float(tail_fraction),
            "n_tail": n_tail,
            "min_candidates": min_c[b],
            "ranking": ranking,
            "alpha": float(lasso_alpha),
            "n_candidates": int(cand.size),
            "n_usable": int(usable.size),
        }
        if usable.size == 0:
            out.append(LassoResult(np.zeros(0, np.int64), np.zeros(0), cand, usable, models, extra))
            continue
        xs = StandardScaler(with_mean=True, with_std=True).fit_transform(x[:, keep])
        yb = y[models, b]
        fit = Lasso(alpha=lasso_alpha, fit_intercept=False, max_iter=10000, random_state=42)
        fit.fit(xs, yb - yb.mean())
        nz = np.flatnonzero(fit.coef_ != 0)
        order = nz[np.argsort(-np.abs(fit.coef_[nz]), kind="stable")]
        extra["n_iter"] = int(fit.n_iter_)
        out.append(
            LassoResult(
                units=usable[order].astype(np.int64),
                coef=fit.coef_[order].astype(np.float64),
                candidates=cand,
                usable=usable,
                models_used=models,
                extra=extra,
            )
        )
    return out


def _recalibrated(cal: Calibration, units: np.ndarray, values: np.ndarray) -> Calibration:
    """``cal``'s null and threshold evaluated at other units with signed ``values``."""
    from dataclasses import replace

    strength = strength_of(values, "thrush", cal.two_sided)
    return replace(
        cal,
        units=np.asarray(units, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
        adjusted_p=adjusted_p_values(np.sort(cal.null_max), strength),
        reason=None if len(units) else "the Lasso kept no unit",
    )


@dataclass(kw_only=True, repr=False, eq=False)
class AuthorsLasso(SignatureMethod):
    """The authors' published code (§2b): Thrush tails, then a fixed-α Lasso.

    Parameters
    ----------
    tail_fraction : float
        Fraction of units per tail kept as candidates.
    ranking : {"average", "first"}
        Tie rule of the Thrush score (``"first"``: the authors' ``rank(method="first")``).
    lasso_alpha : float
        The Lasso's penalty (acts on the scores in the units given).
    n_permutations : int, optional
        When > 0, a marginal max-T pass (:class:`CalibratedMarginal`) calibrates the
        Lasso's units: their adjusted p-values under the same null (default 0: none).
    alpha, shared_null, buffer_units :
        Options of that calibration pass.

    Examples
    --------
    >>> from sigmap_lib.signatures import AuthorsLasso
    >>> from sigmap_lib.worlds import planted_values
    >>> values, scores = planted_values(300, 20, planted=[3, 40], noise=0.05)
    >>> method = AuthorsLasso(tail_fraction=0.01, lasso_alpha=0.1, n_permutations=99)
    >>> [sig] = method.extract(values, scores, names=["b"])
    >>> sig.method, sig.units.tolist(), sig.coef.round(3).tolist()  # largest |coef| first
    ('lasso', [40, 3], [-0.566, -0.184])
    >>> sig.calibration.adjusted_p.tolist()  # the marginal max-T pass of n_permutations
    [0.01, 0.01]
    """

    name: ClassVar[str] = "lasso"
    fits_coefficients: ClassVar[bool] = True
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "tail_fraction": [Interval(float, 0.0, None)],
        "ranking": [Options(RANKINGS)],
        "lasso_alpha": [Interval(float, 0.0, None, closed="neither")],
        "n_permutations": [None, Interval(int, 0, None)],
        "alpha": [Interval(float, 0.0, 1.0, closed="neither")],
        "shared_null": [bool],
        "buffer_units": [Interval(int, 1, None)],
    }

    tail_fraction: float = 1e-6
    ranking: str = "average"
    lasso_alpha: float = 0.01
    n_permutations: int | None = None
    alpha: float = 0.05
    shared_null: bool = False
    buffer_units: int = 1024

    def _extract(self, source: Any, scores: np.ndarray, run: Pass) -> list[Signature]:
        names, chunk_units = run.names, run.chunk_units
        for b, name in enumerate(names):
            check_benchmark(scores[:, b], name)
        values_src = values_source(source, run.nll_arrays)
        fits = lasso_signatures(
            source,
            scores,
            lambda units: gather_units(values_src, units),
            tail_fraction=self.tail_fraction,
            ranking=self.ranking,
            lasso_alpha=self.lasso_alpha,
            chunk_units=chunk_units,
            names=names,
        )
        p = self.n_permutations or 0
        cals = (
            calibrated_signatures(
                source,
                scores,
                DesignOptions(
                    method="calibrated-marginal",
                    n_permutations=p,
                    shared_null=self.shared_null,
                    two_sided=True,
                    seed=run.seed,
                    chunk_units=chunk_units,
                ),
                alpha=self.alpha,
                buffer_units=self.buffer_units,
            )
            if p
            else None
        )
        out = []
        for b, fit in enumerate(fits):
            sig = Signature(
                benchmark=names[b],
                units=fit.units,
                models_used=fit.models_used,
                method=self.name,
                coef=fit.coef,
                candidates=fit.candidates,
                extra={"lasso": fit.extra},
            )
            if cals is not None:
                models = fit.models_used
                vals = gather_units(values_src, fit.units)[models].T  # (k, m_b)
                stat = (
                    thrush_correlation(vals, scores[models, b])
                    if fit.units.size
                    else np.zeros(0, dtype=np.float64)
                )
                sig.calibration = _recalibrated(cals[b].calibration, fit.units, stat)
            out.append(sig)
        return out

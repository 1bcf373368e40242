"""Benchmark signatures: every method of METHODS.md §2–§3b behind one function.

:func:`extract_signatures` with ``method=``:

* ``"calibrated"`` (the default): every unit whose partial correlation with the scores
  given general quality beats a max-T permutation threshold (family-wise error ``alpha``
  over all ``d`` units, or over all benchmarks with ``fwer="all"``): the Spearman
  correlation of the unit's values and the scores, both residualized on a spline of the
  unranked general quality ``ĝ`` (and on ``strata``), streamed from the per-unit values
  (see :mod:`sigmap_lib.signatures._calibration`); ``"calibrated-marginal"``: the same test
  on the marginal Thrush correlation (rank codes suffice). An empty signature is a result,
  not an error.
* ``"lasso"``: the authors' published code (§2b): Thrush tails, then a fixed-α Lasso
  (:mod:`sigmap_lib.signatures._lasso`).
* ``"aic" | "bic" | "ebic"``: the paper's text (§2–§3), the two-stage procedure below
  (``criterion=`` selects these too, as before).

The two-stage procedure of the paper's text as pure functions:

1. :func:`sigmap_lib.signatures.screen` keeps the ``K`` strongest units per benchmark;
2. :func:`gather_units` reads only those units' per-model values;
3. :func:`sigmap_lib.signatures.forward_select` picks the signature among them.

Stage-2 design matrix: each candidate unit's per-model **NLL** (nats), standardized across
models. Because a unit's bits-per-byte is its NLL times the constant ``1/(n_bytes·ln 2)``,
standardizing makes NLL and bits-per-byte columns identical, so the choice is immaterial.

Calibration of forward selection (all in the SAME streaming screening pass as the real
scores: extra score columns are screened alongside):

* **LOO R²** of the whole two-stage procedure: for each model ``i``, screen + select on the
  other ``m − 1`` models (the fold's score column has ``NaN`` at ``i``, so the screening
  re-ranks within the other models), predict ``ŷ_i`` from ``i``'s values on the fold's
  signature with the raw-scale OLS fit, and report ``1 − Σ(y_i − ŷ_i)² / Σ(y_i − ȳ)²``
  (ȳ over all scored models). It can be negative.
* **Bootstrap selection frequency**: stage 2 re-run on ``n_bootstrap`` resamples of models
  (with replacement) over the fixed candidate set of the full data; for each signature
  unit, the fraction of resamples that select it (screening held fixed: conditional
  stability of stage 2).
* **Permutation null**: ``n_permutations`` copies of the scores permuted across the scored
  models are screened and selected like the real ones; the null distribution of the best
  screened strength and of the final criterion / R² is reported next to the real values
  (``p = (1 + #{null ≥ real}) / (1 + P)``). The best screened strength under each
  permutation is the maximum over ALL units, so the same permutations also give the
  selected units their max-T calibration (:class:`Calibration`, the marginal test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import RankStore, check_model_arrays, read_points
from sigmap_lib.signatures._calibration import (
    CALIBRATED_METHODS,
    Calibration,
    adjusted_p_values,
    calibrated_signatures,
    calibration_from_null,
)
from sigmap_lib.signatures._lasso import lasso_signatures
from sigmap_lib.signatures._screening import ScreenResult, screen
from sigmap_lib.signatures._selection import CRITERIA, SelectionResult, forward_select
from sigmap_lib.signatures._statistics import (
    as_scores,
    check_benchmark,
    strength_of,
    thrush_correlation,
)

METHODS = ("calibrated", "calibrated-marginal", "lasso", "aic", "bic", "ebic")


def gather_units(nll_arrays: Any, unit_indices: Any) -> np.ndarray:
    """Per-model values of selected units, reading only those units.

    Parameters
    ----------
    nll_arrays : sequence of per-model 1-D arrays (zarr / numpy / paths), or a unit-major
        ``(n_units, n_models)`` numpy array.
    unit_indices : array_like of int, shape (k,)
        Units to read (any order, duplicates allowed).

    Returns
    -------
    numpy.ndarray, shape (n_models, k), float64
        Column ``i`` holds unit ``unit_indices[i]`` for every model.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import gather_units
    >>> values = np.arange(15.0).reshape(5, 3)  # (n_units, n_models)
    >>> gather_units(values, [4, 0]).tolist()  # (n_models, k): model-major
    [[12.0, 0.0], [13.0, 1.0], [14.0, 2.0]]
    >>> per_model = [values[:, j] for j in range(3)]  # or zarr arrays / .npy paths
    >>> gather_units(per_model, [4, 0]).shape
    (3, 2)
    """
    idx = np.asarray(unit_indices, dtype=np.int64).reshape(-1)
    if isinstance(nll_arrays, np.ndarray) and nll_arrays.ndim == 2:
        d = nll_arrays.shape[0]
        _check_indices(idx, d)
        return np.asarray(nll_arrays[idx], dtype=np.float64).T.copy()
    arrays, d = check_model_arrays(list(nll_arrays))
    _check_indices(idx, d)
    uniq, inverse = np.unique(idx, return_inverse=True)
    out = np.empty((len(arrays), uniq.size), dtype=np.float64)
    for j, arr in enumerate(arrays):
        if uniq.size:
            out[j] = read_points(arr, uniq)
    return out[:, inverse]


def _check_indices(idx: np.ndarray, d: int) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= d):
        raise SigmapInputError(
            f"unit indices must be in [0, {d}), got range [{idx.min()}, {idx.max()}]"
        )


@dataclass
class NullCalibration:
    """Permutation null of the two-stage procedure for one benchmark.

    Attributes
    ----------
    best_strength : numpy.ndarray, shape (P,)
        Strongest screened strength under each permutation.
    final_criterion, r2, k : numpy.ndarray, shape (P,)
        Stage-2 final criterion, in-sample R², number of selected units under the null.
    criterion_paths : list of numpy.ndarray
    real_best, real_criterion, real_r2 : float
    p_best, p_criterion, p_r2 : float
        ``(1 + #{null at least as extreme}) / (1 + P)``.
    """

    best_strength: np.ndarray
    final_criterion: np.ndarray
    r2: np.ndarray
    k: np.ndarray
    criterion_paths: list[np.ndarray]
    real_best: float
    real_criterion: float
    real_r2: float
    p_best: float
    p_criterion: float
    p_r2: float

    def summary(self) -> dict[str, float]:
        return {
            "n_permutations": int(self.best_strength.size),
            "real_best_strength": self.real_best,
            "null_best_strength_median": float(np.median(self.best_strength)),
            "null_best_strength_q95": float(np.quantile(self.best_strength, 0.95)),
            "p_best_strength": self.p_best,
            "real_final_criterion": self.real_criterion,
            "null_final_criterion_median": float(np.median(self.final_criterion)),
            "p_final_criterion": self.p_criterion,
            "real_r2": self.real_r2,
            "null_r2_median": float(np.median(self.r2)),
            "p_r2": self.p_r2,
        }


def unit_orientation(statistic: Any, coef: Any = None) -> np.ndarray:
    """The direction of each signature unit: +1 where better-scoring models are less
    perplexed on it, −1 where they are more perplexed.

    A two-sided signature holds units of both directions; an average over its units that
    ignored the direction would let them cancel. The direction is the sign of the unit's
    statistic (calibrated and marginal tests: positive = less perplexed); without one (a
    forward-selection or Lasso signature fitted without calibration) it is minus the sign
    of the unit's coefficient on NLL; +1 when neither is known or either is 0.

    Parameters
    ----------
    statistic : array-like of float, shape (k,)
        Signed statistics (NaN where unknown).
    coef : array-like of float, shape (k,), optional
        Coefficients of the scores on the units' standardized NLL (NaN where unknown).

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
        Values in {−1, +1}.

    Examples
    --------
    >>> from sigmap_lib.signatures import unit_orientation
    >>> unit_orientation([0.8, -0.7, float("nan"), float("nan")], [None, None, 0.4, None]).tolist()
    [1.0, -1.0, -1.0, 1.0]
    """
    stat = np.asarray(statistic, dtype=np.float64).ravel()
    out = np.sign(stat)
    if coef is not None:
        c = np.asarray(coef, dtype=np.float64).ravel()
        if c.shape != stat.shape:
            raise SigmapInputError(
                f"unit_orientation: statistic has {stat.size} values but coef {c.size}"
            )
        out = np.where(np.isfinite(out), out, -np.sign(c))
    return np.where(np.isfinite(out) & (out != 0), out, 1.0)


@dataclass
class Signature:
    """A benchmark's signature and its calibration, whatever the method.

    Attributes
    ----------
    benchmark : str
    units : numpy.ndarray of int64, shape (k,)
        Corpus unit indices in the method's order: strongest statistic first
        (calibrated), largest ``|coef|`` first (lasso), order of entry (aic / bic / ebic).
        Empty (``k = 0``) when nothing stands out: see :attr:`empty`.
    models_used : numpy.ndarray of bool, shape (n_models,)
        Models with a score on this benchmark (the only ones used).
    method : {"calibrated", "calibrated-marginal", "lasso", "aic", "bic", "ebic"}
    coef : numpy.ndarray of float64, shape (k,)
        aic / bic / ebic: OLS coefficients on the standardized scale (``selection.coef``);
        lasso: Lasso coefficients on standardized NLL; calibrated: NaN (no model is fitted;
        the statistics are ``calibration.values``).
    calibration : Calibration or None
        The max-T calibration. Calibrated methods: always (it defines the signature).
        aic / bic / ebic / lasso: when ``n_permutations > 0``, the marginal max-T
        calibration of their units (aic / bic / ebic: from the same permutations as
        :attr:`null`, the maximum screening strength over all units; lasso: a
        ``"calibrated-marginal"`` pass); else None.
    selection : SelectionResult or None
        Stage-2 fit of aic / bic / ebic (columns = ``candidates``;
        ``units = candidates[selection.selected]``).
    screen : ScreenResult or None
        Stage-1 result of aic / bic / ebic.
    candidates : numpy.ndarray of int64, shape (K,)
        aic / bic / ebic: the screened units; lasso: the tail candidates (unit order);
        calibrated: empty (every unit is tested).
    loo_r2 : float or None
    loo_predictions : numpy.ndarray (n_models,) or None
        Held-out predictions (NaN for unscored models); aic / bic / ebic only.
    bootstrap_frequency : numpy.ndarray (k,) or None
    null : NullCalibration or None
        Forward selection's permutation null (aic / bic / ebic with ``n_permutations``).
    extra : dict
        Method details (``extra["lasso"]``: candidates, usable columns, α, iterations).

    Examples
    --------
    Pure noise: the calibrated default finds nothing above chance, and says so:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signatures
    >>> rng = np.random.default_rng(1)
    >>> [sig] = extract_signatures(rng.standard_normal((300, 12)), rng.standard_normal(12))
    >>> sig.method, sig.empty, sig.units.tolist(), sig.coef.tolist()
    ('calibrated', True, [], [])
    >>> s = sig.summary()
    >>> s["empty"], s["calibration"]["n_permutations"], s["calibration"]["reason"][:20]
    (True, 199, 'no unit above the ma')
    >>> s["calibration"]["controlled_for_strata"], s["calibration"]["fwer"]
    (False, 'benchmark')
    """

    benchmark: str
    units: np.ndarray
    models_used: np.ndarray
    method: str = "aic"
    coef: np.ndarray | None = None
    calibration: Calibration | None = None
    selection: SelectionResult | None = None
    screen: ScreenResult | None = None
    candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loo_r2: float | None = None
    loo_predictions: np.ndarray | None = None
    bootstrap_frequency: np.ndarray | None = None
    null: NullCalibration | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.units = np.asarray(self.units, dtype=np.int64).reshape(-1)
        if self.coef is None:
            self.coef = (
                np.asarray(self.selection.coef, dtype=np.float64)
                if self.selection is not None
                else np.full(self.units.size, np.nan)
            )
        self.coef = np.asarray(self.coef, dtype=np.float64).reshape(-1)
        if self.coef.size != self.units.size:
            raise SigmapInputError(
                f"signature {self.benchmark}: {self.coef.size} coefficients for "
                f"{self.units.size} units"
            )

    @property
    def empty(self) -> bool:
        """No unit stands out ("no signature above chance at this m, d and α")."""
        return self.units.size == 0

    @property
    def statistics(self) -> np.ndarray:
        """``(k,)`` each unit's calibrated statistic (positive = better-scoring models are
        less perplexed on it); NaN where the signature has no calibration of the unit."""
        stat = np.full(self.units.size, np.nan)
        cal = self.calibration
        if cal is not None and len(cal.units):
            pos = {int(u): i for i, u in enumerate(cal.units.tolist())}
            for i, u in enumerate(self.units.tolist()):
                if u in pos:
                    stat[i] = cal.values[pos[u]]
        return stat

    @property
    def orientation(self) -> np.ndarray:
        """``(k,)`` +1 where better-scoring models are less perplexed on the unit, −1 where
        they are more perplexed (:func:`unit_orientation` of :attr:`statistics` and
        :attr:`coef`)."""
        return unit_orientation(self.statistics, self.coef)

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary (NaN written as ``None``).

        Always: ``benchmark``, ``method``, ``empty``, ``units``, ``coef``, ``n_models``,
        ``n_candidates``, ``loo_r2`` and ``calibration`` (:meth:`Calibration.summary`, or
        None). aic / bic / ebic add ``criterion``, ``criterion_path``, ``rss_path``, ``r2``,
        ``adj_r2``, ``best_strength`` and, when computed, ``bootstrap_frequency`` and
        ``null``; lasso adds ``lasso``.
        """
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "method": self.method,
            "empty": self.empty,
            "units": self.units.tolist(),
            "coef": [float(c) if np.isfinite(c) else None for c in self.coef.tolist()],
            "n_models": int(self.models_used.sum()),
            "n_candidates": int(self.candidates.size),
            "loo_r2": self.loo_r2,
            "calibration": None if self.calibration is None else self.calibration.summary(),
        }
        s = self.selection
        if s is not None:
            out |= {
                "criterion": s.criterion,
                "criterion_path": s.criterion_path.tolist(),
                "rss_path": s.rss_path.tolist(),
                "r2": s.r2,
                "adj_r2": s.adj_r2,
                "best_strength": self.screen.best if self.screen is not None else None,
            }
        if "lasso" in self.extra:
            out["lasso"] = dict(self.extra["lasso"])
        if self.bootstrap_frequency is not None:
            out["bootstrap_frequency"] = self.bootstrap_frequency.tolist()
        if self.null is not None:
            out["null"] = self.null.summary()
        return out


def _values_source(source: Any, nll_arrays: Any) -> Any:
    if nll_arrays is not None:
        return nll_arrays
    if isinstance(source, RankStore):
        raise SigmapInputError(
            "this method needs the per-unit values (NLL), not only their ranks: pass "
            "nll_arrays= with a RankStore source"
        )
    return source


def _select_on(
    values: np.ndarray, y: np.ndarray, models: np.ndarray, criterion: str, gamma: float, **kw: Any
) -> SelectionResult:
    return forward_select(values[models], y[models], criterion, gamma=gamma, **kw)


def _selection_signatures(
    source: Any,
    y_all: np.ndarray,
    *,
    names: list[str],
    nll_arrays: Any,
    q: float,
    k: int | None,
    statistic: str,
    two_sided: bool,
    criterion: str,
    gamma: float,
    max_features: int | None,
    loo: bool,
    n_bootstrap: int,
    n_permutations: int,
    alpha: float,
    seed: int,
    chunk_units: int,
) -> list[Signature]:
    """The paper's text (aic / bic / ebic): one screening pass, then forward selection."""
    m, nb = y_all.shape
    values_src = _values_source(source, nll_arrays)
    rng = np.random.default_rng(seed)

    # --- all score columns screened in one pass -----------------------------------------
    cols = [y_all]
    layout: dict[str, list[tuple[int, int]]] = {"perm": [], "loo": []}
    offset = nb
    for b in range(nb):
        avail = np.flatnonzero(~np.isnan(y_all[:, b]))
        if n_permutations:
            block = np.full((m, n_permutations), np.nan)
            for p in range(n_permutations):
                block[avail, p] = y_all[rng.permutation(avail), b]
            cols.append(block)
            layout["perm"].append((offset, n_permutations))
            offset += n_permutations
        if loo:
            block = np.repeat(y_all[:, b : b + 1], len(avail), axis=1)
            block[avail, np.arange(len(avail))] = np.nan
            cols.append(block)
            layout["loo"].append((offset, len(avail)))
            offset += len(avail)
    y_cols = np.concatenate(cols, axis=1)
    col_names = names + [f"{names[0]}:calibration#{i}" for i in range(y_cols.shape[1] - nb)]
    screened = screen(
        source,
        y_cols,
        q=q,
        k=k,
        statistic=statistic,
        two_sided=two_sided,
        chunk_units=chunk_units,
        benchmark_names=col_names,
    )

    # --- gather every needed unit once ------------------------------------------------
    union = np.unique(np.concatenate([r.indices for r in screened]))
    values_union = gather_units(values_src, union)  # (m, |union|)

    def cand_values(res: ScreenResult) -> np.ndarray:
        return values_union[:, np.searchsorted(union, res.indices)]

    sel_kw = {"max_features": max_features}
    out: list[Signature] = []
    for b in range(nb):
        y = y_all[:, b]
        models = ~np.isnan(y)
        res = screened[b]
        xv = cand_values(res)
        sel = _select_on(xv, y, models, criterion, gamma, **sel_kw)
        sig = Signature(
            benchmark=names[b],
            units=res.indices[sel.selected],
            method=criterion,
            selection=sel,
            screen=res,
            candidates=res.indices,
            models_used=models,
        )
        if n_bootstrap:
            idx_models = np.flatnonzero(models)
            counts = np.zeros(res.indices.size)
            done = 0
            for _ in range(n_bootstrap):
                draw = rng.choice(idx_models, size=idx_models.size, replace=True)
                yb = y[draw]
                if np.unique(draw).size < 4 or np.all(yb == yb[0]):
                    continue
                sb = forward_select(xv[draw], yb, criterion, gamma=gamma, **sel_kw)
                counts[sb.selected] += 1
                done += 1
            sig.bootstrap_frequency = counts[sel.selected] / max(done, 1)
            sig.extra["n_bootstrap_done"] = done
        if loo:
            start, n_f = layout["loo"][b]
            avail = np.flatnonzero(models)
            pred = np.full(m, np.nan)
            for f in range(n_f):
                i = avail[f]
                r_f = screened[start + f]
                xf = cand_values(r_f)
                train = models.copy()
                train[i] = False
                sf = _select_on(xf, y, train, criterion, gamma, **sel_kw)
                pred[i] = sf.intercept_raw + float(xf[i, sf.selected] @ sf.coef_raw)
            yy = y[avail]
            sig.loo_predictions = pred
            sig.loo_r2 = float(
                1.0 - ((yy - pred[avail]) ** 2).sum() / ((yy - yy.mean()) ** 2).sum()
            )
        if n_permutations:
            start, n_p = layout["perm"][b]
            best, crit, r2, kk, paths = [], [], [], [], []
            for p in range(n_p):
                r_p = screened[start + p]
                yp = y_cols[:, start + p]
                sp = _select_on(cand_values(r_p), yp, models, criterion, gamma, **sel_kw)
                best.append(r_p.best)
                crit.append(sp.criterion_path[-1])
                r2.append(sp.r2)
                kk.append(sp.k)
                paths.append(sp.criterion_path)
            best_a, crit_a, r2_a = np.asarray(best), np.asarray(crit), np.asarray(r2)
            real_c = float(sel.criterion_path[-1])
            sig.null = NullCalibration(
                best_strength=best_a,
                final_criterion=crit_a,
                r2=r2_a,
                k=np.asarray(kk),
                criterion_paths=paths,
                real_best=res.best,
                real_criterion=real_c,
                real_r2=sel.r2,
                p_best=float((1 + (best_a >= res.best).sum()) / (1 + n_p)),
                p_criterion=float((1 + (crit_a <= real_c).sum()) / (1 + n_p)),
                p_r2=float((1 + (r2_a >= sel.r2).sum()) / (1 + n_p)),
            )
            # the best screened strength is the maximum over ALL units: a max-T null
            sig.calibration = calibration_from_null(
                units=sig.units,
                values=(res.thrush if statistic == "thrush" else res.preselect)[sel.selected],
                strength=res.strength[sel.selected],
                null_max=best_a,
                observed_max=res.best,
                alpha=alpha,
                statistic=statistic,
                two_sided=two_sided,
                n_models=int(models.sum()),
                n_units=res.n_units,
            )
        out.append(sig)
    return out


def resolve_method(method: str | None, criterion: str | None) -> str:
    """The signature method named by ``method=`` and its alias ``criterion=``.

    ``criterion`` (``"aic" | "bic" | "ebic"``, the argument of earlier versions) selects
    that forward-selection method when ``method`` is not given; neither given means
    ``"calibrated"``; both given must agree.

    Examples
    --------
    >>> from sigmap_lib.signatures import resolve_method
    >>> resolve_method(None, None), resolve_method(None, "bic"), resolve_method("lasso", None)
    ('calibrated', 'bic', 'lasso')
    >>> resolve_method("calibrated", "aic")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: method='calibrated' and criterion='aic' disagree: criterion= only selects the forward-selection methods ('aic', 'bic', 'ebic'); pass one of them
    """
    if criterion is not None and criterion not in CRITERIA:
        raise SigmapInputError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    if method is None:
        return criterion if criterion is not None else "calibrated"
    if method not in METHODS:
        raise SigmapInputError(f"method must be one of {METHODS}, got {method!r}")
    if criterion is not None and criterion != method:
        raise SigmapInputError(
            f"method={method!r} and criterion={criterion!r} disagree: criterion= only selects "
            f"the forward-selection methods {CRITERIA}; pass one of them"
        )
    return method


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


def extract_signatures(
    source: Any,
    scores: Any,
    *,
    method: str | None = None,
    nll_arrays: Any = None,
    benchmark_names: Sequence[str] | None = None,
    n_permutations: int | None = None,
    alpha: float = 0.05,
    shared_null: bool = False,
    two_sided: bool = True,
    buffer_units: int = 1024,
    q: float = 0.01,
    k: int | None = None,
    statistic: str = "thrush",
    criterion: str | None = None,
    gamma: float = 0.5,
    max_features: int | None = None,
    loo: bool = False,
    n_bootstrap: int = 0,
    tail_fraction: float = 1e-6,
    ranking: str = "average",
    lasso_alpha: float = 0.01,
    seed: int = 0,
    chunk_units: int = 1 << 20,
    strata: Any = None,
    fwer: str = "benchmark",
    partial_statistic: str = "spearman",
) -> list[Signature]:
    """Signatures of several benchmarks, each in ONE streaming pass over all units.

    Parameters
    ----------
    source : RankStore | (n_units, n_models) array | sequence of per-model arrays
        What :func:`sigmap_lib.signatures.screen` reads.
    scores : array_like, shape (n_models,) or (n_models, B)
        Higher = better; NaN = unscored (that model is left out of the benchmark; the
        benchmarks scored by the same models share their ranks, ``ĝ`` and passes).
    method : {"calibrated", "calibrated-marginal", "lasso", "aic", "bic", "ebic"}, optional
        ``"calibrated"`` (default): the max-T test of the partial correlation given general
        quality (residuals on a spline of ``ĝ``); ``"calibrated-marginal"``: the same on the
        Thrush correlation; ``"lasso"``: the authors' code (§2b); ``"aic" | "bic" |
        "ebic"``: the paper's text (§3), screening then forward selection.
    nll_arrays : per-model arrays of the per-unit values (NLL) for ``"calibrated"`` and the
        fits of lasso / aic / bic / ebic (required with a RankStore source; defaults to
        ``source`` otherwise). ``"calibrated-marginal"`` needs only the ranks.
    benchmark_names : sequence of str, optional
    n_permutations : int, optional
        ``P``. Calibrated methods: the max-T permutations (default 199; 999 for reported
        p-values). aic / bic / ebic: forward selection's permutation null (default 0),
        which also gives the selected units their max-T :class:`Calibration`; lasso: when
        ``> 0``, a ``"calibrated-marginal"`` pass calibrates the Lasso's units.
    alpha : float
        Family-wise error level of the max-T threshold.
    shared_null : bool
        One set of permutation columns per set of scored models (``B + P`` columns instead
        of ``B·(P + 1)``; exact for untied scores, approximate for tied ones).
    two_sided : bool
        Calibrated: test ``|statistic|`` (default) or the signed statistic (positive =
        better models less perplexed); aic / bic / ebic: the screening's sidedness; lasso:
        ignored (both tails by construction).
    buffer_units : int
        Calibrated: units kept per benchmark in the running top-K; the result does not
        depend on it (when more units pass the threshold, a second pass collects them).
    q, k, statistic : screening options of aic / bic / ebic (``K`` candidates per benchmark,
        the statistic ``"thrush" | "preselect"``). The calibrated methods and the Lasso
        test every unit with their own statistic (``statistic`` must be ``"thrush"``).
    criterion : {"aic", "bic", "ebic"}, optional
        Alias of ``method`` for the forward-selection methods (earlier versions' argument).
    gamma, max_features : forward-selection options (EBIC uses ``p = K``).
    loo : bool
        aic / bic / ebic: leave-one-model-out R² of the whole procedure (adds ``m``
        screening columns per benchmark to the pass; each needs its own re-ranking).
    n_bootstrap : int
        aic / bic / ebic: stage-2 bootstrap resamples of models for selection frequencies.
    tail_fraction, ranking, lasso_alpha : the Lasso's candidate tails (fraction of units per
        tail), tie rule of its Thrush score (``"average"`` or the authors' ``"first"``) and
        penalty (acts on the scores in the units given).
    seed : int
        Seed of every random draw (permutations, bootstrap).
    chunk_units : int
        Units read at a time.
    strata : array_like, shape (n_models,), optional
        ``"calibrated"``: one label per model (e.g. its family). Permutations stay within
        strata and stratum effects are regressed out of units and scores, so models of one
        family sharing an offset do not pass for signal. The calibration records it.
    fwer : {"benchmark", "all"}
        Calibrated methods: control the family-wise error over each benchmark's ``d`` units
        (default; the chance that *some* benchmark of ``B`` gets a false unit is then up to
        ``B·alpha``) or over all units of all benchmarks together (one set of model
        permutations shared by every benchmark, one threshold from the maximum over all).

    partial_statistic : {"spearman", "pearson"}
        ``"calibrated"``: the correlation of the two residuals (units' values and scores on
        the quality basis) — Spearman (default: the correlation of their ranks, which held
        its level in every null world of ``sigmap bench recovery``) or Pearson (more power,
        but above its level in one measured world: m = 64, d = 2,000; docs/RESULTS.md).

    Returns
    -------
    list[Signature], one per score column.

    Examples
    --------
    400 units by 16 models; units 5 and 120 are planted to track the first benchmark,
    the second benchmark is noise. The calibrated default finds exactly the planted units
    for the first and, rightly, nothing for the second:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signatures
    >>> rng = np.random.default_rng(0)
    >>> a = rng.standard_normal(16)
    >>> values = rng.standard_normal((400, 16))  # (n_units, n_models)
    >>> values[[5, 120]] = -a + 0.1 * rng.standard_normal((2, 16))
    >>> scores = np.column_stack([a, rng.standard_normal(16)])  # (n_models, B)
    >>> sigs = extract_signatures(values, scores, benchmark_names=["real", "noise"])
    >>> [(s.benchmark, s.method, s.units.tolist(), s.empty) for s in sigs]
    [('real', 'calibrated', [5, 120], False), ('noise', 'calibrated', [], True)]
    >>> sigs[0].calibration.adjusted_p.tolist()  # (1 + #{T* >= |stat|}) / (P + 1)
    [0.005, 0.005]

    The paper's forward selection (``criterion=`` as before), with the leave-one-model-out
    R² of the whole procedure; the second benchmark has no score for model 0:

    >>> scores = np.column_stack([a, -a])
    >>> scores[0, 1] = np.nan
    >>> sigs = extract_signatures(
    ...     values, scores, benchmark_names=["up", "down"], k=10, criterion="bic", loo=True
    ... )
    >>> [(s.benchmark, s.method, s.units.tolist(), int(s.models_used.sum())) for s in sigs]
    [('up', 'bic', [120, 5, 39], 16), ('down', 'bic', [120, 5, 39], 15)]
    """
    meth = resolve_method(method, criterion)
    y_all, _ = as_scores(scores)
    nb = y_all.shape[1]
    names = list(benchmark_names) if benchmark_names is not None else [f"#{b}" for b in range(nb)]
    if len(names) != nb:
        raise SigmapInputError(f"{len(names)} benchmark names for {nb} score columns")
    p = int(
        n_permutations if n_permutations is not None else (199 if meth in CALIBRATED_METHODS else 0)
    )
    if p < 0:
        raise SigmapInputError(f"n_permutations must be >= 0, got {p}")
    if not 0.0 < alpha < 1.0:
        raise SigmapInputError(f"alpha must be in (0, 1), got {alpha}")
    if strata is not None and meth != "calibrated":
        raise SigmapInputError(f"strata= is an option of method='calibrated', not {meth!r}")
    if fwer != "benchmark" and meth not in CALIBRATED_METHODS:
        raise SigmapInputError(f"fwer={fwer!r} is an option of the calibrated methods")
    if meth in CRITERIA:
        return _selection_signatures(
            source,
            y_all,
            names=names,
            nll_arrays=nll_arrays,
            q=q,
            k=k,
            statistic=statistic,
            two_sided=two_sided,
            criterion=meth,
            gamma=gamma,
            max_features=max_features,
            loo=loo,
            n_bootstrap=n_bootstrap,
            n_permutations=p,
            alpha=alpha,
            seed=seed,
            chunk_units=chunk_units,
        )
    unsupported = {
        "loo": loo,
        "n_bootstrap": n_bootstrap,
        "max_features": max_features is not None,
        "statistic='preselect'": statistic != "thrush",
    }
    bad = [name for name, on in unsupported.items() if on]
    if bad:
        raise SigmapInputError(
            f"method={meth!r} does not take {', '.join(bad)} (forward selection's options: "
            f"use method='aic' | 'bic' | 'ebic')"
        )
    for b in range(nb):
        check_benchmark(y_all[:, b], names[b])
    if meth in CALIBRATED_METHODS:
        found = calibrated_signatures(
            _values_source(source, nll_arrays) if meth == "calibrated" else source,
            y_all,
            method=meth,
            n_permutations=p,
            alpha=alpha,
            shared_null=shared_null,
            two_sided=two_sided,
            seed=seed,
            buffer_units=buffer_units,
            chunk_units=chunk_units,
            strata=strata,
            fwer=fwer,
            names=names,
            partial_statistic=partial_statistic,
        )
        return [
            Signature(
                benchmark=names[b],
                units=r.units,
                models_used=r.models_used,
                method=meth,
                calibration=r.calibration,
                extra=r.extra,
            )
            for b, r in enumerate(found)
        ]
    # the authors' Lasso
    values_src = _values_source(source, nll_arrays)
    fits = lasso_signatures(
        source,
        y_all,
        lambda units: gather_units(values_src, units),
        tail_fraction=tail_fraction,
        ranking=ranking,
        lasso_alpha=lasso_alpha,
        chunk_units=chunk_units,
        names=names,
    )
    cals = (
        calibrated_signatures(
            source,
            y_all,
            method="calibrated-marginal",
            n_permutations=p,
            alpha=alpha,
            shared_null=shared_null,
            two_sided=True,
            seed=seed,
            buffer_units=buffer_units,
            chunk_units=chunk_units,
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
            method="lasso",
            coef=fit.coef,
            candidates=fit.candidates,
            extra={"lasso": fit.extra},
        )
        if cals is not None:
            models = fit.models_used
            vals = gather_units(values_src, fit.units)[models].T  # (k, m_b)
            stat = (
                thrush_correlation(vals, y_all[models, b])
                if fit.units.size
                else np.zeros(0, dtype=np.float64)
            )
            sig.calibration = _recalibrated(cals[b].calibration, fit.units, stat)
        out.append(sig)
    return out


def extract_signature(source: Any, scores: Any, **kwargs: Any) -> Signature:
    """One benchmark's signature; ``scores`` of shape ``(n_models,)``.

    See :func:`extract_signatures` for the parameters.

    Examples
    --------
    300 units by 12 models; units 5 and 120 are planted to track the scores:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signature
    >>> rng = np.random.default_rng(0)
    >>> scores, values = rng.standard_normal(12), rng.standard_normal((300, 12))  # 12 models
    >>> values[[5, 120]] = -scores + 0.1 * rng.standard_normal((2, 12))
    >>> sig = extract_signature(values, scores, k=10, criterion="bic", n_permutations=5)
    >>> sig.candidates[:2].tolist(), sig.units.tolist()  # screened, then selected
    ([120, 5], [5, 120, 21])
    >>> round(sig.selection.r2, 3), round(sig.null.p_best, 3)
    (0.997, 0.167)
    """
    y = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1:
        raise SigmapInputError(f"extract_signature takes (n_models,) scores, got {y.shape}")
    return extract_signatures(source, y, **kwargs)[0]

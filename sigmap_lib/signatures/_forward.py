"""The paper's text (METHODS §2–§3): screening, then forward selection by AIC, BIC or EBIC.

1. :func:`~sigmap_lib.signatures.screen` keeps the ``K`` strongest units per benchmark;
2. :func:`~sigmap_lib.signatures.gather_units` reads only those units' per-model values;
3. :func:`~sigmap_lib.signatures.forward_select` picks the signature among them.

Stage-2 design matrix: each candidate unit's per-model **NLL** (nats), standardized across
models. Because a unit's bits-per-byte is its NLL times the constant ``1/(n_bytes·ln 2)``,
standardizing makes NLL and bits-per-byte columns identical, so the choice is immaterial.

Calibration of forward selection (all in the SAME streaming screening pass as the real
scores: extra score columns are screened alongside; shard partials merge with
:func:`~sigmap_lib.signatures.merge_screen`):

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
  selected units their max-T calibration (:class:`~sigmap_lib.signatures.Calibration`,
  the marginal test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sigmap_lib.signatures._calibration import calibration_from_null
from sigmap_lib.signatures._method import Interval, Options, Pass, SignatureMethod
from sigmap_lib.signatures._result import (
    NullCalibration,
    Signature,
    gather_units,
    values_source,
)
from sigmap_lib.signatures._screening import ScreenResult, screen
from sigmap_lib.signatures._selection import SelectionResult, forward_select
from sigmap_lib.signatures._statistics import STATISTICS


@dataclass(kw_only=True, repr=False, eq=False)
class ForwardSelection(SignatureMethod):
    """Screening then forward selection; :attr:`criterion` is the stopping rule.

    Parameters
    ----------
    q, k : screening: the fraction of units (or a fixed number ``k``) kept per benchmark.
    statistic : {"thrush", "preselect"}
        The rank statistic that orders candidates.
    two_sided : bool
        Screen on ``|statistic|``.
    max_features : int, optional
        The most units stage 2 enters.
    loo : bool
        Leave-one-model-out R² of the whole procedure (``m`` screening columns more per
        benchmark in the pass).
    n_bootstrap : int
        Stage-2 bootstrap resamples of models for selection frequencies.
    n_permutations : int, optional
        The permutation null of the whole procedure (default 0: none); it also gives the
        selected units their marginal max-T calibration.
    alpha : float
        Family-wise level of that calibration.
    """

    criterion: ClassVar[str] = ""
    fits_coefficients: ClassVar[bool] = True
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "q": [Interval(float, 0.0, 1.0, closed="right")],
        "k": [None, Interval(int, 1, None)],
        "statistic": [Options(STATISTICS)],
        "two_sided": [bool],
        "max_features": [None, Interval(int, 1, None)],
        "loo": [bool],
        "n_bootstrap": [Interval(int, 0, None)],
        "n_permutations": [None, Interval(int, 0, None)],
        "alpha": [Interval(float, 0.0, 1.0, closed="neither")],
    }

    q: float = 0.01
    k: int | None = None
    statistic: str = "thrush"
    two_sided: bool = True
    max_features: int | None = None
    loo: bool = False
    n_bootstrap: int = 0
    n_permutations: int | None = None
    alpha: float = 0.05

    @property
    def gamma_value(self) -> float:
        """The γ passed to the criterion (used by EBIC only)."""
        return 0.5

    def other_statistic(self) -> tuple[str, dict[str, Any]]:
        other = "preselect" if self.statistic == "thrush" else "thrush"
        return f"screening={other}", {"statistic": other}

    def _extract(self, source: Any, scores: np.ndarray, run: Pass) -> list[Signature]:
        return _selection_signatures(source, scores, self, run)


@dataclass(kw_only=True, repr=False, eq=False)
class ForwardAIC(ForwardSelection):
    """The paper's default: forward selection stopped by AIC (parameters:
    :class:`ForwardSelection`).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import ForwardAIC
    >>> rng = np.random.default_rng(0)
    >>> y, values = rng.standard_normal(12), rng.standard_normal((300, 12))
    >>> values[[5, 120]] = -y + 0.1 * rng.standard_normal((2, 12))
    >>> [sig] = ForwardAIC(k=10).extract(values, y[:, None], names=["b"])
    >>> sig.method, sig.candidates[:2].tolist(), sig.units.tolist()  # screened, then selected
    ('aic', [120, 5], [5, 120, 21, 83])
    """

    name: ClassVar[str] = "aic"
    criterion: ClassVar[str] = "aic"


@dataclass(kw_only=True, repr=False, eq=False)
class ForwardBIC(ForwardSelection):
    """Forward selection stopped by BIC (parameters: :class:`ForwardSelection`)."""

    name: ClassVar[str] = "bic"
    criterion: ClassVar[str] = "bic"


@dataclass(kw_only=True, repr=False, eq=False)
class ForwardEBIC(ForwardSelection):
    """Forward selection stopped by the extended BIC with ``p = K`` and γ = ``gamma``
    (the other parameters: :class:`ForwardSelection`)."""

    name: ClassVar[str] = "ebic"
    criterion: ClassVar[str] = "ebic"
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = (
        ForwardSelection._parameter_constraints | {"gamma": [Interval(float, 0.0, 1.0)]}
    )

    gamma: float = 0.5

    @property
    def gamma_value(self) -> float:
        return self.gamma


def _select_on(
    values: np.ndarray, y: np.ndarray, models: np.ndarray, criterion: str, gamma: float, **kw: Any
) -> SelectionResult:
    return forward_select(values[models], y[models], criterion, gamma=gamma, **kw)


def _selection_signatures(
    source: Any, y_all: np.ndarray, method: ForwardSelection, run: Pass
) -> list[Signature]:
    """The paper's text (aic / bic / ebic): one screening pass, then forward selection."""
    names, loo, n_bootstrap, alpha = run.names, method.loo, method.n_bootstrap, method.alpha
    criterion, gamma, statistic = method.criterion, method.gamma_value, method.statistic
    n_permutations = method.n_permutations or 0
    m, nb = y_all.shape
    values_src = values_source(source, run.nll_arrays)
    rng = np.random.default_rng(run.seed)

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
        q=method.q,
        k=method.k,
        statistic=statistic,
        two_sided=method.two_sided,
        chunk_units=run.chunk_units,
        benchmark_names=col_names,
    )

    # --- gather every needed unit once ------------------------------------------------
    union = np.unique(np.concatenate([r.indices for r in screened]))
    values_union = gather_units(values_src, union)  # (m, |union|)

    def cand_values(res: ScreenResult) -> np.ndarray:
        return values_union[:, np.searchsorted(union, res.indices)]

    sel_kw = {"max_features": method.max_features}
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
                two_sided=method.two_sided,
                n_models=int(models.sum()),
                n_units=res.n_units,
            )
        out.append(sig)
    return out

"""Benchmark signatures: screening → forward selection, with honest calibration.

The two-stage procedure of METHODS.md §2–§3 as pure functions:

1. :func:`sigmap_lib.signatures.screen` keeps the ``K`` strongest units per benchmark;
2. :func:`gather_units` reads only those units' per-model values;
3. :func:`sigmap_lib.signatures.forward_select` picks the signature among them.

Stage-2 design matrix: each candidate unit's per-model **NLL** (nats), standardized across
models. Because a unit's bits-per-byte is its NLL times the constant ``1/(n_bytes·ln 2)``,
standardizing makes NLL and bits-per-byte columns identical, so the choice is immaterial.

Calibration (all in the SAME streaming screening pass as the real scores: extra score
columns are screened alongside):

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
  (``p = (1 + #{null ≥ real}) / (1 + P)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll._ranks import RankStore, check_model_arrays
from sigmap_lib.signatures._screening import ScreenResult, screen
from sigmap_lib.signatures._selection import SelectionResult, forward_select


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
        if uniq.size == 0:
            continue
        if hasattr(arr, "get_orthogonal_selection"):
            out[j] = np.asarray(arr.get_orthogonal_selection((uniq,)), dtype=np.float64)
        else:
            out[j] = np.asarray(arr[uniq], dtype=np.float64)
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


@dataclass
class Signature:
    """A benchmark's signature and its calibration.

    Attributes
    ----------
    benchmark : str
    units : numpy.ndarray of int64, shape (k,)
        Corpus unit indices in order of entry.
    selection : SelectionResult
        Stage-2 fit (columns = ``candidates``; ``units = candidates[selection.selected]``).
    screen : ScreenResult
    candidates : numpy.ndarray of int64, shape (K,)
    models_used : numpy.ndarray of bool, shape (n_models,)
    loo_r2 : float or None
    loo_predictions : numpy.ndarray (n_models,) or None
        Held-out predictions (NaN for unscored models).
    bootstrap_frequency : numpy.ndarray (k,) or None
    null : NullCalibration or None
    """

    benchmark: str
    units: np.ndarray
    selection: SelectionResult
    screen: ScreenResult
    candidates: np.ndarray
    models_used: np.ndarray
    loo_r2: float | None = None
    loo_predictions: np.ndarray | None = None
    bootstrap_frequency: np.ndarray | None = None
    null: NullCalibration | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary."""
        s = self.selection
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "units": self.units.tolist(),
            "coef": s.coef.tolist(),
            "criterion": s.criterion,
            "criterion_path": s.criterion_path.tolist(),
            "rss_path": s.rss_path.tolist(),
            "r2": s.r2,
            "adj_r2": s.adj_r2,
            "n_candidates": int(self.candidates.size),
            "n_models": int(self.models_used.sum()),
            "best_strength": self.screen.best,
            "loo_r2": self.loo_r2,
        }
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
            "stage 2 needs the per-model values: pass nll_arrays when screening a RankStore"
        )
    return source


def _select_on(
    values: np.ndarray, y: np.ndarray, models: np.ndarray, criterion: str, gamma: float, **kw: Any
) -> SelectionResult:
    return forward_select(values[models], y[models], criterion, gamma=gamma, **kw)


def extract_signatures(
    source: Any,
    scores: Any,
    *,
    nll_arrays: Any = None,
    benchmark_names: Sequence[str] | None = None,
    q: float = 0.01,
    k: int | None = None,
    statistic: str = "thrush",
    two_sided: bool = True,
    criterion: str = "aic",
    gamma: float = 0.5,
    max_features: int | None = None,
    loo: bool = False,
    n_bootstrap: int = 0,
    n_permutations: int = 0,
    seed: int = 0,
    chunk_units: int = 1 << 20,
) -> list[Signature]:
    """Signatures of several benchmarks with ONE streaming screening pass.

    Parameters
    ----------
    source : RankStore | (n_units, n_models) array | sequence of per-model arrays
        What :func:`sigmap_lib.signatures.screen` reads.
    scores : array_like, shape (n_models,) or (n_models, B)
        NaN = unscored (that model is left out of the benchmark's both stages).
    nll_arrays : per-model arrays for stage 2 (required with a RankStore source; defaults
        to ``source`` otherwise).
    q, k, statistic, two_sided : screening options (per benchmark ``K`` candidates).
    criterion, gamma, max_features : stage-2 options (EBIC uses ``p = K``).
    loo : bool
        Leave-one-model-out R² of the whole procedure (adds ``m`` screening columns per
        benchmark to the pass; each needs its own re-ranking, so the pass costs ~m× more).
    n_bootstrap : int
        Stage-2 bootstrap resamples of models for selection frequencies.
    n_permutations : int
        Permutation-null replicates (screened in the same pass).
    seed : int

    Returns
    -------
    list[Signature], one per score column.

    Examples
    --------
    300 units by 12 models with units 5 and 120 planted; the second benchmark is the
    reverse of the first and has no score for model 0:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signatures
    >>> rng = np.random.default_rng(0)
    >>> a = rng.standard_normal(12)
    >>> values = rng.standard_normal((300, 12))  # (n_units, n_models)
    >>> values[[5, 120]] = -a + 0.1 * rng.standard_normal((2, 12))
    >>> scores = np.column_stack([a, -a])  # (n_models, B)
    >>> scores[0, 1] = np.nan
    >>> sigs = extract_signatures(
    ...     values, scores, benchmark_names=["up", "down"], k=10, criterion="bic", loo=True
    ... )
    >>> [(s.benchmark, s.units.tolist(), int(s.models_used.sum())) for s in sigs]
    [('up', [5, 120, 21], 12), ('down', [5, 120, 21], 11)]
    >>> [round(s.loo_r2, 3) for s in sigs]
    [0.961, 0.919]
    """
    y_all = np.asarray(scores, dtype=np.float64)
    if y_all.ndim == 1:
        y_all = y_all[:, None]
    if y_all.ndim != 2:
        raise SigmapInputError(f"scores must be (n_models,) or (n_models, B), got {y_all.shape}")
    m, nb = y_all.shape
    names = list(benchmark_names) if benchmark_names is not None else [f"#{b}" for b in range(nb)]
    if len(names) != nb:
        raise SigmapInputError(f"{len(names)} benchmark names for {nb} score columns")
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
    >>> scores = rng.standard_normal(12)
    >>> values = rng.standard_normal((300, 12))  # (n_units, n_models)
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

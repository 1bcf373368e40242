"""metabench: distil benchmarks to a sparse item set with IRT (Kipnis et al., ICLR 2025).

Pipeline (``../shared/data/metabench_irt/ALGORITHM.md``), per benchmark:

1. :func:`split_models` — a common test split of the models present in every benchmark,
   stratified on the grand (mean normalised) score.
2. :func:`build_item_pool` — drop outlier models (total <= 0.1 % quantile), drop items
   (sd <= 0.01; guess-adjusted easiness > 0.7125; |point-biserial| < 0.05), hold out 10 %
   of training models as validation (stratified on the score), and cross-validated random
   subsampling to a pool (default 350 items): each of ``n_subsets`` random subsets is scored
   by the worst 5-fold validation RMSE of a spline ``score ~ s(subset mean)``; the minimax
   subset is kept. The original drew 10,000 subsets; the default here is 500 (the
   minimax RMSE curve is flat by then on our simulations and a subset costs ~5 ms).
3. :func:`fit_pool_irt` — 2PL/3PL(/4PL) EM fits on the pool (train + validation models),
   θ by MAP and EAPsum, and the cross-validated reconstruction RMSE of every
   (model, θ-method) pair (GAM ``score ~ s(θ)`` on train, RMSE on validation).
4. :func:`select_items` — information filtering (ALGORITHM.md §5: type-4 quantile bins of
   the θ grid, greedy low→high, ≤ 1 item per bin, threshold τ), refit on the selected
   items (train models only), θ, GAM, validation RMSE; objective RMSE + λ·n_items. The
   original tuned (model, θ method, grid type, τ) by Bayesian optimisation; here a grid:
   the ``top_k`` best (model, θ-method) pairs of step 3 × both grid types × ``n_tau``
   thresholds at quantiles of the items' peak information, with identical selections
   evaluated once. The best configuration is refitted (1000 EM cycles), the GAM
   ``score ~ s(θ)`` is fitted on train models and the test RMSE reported.

Joint (:func:`fit_joint`): the union of selections; the grand score and every benchmark's
score reconstructed from all benchmarks' θ jointly (additive GAM); one-factor analysis of
the θs and the Spearman correlation of the factor score with the grand score.

:func:`fit_metabench` runs everything; :func:`score_new_models` scores models that only
answered the selected items. :class:`MetabenchFit` saves to / loads from a folder
(JSON + parquet, written atomically).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.gam import GamModel, fit_gam, fit_pspline
from sigmap_lib.irt import IRT_MODELS, IrtFit, estimate_theta, fit_irt, item_information
from sigmap_lib.reconstruction import (
    DEFAULT_COVARIATE_SETS,
    LinearPredictor,
    ScoreModel,
    fit_score_model,
    parse_covariates,
)

# ---------------------------------------------------------------------------
# configuration


@dataclass
class MetabenchConfig:
    """All hyperparameters of the pipeline (defaults follow ALGORITHM.md where it is explicit).

    Speed-motivated departures from the original: ``n_subsets`` 500 (not 10,000),
    ``irt_models`` 2PL and 3PL (4PL is supported but costs ~10x a 2PL fit with mirt's EM),
    and a grid search (``top_k`` x grid types x ``n_tau``) instead of Bayesian optimisation.

    The search objective is metabench's (validation RMSE of ``score ~ s(θ)`` + λ x items).
    The final reconstruction adds, by K-fold CV among ``score_covariates``, the reduced
    test's percent correct and linear predictor (``meta.R``'s ``.s`` and ``.l``), see
    :mod:`sigmap_lib.reconstruction`; the θ-only RMSE is reported alongside.
    """

    test_frac: float = 0.1
    val_frac: float = 0.1
    outlier_quantile: float = 0.001
    sd_min: float = 0.01
    guess_factor: float = 0.75
    easy_max: float = 0.7125
    pbis_min: float = 0.05
    pbis_min_by_benchmark: dict[str, float] = field(default_factory=lambda: {"winogrande": 0.02})
    pool_size: int = 350
    n_subsets: int = 500
    n_folds: int = 5
    irt_models: tuple[str, ...] = ("2PL", "3PL")
    theta_methods: tuple[str, ...] = ("MAP", "EAPsum")
    tol: float = 1e-4
    max_iter_pool: int = 1000
    max_iter_search: int = 500
    max_iter_final: int = 1000
    n_quant: int = 200
    grid_types: tuple[int, ...] = (1, 2)
    n_tau: int = 5
    top_k: int = 2
    lam: float = 0.005
    lam_by_benchmark: dict[str, float] = field(default_factory=dict)
    min_items: int = 10
    gam_df: int = 20
    score_covariates: tuple[str, ...] = DEFAULT_COVARIATE_SETS
    n_random_baseline: int = 5

    @classmethod
    def from_kwargs(cls, **config: Any) -> MetabenchConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known)
        if unknown:
            raise SigmapInputError(
                f"metabench config: unknown option(s) {unknown}; known: {sorted(known)}"
            )
        cfg = cls(**config)
        for name in ("irt_models", "theta_methods", "grid_types", "score_covariates"):
            setattr(cfg, name, tuple(getattr(cfg, name)))
        bad = [m for m in cfg.irt_models if m not in IRT_MODELS]
        if bad or not cfg.irt_models:
            raise SigmapInputError(
                f"metabench config: irt_models must be a non-empty subset of {IRT_MODELS}, got {bad}"
            )
        bad = [m for m in cfg.theta_methods if m not in ("MAP", "EAP", "EAPsum")]
        if bad or not cfg.theta_methods:
            raise SigmapInputError(f"metabench config: unknown theta_methods {bad}")
        if not cfg.score_covariates or any(
            "theta" not in parse_covariates(c) for c in cfg.score_covariates
        ):
            raise SigmapInputError(
                "metabench config: score_covariates must be non-empty sets that include theta, "
                f"e.g. {DEFAULT_COVARIATE_SETS}; got {cfg.score_covariates}"
            )
        if not 0 < cfg.test_frac < 0.5 or not 0 < cfg.val_frac < 0.5:
            raise SigmapInputError("metabench config: test_frac and val_frac must be in (0, 0.5)")
        if cfg.pool_size < cfg.min_items or cfg.n_quant < cfg.min_items:
            raise SigmapInputError("metabench config: pool_size and n_quant must be >= min_items")
        return cfg

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d


# ---------------------------------------------------------------------------
# small statistics helpers


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Root mean squared difference of two equal-length vectors."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def type4_quantiles(x: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """R's ``quantile(x, probs, type = 4)``: linear interpolation of the empirical CDF.

    Follows R's arithmetic exactly (``j = floor(n p + fuzz)``, ``h = n p - j`` snapped to 0
    when ``|h| < fuzz``, ``fuzz = 4 eps``), so that bin edges coincide with grid points
    where R's do; ``numpy.quantile(method="interpolated_inverted_cdf")`` differs in the
    last bits, which moves grid points across bin edges.
    """
    xs = np.sort(np.asarray(x, float).reshape(-1))
    n = len(xs)
    p = np.asarray(probs, float)
    fuzz = 4 * np.finfo(float).eps
    nppm = n * p
    j = np.floor(nppm + fuzz).astype(int)
    h = nppm - j
    h = np.where(np.abs(h) < fuzz, 0.0, h)
    padded = np.concatenate([[xs[0]], xs, [xs[-1]]])  # R: x[c(1, 1:n, n)]
    lo = padded[np.clip(j, 0, n + 1)]
    hi = padded[np.clip(j + 1, 0, n + 1)]
    out = (1 - h) * lo + h * hi
    # R interpolates only where 0 < h < 1 and the two order statistics differ; elsewhere
    # the order statistic itself is returned (this matters for tied grids, e.g. EAPsum θ)
    return np.where((h > 0) & (h < 1) & (lo != hi), out, lo)


def stratified_sample(
    y: np.ndarray, frac: float, rng: np.random.Generator, n_groups: int = 5
) -> np.ndarray:
    """Boolean mask drawing ``frac`` of each quantile group of ``y`` (caret::createDataPartition)."""
    y = np.asarray(y, float)
    cuts = np.unique(np.quantile(y, np.linspace(0, 1, n_groups + 1)))
    groups = np.clip(np.searchsorted(cuts, y, side="right") - 1, 0, max(len(cuts) - 2, 0))
    mask = np.zeros(len(y), bool)
    for gr in np.unique(groups):
        idx = np.where(groups == gr)[0]
        k = int(np.ceil(frac * len(idx)))
        mask[rng.choice(idx, size=min(k, len(idx)), replace=False)] = True
    return mask


def stratified_folds(y: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold label per observation, balanced within quantile groups of ``y`` (caret::createFolds)."""
    y = np.asarray(y, float)
    order = np.argsort(y + rng.random(len(y)) * 1e-9, kind="stable")
    folds = np.empty(len(y), int)
    for start in range(0, len(y), n_folds):
        block = order[start : start + n_folds]
        folds[block] = rng.permutation(n_folds)[: len(block)]
    return folds


def information_filter(
    info: np.ndarray, grid: np.ndarray, threshold: float, n_quant: int
) -> list[int]:
    """Greedy information filtering (ALGORITHM.md §5, steps 4-6).

    Parameters
    ----------
    info : ndarray, shape (n_grid, n_items)
        Item information at each grid point.
    grid : ndarray, shape (n_grid,)
        θ grid (any order).
    threshold : τ; an item whose peak information inside a bin is below τ is ignored there.
    n_quant : number of bins, cut at R type-4 quantiles of the grid.

    Returns
    -------
    Column indices of the selected items in selection order (lowest-θ bin first);
    at most one per bin.
    """
    grid = np.asarray(grid, float).reshape(-1)
    info = np.asarray(info, float)
    if info.ndim != 2 or info.shape[0] != len(grid):
        raise SigmapInputError(
            f"information filter: info has shape {info.shape}, grid has {len(grid)} points"
        )
    order = np.argsort(grid, kind="stable")
    grid = grid[order]
    info = info[order]
    cuts = type4_quantiles(grid, np.arange(n_quant + 1) / n_quant)
    available = np.ones(info.shape[1], bool)
    selected: list[int] = []
    for k in range(n_quant):
        in_bin = (grid >= cuts[k]) & (grid < cuts[k + 1])
        if not in_bin.any():
            continue
        peak = info[in_bin].max(axis=0)
        ok = available & (peak >= threshold)
        if not ok.any():
            continue
        j = int(np.argmax(np.where(ok, peak, -np.inf)))
        selected.append(j)
        available[j] = False
    return selected


def item_statistics(x: np.ndarray, guess_factor: float = 0.75) -> pd.DataFrame:
    """Classical item statistics: ``sd``, guess-adjusted easiness ``diff``, point-biserial ``disc``."""
    x = np.asarray(x, float)
    total = x.sum(axis=1)
    sd = x.std(axis=0, ddof=1)
    diff = x.mean(axis=0) * guess_factor
    xc = x - x.mean(axis=0)
    tc = total - total.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        disc = (xc * tc[:, None]).sum(0) / np.sqrt((xc**2).sum(0) * (tc**2).sum())
    return pd.DataFrame({"sd": sd, "diff": diff, "disc": np.nan_to_num(disc)})


# ---------------------------------------------------------------------------
# data validation


def _check_inputs(responses: dict[str, pd.DataFrame], full_scores: pd.DataFrame) -> None:
    if not isinstance(responses, dict) or not responses:
        raise SigmapInputError(
            "metabench: responses must be a non-empty dict benchmark -> DataFrame"
        )
    if not isinstance(full_scores, pd.DataFrame):
        raise SigmapInputError("metabench: full_scores must be a DataFrame (models x benchmarks)")
    for bm, df in responses.items():
        if bm not in full_scores.columns:
            raise SigmapInputError(
                f"metabench: benchmark {bm!r} has responses but no column in full_scores"
            )
        if not isinstance(df, pd.DataFrame):
            raise SigmapInputError(
                f"metabench: responses[{bm!r}] must be a DataFrame (models x items)"
            )
        if df.index.has_duplicates:
            raise SigmapInputError(
                f"{bm}: duplicate model ids, e.g. {df.index[df.index.duplicated()][:3].tolist()}"
            )
        if df.columns.has_duplicates:
            raise SigmapInputError(
                f"{bm}: duplicate item ids, e.g. {df.columns[df.columns.duplicated()][:3].tolist()}"
            )
        vals = df.to_numpy(dtype=float, na_value=np.nan)
        if np.isnan(vals).any():
            raise SigmapInputError(
                f"{bm}: responses contain missing values; metabench needs complete 0/1 matrices"
            )
        if not np.all((vals == 0) | (vals == 1)):
            raise SigmapInputError(f"{bm}: responses must be 0/1")
        s = full_scores[bm].reindex(df.index)
        if s.isna().any():
            miss = s.index[s.isna()][:3].tolist()
            raise SigmapInputError(
                f"{bm}: {int(s.isna().sum())} models have responses but no full score, e.g. {miss}"
            )
        if len(df) < 50:
            raise SigmapInputError(f"{bm}: need at least 50 models, got {len(df)}")
    if full_scores.index.has_duplicates:
        raise SigmapInputError("metabench: full_scores has duplicate model ids")


# ---------------------------------------------------------------------------
# stage 1: common test split


def split_models(full_scores: pd.DataFrame, *, test_frac: float = 0.1, seed: int = 0) -> pd.Series:
    """Common train/test split of models (index) -> "train" / "test".

    Only models with a score in every benchmark column are eligible for the test set;
    the draw is stratified on their grand (row-mean) score (caret::createDataPartition).
    """
    complete = full_scores.dropna()
    if len(complete) < 20:
        raise SigmapInputError(
            f"metabench split: only {len(complete)} models have scores on every benchmark (need >= 20)"
        )
    rng = np.random.default_rng(seed)
    test = stratified_sample(complete.mean(axis=1).to_numpy(), test_frac, rng)
    out = pd.Series("train", index=full_scores.index, name="split")
    out.loc[complete.index[test]] = "test"
    return out


# ---------------------------------------------------------------------------
# stage 2: filtering and cross-validated subsampling


@dataclass
class ItemPool:
    """Output of :func:`build_item_pool` for one benchmark."""

    benchmark: str
    item_stats: pd.DataFrame  # per original item: sd, diff, disc, excluded_by, in_pool
    pool_items: list[str]
    roles: pd.Series  # model -> train / val / test / outlier (models of this benchmark)
    subsample_rmse: float  # minimax validation RMSE of the chosen subset (NaN if no subsampling)


def build_item_pool(
    benchmark: str,
    responses: pd.DataFrame,
    scores: pd.Series,
    split: pd.Series,
    *,
    seed: int = 0,
    config: MetabenchConfig | None = None,
) -> ItemPool:
    """Filter items and subsample to a pool (see module docstring, step 2).

    Parameters
    ----------
    responses : DataFrame (models x items), 0/1.
    scores : Series model -> normalised full score (0-100).
    split : Series model -> "train"/"test" from :func:`split_models` (models absent: train).
    """
    cfg = config or MetabenchConfig()
    x = responses.to_numpy(float)
    models = responses.index
    role = split.reindex(models).fillna("train").astype(str).to_numpy(copy=True)
    rng = np.random.default_rng([seed, _stable_hash(benchmark)])
    train = role == "train"
    total = x.sum(axis=1)
    cut = np.quantile(total[train], cfg.outlier_quantile)
    outlier = train & (total <= cut)
    # "at or below the 0.1 % quantile" (ALGORITHM.md) assumes few ties at the cut; when many
    # models share the minimum (e.g. undertrained models scoring 0 on a cloze task) it would
    # drop far more than the intended fraction, so ties at the cut are then kept.
    if outlier.sum() > max(2.0 * cfg.outlier_quantile * train.sum(), 1.0):
        outlier = train & (total < cut)
    role[outlier] = "outlier"
    train = role == "train"
    stats = item_statistics(x[train], cfg.guess_factor)
    stats.index = pd.Index([str(c) for c in responses.columns], name="item")
    pmin = cfg.pbis_min_by_benchmark.get(benchmark, cfg.pbis_min)
    excluded = np.full(len(stats), "", dtype=object)
    excluded[(excluded == "") & (stats["sd"].to_numpy() <= cfg.sd_min)] = "sd"
    excluded[(excluded == "") & (stats["diff"].to_numpy() > cfg.easy_max)] = "too_easy"
    excluded[(excluded == "") & (np.abs(stats["disc"].to_numpy()) < pmin)] = "low_point_biserial"
    stats["excluded_by"] = excluded
    kept = np.where(excluded == "")[0]
    if len(kept) < cfg.min_items:
        raise SigmapInputError(
            f"{benchmark}: only {len(kept)} items survive filtering (need >= {cfg.min_items})"
        )
    # validation models: stratified on the score among training models
    y = scores.reindex(models).to_numpy(float)
    tr_idx = np.where(train)[0]
    val = stratified_sample(y[tr_idx], cfg.val_frac, rng)
    role[tr_idx[val]] = "val"
    fit_rows = np.isin(role, ["train", "val"])
    sub_rmse = float("nan")
    if len(kept) > cfg.pool_size:
        pool_cols, sub_rmse = _subsample(x[fit_rows][:, kept], y[fit_rows], cfg, rng)
        pool = kept[pool_cols]
    else:
        pool = kept
    pool = np.sort(pool)
    stats["in_pool"] = False
    stats.iloc[pool, stats.columns.get_loc("in_pool")] = True
    return ItemPool(
        benchmark=benchmark,
        item_stats=stats,
        pool_items=[stats.index[j] for j in pool],
        roles=pd.Series(role, index=models, name="role"),
        subsample_rmse=sub_rmse,
    )


def _stable_hash(text: str) -> int:
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (2**31)


def _subsample(
    x: np.ndarray, y: np.ndarray, cfg: MetabenchConfig, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """Minimax cross-validated random subset of ``cfg.pool_size`` columns of ``x``."""
    _n, m = x.shape
    folds = stratified_folds(y, cfg.n_folds, rng)
    best, best_cols = np.inf, None
    batch = 50
    xf = x.astype(np.float32)
    for start in range(0, cfg.n_subsets, batch):
        nb = min(batch, cfg.n_subsets - start)
        cols = np.stack([rng.choice(m, cfg.pool_size, replace=False) for _ in range(nb)])
        ind = np.zeros((m, nb), np.float32)
        ind[cols.T, np.arange(nb)] = 1.0
        means = (xf @ ind) / cfg.pool_size  # (n, nb)
        for b in range(nb):
            s = means[:, b]
            worst = 0.0
            for f in range(cfg.n_folds):
                te = folds == f
                sp = fit_pspline(s[~te], y[~te])
                worst = max(worst, rmse(sp.predict(s[te]), y[te]))
                if worst >= best:
                    break
            if worst < best:
                best, best_cols = worst, cols[b]
    return np.asarray(best_cols), float(best)


# ---------------------------------------------------------------------------
# stage 3: IRT on the pool


@dataclass
class PoolIrt:
    """Output of :func:`fit_pool_irt`: per IRT model the pool parameters, θ, and CV RMSE."""

    benchmark: str
    params: dict[str, pd.DataFrame]  # model -> item params of the pool fit
    thetas: dict[str, pd.DataFrame]  # "2PL/MAP" -> DataFrame(theta, se) for train+val models
    cv: pd.DataFrame  # columns irt_model, theta_method, val_rmse, log_likelihood, converged


def fit_pool_irt(
    benchmark: str,
    responses: pd.DataFrame,
    scores: pd.Series,
    pool: ItemPool,
    *,
    config: MetabenchConfig | None = None,
) -> PoolIrt:
    """Fit every configured IRT model to the pool (train + validation models) and rank
    (model, θ-method) pairs by validation RMSE of ``score ~ s(θ)`` fitted on train."""
    cfg = config or MetabenchConfig()
    roles = pool.roles.reindex(responses.index)
    rows = roles.isin(["train", "val"]).to_numpy()
    x = responses.loc[rows, pool.pool_items]
    x.columns = [str(c) for c in x.columns]
    y = scores.reindex(x.index).to_numpy(float)
    is_val = (roles[rows] == "val").to_numpy()
    params, thetas, rec = {}, {}, []
    for model in cfg.irt_models:
        fit = fit_irt(x, model, max_iter=cfg.max_iter_pool, tol=cfg.tol, benchmark=benchmark)
        params[model] = fit.params
        for method in cfg.theta_methods:
            th = estimate_theta(fit.params, x, method, benchmark=benchmark)
            thetas[f"{model}/{method}"] = th
            t = th["theta"].to_numpy()
            gam = fit_gam(t[~is_val], y[~is_val], df=cfg.gam_df, what=f"{benchmark} pool GAM")
            rec.append(
                {
                    "irt_model": model,
                    "theta_method": method,
                    "val_rmse": rmse(gam.predict(t[is_val]), y[is_val]),
                    "log_likelihood": fit.log_likelihood,
                    "converged": fit.converged,
                    "n_iterations": fit.n_iterations,
                }
            )
    cv = pd.DataFrame(rec).sort_values("val_rmse", kind="stable").reset_index(drop=True)
    return PoolIrt(benchmark=benchmark, params=params, thetas=thetas, cv=cv)


# ---------------------------------------------------------------------------
# stage 4: information filtering + refit + reconstruction


@dataclass
class BenchmarkFit:
    """Final per-benchmark result of :func:`select_items`."""

    benchmark: str
    irt_model: str
    theta_method: str
    grid_type: int
    threshold: float
    lam: float
    selected: list[str]
    params: pd.DataFrame  # refit parameters of the selected items (selection order)
    pool_params: pd.DataFrame  # pool-fit parameters of the selected items
    thetas: pd.DataFrame  # per model: role, theta, se, score, score_pred
    gam: GamModel
    val_rmse: float
    test_rmse: float
    # mean test RMSE of random same-size subsets of ALL items, reconstructed from the same
    # non-θ summaries as ``score_model`` (percent correct [+ linear predictor])
    random_test_rmse: float
    n_pool: int
    search: pd.DataFrame
    info_grid: np.ndarray  # θ grid used for the selection
    item_stats: pd.DataFrame | None = None
    score_model: ScoreModel | None = None  # the reconstruction (None: θ-only ``gam``)
    test_rmse_theta: float = float("nan")  # test RMSE of the θ-only GAM ``gam``
    # random same-size subsets reconstructed from their percent correct only (metabench's
    # baseline; ``random_test_rmse`` uses the same non-θ summaries as ``score_model``)
    random_test_rmse_percent: float = float("nan")

    @property
    def covariates(self) -> str:
        return self.score_model.covariates if self.score_model is not None else "theta"

    def predict_scores(self, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Reconstructed full scores from θ ``(n,)`` and the answers to ``selected`` ``(n, p)``."""
        if self.score_model is None:
            return self.gam.predict(theta)
        return self.score_model.predict(theta, x)


def select_items(
    benchmark: str,
    responses: pd.DataFrame,
    scores: pd.Series,
    pool: ItemPool,
    pool_irt: PoolIrt,
    *,
    seed: int = 0,
    config: MetabenchConfig | None = None,
) -> BenchmarkFit:
    """Hyperparameter search over information-filtered selections, final refit, test RMSE."""
    cfg = config or MetabenchConfig()
    lam = cfg.lam_by_benchmark.get(benchmark, cfg.lam)
    roles = pool.roles.reindex(responses.index).to_numpy()
    y_all = scores.reindex(responses.index).to_numpy(float)
    tr, va, te = roles == "train", roles == "val", roles == "test"
    if va.sum() < 5 or te.sum() < 5:
        raise SigmapInputError(
            f"{benchmark}: need >= 5 validation and test models (got {va.sum()}, {te.sum()})"
        )
    xpool = responses[pool.pool_items]
    xpool.columns = [str(c) for c in xpool.columns]
    fit_index = responses.index[tr | va]
    pairs = pool_irt.cv.head(cfg.top_k)[["irt_model", "theta_method"]].itertuples(index=False)
    records: list[dict] = []
    seen: dict[tuple, dict] = {}
    grids: dict[tuple, np.ndarray] = {}
    # The refit depends on (IRT model, items) only, not on the θ method: pairs such as
    # 2PL/MAP and 2PL/EAPsum often select the same items, so each refit is done once.
    irt_cache: dict[tuple, IrtFit] = {}
    for model, method in pairs:
        params = pool_irt.params[model]
        th = pool_irt.thetas[f"{model}/{method}"].reindex(fit_index)["theta"].to_numpy()
        for grid_type in cfg.grid_types:
            grid = np.sort(th) if grid_type == 1 else np.linspace(th.min(), th.max(), cfg.n_quant)
            grids[(model, method, grid_type)] = grid
            info = item_information(params, grid)
            peaks = info.max(axis=0)
            taus = np.unique(np.quantile(peaks, np.linspace(0.0, 0.8, cfg.n_tau)))
            for tau in taus:
                sel = information_filter(info, grid, float(tau), cfg.n_quant)
                rec = {
                    "irt_model": model,
                    "theta_method": method,
                    "grid_type": grid_type,
                    "threshold": float(tau),
                    "n_items": len(sel),
                }
                key = (model, method, tuple(sel))
                if len(sel) < cfg.min_items:
                    rec.update(val_rmse=9999.0, objective=9999.0)
                elif key in seen:
                    rec.update(val_rmse=seen[key]["val_rmse"], objective=seen[key]["objective"])
                else:
                    items = [xpool.columns[j] for j in sel]
                    v = _evaluate_selection(
                        benchmark,
                        xpool[items],
                        y_all,
                        tr,
                        va,
                        model,
                        method,
                        cfg,
                        cfg.max_iter_search,
                        irt_cache=irt_cache,
                    )
                    rec.update(val_rmse=v["val_rmse"], objective=v["val_rmse"] + lam * len(sel))
                    seen[key] = rec
                rec["selected"] = [xpool.columns[j] for j in sel]
                records.append(rec)
    search = pd.DataFrame(records)
    best = search.sort_values(["objective", "n_items"], kind="stable").iloc[0]
    if best["objective"] >= 9999.0:
        raise SigmapInputError(f"{benchmark}: no configuration selected >= {cfg.min_items} items")
    items = list(best["selected"])
    final = _evaluate_selection(
        benchmark,
        xpool[items],
        y_all,
        tr,
        va,
        best["irt_model"],
        best["theta_method"],
        cfg,
        cfg.max_iter_final,
        full=True,
        irt_cache=irt_cache,
    )
    thetas = final["thetas"]
    thetas.insert(0, "role", roles)
    thetas["score"] = y_all
    t_all = thetas["theta"].to_numpy()
    x_sel = responses[items].to_numpy(float)
    score_model = fit_score_model(
        t_all[tr],
        x_sel[tr],
        y_all[tr],
        covariate_sets=cfg.score_covariates,
        df=cfg.gam_df,
        n_folds=cfg.n_folds,
        seed=seed,
        what=f"{benchmark} score model",
    )
    feats = score_model.features(t_all, x_sel)
    feats[tr] = score_model.gam.x_train  # training rows: the leave-one-out linear predictor
    for j, name in enumerate(score_model.covariate_names):
        if name != "theta":
            thetas[name] = feats[:, j]
    thetas["score_pred"] = score_model.gam.predict(feats)
    thetas["score_pred_theta"] = final["gam"].predict(t_all)
    # random same-size subsets: with the same non-θ summaries as the chosen reconstruction,
    # and with percent correct only (metabench's baseline); one fit when they coincide
    non_theta = "+".join(c for c in score_model.covariate_names if c != "theta") or "percent"
    x_np = responses.to_numpy(np.float32)
    rnd = {
        covs: random_subset_rmse(
            x_np,
            y_all,
            tr,
            te,
            len(items),
            n_rep=cfg.n_random_baseline,
            seed=seed,
            df=cfg.gam_df,
            covariates=covs,
        )
        for covs in dict.fromkeys([non_theta, "percent"])
    }
    return BenchmarkFit(
        benchmark=benchmark,
        irt_model=str(best["irt_model"]),
        theta_method=str(best["theta_method"]),
        grid_type=int(best["grid_type"]),
        threshold=float(best["threshold"]),
        lam=float(lam),
        selected=items,
        params=final["params"],
        pool_params=pool_irt.params[best["irt_model"]].loc[items],
        thetas=thetas,
        gam=final["gam"],
        val_rmse=float(final["val_rmse"]),
        test_rmse=rmse(thetas["score_pred"][te], y_all[te]),
        random_test_rmse=rnd[non_theta],
        n_pool=len(pool.pool_items),
        search=search.assign(selected=search["selected"].map(len)).rename(
            columns={"selected": "n_selected"}
        ),
        info_grid=grids[(best["irt_model"], best["theta_method"], int(best["grid_type"]))],
        item_stats=pool.item_stats,
        score_model=score_model,
        test_rmse_theta=rmse(thetas["score_pred_theta"][te], y_all[te]),
        random_test_rmse_percent=rnd["percent"],
    )


def _evaluate_selection(
    benchmark: str,
    x: pd.DataFrame,
    y: np.ndarray,
    tr: np.ndarray,
    va: np.ndarray,
    model: str,
    method: str,
    cfg: MetabenchConfig,
    max_iter: int,
    full: bool = False,
    irt_cache: dict[tuple, IrtFit] | None = None,
) -> dict:
    """Refit ``model`` on the selected items (train models), θ by ``method``, GAM on train.

    ``irt_cache`` maps ``(model, items)`` to an earlier refit on the same train rows. It is
    reused when it was run with the same cycle limit, or with a smaller one under which
    every EM run converged (mirt's EM uses the limit only as a bound, so the result is
    identical to a run with the larger limit).
    """
    key = (model, tuple(x.columns))
    fit = irt_cache.get(key) if irt_cache is not None else None
    if fit is not None and not _fit_reusable(fit, max_iter, cfg.tol):
        fit = None
    if fit is None:
        fit = fit_irt(x[tr], model, max_iter=max_iter, tol=cfg.tol, benchmark=benchmark)
        if irt_cache is not None:
            irt_cache[key] = fit
    th = estimate_theta(fit.params, x if full else x[tr | va], method, benchmark=benchmark)
    t = th["theta"].to_numpy()
    if full:
        t_tr, t_va = t[tr], t[va]
    else:
        sub_tr = tr[tr | va]
        t_tr, t_va = t[sub_tr], t[~sub_tr]
    gam = fit_gam(t_tr, y[tr], df=cfg.gam_df, what=f"{benchmark} GAM")
    out = {"val_rmse": rmse(gam.predict(t_va), y[va]), "gam": gam, "params": fit.params}
    if full:
        out["thetas"] = th
    return out


def _fit_reusable(fit: IrtFit, max_iter: int, tol: float) -> bool:
    """Whether ``fit`` equals what ``fit_irt(..., max_iter=max_iter, tol=tol)`` returns."""
    ex = fit.extra
    if not ex or ex.get("tol") != tol or "stages" not in ex:
        return False
    if ex["max_iter"] == max_iter:
        return True
    return ex["max_iter"] < max_iter and all(
        st["converged"] and st["n_iterations"] < ex["max_iter"] for st in ex["stages"]
    )


def random_subset_rmse(
    x: np.ndarray,
    y: np.ndarray,
    tr: np.ndarray,
    te: np.ndarray,
    n_items: int,
    *,
    n_rep: int = 5,
    seed: int = 0,
    df: int = 8,
    covariates: str = "percent",
) -> float:
    """Mean test RMSE of a reconstruction from a random ``n_items`` subset (fitted on train).

    ``covariates``: the subset's summaries the GAM uses — ``"percent"`` (percent correct,
    metabench's random baseline) or ``"percent+linear"`` (also the ridge linear predictor),
    so a selection reconstructed with those summaries is compared like with like.
    """
    rng = np.random.default_rng([seed, n_items])
    out = []
    for _ in range(max(n_rep, 1)):
        cols = rng.choice(x.shape[1], size=min(n_items, x.shape[1]), replace=False)
        xs = np.asarray(x[:, cols], float)
        m = fit_score_model(
            None,
            xs[tr],
            y[tr],
            covariate_sets=(covariates,),
            df=df,
            seed=seed,
            what="random baseline",
        )
        out.append(rmse(m.predict(None, xs[te]), y[te]))
    return float(np.mean(out))


# ---------------------------------------------------------------------------
# joint metabench


@dataclass
class JointFit:
    """Joint reconstruction and factor analysis over all benchmarks."""

    benchmarks: list[str]
    grand_gam: GamModel
    bench_gams: dict[str, GamModel]
    rmse_table: pd.DataFrame  # rows: benchmarks + "grand"; cols: test_rmse_joint, test_rmse_single
    grand_test_rmse: float
    factor_loadings: pd.Series
    factor_spearman: float
    factor_scores: pd.Series
    thetas: pd.DataFrame  # models in all benchmarks: role + theta_<bm>


def fit_joint(
    bench_fits: dict[str, BenchmarkFit],
    full_scores: pd.DataFrame,
    split: pd.Series,
    *,
    config: MetabenchConfig | None = None,
) -> JointFit:
    """Union of selections; grand and per-benchmark scores from all θ; one-factor analysis."""
    from scipy.stats import spearmanr
    from statsmodels.multivariate.factor import Factor

    cfg = config or MetabenchConfig()
    bms = list(bench_fits)
    th = pd.concat({bm: f.thetas["theta"] for bm, f in bench_fits.items()}, axis=1).dropna()
    th.columns = [f"theta_{bm}" for bm in bms]
    role = split.reindex(th.index).fillna("train")
    # a model is "test" only if it is a common test model; rows with any outlier role are dropped
    bad = np.zeros(len(th), bool)
    for f in bench_fits.values():
        bad |= (f.thetas["role"].reindex(th.index) == "outlier").to_numpy()
    th = th[~bad]
    role = role[~bad]
    tr = (role != "test").to_numpy()
    te = ~tr
    if tr.sum() < 50 or te.sum() < 5:
        raise SigmapInputError(
            f"metabench joint: need >= 50 training and 5 test models with all benchmarks (got {tr.sum()}, {te.sum()})"
        )
    scores = full_scores.reindex(th.index)[bms]
    grand = scores.mean(axis=1).to_numpy()
    xth = th.to_numpy()
    grand_gam = fit_gam(xth[tr], grand[tr], df=cfg.gam_df, what="grand-score GAM")
    rows = {
        "grand": {
            "test_rmse_joint": rmse(grand_gam.predict(xth[te]), grand[te]),
            "test_rmse_single": np.nan,
        }
    }
    gams = {}
    for bm in bms:
        yb = scores[bm].to_numpy()
        gams[bm] = fit_gam(xth[tr], yb[tr], df=cfg.gam_df, what=f"{bm} joint GAM")
        single = bench_fits[bm].thetas["score_pred"].reindex(th.index).to_numpy()[te]
        rows[bm] = {
            "test_rmse_joint": rmse(gams[bm].predict(xth[te]), yb[te]),
            "test_rmse_single": rmse(single, yb[te]),
        }
    table = pd.DataFrame(rows).T
    fa_loadings = pd.Series(np.nan, index=th.columns)
    fscores = pd.Series(np.nan, index=th.index)
    rho = float("nan")
    if len(bms) >= 3:
        z = (xth - xth.mean(0)) / xth.std(0)
        fa = Factor(z, n_factor=1, method="pa").fit()
        load = np.asarray(fa.loadings).reshape(-1)
        sc = np.asarray(fa.factor_scoring(method="regression")).reshape(-1)
        if load.sum() < 0:
            load, sc = -load, -sc
        fa_loadings = pd.Series(load, index=th.columns)
        fscores = pd.Series(sc, index=th.index)
        rho = float(spearmanr(sc, grand).statistic)
    th.insert(0, "role", role.to_numpy())
    return JointFit(
        benchmarks=bms,
        grand_gam=grand_gam,
        bench_gams=gams,
        rmse_table=table,
        grand_test_rmse=float(rows["grand"]["test_rmse_joint"]),
        factor_loadings=fa_loadings,
        factor_spearman=rho,
        factor_scores=fscores,
        thetas=th,
    )


# ---------------------------------------------------------------------------
# whole pipeline


@dataclass
class MetabenchFit:
    """Everything :func:`fit_metabench` produces (savable with :meth:`save` / :meth:`load`)."""

    config: MetabenchConfig
    seed: int
    split: pd.Series
    benchmarks: dict[str, BenchmarkFit]
    joint: JointFit | None

    @property
    def selected(self) -> dict[str, list[str]]:
        return {bm: list(f.selected) for bm, f in self.benchmarks.items()}

    @property
    def test_rmse(self) -> dict[str, float]:
        return {bm: float(f.test_rmse) for bm, f in self.benchmarks.items()}

    @property
    def grand_test_rmse(self) -> float:
        return float(self.joint.grand_test_rmse) if self.joint is not None else float("nan")

    @property
    def n_selected(self) -> int:
        return sum(len(v) for v in self.selected.values())

    def rmse_table(self) -> pd.DataFrame:
        """Per benchmark: items, model, θ method, val/test RMSE, random-subset RMSE (+ joint)."""
        rows = []
        for bm, f in self.benchmarks.items():
            rows.append(
                {
                    "benchmark": bm,
                    "n_items": len(f.selected),
                    "n_pool": f.n_pool,
                    "irt_model": f.irt_model,
                    "theta_method": f.theta_method,
                    "grid_type": f.grid_type,
                    "threshold": f.threshold,
                    "lambda": f.lam,
                    "covariates": f.covariates,
                    "val_rmse": f.val_rmse,
                    "test_rmse": f.test_rmse,
                    "test_rmse_theta": f.test_rmse_theta,
                    "random_test_rmse": f.random_test_rmse,
                    "random_test_rmse_percent": f.random_test_rmse_percent,
                    "test_rmse_joint": float(self.joint.rmse_table.loc[bm, "test_rmse_joint"])
                    if self.joint
                    else np.nan,
                }
            )
        return pd.DataFrame(rows)

    # -- persistence ---------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write to folder ``path`` atomically (temporary sibling folder, then rename)."""
        from sigmap_lib.atomic import atomic_dir

        dest = Path(path)
        with atomic_dir(dest) as tmp:
            meta: dict[str, Any] = {
                "format": "sigmap-metabench-1",
                "config": self.config.to_dict(),
                "seed": self.seed,
                "benchmarks": {},
            }
            self.split.rename("split").to_frame().to_parquet(tmp / "split.parquet")
            for bm, f in self.benchmarks.items():
                meta["benchmarks"][bm] = {
                    "irt_model": f.irt_model,
                    "theta_method": f.theta_method,
                    "grid_type": f.grid_type,
                    "threshold": f.threshold,
                    "lam": f.lam,
                    "selected": f.selected,
                    "val_rmse": f.val_rmse,
                    "test_rmse": f.test_rmse,
                    "random_test_rmse": f.random_test_rmse,
                    "n_pool": f.n_pool,
                    "gam": f.gam.to_dict(),
                    "info_grid": f.info_grid.tolist(),
                    "test_rmse_theta": f.test_rmse_theta,
                    "random_test_rmse_percent": f.random_test_rmse_percent,
                }
                if f.score_model is not None:
                    meta["benchmarks"][bm]["score_model"] = _save_score_model(
                        f.score_model, tmp, bm
                    )
                f.params.to_parquet(tmp / f"{bm}__params.parquet")
                f.pool_params.to_parquet(tmp / f"{bm}__pool_params.parquet")
                f.thetas.to_parquet(tmp / f"{bm}__thetas.parquet")
                f.search.to_parquet(tmp / f"{bm}__search.parquet")
                _gam_frame(f.gam).to_parquet(tmp / f"{bm}__gam.parquet")
                if f.item_stats is not None:
                    f.item_stats.to_parquet(tmp / f"{bm}__item_stats.parquet")
            if self.joint is not None:
                j = self.joint
                meta["joint"] = {
                    "benchmarks": j.benchmarks,
                    "grand_gam": j.grand_gam.to_dict(),
                    "bench_gams": {bm: g.to_dict() for bm, g in j.bench_gams.items()},
                    "grand_test_rmse": j.grand_test_rmse,
                    "factor_spearman": j.factor_spearman,
                    "factor_loadings": j.factor_loadings.to_dict(),
                }
                j.rmse_table.to_parquet(tmp / "joint__rmse.parquet")
                j.thetas.assign(factor_score=j.factor_scores).to_parquet(
                    tmp / "joint__thetas.parquet"
                )
                _gam_frame(j.grand_gam).to_parquet(tmp / "joint__grand_gam.parquet")
                for bm, g in j.bench_gams.items():
                    _gam_frame(g).to_parquet(tmp / f"joint__{bm}__gam.parquet")
            (tmp / "metabench.json").write_text(json.dumps(meta, indent=1, default=float))
        return dest

    @classmethod
    def load(cls, path: str | os.PathLike) -> MetabenchFit:
        """Read a folder written by :meth:`save`."""
        src = Path(path)
        meta_path = src / "metabench.json"
        if not meta_path.exists():
            raise SigmapInputError(f"metabench: {meta_path} not found (not a saved MetabenchFit)")
        meta = json.loads(meta_path.read_text())
        cfg = MetabenchConfig.from_kwargs(**meta["config"])
        split = pd.read_parquet(src / "split.parquet")["split"]
        benches = {}
        for bm, m in meta["benchmarks"].items():
            stats_path = src / f"{bm}__item_stats.parquet"
            benches[bm] = BenchmarkFit(
                benchmark=bm,
                irt_model=m["irt_model"],
                theta_method=m["theta_method"],
                grid_type=int(m["grid_type"]),
                threshold=float(m["threshold"]),
                lam=float(m["lam"]),
                selected=list(m["selected"]),
                params=pd.read_parquet(src / f"{bm}__params.parquet"),
                pool_params=pd.read_parquet(src / f"{bm}__pool_params.parquet"),
                thetas=pd.read_parquet(src / f"{bm}__thetas.parquet"),
                gam=_gam_load(pd.read_parquet(src / f"{bm}__gam.parquet"), m["gam"]),
                val_rmse=float(m["val_rmse"]),
                test_rmse=float(m["test_rmse"]),
                random_test_rmse=float(m["random_test_rmse"]),
                n_pool=int(m["n_pool"]),
                search=pd.read_parquet(src / f"{bm}__search.parquet"),
                info_grid=np.asarray(m["info_grid"], float),
                item_stats=pd.read_parquet(stats_path) if stats_path.exists() else None,
                score_model=_load_score_model(m["score_model"], src, bm)
                if "score_model" in m
                else None,
                test_rmse_theta=float(m.get("test_rmse_theta", "nan")),
                random_test_rmse_percent=float(m.get("random_test_rmse_percent", "nan")),
            )
        joint = None
        if "joint" in meta:
            jm = meta["joint"]
            jt = pd.read_parquet(src / "joint__thetas.parquet")
            joint = JointFit(
                benchmarks=list(jm["benchmarks"]),
                grand_gam=_gam_load(
                    pd.read_parquet(src / "joint__grand_gam.parquet"), jm["grand_gam"]
                ),
                bench_gams={
                    bm: _gam_load(pd.read_parquet(src / f"joint__{bm}__gam.parquet"), g)
                    for bm, g in jm["bench_gams"].items()
                },
                rmse_table=pd.read_parquet(src / "joint__rmse.parquet"),
                grand_test_rmse=float(jm["grand_test_rmse"]),
                factor_loadings=pd.Series(jm["factor_loadings"], dtype=float),
                factor_spearman=float(jm["factor_spearman"]),
                factor_scores=jt.pop("factor_score"),
                thetas=jt,
            )
        return cls(config=cfg, seed=int(meta["seed"]), split=split, benchmarks=benches, joint=joint)


def _gam_frame(g: GamModel) -> pd.DataFrame:
    df = pd.DataFrame(g.x_train, columns=[f"x{i}" for i in range(g.n_features)])
    df["y"] = g.y_train
    return df


def _gam_load(df: pd.DataFrame, meta: dict) -> GamModel:
    return GamModel.from_arrays(df.drop(columns="y").to_numpy(float), df["y"].to_numpy(float), meta)


def _save_score_model(m: ScoreModel, folder: Path, bm: str) -> dict:
    _gam_frame(m.gam).to_parquet(folder / f"{bm}__score_gam.parquet")
    meta: dict[str, Any] = {
        "covariates": m.covariates,
        "cv_rmse": m.cv_rmse,
        "gam": m.gam.to_dict(),
    }
    if m.linear is not None:
        pd.DataFrame({"coef": m.linear.coef, "item_mean": m.linear.item_means}).to_parquet(
            folder / f"{bm}__linear.parquet"
        )
        meta["linear"] = {"intercept": m.linear.intercept, "alpha": m.linear.alpha}
    return meta


def _load_score_model(meta: dict, folder: Path, bm: str) -> ScoreModel:
    linear = None
    if "linear" in meta:
        lf = pd.read_parquet(folder / f"{bm}__linear.parquet")
        linear = LinearPredictor(
            coef=lf["coef"].to_numpy(float),
            intercept=float(meta["linear"]["intercept"]),
            alpha=float(meta["linear"]["alpha"]),
            item_means=lf["item_mean"].to_numpy(float),
        )
    return ScoreModel(
        covariates=str(meta["covariates"]),
        gam=_gam_load(pd.read_parquet(folder / f"{bm}__score_gam.parquet"), meta["gam"]),
        linear=linear,
        cv_rmse={str(k): float(v) for k, v in meta.get("cv_rmse", {}).items()},
    )


def fit_metabench(
    responses: dict[str, pd.DataFrame],
    full_scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_jobs: int = 1,
    **config: Any,
) -> MetabenchFit:
    """Run the whole metabench pipeline.

    Parameters
    ----------
    responses : dict benchmark -> DataFrame (models x items) of 0/1, index = model ids,
        columns = item ids.
    full_scores : DataFrame (models x benchmarks) of normalised full scores (0-100).
    seed : seed of the test split, validation split, subsampling and baselines.
    n_jobs : benchmarks fitted in parallel worker processes (see :func:`fit_benchmarks`).
    **config : any :class:`MetabenchConfig` field.

    Returns
    -------
    MetabenchFit with ``.selected``, ``.test_rmse``, ``.benchmarks`` (per-benchmark
    :class:`BenchmarkFit`), ``.joint`` (:class:`JointFit`, when >= 2 benchmarks), ``.split``.
    """
    cfg = MetabenchConfig.from_kwargs(**config)
    _check_inputs(responses, full_scores)
    scores = full_scores[list(responses)]
    split = split_models(scores, test_frac=cfg.test_frac, seed=seed)
    fits, _ = fit_benchmarks(responses, scores, split, seed=seed, config=cfg, n_jobs=n_jobs)
    joint = fit_joint(fits, scores, split, config=cfg) if len(fits) >= 2 else None
    return MetabenchFit(config=cfg, seed=seed, split=split, benchmarks=fits, joint=joint)


def _timed_fit_benchmark(*args: Any, **kwargs: Any) -> tuple[BenchmarkFit, float]:
    import time

    t0 = time.perf_counter()
    fit = fit_benchmark(*args, **kwargs)
    return fit, time.perf_counter() - t0


def fit_benchmarks(
    responses: dict[str, pd.DataFrame],
    scores: pd.DataFrame,
    split: pd.Series,
    *,
    seed: int = 0,
    config: MetabenchConfig | None = None,
    n_jobs: int = 1,
    on_done: Any = None,
) -> tuple[dict[str, BenchmarkFit], dict[str, float]]:
    """:func:`fit_benchmark` for every benchmark, optionally in parallel processes.

    Each benchmark's fit depends only on its own data and seeds, so the results do not
    depend on ``n_jobs`` (up to floating-point summation order inside mirt's threaded EM).
    With ``n_jobs > 1`` the benchmarks (largest first) go to ``n_jobs`` spawned worker
    processes whose mirt (rayon) and BLAS pools get ``max(1, cpu_count // n_jobs)``
    threads each, so the cores are shared instead of oversubscribed.

    Returns the fits (in ``responses`` order) and each benchmark's wall seconds;
    ``on_done(benchmark, fit, seconds)`` is called as each finishes.
    """
    cfg = config or MetabenchConfig()
    if n_jobs < 1:
        raise SigmapInputError(f"metabench: n_jobs must be >= 1, got {n_jobs}")
    fits: dict[str, BenchmarkFit] = {}
    wall: dict[str, float] = {}

    def args(bm: str) -> tuple:
        return (bm, responses[bm], scores[bm], split)

    if n_jobs == 1 or len(responses) == 1:
        for bm in responses:
            fits[bm], wall[bm] = _timed_fit_benchmark(*args(bm), seed=seed, config=cfg)
            if on_done is not None:
                on_done(bm, fits[bm], wall[bm])
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = str(max(1, (os.cpu_count() or 1) // n_jobs))
        env = {k: threads for k in ("RAYON_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
        saved = {k: os.environ.get(k) for k in env}
        order = sorted(responses, key=lambda b: -responses[b].size)
        os.environ.update(env)  # inherited by the workers, spawned during the submits
        try:
            ex = ProcessPoolExecutor(n_jobs, mp_context=mp.get_context("spawn"))
            futs = {
                ex.submit(_timed_fit_benchmark, *args(bm), seed=seed, config=cfg): bm
                for bm in order
            }
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        with ex:
            for fut in as_completed(futs):
                bm = futs[fut]
                fits[bm], wall[bm] = fut.result()
                if on_done is not None:
                    on_done(bm, fits[bm], wall[bm])
    return {bm: fits[bm] for bm in responses}, {bm: wall[bm] for bm in responses}


def fit_benchmark(
    benchmark: str,
    responses: pd.DataFrame,
    scores: pd.Series,
    split: pd.Series,
    *,
    seed: int = 0,
    config: MetabenchConfig | None = None,
) -> BenchmarkFit:
    """Stages 2-4 for one benchmark (filter + pool -> IRT -> select/reconstruct)."""
    cfg = config or MetabenchConfig()
    responses = responses.copy()
    responses.columns = [str(c) for c in responses.columns]
    pool = build_item_pool(benchmark, responses, scores, split, seed=seed, config=cfg)
    pirt = fit_pool_irt(benchmark, responses, scores, pool, config=cfg)
    return select_items(benchmark, responses, scores, pool, pirt, seed=seed, config=cfg)


# ---------------------------------------------------------------------------
# using a fit


def score_new_models(
    fit: MetabenchFit, responses: dict[str, pd.DataFrame]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """θ and reconstructed scores for models that answered the selected items.

    Parameters
    ----------
    fit : MetabenchFit
    responses : dict benchmark -> DataFrame (models x items) containing at least the
        benchmark's selected items (extra columns are ignored).

    Returns
    -------
    thetas : DataFrame (models x benchmarks)
    scores : DataFrame (models x benchmarks [+ "grand"]): per benchmark the fit's
        reconstruction (``BenchmarkFit.predict_scores``: the GAM on θ and, when chosen, the
        percent correct and linear predictor of the selected items); "grand" (only when
        every benchmark is given) from the joint GAM on all θ.
    """
    if not responses:
        raise SigmapInputError("score_new_models: no responses given")
    th, sc = {}, {}
    for bm, df in responses.items():
        if bm not in fit.benchmarks:
            raise SigmapInputError(
                f"score_new_models: benchmark {bm!r} is not in the fit (have {sorted(fit.benchmarks)})"
            )
        f = fit.benchmarks[bm]
        d = df.copy()
        d.columns = [str(c) for c in d.columns]
        missing = [c for c in f.selected if c not in d.columns]
        if missing:
            raise SigmapInputError(
                f"score_new_models: {bm}: responses lack {len(missing)} selected item(s), "
                f"e.g. {missing[:3]}"
            )
        est = estimate_theta(f.params, d, f.theta_method, benchmark=bm)
        th[bm] = est["theta"]
        x_sel = d.loc[est.index, f.selected].to_numpy(float)
        sc[bm] = pd.Series(f.predict_scores(est["theta"].to_numpy(), x_sel), index=est.index)
    thetas = pd.DataFrame(th)
    scores = pd.DataFrame(sc)
    j = fit.joint
    if j is not None and set(j.benchmarks) <= set(thetas.columns):
        complete = thetas[j.benchmarks].dropna()
        scores["grand"] = pd.Series(j.grand_gam.predict(complete.to_numpy()), index=complete.index)
    return thetas, scores


def export_items(
    fit: MetabenchFit, questions: dict[str, pd.DataFrame], out_dir: str | os.PathLike
) -> dict[str, Path]:
    """Write the selected items as parquet + JSONL (one file per benchmark) for an
    lm-evaluation-harness task (``dataset_path: json``, ``data_files``).

    ``questions[bm]`` has a column ``item_id`` plus any item fields (text, choices,
    answer, ...). Rows keep the selection order and gain ``benchmark``,
    ``selection_order`` and the IRT parameters ``a1, d, g, u, b``.
    Returns benchmark -> JSONL path (the parquet sits beside it).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for bm, f in fit.benchmarks.items():
        if bm not in questions:
            raise SigmapInputError(f"export_items: no questions given for benchmark {bm!r}")
        q = questions[bm].copy()
        if "item_id" not in q.columns:
            raise SigmapInputError(f"export_items: questions[{bm!r}] needs an 'item_id' column")
        q["item_id"] = q["item_id"].astype(str)
        missing = sorted(set(f.selected) - set(q["item_id"]))
        if missing:
            raise SigmapInputError(
                f"export_items: {bm}: {len(missing)} selected items have no question text, e.g. {missing[:5]}"
            )
        rows = q.set_index("item_id").loc[f.selected].reset_index()
        rows.insert(0, "benchmark", bm)
        rows.insert(2, "selection_order", np.arange(1, len(rows) + 1))
        par = f.params.loc[f.selected].reset_index(drop=True)
        for c in ["a1", "d", "g", "u", "b"]:
            rows[f"irt_{c}"] = par[c].to_numpy()
        pq = out / f"metabench_{bm}.parquet"
        jl = out / f"metabench_{bm}.jsonl"
        for target, writer in (
            (pq, lambda p, rows=rows: rows.to_parquet(p, index=False)),
            (
                jl,
                lambda p, rows=rows: rows.to_json(
                    p, orient="records", lines=True, force_ascii=False
                ),
            ),
        ):
            fd, tmpname = tempfile.mkstemp(prefix=f".{target.name}.", dir=out)
            os.close(fd)
            try:
                writer(tmpname)
                os.replace(tmpname, target)
            except BaseException:
                Path(tmpname).unlink(missing_ok=True)
                raise
        paths[bm] = jl
    return paths


# ---------------------------------------------------------------------------
# plots


def plot_reconstruction(fit: MetabenchFit, path: str | os.PathLike) -> Path:
    """Scatter of reconstructed vs true score for the test models, one panel per benchmark (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bms = list(fit.benchmarks)
    ncol = min(3, len(bms))
    nrow = int(np.ceil(len(bms) / ncol))
    figure, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 4 * nrow), squeeze=False)
    for ax, bm in zip(axes.ravel(), bms, strict=False):
        t = fit.benchmarks[bm].thetas
        t = t[t["role"] == "test"]
        ax.scatter(t["score"], t["score_pred"], s=6, alpha=0.6)
        lo, hi = (
            float(t[["score", "score_pred"]].min().min()),
            float(t[["score", "score_pred"]].max().max()),
        )
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_title(
            f"{bm}: {len(fit.benchmarks[bm].selected)} items, RMSE {fit.benchmarks[bm].test_rmse:.2f}"
        )
        ax.set_xlabel("true score")
        ax.set_ylabel("reconstructed")
    for ax in axes.ravel()[len(bms) :]:
        ax.axis("off")
    figure.tight_layout()
    return _save_fig(figure, path)


def plot_test_information(fit: MetabenchFit, path: str | os.PathLike) -> Path:
    """Test information curves (sum of selected items' information) per benchmark (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(-4, 4, 201)
    figure, ax = plt.subplots(figsize=(6, 4))
    for bm, f in fit.benchmarks.items():
        ax.plot(grid, item_information(f.params, grid).sum(axis=1), label=f"{bm} ({f.irt_model})")
    ax.set_xlabel("θ")
    ax.set_ylabel("test information")
    ax.legend(fontsize=8)
    figure.tight_layout()
    return _save_fig(figure, path)


def _save_fig(figure: Any, path: str | os.PathLike) -> Path:
    import matplotlib.pyplot as plt

    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp.png")
    figure.savefig(tmp, dpi=110)
    plt.close(figure)
    os.replace(tmp, dest)
    return dest


# ---------------------------------------------------------------------------
# simulation


def simulate_benchmarks(
    n_models: int,
    sizes: dict[str, int],
    *,
    seed: int = 0,
    item_params: pd.DataFrame | None = None,
    abilities: np.ndarray | None = None,
    general: float = 0.8,
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, dict[str, Any]]:
    """A simulated world: 0/1 responses per benchmark and normalised full scores.

    Parameters
    ----------
    n_models : number of models.
    sizes : benchmark -> number of items.
    item_params : optional table (``a1, d, g, u``) whose rows are resampled for every
        benchmark (the empirical distribution of real items); default: 3PL items with
        a1 ~ logN(0.3, 0.4), d ~ N(0, 1.5), g ~ Beta(2, 18).
    abilities : optional ``(n_pool, n_benchmarks)`` real θ rows to resample (keeps their
        correlation); default: θ_b = general·G + sqrt(1 - general²)·E_b, standard normal.

    Returns
    -------
    responses, full_scores, truth (``{"theta": DataFrame, "params": {bm: DataFrame}}``).
    """
    from sigmap_lib.irt import simulate_responses

    rng = np.random.default_rng(seed)
    bms = list(sizes)
    if abilities is not None:
        ab = np.asarray(abilities, float)
        if ab.ndim != 2 or ab.shape[1] < len(bms):
            raise SigmapInputError(
                f"simulate_benchmarks: abilities need >= {len(bms)} columns, got shape {ab.shape}"
            )
        theta = ab[rng.integers(0, len(ab), n_models)][:, : len(bms)]
        theta = (theta - theta.mean(0)) / theta.std(0)
    else:
        gfac = rng.normal(size=(n_models, 1))
        theta = general * gfac + np.sqrt(1 - general**2) * rng.normal(size=(n_models, len(bms)))
    models = pd.Index([f"model_{i:05d}" for i in range(n_models)], name="model")
    responses, scores, truth_params = {}, {}, {}
    for b, bm in enumerate(bms):
        m = int(sizes[bm])
        if item_params is not None:
            src = item_params[["a1", "d", "g", "u"]].to_numpy(float)
            par = src[rng.integers(0, len(src), m)]
            par[:, 0] *= np.exp(rng.normal(0, 0.1, m))
            par[:, 1] += rng.normal(0, 0.2, m)
            p = pd.DataFrame(par, columns=["a1", "d", "g", "u"])
        else:
            p = pd.DataFrame(
                {
                    "a1": rng.lognormal(0.3, 0.4, m),
                    "d": rng.normal(0, 1.5, m),
                    "g": rng.beta(2, 18, m),
                    "u": np.ones(m),
                }
            )
        p.index = pd.Index([f"{bm}.{j}" for j in range(m)], name="item")
        x = simulate_responses(p, theta[:, b], rng)
        responses[bm] = pd.DataFrame(x, index=models, columns=p.index)
        scores[bm] = 100.0 * x.mean(axis=1)
        truth_params[bm] = p
    truth = {"theta": pd.DataFrame(theta, index=models, columns=bms), "params": truth_params}
    return responses, pd.DataFrame(scores, index=models), truth

"""Item pools: item filtering and the cross-validated subsample to a pool per benchmark, and its IRT fit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import estimate_theta, fit_gam, fit_irt, fit_pspline
from sigmap_lib.metabench._common import (
    item_statistics,
    rmse,
    stable_hash,
    stratified_folds,
    stratified_sample,
)
from sigmap_lib.metabench._config import MetabenchConfig

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

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     MetabenchConfig, build_item_pool, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> split = split_models(scores)
    >>> config = MetabenchConfig(pool_size=20, n_subsets=20)  # pool of 20 of the 30 items
    >>> pool = build_item_pool("arc", responses["arc"], scores["arc"], split, config=config)
    >>> len(pool.pool_items), pool.roles.value_counts().to_dict()
    (20, {'train': 159, 'test': 21, 'val': 19, 'outlier': 1})
    >>> pool.item_stats.round(2).head(3)  # excluded_by is "" for items that pass the filters
             sd  diff  disc excluded_by  in_pool
    item
    arc.0  0.36  0.11  0.33                 True
    arc.1  0.50  0.39  0.34                False
    arc.2  0.34  0.65  0.37                 True
    """
    cfg = config or MetabenchConfig()
    x = responses.to_numpy(float)
    models = responses.index
    role = split.reindex(models).fillna("train").astype(str).to_numpy(copy=True)
    rng = np.random.default_rng([seed, stable_hash(benchmark)])
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
    (model, θ-method) pairs by validation RMSE of ``score ~ s(θ)`` fitted on train.

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     MetabenchConfig, build_item_pool, fit_pool_irt, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> split = split_models(scores)
    >>> config = MetabenchConfig(pool_size=20, n_subsets=20, irt_models=("2PL",), gam_df=5)
    >>> pool = build_item_pool("arc", responses["arc"], scores["arc"], split, config=config)
    >>> pirt = fit_pool_irt("arc", responses["arc"], scores["arc"], pool, config=config)
    >>> list(pirt.params), list(pirt.thetas)
    (['2PL'], ['2PL/MAP', '2PL/EAPsum'])
    >>> pirt.cv[["irt_model", "theta_method", "val_rmse"]].round(1)  # best pair first
      irt_model theta_method  val_rmse
    0       2PL       EAPsum       4.3
    1       2PL          MAP       4.9
    """
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

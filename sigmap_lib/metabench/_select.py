"""Information-based item selection and its evaluation against random subsets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import (
    GamModel,
    IrtFit,
    ScoreModel,
    estimate_theta,
    fit_gam,
    fit_irt,
    fit_score_model,
    item_information,
)
from sigmap_lib.metabench._common import rmse, type4_quantiles
from sigmap_lib.metabench._config import MetabenchConfig
from sigmap_lib.metabench._pool import ItemPool, PoolIrt


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

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sigmap_lib.irt import item_information
    >>> from sigmap_lib.metabench import information_filter
    >>> params = pd.DataFrame(
    ...     {"a1": [1.5, 1.5, 1.5, 0.5], "d": [1.5, 0.0, -1.5, 0.0]},
    ...     index=["easy", "mid", "hard", "flat"],
    ... )
    >>> grid = np.linspace(-3, 3, 61)
    >>> info = item_information(params, grid)  # (61, 4)
    >>> information_filter(info, grid, threshold=0.3, n_quant=3)  # one item per third of the grid
    [0, 1, 2]
    >>> information_filter(info, grid, threshold=0.0, n_quant=6)  # tau 0: even the flat item
    [0, 1, 2, 3]
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
    """Hyperparameter search over information-filtered selections, final refit, test RMSE.

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, build_item_pool, fit_pool_irt, select_items,
    ...     simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> split = split_models(scores)
    >>> config = MetabenchConfig(**TINY_SETTINGS)  # tiny settings for a fast example
    >>> x, y = responses["arc"], scores["arc"]
    >>> pool = build_item_pool("arc", x, y, split, config=config)
    >>> pool_irt = fit_pool_irt("arc", x, y, pool, config=config)
    >>> fit = select_items("arc", x, y, pool, pool_irt, config=config)
    >>> fit.irt_model, fit.theta_method, len(fit.selected), fit.selected[:3]
    ('2PL', 'EAPsum', 14, ['arc.2', 'arc.19', 'arc.5'])
    >>> round(fit.test_rmse, 1), round(fit.random_test_rmse, 1)  # vs random 14-item subsets
    (5.8, 7.5)
    >>> fit.thetas[["role", "theta", "score", "score_pred"]].round(1).head(3)
                 role  theta  score  score_pred
    model
    model_00000  test   -0.5   50.0        46.7
    model_00001   val   -1.2   30.0        32.0
    model_00002  test    1.1   73.3        79.5
    """
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

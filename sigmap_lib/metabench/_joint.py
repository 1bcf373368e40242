"""The joint metabench: the total score reconstructed from all benchmarks' θ, and one common factor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt._gam import GamModel, fit_gam
from sigmap_lib.metabench._common import rmse
from sigmap_lib.metabench._config import MetabenchConfig
from sigmap_lib.metabench._select import BenchmarkFit

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
    """Union of selections; grand and per-benchmark scores from all θ; one-factor analysis.

    The factor analysis needs at least 3 benchmarks; with fewer, ``factor_loadings``,
    ``factor_scores`` and ``factor_spearman`` are NaN.

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, fit_benchmarks, fit_joint, simulate_benchmarks,
    ...     split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40, "mmlu": 30})
    >>> config = MetabenchConfig(**TINY_SETTINGS)  # tiny settings for a fast example
    >>> split = split_models(scores)
    >>> fits, _ = fit_benchmarks(responses, scores, split, config=config)
    >>> joint = fit_joint(fits, scores, split, config=config)
    >>> joint.rmse_table.round(1)  # test RMSE from all benchmarks' theta vs from their own
           test_rmse_joint  test_rmse_single
    grand              4.4               NaN
    arc                8.2               8.0
    gsm8k              7.9               7.4
    mmlu               5.2               6.4
    >>> joint.factor_loadings.round(2).tolist(), round(joint.factor_spearman, 2)
    ([0.67, 0.73, 0.72], 0.97)
    """
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

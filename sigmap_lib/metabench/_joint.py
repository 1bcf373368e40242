"""The joint metabench: the total score reconstructed from all benchmarks' θ, and one common factor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import GamModel, TrainedOnArrays, TrainingScale, fit_gam, fit_ridge
from sigmap_lib.metabench._common import rmse
from sigmap_lib.metabench._config import MetabenchConfig
from sigmap_lib.metabench._select import BenchmarkFit

# ---------------------------------------------------------------------------
# the joint model's guard: an additive GAM on k θs when the design is well-posed, else ridge


def gam_n_params(n_features: int, df: int) -> int:
    """Coefficients of the additive GAM ``y ~ s(x_1) + ... + s(x_k)`` of :func:`fit_gam`:
    an intercept and ``df - 1`` B-spline columns per smooth (statsmodels ``BSplines`` with
    ``include_intercept=False``).

    Examples
    --------
    >>> from sigmap_lib.metabench import gam_n_params
    >>> gam_n_params(16, 6)  # the zoo: 16 benchmarks, gam_df 6 -> 81 coefficients
    81
    >>> gam_n_params(6, 20)  # the published metabench: 6 benchmarks, gam_df 20
    115
    """
    return 1 + int(n_features) * (int(df) - 1)


@dataclass
class RidgeJoint(TrainedOnArrays):
    """Ridge regression of a score on all benchmarks' θ: the joint model's fallback.

    Covariates are standardised with the training mean and sd, clipped to the training
    range at prediction (as :class:`~sigmap_lib.irt.GamModel` does), and the penalty is
    the one with the smallest exact leave-one-out RMSE (:func:`~sigmap_lib.irt.fit_ridge`).
    Like the GAM it keeps its training data, so it is saved as plain arrays and refitted
    bit-for-bit on load.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.metabench import RidgeJoint
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(60, 3))
    >>> ridge = RidgeJoint.fit(x, 50 + 10 * x.sum(axis=1) + rng.normal(0, 1, 60))
    >>> ridge.kind, ridge.n_features, ridge.predict(np.zeros((1, 3))).round(1).tolist()
    ('ridge', 3, [49.7])
    >>> again = RidgeJoint.from_arrays(ridge.x_train, ridge.y_train, ridge.to_dict())
    >>> bool(np.array_equal(again.predict(x), ridge.predict(x)))  # refitted bit-for-bit
    True
    """

    x_train: np.ndarray
    y_train: np.ndarray
    alpha: float
    loo_rmse: dict[float, float] = field(default_factory=dict)
    _scaling: TrainingScale | None = field(default=None, repr=False)
    _coef: np.ndarray | None = field(default=None, repr=False)
    _intercept: float = field(default=0.0, repr=False)
    hyper: ClassVar[dict[str, type]] = {"alpha": float}
    rmse_table: ClassVar[str] = "loo_rmse"
    kind: ClassVar[str | None] = "ridge"
    what: ClassVar[str] = "joint ridge"

    def __post_init__(self) -> None:
        self.x_train = np.ascontiguousarray(self.x_train, float)
        self.y_train = np.ascontiguousarray(self.y_train, float)
        if self._coef is None:
            self._scaling = TrainingScale.fit(self.x_train)
            z = self._scaling.transform(self.x_train)
            rf = fit_ridge(z, self.y_train, alphas=(float(self.alpha),), what="joint ridge")
            self._coef, self._intercept = rf.coef, rf.intercept

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, *, what: str = "joint ridge") -> RidgeJoint:
        """Fit with the penalty chosen by exact leave-one-out RMSE (see the class)."""
        xa = np.ascontiguousarray(x, float)
        ya = np.asarray(y, float).reshape(-1)
        scaling = TrainingScale.fit(xa)
        rf = fit_ridge(scaling.transform(xa), ya, what=what)
        return cls(
            x_train=xa,
            y_train=ya,
            alpha=rf.alpha,
            loo_rmse=rf.loo_rmse,
            _scaling=scaling,
            _coef=rf.coef,
            _intercept=rf.intercept,
        )

    @property
    def cv_rmse(self) -> dict[float, float]:
        """The leave-one-out RMSE per penalty (named like the GAM's CV table)."""
        return self.loo_rmse

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted scores, shape ``(n,)``, for θs ``(n, k)``."""
        assert self._scaling is not None and self._coef is not None
        return self._intercept + self._scaling.transform(self.covariates(x)) @ self._coef


def fit_joint_model(
    x: np.ndarray,
    y: np.ndarray,
    *,
    df: int = 20,
    rows_per_param: float = 5.0,
    what: str = "joint GAM",
) -> tuple[GamModel | RidgeJoint, dict[str, Any]]:
    """A score from all benchmarks' θ: the additive GAM when well-posed, else ridge.

    The guard, in order:

    1. **size** — the GAM ``y ~ s(θ_1) + ... + s(θ_k)`` has
       ``p = 1 + k (df - 1)`` coefficients (:func:`gam_n_params`); it is fitted only if
       ``n_train >= rows_per_param * p`` (default 5 training rows per coefficient).
    2. **degeneracy** — a GAM that was fitted is still replaced if its best cross-validated
       RMSE is no better than predicting the training mean (the RMSE of the constant, the
       sd of ``y``), or its training predictions are not finite. This catches the
       statsmodels B-spline basis collapsing when a third or more of the θ values are tied
       (e.g. a ceiling of an EAPsum θ): coinciding knots give a penalty of ~1e40 and a
       GAM that predicts 0 for everyone.

    Otherwise the fallback is :class:`RidgeJoint` (ridge on the standardised θs, penalty
    by exact leave-one-out). When the GAM passes both checks it is returned exactly as
    :func:`~sigmap_lib.irt.fit_gam` fits it (same alpha grid, folds and seed).

    Parameters
    ----------
    x : ndarray, shape (n, k)
        Training θs (one column per benchmark).
    y : ndarray, shape (n,)
        Training target (normalised score, 0-100).
    df : B-spline basis size per smooth (``MetabenchConfig.gam_df``).
    rows_per_param : training rows needed per GAM coefficient
        (``MetabenchConfig.joint_rows_per_param``).
    what : label for error messages.

    Returns
    -------
    model : GamModel or RidgeJoint (both ``.predict(x)``, ``.to_dict()``, ``.x_train``)
    info : dict with ``model`` ("gam" / "ridge"), ``reason``, ``n_train``, ``n_features``,
        ``n_params``, ``rows_per_param``, ``gam_cv_rmse`` (best CV RMSE of the GAM, None if
        not fitted), ``ridge_loo_rmse`` (None for a GAM) and ``y_sd``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.metabench import fit_joint_model
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(70, 16))  # 70 training models, 16 benchmarks (the zoo)
    >>> score = 40 + 3 * np.tanh(theta).sum(axis=1) + rng.normal(0, 1, 70)
    >>> model, info = fit_joint_model(theta, score, df=6)
    >>> info["model"], info["n_params"], info["reason"]
    ('ridge', 81, 'GAM has 81 coefficients for 70 training rows (needs >= 5 rows each, 405)')
    >>> theta = rng.normal(size=(1000, 3))  # well-posed: the GAM, as before
    >>> model, info = fit_joint_model(theta, 40 + 3 * np.tanh(theta).sum(axis=1), df=6)
    >>> info["model"], info["n_params"], type(model).__name__
    ('gam', 16, 'GamModel')
    """
    xa = np.asarray(x, float)
    if xa.ndim == 1:
        xa = xa.reshape(-1, 1)
    ya = np.asarray(y, float).reshape(-1)
    n, k = xa.shape
    p = gam_n_params(k, df)
    info: dict[str, Any] = {
        "model": "gam",
        "reason": "",
        "n_train": int(n),
        "n_features": int(k),
        "n_params": int(p),
        "rows_per_param": float(rows_per_param),
        "gam_cv_rmse": None,
        "ridge_loo_rmse": None,
        "y_sd": float(np.std(ya)) if n else float("nan"),
    }
    need = rows_per_param * p
    if n < need:
        info["reason"] = (
            f"GAM has {p} coefficients for {n} training rows "
            f"(needs >= {rows_per_param:g} rows each, {need:g})"
        )
    else:
        gam = fit_gam(xa, ya, df=df, what=what)
        best = min(gam.cv_rmse.values()) if gam.cv_rmse else float("nan")
        info["gam_cv_rmse"] = float(best)
        fitted_ok = bool(np.all(np.isfinite(gam.predict(xa))))
        if fitted_ok and np.isfinite(best) and best < info["y_sd"]:
            info["reason"] = (
                f"well-posed: {n} training rows >= {rows_per_param:g} x {p} GAM coefficients"
            )
            return gam, info
        info["reason"] = (
            f"degenerate GAM: best CV RMSE {best:.3g} is no better than the constant "
            f"(sd {info['y_sd']:.3g})"
            if fitted_ok
            else "degenerate GAM: non-finite predictions"
        )
    ridge = RidgeJoint.fit(xa, ya, what=what.replace("GAM", "ridge"))
    info["model"] = "ridge"
    info["ridge_loo_rmse"] = float(ridge.loo_rmse[ridge.alpha])
    return ridge, info


# ---------------------------------------------------------------------------
# joint metabench


@dataclass
class JointFit:
    """Joint reconstruction and factor analysis over all benchmarks.

    ``grand_gam`` and ``bench_gams`` are the joint models (the names are historical): a
    :class:`~sigmap_lib.irt.GamModel` where the design is well-posed, else a
    :class:`RidgeJoint`; ``joint_models`` says, per target ("grand" and each benchmark),
    which one and why (the ``info`` of :func:`fit_joint_model`).
    """

    benchmarks: list[str]
    grand_gam: GamModel | RidgeJoint
    bench_gams: dict[str, GamModel | RidgeJoint]
    rmse_table: pd.DataFrame  # rows: benchmarks + "grand"; cols: test_rmse_joint, test_rmse_single
    grand_test_rmse: float
    factor_loadings: pd.Series
    factor_spearman: float
    factor_scores: pd.Series
    thetas: pd.DataFrame  # models in all benchmarks: role + theta_<bm>
    joint_models: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def grand_model(self) -> str:
        """ "gam" or "ridge": the model that reconstructs the grand score."""
        default = getattr(self.grand_gam, "kind", "gam")
        return str(self.joint_models.get("grand", {}).get("model", default))


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

    Each joint model (grand score, every benchmark) is fitted by :func:`fit_joint_model`:
    the additive GAM on all θs when there are at least ``config.joint_rows_per_param``
    training models per GAM coefficient and the GAM is not degenerate, else a ridge
    regression on the θs; ``JointFit.joint_models`` records which and why.

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
    >>> joint.grand_model, joint.joint_models["grand"]["reason"]  # 178 rows, 3 x 4 + 1 coefs
    ('gam', 'well-posed: 178 training rows >= 5 x 13 GAM coefficients')
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
    guard = {"df": cfg.gam_df, "rows_per_param": cfg.joint_rows_per_param}
    grand_gam, grand_info = fit_joint_model(xth[tr], grand[tr], what="grand-score GAM", **guard)
    infos = {"grand": grand_info}
    rows = {
        "grand": {
            "test_rmse_joint": rmse(grand_gam.predict(xth[te]), grand[te]),
            "test_rmse_single": np.nan,
        }
    }
    gams = {}
    for bm in bms:
        yb = scores[bm].to_numpy()
        gams[bm], infos[bm] = fit_joint_model(xth[tr], yb[tr], what=f"{bm} joint GAM", **guard)
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
        joint_models=infos,
    )

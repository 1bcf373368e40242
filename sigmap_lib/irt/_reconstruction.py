"""Full-score reconstruction from a reduced test: GAM on θ and the test's own summaries.

metabench predicts a benchmark's normalised full score from the ability θ estimated on
the selected items, ``score ~ s(θ)``. Its own analysis (``meta.R``) also uses two summaries
of the same answers: the percent correct on the selected items (``.s``) and a linear
predictor, a regression of the full score on the 0/1 answers (``.l``). A 3PL/4PL MAP θ is
not a function of the sum score, and the linear predictor weights items by how much of the
*full* benchmark they stand for, so the three carry different information.
:func:`fit_score_model` fits ``score ~ s(θ) [+ s(percent) [+ s(linear)]]`` for each
candidate covariate set and keeps the one with the lowest K-fold cross-validated RMSE.

The linear predictor is a ridge regression (:func:`sigmap_lib.irt.fit_ridge`); the GAM is
trained on its exact leave-one-out predictions, so it sees the linear predictor with the
noise it has on a model outside the fit, not its in-sample (over-fitted) values. Missing
answers (NaN) are left out of the percent correct and imputed with the item's training
mean in the linear predictor.

Conventions: ``theta`` shape ``(n,)``; ``x`` the 0/1 answers to the selected items, shape
``(n, p)`` with NaN for missing; ``y`` the normalised full score (0-100), shape ``(n,)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt._gam import GamModel, fit_gam
from sigmap_lib.irt._ridge import design_matrix, fit_ridge

COVARIATES: tuple[str, ...] = ("theta", "percent", "linear")
DEFAULT_COVARIATE_SETS: tuple[str, ...] = ("theta", "theta+percent", "theta+percent+linear")


def parse_covariates(spec: str) -> tuple[str, ...]:
    """``"theta+percent"`` -> ``("theta", "percent")``, validated and in canonical order.

    Examples
    --------
    >>> from sigmap_lib.irt import parse_covariates
    >>> parse_covariates("percent + theta")
    ('theta', 'percent')
    """
    parts = [p.strip() for p in str(spec).split("+") if p.strip()]
    bad = [p for p in parts if p not in COVARIATES]
    if bad or not parts or len(set(parts)) != len(parts):
        raise SigmapInputError(
            f"score covariates {spec!r}: use '+'-joined distinct names from {COVARIATES}"
        )
    return tuple(c for c in COVARIATES if c in parts)


def percent_correct(x: np.ndarray, what: str = "score model") -> np.ndarray:
    """Percent correct per row (0-100) over the answered items; shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.irt import percent_correct
    >>> percent_correct(np.array([[1, 0, 1, np.nan], [0, 0, 0, 1]])).round(1).tolist()
    [66.7, 25.0]
    """
    arr = np.asarray(x, float)
    answered = np.isfinite(arr).sum(axis=1)
    if np.any(answered == 0):
        raise SigmapInputError(
            f"{what}: {int((answered == 0).sum())} model(s) answered none of the selected items"
        )
    return 100.0 * np.nansum(arr, axis=1) / answered


@dataclass
class LinearPredictor:
    """Ridge regression of the full score on the 0/1 answers (missing -> item mean)."""

    coef: np.ndarray
    intercept: float
    alpha: float
    item_means: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        arr = design_matrix(x, len(self.coef), "linear predictor: answers")
        filled = np.where(np.isfinite(arr), arr, self.item_means)
        return self.intercept + filled @ self.coef


def _fit_linear(x: np.ndarray, y: np.ndarray, what: str) -> tuple[LinearPredictor, np.ndarray]:
    """The linear predictor and its leave-one-out predictions on the training rows."""
    with np.errstate(invalid="ignore"):
        means = np.nanmean(np.where(np.isfinite(x), x, np.nan), axis=0)
    means = np.where(np.isfinite(means), means, 0.0)
    filled = np.where(np.isfinite(x), x, means)
    rf = fit_ridge(filled, y, what=f"{what} linear predictor")
    lin = LinearPredictor(coef=rf.coef, intercept=rf.intercept, alpha=rf.alpha, item_means=means)
    return lin, rf.loo_pred


def _features(
    covs: tuple[str, ...],
    theta: np.ndarray | None,
    percent: np.ndarray,
    linear: np.ndarray | None,
) -> np.ndarray:
    cols = {"theta": theta, "percent": percent, "linear": linear}
    return np.column_stack([np.asarray(cols[c], float) for c in covs])


@dataclass
class ScoreModel:
    """A fitted reconstruction ``score ~ s(c_1) + ... + s(c_k)`` (see :func:`fit_score_model`).

    Attributes
    ----------
    covariates : str
        The chosen covariate set, e.g. ``"theta+percent+linear"``.
    gam : GamModel
        The GAM on those covariates (its ``x_train`` holds the training features, with the
        linear predictor's leave-one-out values).
    linear : LinearPredictor or None
        Present when the set uses ``linear``.
    cv_rmse : dict[str, float]
        K-fold CV RMSE of every candidate set (empty when only one was given and CV was off).
    """

    covariates: str
    gam: GamModel
    linear: LinearPredictor | None = None
    cv_rmse: dict[str, float] = field(default_factory=dict)

    @property
    def covariate_names(self) -> tuple[str, ...]:
        return parse_covariates(self.covariates)

    def features(self, theta: np.ndarray | None, x: np.ndarray) -> np.ndarray:
        """Covariate matrix ``(n, k)`` for new models (θ ``(n,)``, answers ``(n, p)``)."""
        covs = self.covariate_names
        if "theta" in covs and theta is None:
            raise SigmapInputError(f"score model ({self.covariates}): θ is required")
        pct = percent_correct(x)
        lin = self.linear.predict(x) if self.linear is not None else None
        return _features(covs, theta, pct, lin)

    def predict(self, theta: np.ndarray | None, x: np.ndarray) -> np.ndarray:
        """Reconstructed full scores, shape ``(n,)``."""
        return self.gam.predict(self.features(theta, x))


def _fit_one(
    covs: tuple[str, ...],
    theta: np.ndarray | None,
    x: np.ndarray,
    y: np.ndarray,
    df: int,
    seed: int,
    what: str,
) -> ScoreModel:
    lin, lin_loo = _fit_linear(x, y, what) if "linear" in covs else (None, None)
    feats = _features(covs, theta, percent_correct(x, what), lin_loo)
    gam = fit_gam(feats, y, df=df, seed=seed, what=f"{what} GAM ({'+'.join(covs)})")
    return ScoreModel(covariates="+".join(covs), gam=gam, linear=lin)


def fit_score_model(
    theta: np.ndarray | None,
    x: np.ndarray,
    y: np.ndarray,
    *,
    covariate_sets: tuple[str, ...] = DEFAULT_COVARIATE_SETS,
    df: int = 20,
    n_folds: int = 5,
    seed: int = 0,
    cv: bool | None = None,
    what: str = "score model",
) -> ScoreModel:
    """Fit the reconstruction GAM, choosing the covariate set by K-fold CV.

    Parameters
    ----------
    theta : ndarray, shape (n,), or None when no set uses θ.
    x : ndarray, shape (n, p)
        0/1 answers to the selected items (NaN = missing).
    y : ndarray, shape (n,)
        Normalised full scores.
    covariate_sets : candidate sets, each a ``"+"``-joined subset of ``COVARIATES``.
    df : B-spline basis size per smooth (see :func:`sigmap_lib.irt.fit_gam`).
    n_folds, seed : the CV folds (a seeded permutation). Every fold refits the linear
        predictor without the fold, so the CV error includes its estimation noise.
    cv : run the CV; default: only when there are several candidates.

    Returns
    -------
    ScoreModel fitted on all rows with the set of lowest CV RMSE (ties: the earlier set).

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sigmap_lib.irt import estimate_theta, fit_score_model, simulate_responses
    >>> rng = np.random.default_rng(0)
    >>> params = pd.DataFrame({"a1": rng.uniform(0.5, 2.0, 10), "d": rng.normal(size=10)})
    >>> ability = rng.normal(size=100)
    >>> x = simulate_responses(params, ability, rng=1)  # 100 models x 10 selected items
    >>> y = 100 / (1 + np.exp(-ability)) + rng.normal(0, 3, size=100)  # full scores
    >>> theta = estimate_theta(params, x)["theta"].to_numpy()
    >>> model = fit_score_model(theta, x, y, df=8)
    >>> model.covariates, {k: round(v, 1) for k, v in model.cv_rmse.items()}
    ('theta', {'theta': 11.2, 'theta+percent': 11.6, 'theta+percent+linear': 11.6})
    >>> model.predict(theta[:3], x[:3]).round(1).tolist()  # true 49.2, 82.2, 34.2
    [34.0, 78.4, 28.8]
    """
    sets = [parse_covariates(s) for s in covariate_sets]
    if not sets:
        raise SigmapInputError(f"{what}: no covariate set given")
    xa = np.asarray(x, float)
    ya = np.asarray(y, float).reshape(-1)
    th = None if theta is None else np.asarray(theta, float).reshape(-1)
    if xa.ndim != 2 or len(xa) != len(ya) or (th is not None and len(th) != len(ya)):
        raise SigmapInputError(
            f"{what}: answers {xa.shape}, θ {None if th is None else th.shape} and scores "
            f"{ya.shape} must have the same number of rows"
        )
    if th is None and any("theta" in s for s in sets):
        raise SigmapInputError(f"{what}: a covariate set uses θ but no θ was given")
    cv_rmse: dict[str, float] = {}
    if cv or (cv is None and len(sets) > 1):
        folds = np.random.default_rng(seed).permutation(len(ya)) % n_folds
        for covs in sets:
            sse = 0.0
            for f in range(n_folds):
                te = folds == f
                m = _fit_one(
                    covs, None if th is None else th[~te], xa[~te], ya[~te], df, seed, what
                )
                pred = m.predict(None if th is None else th[te], xa[te])
                sse += float(np.sum((pred - ya[te]) ** 2))
            cv_rmse["+".join(covs)] = float(np.sqrt(sse / len(ya)))
        best = min(cv_rmse, key=cv_rmse.get)
        covs_best = parse_covariates(best)
    else:
        covs_best = sets[0]
    model = _fit_one(covs_best, th, xa, ya, df, seed, what)
    model.cv_rmse = cv_rmse
    return model

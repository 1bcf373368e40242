"""Item response theory and score reconstruction: 2PL/3PL/4PL fits (mirt), ability
estimation, penalised GAMs, ridge regression and the reconstruction models.
"""

from ._gam import (
    GamModel,
    PSpline,
    TrainedOnArrays,
    TrainingScale,
    fit_gam,
    fit_pspline,
)
from ._irt import (
    IRT_MODELS,
    WIDE_BOUNDS,
    IrtFit,
    estimate_theta,
    fit_irt,
    item_information,
    item_probabilities,
    marginal_loglik,
    simulate_responses,
)
from ._reconstruction import (
    DEFAULT_COVARIATE_SETS,
    LinearPredictor,
    ScoreModel,
    fit_score_model,
    parse_covariates,
    percent_correct,
)
from ._ridge import (
    RidgeFit,
    fit_ridge,
)

__all__ = [
    "DEFAULT_COVARIATE_SETS",
    "IRT_MODELS",
    "WIDE_BOUNDS",
    "GamModel",
    "IrtFit",
    "LinearPredictor",
    "PSpline",
    "RidgeFit",
    "ScoreModel",
    "TrainedOnArrays",
    "TrainingScale",
    "estimate_theta",
    "fit_gam",
    "fit_irt",
    "fit_pspline",
    "fit_ridge",
    "fit_score_model",
    "item_information",
    "item_probabilities",
    "marginal_loglik",
    "parse_covariates",
    "percent_correct",
    "simulate_responses",
]

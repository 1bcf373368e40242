"""The settings of a metabench distillation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import (
    DEFAULT_COVARIATE_SETS,
    IRT_MODELS,
    parse_covariates,
)

# ---------------------------------------------------------------------------
# configuration

#: Tiny settings for examples and quick tests (a 20-item pool, 2PL only, a coarse
#: search): ``MetabenchConfig(**TINY_SETTINGS)`` or ``fit_metabench(..., **TINY_SETTINGS)``.
TINY_SETTINGS: MappingProxyType[str, Any] = MappingProxyType(
    dict(pool_size=20, n_subsets=20, irt_models=("2PL",), n_quant=15, gam_df=5, top_k=1, n_tau=3)
)


@dataclass
class MetabenchConfig:
    """All hyperparameters of the pipeline (defaults follow ALGORITHM.md where it is explicit).

    Speed-motivated departures from the original: ``n_subsets`` 500 (not 10,000),
    ``irt_models`` 2PL and 3PL (4PL is supported but costs ~10x a 2PL fit with mirt's EM),
    and a grid search (``top_k`` x grid types x ``n_tau``) instead of Bayesian optimisation.

    The search objective is metabench's (validation RMSE of ``score ~ s(θ)`` + λ x items).
    The final reconstruction adds, by K-fold CV among ``score_covariates``, the reduced
    test's percent correct and linear predictor (``meta.R``'s ``.s`` and ``.l``), see
    :mod:`sigmap_lib.irt`; the θ-only RMSE is reported alongside.

    ``joint_rows_per_param`` guards the joint models (:func:`fit_joint_model`): the additive
    GAM on all k benchmarks' θ, with ``1 + k (gam_df - 1)`` coefficients, is used only with
    at least this many training models per coefficient (else ridge on the θs).
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
    joint_rows_per_param: float = 5.0
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
        if not cfg.joint_rows_per_param > 0:
            raise SigmapInputError("metabench config: joint_rows_per_param must be > 0")
        if cfg.pool_size < cfg.min_items or cfg.n_quant < cfg.min_items:
            raise SigmapInputError("metabench config: pool_size and n_quant must be >= min_items")
        return cfg

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

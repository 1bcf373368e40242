"""Benchmark signatures (METHODS Part I): the calibrated max-T signatures (the default),
the authors' Lasso, and the paper's two-stage screening + forward selection with its null
calibration — each a :class:`SignatureMethod`, selected by mode through
:data:`SIGNATURE_METHODS`.
"""

from ._calibration import FWER_SCOPES, Calibration, check_calibrated_models, max_t_threshold
from ._detectable import detectable_rho, models_needed
from ._fdr import fdr_threshold
from ._forward import ForwardAIC, ForwardBIC, ForwardEBIC, ForwardSelection
from ._lasso import AuthorsLasso
from ._max_t import (
    BLOCK_MODELS,
    MIN_MODELS_CALIBRATED,
    MIN_RESIDUAL_DF,
    MIN_STRATUM_MODELS,
    MIN_UNITS_CALIBRATED,
    NULL_BINS,
    SCORE_KNOTS,
    MaxTPartial,
    basis_shape,
    distinct_permutations,
    general_quality,
    merge_max_t,
    pooled_strata,
    quality_basis,
    quality_blocks,
    residual_codes,
    residuals,
    score_basis,
    score_knots,
    score_scale,
    stratified_permutations,
    studentized,
)
from ._max_t_methods import CalibratedMarginal, CalibratedPartial
from ._merge import (
    ScreenPartial,
    corpus_k,
    merge_histograms,
    merge_null_maxima,
    merge_screen,
    screen_partial,
)
from ._method import Interval, Options, Pass, SignatureMethod
from ._multiresolution import CalibratedMultiResolution, group_sums, minp_adjusted
from ._partial_store import PartialKey, partial_key, reuse_partial
from ._result import NullCalibration, Signature, gather_units, unit_orientation
from ._screening import ScreenResult, screen
from ._selection import (
    SelectionResult,
    criterion_value,
    forward_select,
)
from ._settings import SignatureSettings
from ._signature import (
    SIGNATURE_METHODS,
    extract_signature,
    extract_signatures,
    method_class,
    register_method,
    signature_method,
)
from ._statistics import (
    STATISTICS,
    preselect_correlation,
    preselect_from_codes,
    score_coefficients,
    split_screenable,
    strength_of,
    thrush_correlation,
    thrush_from_codes,
    thrush_max,
    unscreenable_reason,
)
from ._table import signature_table

__all__ = [
    "BLOCK_MODELS",
    "FWER_SCOPES",
    "MIN_MODELS_CALIBRATED",
    "MIN_RESIDUAL_DF",
    "MIN_STRATUM_MODELS",
    "MIN_UNITS_CALIBRATED",
    "NULL_BINS",
    "SCORE_KNOTS",
    "SIGNATURE_METHODS",
    "STATISTICS",
    "AuthorsLasso",
    "CalibratedMarginal",
    "CalibratedMultiResolution",
    "CalibratedPartial",
    "Calibration",
    "ForwardAIC",
    "ForwardBIC",
    "ForwardEBIC",
    "ForwardSelection",
    "Interval",
    "MaxTPartial",
    "NullCalibration",
    "Options",
    "PartialKey",
    "Pass",
    "ScreenPartial",
    "ScreenResult",
    "SelectionResult",
    "Signature",
    "SignatureMethod",
    "SignatureSettings",
    "basis_shape",
    "check_calibrated_models",
    "corpus_k",
    "criterion_value",
    "detectable_rho",
    "distinct_permutations",
    "extract_signature",
    "extract_signatures",
    "fdr_threshold",
    "forward_select",
    "gather_units",
    "general_quality",
    "group_sums",
    "max_t_threshold",
    "merge_histograms",
    "merge_max_t",
    "merge_null_maxima",
    "merge_screen",
    "method_class",
    "minp_adjusted",
    "models_needed",
    "partial_key",
    "pooled_strata",
    "preselect_correlation",
    "preselect_from_codes",
    "quality_basis",
    "quality_blocks",
    "register_method",
    "residual_codes",
    "residuals",
    "reuse_partial",
    "score_basis",
    "score_coefficients",
    "score_knots",
    "score_scale",
    "screen",
    "screen_partial",
    "signature_method",
    "signature_table",
    "split_screenable",
    "stratified_permutations",
    "strength_of",
    "studentized",
    "thrush_correlation",
    "thrush_from_codes",
    "thrush_max",
    "unit_orientation",
    "unscreenable_reason",
]

"""Benchmark signatures (METHODS Part I): the calibrated max-T signatures (the default),
the authors' Lasso, and the paper's two-stage screening + forward selection with its null
calibration.
"""

from ._calibration import FWER_SCOPES, Calibration, check_calibrated_models, max_t_threshold
from ._detectable import detectable_rho, models_needed
from ._max_t import (
    MIN_MODELS_CALIBRATED,
    MIN_RESIDUAL_DF,
    MaxTPartial,
    basis_shape,
    general_quality,
    merge_max_t,
    quality_basis,
    residual_codes,
    residuals,
    stratified_permutations,
)
from ._merge import (
    ScreenPartial,
    corpus_k,
    merge_histograms,
    merge_null_maxima,
    merge_screen,
    screen_partial,
)
from ._partial_store import PartialKey, partial_key, reuse_partial
from ._screening import ScreenResult, screen
from ._selection import (
    SelectionResult,
    criterion_value,
    forward_select,
)
from ._settings import SignatureSettings
from ._signature import (
    METHODS,
    NullCalibration,
    Signature,
    extract_signature,
    extract_signatures,
    gather_units,
    resolve_method,
    unit_orientation,
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
    "FWER_SCOPES",
    "METHODS",
    "MIN_MODELS_CALIBRATED",
    "MIN_RESIDUAL_DF",
    "STATISTICS",
    "Calibration",
    "MaxTPartial",
    "NullCalibration",
    "PartialKey",
    "ScreenPartial",
    "ScreenResult",
    "SelectionResult",
    "Signature",
    "SignatureSettings",
    "basis_shape",
    "check_calibrated_models",
    "corpus_k",
    "criterion_value",
    "detectable_rho",
    "extract_signature",
    "extract_signatures",
    "forward_select",
    "gather_units",
    "general_quality",
    "max_t_threshold",
    "merge_histograms",
    "merge_max_t",
    "merge_null_maxima",
    "merge_screen",
    "models_needed",
    "partial_key",
    "preselect_correlation",
    "preselect_from_codes",
    "quality_basis",
    "residual_codes",
    "residuals",
    "resolve_method",
    "reuse_partial",
    "score_coefficients",
    "screen",
    "screen_partial",
    "signature_table",
    "split_screenable",
    "stratified_permutations",
    "strength_of",
    "thrush_correlation",
    "thrush_from_codes",
    "thrush_max",
    "unit_orientation",
    "unscreenable_reason",
]

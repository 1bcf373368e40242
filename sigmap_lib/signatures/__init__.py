"""Benchmark signatures (METHODS Part I): stage-1 rank-correlation screening,
stage-2 selection, and the two-stage extraction with its null calibration.
"""

from ._screening import ScreenResult, screen
from ._selection import (
    SelectionResult,
    criterion_value,
    forward_select,
)
from ._settings import SignatureSettings
from ._signature import (
    NullCalibration,
    Signature,
    extract_signature,
    extract_signatures,
    gather_units,
)
from ._statistics import (
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

__all__ = [
    "NullCalibration",
    "ScreenResult",
    "SelectionResult",
    "Signature",
    "SignatureSettings",
    "criterion_value",
    "extract_signature",
    "extract_signatures",
    "forward_select",
    "gather_units",
    "preselect_correlation",
    "preselect_from_codes",
    "score_coefficients",
    "screen",
    "split_screenable",
    "strength_of",
    "thrush_correlation",
    "thrush_from_codes",
    "thrush_max",
    "unscreenable_reason",
]

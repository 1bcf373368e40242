"""Studies on the real public data in ``../shared/data``: real-data overlap and the
comparison of sigmap's IRT with metabench's R fits.
"""

from sigmap_lib.metabench import r_refit_params  # lives with the scorer that reads R's fits

from ._example import write_example_data
from ._paths import (
    shared_data_dir,
)
from ._r_comparison import (
    DEFAULT_STEMS,
    R_POOL_COLUMNS,
    compare_fit,
    heldout_reconstruction,
    real_data_validation,
)
from ._realdata import (
    real_data_overlap_summary,
)
from ._realfindings import null_scores, real_data_null, real_model_findings
from ._realmodels import real_model_signatures
from ._scoring import published_scoring_validation

__all__ = [
    "DEFAULT_STEMS",
    "R_POOL_COLUMNS",
    "compare_fit",
    "heldout_reconstruction",
    "null_scores",
    "published_scoring_validation",
    "r_refit_params",
    "real_data_null",
    "real_data_overlap_summary",
    "real_data_validation",
    "real_model_findings",
    "real_model_signatures",
    "shared_data_dir",
    "write_example_data",
]

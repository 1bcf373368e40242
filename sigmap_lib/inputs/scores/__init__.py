"""Benchmark scores: one canonical long table, readers for the usual sources
(wide CSV/parquet leaderboards, long tables, lm-evaluation-harness results), validation,
reshaping and model-id matching.
"""

from ._common import (
    MISSING_TOKENS,
    SCORE_SCHEMA,
    Duplicates,
    empty_scores,
)
from ._lm_eval import (
    DEFAULT_LM_EVAL_METRICS,
    file_time,
    latest_samples,
    lm_eval_folder_model,
    lm_eval_model_id,
    read_lm_eval_results,
    samples_task,
)
from ._match import (
    MatchResult,
    apply_model_match,
    keyed_scores,
    match_models,
    normalize_model_id,
)
from ._readers import (
    read_long,
    read_score_sources,
    read_scores,
    read_wide,
    score_source_path,
)
from ._reshape import (
    from_wide,
    score_summary,
    to_wide,
)
from ._validate import (
    ScoreValidation,
    validate_scores,
)

__all__ = [
    "DEFAULT_LM_EVAL_METRICS",
    "MISSING_TOKENS",
    "SCORE_SCHEMA",
    "Duplicates",
    "MatchResult",
    "ScoreValidation",
    "apply_model_match",
    "empty_scores",
    "file_time",
    "from_wide",
    "keyed_scores",
    "latest_samples",
    "lm_eval_folder_model",
    "lm_eval_model_id",
    "match_models",
    "normalize_model_id",
    "read_lm_eval_results",
    "read_long",
    "read_score_sources",
    "read_scores",
    "read_wide",
    "samples_task",
    "score_source_path",
    "score_summary",
    "to_wide",
    "validate_scores",
]

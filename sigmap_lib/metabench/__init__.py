"""metabench (METHODS Part II): item pools, IRT fits, information-based selection,
the joint fit, persistence, scoring of new models, export and simulation.
"""

from ._common import (
    check_inputs,
    full_scores,
    item_statistics,
    rmse,
    split_models,
    type4_quantiles,
)
from ._config import (
    TINY_SETTINGS,
    MetabenchConfig,
)
from ._export import (
    export_items,
)
from ._fit import (
    MetabenchFit,
    fit_benchmarks,
    fit_metabench,
    select_items_many,
)
from ._joint import (
    JointFit,
    RidgeJoint,
    fit_joint,
    fit_joint_model,
    gam_n_params,
)
from ._logs import (
    LogAnswers,
    TaskRule,
    answers_frame,
    fit_rules,
    manifest_rules,
    model_label,
    published_rules,
    read_lm_eval_answers,
)
from ._persist import (
    load_benchmark_fit,
    load_item_pool,
    load_pool_irt,
    save_benchmark_fit,
    save_item_pool,
    save_pool_irt,
)
from ._pool import (
    ItemPool,
    PoolIrt,
    build_item_pool,
    fit_pool_irt,
)
from ._score import (
    score_new_models,
)
from ._scorer import (
    COVERAGE_AT_MIN_SHARE,
    MIN_ANSWERED_SHARE,
    BenchmarkScorer,
    MetabenchScorer,
    local_interval,
    low_answers_warning,
    r_refit_params,
    score_range_of,
)
from ._select import (
    BenchmarkFit,
    information_filter,
    select_items,
)
from ._simulate import (
    simulate_benchmarks,
)
from ._tasks import (
    PUBLISHED_BENCHMARKS,
    VERSIONS,
    TaskSpec,
    fit_tasks,
    published_tasks,
    write_lm_eval_tasks,
)
from ._validate import partial_answer_coverage

__all__ = [
    "COVERAGE_AT_MIN_SHARE",
    "MIN_ANSWERED_SHARE",
    "PUBLISHED_BENCHMARKS",
    "TINY_SETTINGS",
    "VERSIONS",
    "BenchmarkFit",
    "BenchmarkScorer",
    "ItemPool",
    "JointFit",
    "LogAnswers",
    "MetabenchConfig",
    "MetabenchFit",
    "MetabenchScorer",
    "PoolIrt",
    "RidgeJoint",
    "TaskRule",
    "TaskSpec",
    "answers_frame",
    "build_item_pool",
    "check_inputs",
    "export_items",
    "fit_benchmarks",
    "fit_joint",
    "fit_joint_model",
    "fit_metabench",
    "fit_pool_irt",
    "fit_rules",
    "fit_tasks",
    "full_scores",
    "gam_n_params",
    "information_filter",
    "item_statistics",
    "load_benchmark_fit",
    "load_item_pool",
    "load_pool_irt",
    "local_interval",
    "low_answers_warning",
    "manifest_rules",
    "model_label",
    "partial_answer_coverage",
    "published_rules",
    "published_tasks",
    "r_refit_params",
    "read_lm_eval_answers",
    "rmse",
    "save_benchmark_fit",
    "save_item_pool",
    "save_pool_irt",
    "score_new_models",
    "score_range_of",
    "select_items",
    "select_items_many",
    "simulate_benchmarks",
    "split_models",
    "type4_quantiles",
    "write_lm_eval_tasks",
]

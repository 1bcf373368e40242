"""Worlds: the inputs of a whole run -- the synthetic planted-truth world, tiny real
transformers, the embedded zoo, and the layout check of a user's world folder.
"""

from ._example import init_world
from ._hard import (
    HARD_SCENARIOS,
    REALLIKE_SCENARIOS,
    ClusteredWorld,
    HardWorld,
    clustered_world,
    hard_world,
)
from ._layout import (
    WorldLayout,
    check_world,
)
from ._matrix_world import (
    PERPLEXITY_CORRELATIONS_CATALOG,
    world_from_perplexity_correlations,
    write_matrix_world,
)
from ._minimums import REASONS as MINIMUM_REASONS
from ._minimums import WorldMinimums, read_minimums
from ._planted import planted_values
from ._preflight import (
    WorldProblem,
    preflight_world,
    read_corpus_settings,
    read_semantic_settings,
    read_signature_mode,
    read_signature_settings,
)
from ._synthetic import (
    FORMATS,
    SyntheticWorld,
    make_synthetic_world,
    planted_recovery,
)
from ._tiny import (
    build_causal_lm,
    random_text,
    sample_texts,
    save_model,
    train_bpe_tokenizer,
    train_causal_lm,
)

__all__ = [
    "FORMATS",
    "HARD_SCENARIOS",
    "MINIMUM_REASONS",
    "PERPLEXITY_CORRELATIONS_CATALOG",
    "REALLIKE_SCENARIOS",
    "ClusteredWorld",
    "HardWorld",
    "SyntheticWorld",
    "WorldLayout",
    "WorldMinimums",
    "WorldProblem",
    "build_causal_lm",
    "check_world",
    "clustered_world",
    "hard_world",
    "init_world",
    "make_synthetic_world",
    "planted_recovery",
    "planted_values",
    "preflight_world",
    "random_text",
    "read_corpus_settings",
    "read_minimums",
    "read_semantic_settings",
    "read_signature_mode",
    "read_signature_settings",
    "sample_texts",
    "save_model",
    "train_bpe_tokenizer",
    "train_causal_lm",
    "world_from_perplexity_correlations",
    "write_matrix_world",
]

"""Benchmark overlap at three levels -- semantic, performance, signature -- and the
analyses of the overlap matrices (group tests, function matrices, clustering, robustness).
"""

from ._analysis import (
    ClusterResult,
    agreement,
    cluster,
    function_matrix,
    group_test,
    signature_content_alignment,
    spread,
    unit_contexts,
)
from ._embed import (
    DEFAULT_BATCH_SIZE,
    default_encoder_path,
    embed_texts,
    encoder_id,
    load_encoder,
    mean_embedding,
)
from ._matrix import (
    LEVELS,
    OverlapMatrix,
    bootstrap_ci,
    load_overlap_matrix,
    pair_intervals,
    save_overlap_matrix,
    spearman_matrix,
    toy_overlap,
)
from ._performance import (
    performance_overlap,
)
from ._robustness import (
    Variant,
    corpus_half_split,
    signature_robustness,
)
from ._semantic import (
    sample_questions,
    semantic_overlap,
)
from ._signature import (
    SignatureLike,
    SignedUnits,
    UnitBits,
    signature_level,
    signature_model_scores,
    signature_overlap,
    signature_overlap_null,
    signed_units,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "LEVELS",
    "ClusterResult",
    "OverlapMatrix",
    "SignatureLike",
    "SignedUnits",
    "UnitBits",
    "Variant",
    "agreement",
    "bootstrap_ci",
    "cluster",
    "corpus_half_split",
    "default_encoder_path",
    "embed_texts",
    "encoder_id",
    "function_matrix",
    "group_test",
    "load_encoder",
    "load_overlap_matrix",
    "mean_embedding",
    "pair_intervals",
    "performance_overlap",
    "sample_questions",
    "save_overlap_matrix",
    "semantic_overlap",
    "signature_content_alignment",
    "signature_level",
    "signature_model_scores",
    "signature_overlap",
    "signature_overlap_null",
    "signature_robustness",
    "signed_units",
    "spearman_matrix",
    "spread",
    "toy_overlap",
    "unit_contexts",
]

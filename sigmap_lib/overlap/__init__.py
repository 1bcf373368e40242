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
)
from ._embed import (
    default_encoder_path,
    embed_texts,
    encoder_id,
    load_encoder,
    mean_embedding,
)
from ._matrix import (
    OverlapMatrix,
    bootstrap_ci,
    spearman_matrix,
    toy_overlap,
)
from ._performance import (
    performance_overlap,
)
from ._robustness import (
    Variant,
    signature_robustness,
)
from ._semantic import (
    semantic_overlap,
)
from ._signature import (
    signature_model_scores,
    signature_overlap,
    signature_overlap_null,
)

__all__ = [
    "ClusterResult",
    "OverlapMatrix",
    "Variant",
    "agreement",
    "bootstrap_ci",
    "cluster",
    "default_encoder_path",
    "embed_texts",
    "encoder_id",
    "function_matrix",
    "group_test",
    "load_encoder",
    "mean_embedding",
    "performance_overlap",
    "semantic_overlap",
    "signature_content_alignment",
    "signature_model_scores",
    "signature_overlap",
    "signature_overlap_null",
    "signature_robustness",
    "spearman_matrix",
    "spread",
    "toy_overlap",
]

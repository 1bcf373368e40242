"""The embedded zoo: tiny real transformers trained locally on text every Python
install has, and loglikelihood benchmarks built from held-out text.
"""

from ._benchmarks import (
    FAMILIES,
    ZooBenchmark,
    ZooItem,
    build_zoo_benchmarks,
)
from ._models import (
    MIXTURES,
    SIZES,
    ZOO_MODELS,
    Progress,
    ZooModelSpec,
    build_texts,
    checkpoint_steps,
    model_specs,
    train_tokenizers,
)
from ._scoring import (
    RequestBatches,
    batch_requests,
    encode_requests,
    loglikelihoods,
    score_benchmarks,
)
from ._text import (
    DOMAINS,
    SPLITS,
    ZooTexts,
)
from ._world import (
    ZooWorld,
    build_zoo_world,
)

__all__ = [
    "DOMAINS",
    "FAMILIES",
    "MIXTURES",
    "SIZES",
    "SPLITS",
    "ZOO_MODELS",
    "Progress",
    "RequestBatches",
    "ZooBenchmark",
    "ZooItem",
    "ZooModelSpec",
    "ZooTexts",
    "ZooWorld",
    "batch_requests",
    "build_texts",
    "build_zoo_benchmarks",
    "build_zoo_world",
    "checkpoint_steps",
    "encode_requests",
    "loglikelihoods",
    "model_specs",
    "score_benchmarks",
    "train_tokenizers",
]

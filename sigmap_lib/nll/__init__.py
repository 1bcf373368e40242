"""Per-unit negative log-likelihoods: scoring documents with Hugging Face causal LMs
(byte apportioning to corpus units; GGUF files dequantized and cached), the per-model zarr
NLL store, and the rank store.
"""

from sigmap_lib._util import ConcatArray, files_stamp

from ._arrays import check_model_arrays, iter_value_chunks, read_points, values_dtype
from ._fingerprint import file_sha256, imported_fingerprint, model_files, model_fingerprint
from ._gguf import convert_gguf, gguf_architecture, is_gguf_path
from ._loading import load_model, model_context_length, resolve_device
from ._merge import BpbMoments, bpb_moments, merge_bpb_moments
from ._perplexity import (
    apportion_token_nll,
    document_unit_nll,
    score_corpus,
    token_nll,
)
from ._rank_codes import (
    EXACT_INT_DTYPES,
    MAX_MODELS_UINT8,
    as_2d_values,
    decode_ranks,
    encode_ranks,
    numba_kernels,
    rank_dtype,
    rank_rows,
)
from ._ranks import RankStore, build_rank_store, rank_store_identity
from ._sharded import Coverage, ShardedRanks, select_coverage
from ._store import (
    NLLStore,
    import_nll,
    open_nll_source,
    shard_checksum,
)

__all__ = [
    "EXACT_INT_DTYPES",
    "MAX_MODELS_UINT8",
    "BpbMoments",
    "ConcatArray",
    "Coverage",
    "NLLStore",
    "RankStore",
    "ShardedRanks",
    "apportion_token_nll",
    "as_2d_values",
    "bpb_moments",
    "build_rank_store",
    "check_model_arrays",
    "convert_gguf",
    "decode_ranks",
    "document_unit_nll",
    "encode_ranks",
    "file_sha256",
    "files_stamp",
    "gguf_architecture",
    "import_nll",
    "imported_fingerprint",
    "is_gguf_path",
    "iter_value_chunks",
    "load_model",
    "merge_bpb_moments",
    "model_context_length",
    "model_files",
    "model_fingerprint",
    "numba_kernels",
    "open_nll_source",
    "rank_dtype",
    "rank_rows",
    "rank_store_identity",
    "read_points",
    "resolve_device",
    "score_corpus",
    "select_coverage",
    "shard_checksum",
    "token_nll",
    "values_dtype",
]

"""Fixtures for the GGUF tests: a tiny Llama written as an (unquantized) GGUF file.

The writer follows llama.cpp's ``convert_hf_to_gguf.py`` for Llama: llama.cpp tensor
names, Q/K rows permuted into llama.cpp's rotary layout, a byte-level BPE vocabulary
(``tokenizer.ggml.model = "gpt2"``) with its merges. transformers reads it back through
``gguf_file=``, so the tests compare the converted model with the original one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` (HF rotary halves -> interleaved pairs)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_llama_gguf(model: Any, tokenizer: Any, path: Path, *, arch: str = "llama") -> Path:
    """Write a Hugging Face ``LlamaForCausalLM`` + byte-level BPE tokenizer as float32 GGUF."""
    import gguf

    cfg = model.config
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_name("tiny-llama-gguf")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    w.add_rope_dimension_count(cfg.hidden_size // n_head)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    tokens = [None] * len(tokenizer)
    for t, i in vocab.items():
        tokens[i] = t
    for added in spec["added_tokens"]:
        tokens[added["id"]] = added["content"]
    assert all(t is not None for t in tokens)
    special = set(tokenizer.all_special_ids)
    types = [
        gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
        for i in range(len(tokens))
    ]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokenizer.bos_token_id)
    w.add_eos_token_id(tokenizer.eos_token_id)
    w.add_pad_token_id(tokenizer.pad_token_id)
    w.add_unk_token_id(tokenizer.unk_token_id)
    w.add_add_bos_token(False)

    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    per_layer = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for i in range(cfg.num_hidden_layers):
        for hf, gg in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{gg}.weight"
    state = model.state_dict()
    if getattr(cfg, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    for key, tensor in state.items():
        arr = tensor.detach().float().numpy().copy()
        if key.endswith("q_proj.weight"):
            arr = _permute(arr, n_head)
        elif key.endswith("k_proj.weight"):
            arr = _permute(arr, n_kv)
        w.add_tensor(names[key], arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    """``(gguf_path, hf_model, tokenizer)``: a tiny trained Llama (grouped-query attention,
    untied head) with a byte-level BPE tokenizer, written as a float32 GGUF file."""
    from tests.lib.helpers import train_tiny_lm

    model, tok = train_tiny_lm(
        "llama", vocab_size=400, style="byte_level", n_ctx=96, seed=3, n_head=4,
        num_key_value_heads=2,
    )  # fmt: skip
    model.eval()
    path = write_llama_gguf(model, tok, tmp_path_factory.mktemp("gguf") / "tiny-llama.F32.gguf")
    return path, model, tok

"""Model FLOPs of the perplexity benches: the parameters that take part in matrix products."""

from __future__ import annotations

from typing import Any


def matmul_params(model: Any) -> int:
    """Parameters that take part in matrix products (excludes input embeddings, norms,
    biases; a tied LM head counts once more).

    Examples
    --------
    >>> from sigmap_lib.perf._flops import matmul_params
    >>> from sigmap_lib.worlds import build_causal_lm
    >>> model = build_causal_lm("gpt2", 100, d_model=8, n_layer=1, n_head=2, n_ctx=16)
    >>> matmul_params(model)  # 4·8·8 attention + 2·8·32 MLP + the tied 100 × 8 head
    1568
    """
    emb = model.get_input_embeddings().weight
    out_emb = model.get_output_embeddings()
    tied = out_emb is not None and out_emb.weight.data_ptr() == emb.data_ptr()
    n = 0
    for p in model.parameters():
        if p.ndim < 2 or p.data_ptr() == emb.data_ptr():
            continue
        n += p.numel()
    # position embeddings (GPT-2 wpe) are lookups, not matmuls
    for name, p in model.named_parameters():
        if "wpe" in name or "position" in name:
            n -= p.numel()
    if tied:
        n += emb.numel()  # the LM head uses the tied matrix once more
    return n

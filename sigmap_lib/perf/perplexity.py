"""``sigmap bench perplexity``: throughput of per-unit NLL scoring.

CPU (default): a tiny randomly initialised GPT-2 (≈1M parameters, byte-level BPE trained
on the synthetic corpus) scores a synthetic corpus of ≥ 200k tokens through the full
path (:func:`sigmap_lib.nll.score_corpus`: tokenization, windowing, batching,
forward pass, byte apportioning, zarr shard commits). Reported: tokens/s of the forward
pass alone (time inside the model call and the NLL gather), tokens/s end to end, the
overhead of everything else relative to the forward pass (target ≤ 10%), padding.

GPU (``--device cuda``): the same on a ≥ 100M-parameter randomly initialised Llama-style
model in bfloat16, plus the achieved model FLOP/s and the bf16 model FLOP utilisation
(MFU) against an assumed dense bf16 peak (default 989 TFLOP/s, H100/H200 SXM).

FLOP count per processed token (forward only): ``2·N_matmul + 4·n_layer·T̄·d_model`` where
``N_matmul`` = parameters used in matrix products (all but the input embedding and
norms; the LM head included) and ``T̄`` = mean attended context, half the mean window
length (causal attention: QKᵀ and AV each ``2·T̄·d`` per token per layer).
Window re-computation of overlapping context is counted as work actually done (FLOPs
are over all processed token slots that are not padding), while tokens/s counts scored
tokens only.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _log(msg: str) -> None:
    print(f"[bench perplexity] {msg}", file=sys.stderr, flush=True)


def _matmul_params(model: Any) -> int:
    """Parameters that take part in matrix products (excludes input embeddings, norms, biases)."""
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns the result dict (the CLI prints it as one JSON line)."""
    ap = argparse.ArgumentParser(prog="sigmap bench perplexity", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda, mps or auto")
    ap.add_argument("--tokens", type=int, default=None, help="corpus size target in tokens "
                    "(default 220k on CPU, 4M on GPU)")  # fmt: skip
    ap.add_argument("--batch-tokens", type=int, default=None, help="token slots per forward "
                    "(default 8192 CPU, 65536 GPU)")  # fmt: skip
    ap.add_argument(
        "--max-length", type=int, default=None, help="window length (default: model context)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--model-size", choices=["auto", "tiny", "100m"], default="auto",
                    help="tiny (~1M GPT-2, CPU default) or 100m (~134M Llama bf16, GPU default)")  # fmt: skip
    ap.add_argument("--d-model", type=int, default=None)
    ap.add_argument("--n-layer", type=int, default=None)
    ap.add_argument("--shard-units", type=int, default=65536)
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="assumed dense bf16 peak for MFU (H100/H200 SXM: 989)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--workdir", default=None, help="where to write the corpus/NLL stores (default: temp)"
    )
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from sigmap_lib.inputs._corpus import Document, build_corpus_store
    from sigmap_lib.nll._perplexity import resolve_device, score_corpus
    from sigmap_lib.nll._store import NLLStore
    from sigmap_lib.worlds._tiny import build_causal_lm, random_text, train_bpe_tokenizer

    device = resolve_device(args.device)
    gpu = device.startswith("cuda")
    big = args.model_size == "100m" or (args.model_size == "auto" and gpu)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    target_tokens = args.tokens or (4_000_000 if gpu else 220_000)
    batch_tokens = args.batch_tokens or (65536 if gpu else 8192)

    # ---- corpus: synthetic documents, some longer than the context
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    lo, hi = (300, 2500) if big else (20, 400)
    texts: list[str] = []
    approx_tokens = 0
    tokens_per_word = 1.6  # refined after the tokenizer exists
    while approx_tokens < target_tokens * 1.15:
        n = int(rng.integers(lo, hi))
        texts.append(random_text(rng, n))
        approx_tokens += int(n * tokens_per_word)
    tok = train_bpe_tokenizer(texts[:400], vocab_size=2048 if big else 512)
    n_tok = sum(len(x) for x in tok(texts, add_special_tokens=False)["input_ids"])
    while n_tok < target_tokens:  # top up if the estimate was low
        extra = [
            random_text(rng, int(rng.integers(lo, hi))) for _ in range(max(1, len(texts) // 10))
        ]
        n_tok += sum(len(x) for x in tok(extra, add_special_tokens=False)["input_ids"])
        texts.extend(extra)
    _log(f"corpus: {len(texts)} documents, {n_tok} tokens ({time.perf_counter() - t0:.1f}s)")

    # ---- model
    if big:
        d_model, n_layer = args.d_model or 768, args.n_layer or 12
        model = build_causal_lm(
            "llama", 32000, d_model=d_model, n_layer=n_layer, n_head=d_model // 64, n_ctx=2048,
            seed=args.seed, intermediate_size=int(8 * d_model / 3 // 64 * 64),
        )  # fmt: skip
        model = model.to(device=device, dtype=torch.bfloat16 if gpu else torch.float32)
        arch = "llama"
    else:
        d_model, n_layer = args.d_model or 128, args.n_layer or 4
        model = build_causal_lm(
            "gpt2", len(tok), d_model=d_model, n_layer=n_layer, n_head=max(1, d_model // 32), n_ctx=256,
            seed=args.seed,
        )  # fmt: skip
        model = model.to(device)
        arch = "gpt2"
    n_params = sum(p.numel() for p in model.parameters())
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    _log(
        f"model: {arch} d_model={d_model} n_layer={n_layer} params={n_params / 1e6:.1f}M on {device} {dtype}"
    )

    # ---- score through the full path
    work = (
        Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sigmap-bench-ppl-"))
    )
    t1 = time.perf_counter()
    docs = [Document(f"d{i}", "bench", t) for i, t in enumerate(texts)]
    corpus = build_corpus_store(docs, work / "corpus", shard_units=args.shard_units)
    corpus_seconds = time.perf_counter() - t1
    store = NLLStore.create_or_open(
        work / "nll", corpus.n_units, corpus.shard_bounds, corpus.fingerprint
    )
    if gpu:  # warm-up (kernel selection, allocator) outside the timed run
        from sigmap_lib.nll._perplexity import document_unit_nll

        document_unit_nll(
            model, tok, texts[:8], max_length=args.max_length, batch_tokens=batch_tokens
        )
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    stats = score_corpus(
        model, tok, corpus, store, max_length=args.max_length, batch_tokens=batch_tokens,
        progress=lambda p: _log(f"shard {p['shard']} done ({p['tokens_per_s']:.0f} tok/s)"),
    )  # fmt: skip
    total = time.perf_counter() - t2
    fwd = stats["forward_seconds"]
    tokens = stats["tokens"]
    result: dict[str, Any] = {
        "bench": "perplexity",
        "device": device,
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "model": {
            "arch": arch,
            "n_params": n_params,
            "d_model": d_model,
            "n_layer": n_layer,
            "vocab": int(model.config.vocab_size),
        },
        "corpus": {
            "documents": corpus.n_documents,
            "units": corpus.n_units,
            "bytes": corpus.n_bytes,
            "shards": len(corpus.shards),
            "build_seconds": round(corpus_seconds, 3),
        },
        "tokens": tokens,
        "batch_tokens": batch_tokens,
        "forward_tokens_per_s": tokens / fwd if fwd > 0 else math.nan,
        "end_to_end_tokens_per_s": tokens / total if total > 0 else math.nan,
        "overhead_fraction": (total - fwd) / fwd if fwd > 0 else math.nan,
        # window overlap: non-padding token slots processed per scored token
        "recompute_factor": stats["real_slots"] / tokens if tokens else math.nan,
        "forward_processed_tokens_per_s": stats["real_slots"] / fwd if fwd > 0 else math.nan,
        "overhead_target": 0.10,
        "padding_fraction": stats["padding_fraction"],
        "seconds": {
            "forward": round(fwd, 3),
            "align": round(stats["align_seconds"], 3),
            "store": round(stats["store_seconds"], 3),
            "total": round(total, 3),
        },
        "bits_per_byte": stats["bits_per_byte"],
    }
    result["overhead_ok"] = bool(result["overhead_fraction"] <= 0.10)
    if big or gpu:
        from sigmap_lib.nll._perplexity import model_context_length

        L = args.max_length or model_context_length(model, tok)
        nm = _matmul_params(model)
        # processed (non-padding) slots; mean attended context of a window of length w is ~w/2
        real = stats["real_slots"] or tokens
        mean_ctx = min(L, real / max(1, stats["windows"])) / 2
        flops = real * (2 * nm + 2 * n_layer * mean_ctx * d_model * 2)
        achieved = flops / fwd / 1e12
        result.update(
            {
                "matmul_params": nm,
                "achieved_tflops": achieved,
                "peak_tflops_assumed": args.peak_tflops,
                "mfu": achieved / args.peak_tflops,
                "flops_note": "forward only; 2*N_matmul + 4*n_layer*d_model*(mean window/2) per processed token",
            }
        )
    _log(
        f"forward {result['forward_tokens_per_s']:.0f} tok/s, end-to-end "
        f"{result['end_to_end_tokens_per_s']:.0f} tok/s, overhead {result['overhead_fraction']:.1%}, "
        f"padding {result['padding_fraction']:.1%}"
    )
    return result


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(main()))

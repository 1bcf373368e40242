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

A real model (``--model PATH``: a ``save_pretrained`` folder or a ``.gguf`` file,
dequantized once into ``--gguf-cache``): the same full path on real documents (``--docs``,
any corpus file or folder; default: module docstrings and source code of the Python
standard library, about ``--tokens`` tokens, 4,000 by default, each document shorter than
the context), then, in the same process on the same documents, lm-evaluation-harness'
``loglikelihood_rolling`` through its Hugging Face model class (``HFLM`` wrapping the
already loaded model and tokenizer, offline). Reported: tokens/s of the forward pass alone
and end to end, lm-eval's time and its ratio to ours (``time_ratio`` = lm-eval seconds /
our end-to-end seconds), and the largest per-document difference of total NLL (nats).
Both prepend the same prefix token (BOS, else EOS); for documents longer than the
context the two window schemes differ (ours strides with overlap, lm-eval's windows are
disjoint), which ``lm_eval.windows_match`` reports.

Memory (both modes, in ``memory`` of the JSON line): the process's resident set once the
model is loaded and warmed up (``rss_loaded_bytes``: with ``--model`` after one short
document, which pages in the memory-mapped safetensors weights; ``weights_bytes`` = the
parameters' bytes), its peak while scoring (``peak_rss_bytes``: Linux ``VmHWM`` after
resetting it through ``/proc/self/clear_refs`` at that point, so the load and a GGUF
conversion do not count; else ``ru_maxrss`` of the whole process, ``peak_method`` says
which),
``peak_above_loaded_bytes`` and that per token slot of the largest batch
(``peak_above_loaded_per_slot_bytes``). Scoring builds logits only ``logits_chunk ×
vocab`` at a time (``--logits-chunk``, 0 = the full-logits path), so the peak above the
loaded model grows with ``batch_tokens`` by the model body's activations per slot only.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sigmap_lib.perf._flops import matmul_params

__all__ = ["main"]


def _log(msg: str) -> None:
    print(f"[bench perplexity] {msg}", file=sys.stderr, flush=True)


def _proc_status(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes (``None`` where unavailable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _rss_bytes() -> int:
    v = _proc_status("VmRSS")
    if v is not None:
        return v
    import psutil

    return int(psutil.Process().memory_info().rss)


class _PeakRSS:
    """Peak resident set size from now on (Linux: reset ``VmHWM``; else ``ru_maxrss``)."""

    def __init__(self) -> None:
        import gc

        gc.collect()
        self.loaded = _rss_bytes()
        self.method = "ru_maxrss (whole process)"
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")  # reset the peak RSS to the current RSS (Linux >= 4.0)
            hwm = _proc_status("VmHWM")
            if hwm is not None and hwm <= self.loaded + (16 << 20):
                self.method = "VmHWM reset after load"
        except OSError:
            pass

    def peak(self) -> int:
        hwm = _proc_status("VmHWM")
        if hwm is not None and self.method.startswith("VmHWM"):
            return hwm
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(kb) * (1 if sys.platform == "darwin" else 1024)

    def report(self, model: Any, max_slots: int, device: str) -> dict[str, Any]:
        peak = max(self.peak(), _rss_bytes())
        above = peak - self.loaded
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        out: dict[str, Any] = {
            "peak_method": self.method,
            "weights_bytes": int(weights),
            "rss_loaded_bytes": int(self.loaded),
            "peak_rss_bytes": int(peak),
            "peak_above_loaded_bytes": int(above),
            "max_batch_slots": int(max_slots),
            "peak_above_loaded_per_slot_bytes": above / max_slots if max_slots else math.nan,
        }
        if device.startswith("cuda"):
            import torch

            out["cuda_peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
        return out


def _start_peak(device: str) -> _PeakRSS:
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats()
    return _PeakRSS()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns the result dict (the CLI prints it as one JSON line)."""
    ap = argparse.ArgumentParser(prog="sigmap bench perplexity", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda, mps or auto")
    ap.add_argument("--tokens", type=int, default=None, help="corpus size target in tokens "
                    "(default 220k on CPU, 4M on GPU; 4,000 with --model)")  # fmt: skip
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
    ap.add_argument("--model", default=None, help="a real model: save_pretrained folder or "
                    ".gguf file (then --docs / --tokens choose the documents)")  # fmt: skip
    ap.add_argument("--docs", default=None, help="with --model: corpus file or folder "
                    "(default: Python standard-library docstrings and source)")  # fmt: skip
    ap.add_argument(
        "--dtype", default="auto", help="with --model: auto, float32, bfloat16, float16"
    )
    ap.add_argument("--gguf-cache", default=None, help="with a .gguf --model: converted-model "
                    "cache folder (default: <workdir>/gguf)")  # fmt: skip
    ap.add_argument("--lm-eval-batch-size", type=int, default=16,
                    help="with --model: lm-eval HFLM batch size")  # fmt: skip
    ap.add_argument("--no-lm-eval", action="store_true", help="with --model: skip lm-eval")
    ap.add_argument("--logits-chunk", type=int, default=None, help="scored positions per LM-head "
                    "slice (default: ~32 MiB of float32 logits on CPU; 0: full logits)")  # fmt: skip
    ap.add_argument("--shapes", nargs="+", default=None, metavar="SHAPE",
                    help="random-initialised models of real shapes instead (smollm2-135m, "
                    "gemma3-270m, llama-3.2-1b, llama-2-7b): sigmap_lib.perf.shapes")  # fmt: skip
    ap.add_argument("--peak-measured", type=float, default=790.0,
                    help="with --shapes: measured bf16 matmul limit (H200: 790 TFLOP/s)")  # fmt: skip
    ap.add_argument("--max-cpu-gib", type=float, default=8.0,
                    help="with --shapes on a CPU: skip shapes with larger float32 weights")  # fmt: skip
    args = ap.parse_args(argv)
    if args.shapes is not None:
        from sigmap_lib.perf.shapes import run_shapes

        return run_shapes(args)
    if args.model is not None:
        return _model_bench(args)

    import numpy as np
    import torch

    from sigmap_lib.inputs import Document, build_corpus_store
    from sigmap_lib.nll import NLLStore, resolve_device, score_corpus
    from sigmap_lib.worlds import build_causal_lm, random_text, train_bpe_tokenizer

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
        from sigmap_lib.nll import document_unit_nll

        document_unit_nll(
            model, tok, texts[:8], max_length=args.max_length, batch_tokens=batch_tokens,
            logits_chunk=args.logits_chunk,
        )  # fmt: skip
        torch.cuda.synchronize()
    peak = _start_peak(device)
    t2 = time.perf_counter()
    stats = score_corpus(
        model, tok, corpus, store, max_length=args.max_length, batch_tokens=batch_tokens,
        progress=lambda p: _log(f"shard {p['shard']} done ({p['tokens_per_s']:.0f} tok/s)"),
        logits_chunk=args.logits_chunk,
    )  # fmt: skip
    total = time.perf_counter() - t2
    memory = peak.report(model, stats["max_batch_slots"], device)
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
        "logits_chunk": args.logits_chunk,
        "full_logits_batches": stats["full_logits_batches"],
        "memory": memory,
    }
    result["overhead_ok"] = bool(result["overhead_fraction"] <= 0.10)
    if big or gpu:
        from sigmap_lib.nll import model_context_length

        L = args.max_length or model_context_length(model, tok)
        nm = matmul_params(model)
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
    _log_memory(memory)
    return result


def _log_memory(m: dict[str, Any]) -> None:
    mb = 1 / (1 << 20)
    _log(f"memory: loaded {m['rss_loaded_bytes'] * mb:.0f} MiB (weights "
         f"{m['weights_bytes'] * mb:.0f} MiB), peak {m['peak_rss_bytes'] * mb:.0f} MiB, "
         f"+{m['peak_above_loaded_bytes'] * mb:.0f} MiB above loaded = "
         f"{m['peak_above_loaded_per_slot_bytes'] / 1024:.1f} KiB per slot of the largest "
         f"batch ({m['max_batch_slots']} slots; {m['peak_method']})")  # fmt: skip


#: Standard-library modules whose docstrings (English prose) and source code make the
#: default real-model documents (every Python installation has them).
STDLIB_MODULES = (
    "textwrap", "argparse", "json", "csv", "difflib", "statistics", "fractions", "heapq",
    "shlex", "calendar", "string", "bisect", "functools", "pathlib", "dataclasses",
    "contextlib", "zipfile", "logging", "tarfile", "inspect",
)  # fmt: skip


def _chunks(tokenizer: Any, text: str, max_tokens: int) -> list[str]:
    """``text`` cut at line boundaries into pieces of at most ``max_tokens`` tokens each
    (a single longer line is dropped)."""

    def n(t: str) -> int:
        return len(tokenizer(t, add_special_tokens=False)["input_ids"])

    out: list[str] = []
    cur = ""
    for line in text.splitlines(keepends=True):
        if n(cur + line) <= max_tokens:
            cur += line
            continue
        if cur.strip():
            out.append(cur.strip())
        cur = line if n(line) <= max_tokens else ""
    if cur.strip():
        out.append(cur.strip())
    return out


def _stdlib_documents(tokenizer: Any, target_tokens: int, max_tokens: int) -> list[Any]:
    """Real documents: the module docstring and the first ~2,500 characters of the code of
    each of :data:`STDLIB_MODULES`, until ``target_tokens`` tokens; each document has at
    most ``max_tokens`` tokens (so it fits the context in one window)."""
    import importlib
    import inspect

    from sigmap_lib.inputs import Document

    docs: list[Any] = []
    n = 0
    for name in STDLIB_MODULES:
        mod = importlib.import_module(name)
        src = Path(inspect.getsourcefile(mod) or "").read_text(encoding="utf-8")
        doc = inspect.getdoc(mod) or ""
        body = src[src.find(doc[-40:]) + 40 :] if doc and doc[-40:] in src else src
        cut = body.find("\n", 2500)
        for kind, text in (("doc", doc), ("source", body[: cut if cut > 0 else len(body)])):
            for k, piece in enumerate(_chunks(tokenizer, text, max_tokens)):
                if len(piece) < 80:
                    continue
                docs.append(Document(f"{name}:{kind}:{k}", "stdlib", piece))
                n += len(tokenizer(piece, add_special_tokens=False)["input_ids"])
                if n >= target_tokens:
                    return docs
    return docs


def _model_bench(args: argparse.Namespace) -> dict[str, Any]:
    """``--model``: a real model through the full path, then lm-eval on the same documents."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import numpy as np
    import torch

    from sigmap_lib.inputs import build_corpus_store, read_corpus
    from sigmap_lib.nll import (
        NLLStore,
        document_unit_nll,
        is_gguf_path,
        load_model,
        model_context_length,
        resolve_device,
        score_corpus,
    )

    device = resolve_device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    work = (
        Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="sigmap-bench-ppl-"))
    )
    gguf = is_gguf_path(args.model)
    t0 = time.perf_counter()
    model, tok = load_model(
        args.model, device=device, dtype=args.dtype,
        gguf_cache=Path(args.gguf_cache) if args.gguf_cache else work / "gguf",
    )  # fmt: skip
    load_seconds = time.perf_counter() - t0
    L = args.max_length or model_context_length(model, tok)
    n_params = sum(p.numel() for p in model.parameters())
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    _log(f"model {args.model}: {model.config.model_type} {n_params / 1e6:.1f}M params, "
         f"{device} {dtype}, context {L} (loaded in {load_seconds:.1f}s)")  # fmt: skip

    if args.docs:
        docs = read_corpus(args.docs)
    else:
        docs = _stdlib_documents(tok, args.tokens or 4000, L - 1)
    work.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus_store(docs, work / "corpus", shard_units=args.shard_units)
    texts = corpus.documents()
    n_tok = [len(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]
    _log(f"documents: {len(texts)}, {sum(n_tok)} tokens, {corpus.n_bytes} bytes")
    store = NLLStore.create_or_open(
        work / "nll", corpus.n_units, corpus.shard_bounds, corpus.fingerprint
    )
    batch_tokens = args.batch_tokens or (65536 if device.startswith("cuda") else 8192)
    # warm-up (thread pools, allocator, kernel selection; memory-mapped weights paged in)
    # outside both timed runs and before the memory baseline
    document_unit_nll(model, tok, [texts[0][:400]], max_length=L, logits_chunk=args.logits_chunk)
    peak = _start_peak(device)
    t2 = time.perf_counter()
    stats = score_corpus(
        model, tok, corpus, store, max_length=L, batch_tokens=batch_tokens,
        progress=lambda p: _log(f"shard {p['shard']} done ({p['tokens_per_s']:.0f} tok/s)"),
        logits_chunk=args.logits_chunk,
    )  # fmt: skip
    total = time.perf_counter() - t2
    memory = peak.report(model, stats["max_batch_slots"], device)
    fwd, tokens = stats["forward_seconds"], stats["tokens"]
    values = store.read().astype(np.float64)
    ours = np.bincount(corpus.unit_doc, weights=values, minlength=len(texts))
    result: dict[str, Any] = {
        "bench": "perplexity",
        "mode": "model",
        "device": device,
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "model": {
            "path": str(args.model),
            "gguf": gguf,
            "arch": str(model.config.model_type),
            "n_params": n_params,
            "vocab": int(model.config.vocab_size),
            "context": L,
        },
        "corpus": {
            "documents": len(texts),
            "units": corpus.n_units,
            "bytes": corpus.n_bytes,
            "source": str(args.docs) if args.docs else "python-stdlib",
            "max_document_tokens": max(n_tok),
        },
        "tokens": tokens,
        "batch_tokens": batch_tokens,
        "forward_tokens_per_s": tokens / fwd if fwd > 0 else math.nan,
        "end_to_end_tokens_per_s": tokens / total if total > 0 else math.nan,
        "overhead_fraction": (total - fwd) / fwd if fwd > 0 else math.nan,
        "padding_fraction": stats["padding_fraction"],
        "bits_per_byte": stats["bits_per_byte"],
        "seconds": {
            "load": round(load_seconds, 3),
            "forward": round(fwd, 3),
            "align": round(stats["align_seconds"], 3),
            "store": round(stats["store_seconds"], 3),
            "total": round(total, 3),
        },
        "logits_chunk": args.logits_chunk,
        "full_logits_batches": stats["full_logits_batches"],
        "memory": memory,
    }
    _log_memory(memory)
    _log(f"ours: forward {result['forward_tokens_per_s']:.0f} tok/s, end-to-end "
         f"{result['end_to_end_tokens_per_s']:.0f} tok/s, {result['bits_per_byte']:.3f} bits/byte")  # fmt: skip
    if not args.no_lm_eval:
        result["lm_eval"] = _lm_eval_rolling(
            model, tok, texts, ours, L, args.lm_eval_batch_size, total
        )
        le = result["lm_eval"]
        _log(f"lm-eval {le['version']}: {le['tokens_per_s']:.0f} tok/s, time ratio "
             f"{le['time_ratio']:.2f}, max |ΔNLL| per document {le['max_abs_nll_diff']:.2e} nats")  # fmt: skip
    return result


def _lm_eval_rolling(model: Any, tok: Any, texts: list[str], ours: Any, max_length: int,
                     batch_size: int, our_seconds: float) -> dict[str, Any]:  # fmt: skip
    """lm-eval's ``loglikelihood_rolling`` on ``texts`` with the loaded model, vs ``ours``."""
    from importlib.metadata import version

    import numpy as np
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tok, backend="causal", batch_size=batch_size,
              max_length=max_length)  # fmt: skip
    requests = [
        Instance(request_type="loglikelihood_rolling", doc={"text": t}, arguments=(t,), idx=i)
        for i, t in enumerate(texts)
    ]
    lengths = [len(lm.tok_encode(t)) for t in texts]
    t0 = time.perf_counter()
    ll = lm.loglikelihood_rolling(requests, disable_tqdm=True)
    seconds = time.perf_counter() - t0
    theirs = -np.asarray(ll, dtype=np.float64)
    diff = np.abs(ours - theirs)
    return {
        "version": version("lm-eval"),
        "batch_size": batch_size,
        "prefix_token_id": int(lm.prefix_token_id),
        "tokens": int(sum(lengths)),
        "seconds": round(seconds, 3),
        "tokens_per_s": sum(lengths) / seconds if seconds > 0 else math.nan,
        "time_ratio": seconds / our_seconds if our_seconds > 0 else math.nan,
        "total_nll": float(theirs.sum()),
        "our_total_nll": float(ours.sum()),
        "max_abs_nll_diff": float(diff.max()),
        "max_rel_nll_diff": float((diff / np.abs(theirs)).max()),
        "mean_abs_nll_diff": float(diff.mean()),
        "windows_match": bool(max(lengths) + 1 <= max_length),
    }


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(main()))

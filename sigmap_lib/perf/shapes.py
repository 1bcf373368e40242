"""``sigmap bench perplexity --shapes NAME ...``: the scoring loop on the shapes users score.

Each shape is a randomly initialised model with the architecture of a real one (no weights
are needed: speed depends on the shape, not on the values): SmolLM2-135M, Gemma 3 270M (its
262,144-token vocabulary), Llama 3.2 1B and Llama 2 7B. On each, :func:`sigmap_lib.nll.token_nll`
scores random token windows of ``--max-length`` tokens twice — NLL kept on the device until
the end (the default) and copied to the host after every batch (``sync_per_batch``) — and
one batch is timed piece by piece (model body, LM head and loss, host copy), each piece
closed by a device synchronisation. Reported per shape: tokens/s of both runs, model FLOP/s,
MFU against the measured bf16 matrix-product limit (``--peak-measured``, 790 TFLOP/s on an
H200) and the nominal peak (``--peak-tflops``, 989), the time split, peak device memory.
FLOPs per token as in :mod:`sigmap_lib.perf.perplexity` (``2·N_matmul + 4·n_layer·T̄·d``).

On a CPU the shapes run in float32 and shapes whose float32 weights exceed
``--max-cpu-gib`` are skipped with the reason (a 7B model needs 28 GiB).
"""

from __future__ import annotations

import time
from typing import Any

#: name -> (transformers config class, its keyword arguments): the published architectures
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm2-135m": (
        "LlamaConfig",
        dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
             num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
             max_position_embeddings=8192, tie_word_embeddings=True),
    ),
    "gemma3-270m": (
        "Gemma3TextConfig",
        dict(hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
             num_attention_heads=4, num_key_value_heads=1, head_dim=256, vocab_size=262144,
             max_position_embeddings=32768, sliding_window=512),
    ),
    "llama-3.2-1b": (
        "LlamaConfig",
        dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
             num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
             max_position_embeddings=131072, rope_theta=500000.0, tie_word_embeddings=True),
    ),
    "llama-2-7b": (
        "LlamaConfig",
        dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
             max_position_embeddings=4096),
    ),
}  # fmt: skip


def shape_config(name: str) -> Any:
    """The transformers config of a shape of :data:`SHAPES` (SDPA attention).

    Examples
    --------
    >>> from sigmap_lib.perf.shapes import shape_config
    >>> c = shape_config("gemma3-270m")
    >>> c.vocab_size, c.num_hidden_layers, c.hidden_size
    (262144, 18, 640)
    """
    import transformers

    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; known: {sorted(SHAPES)}")
    cls, kw = SHAPES[name]
    return getattr(transformers, cls)(**kw, attn_implementation="sdpa")


def _weights_gib(cfg: Any, bytes_per: int) -> float:
    d, f, n, v = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    hd = getattr(cfg, "head_dim", None) or d // cfg.num_attention_heads
    attn = d * hd * (cfg.num_attention_heads * 2 + cfg.num_key_value_heads * 2)
    per_layer = attn + 3 * d * f
    emb = v * d * (1 if getattr(cfg, "tie_word_embeddings", False) else 2)
    return (n * per_layer + emb) * bytes_per / 2**30


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def bench_shape(
    name: str,
    *,
    device: str,
    tokens: int,
    max_length: int,
    batch_tokens: int,
    peak_measured: float = 790.0,
    peak_nominal: float = 989.0,
    max_cpu_gib: float = 8.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Benchmark one shape (see the module docstring); a dict with ``skipped`` when the
    shape does not fit this device.

    Examples
    --------
    >>> from sigmap_lib.perf.shapes import bench_shape
    >>> r = bench_shape("llama-2-7b", device="cpu", tokens=64, max_length=32,
    ...                 batch_tokens=64, max_cpu_gib=1.0)
    >>> r["skipped"].startswith("float32 weights")
    True
    """
    import numpy as np
    import torch

    from sigmap_lib.nll import token_nll
    from sigmap_lib.perf._flops import matmul_params

    cfg = shape_config(name)
    gpu = device.startswith("cuda")
    dtype = torch.bfloat16 if gpu else torch.float32
    gib = _weights_gib(cfg, 2 if gpu else 4)
    out: dict[str, Any] = {"shape": name, "device": device, "dtype": str(dtype).split(".")[-1],
                           "weights_gib": round(gib, 2)}  # fmt: skip
    if not gpu and gib > max_cpu_gib:
        out["skipped"] = (
            f"float32 weights of {gib:.1f} GiB exceed --max-cpu-gib {max_cpu_gib:g} on a CPU"
        )
        return out
    torch.manual_seed(seed)
    with torch.device(device):
        model = __import__("transformers").AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.eval()
    rng = np.random.default_rng(seed)
    n_win = max(1, tokens // max_length)
    seqs = [rng.integers(3, cfg.vocab_size, max_length + 1) for _ in range(n_win)]
    kw = {"max_length": max_length + 1, "stride": max_length, "batch_tokens": batch_tokens}
    token_nll(model, seqs[:1], **kw)  # warm-up (kernels, allocator)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    runs = {}
    for label, per_batch in (("one_copy", False), ("copy_per_batch", True)):
        stats: dict[str, Any] = {}
        _sync(device)
        t0 = time.perf_counter()
        token_nll(model, seqs, stats=stats, sync_per_batch=per_batch, **kw)
        _sync(device)
        secs = time.perf_counter() - t0
        runs[label] = {"seconds": round(secs, 3), "tokens_per_s": stats["tokens"] / secs,
                       "batches": stats["batches"]}  # fmt: skip
    n_mm = matmul_params(model)
    t_bar = max_length / 2.0
    flop_tok = 2.0 * n_mm + 4.0 * cfg.num_hidden_layers * t_bar * cfg.hidden_size
    best = runs["one_copy"]["tokens_per_s"]
    out.update(
        params=int(sum(p.numel() for p in model.parameters())),
        matmul_params=int(n_mm),
        tokens=int(n_win * max_length),
        max_length=max_length,
        batch_tokens=batch_tokens,
        runs=runs,
        model_tflops=flop_tok * best / 1e12,
        mfu_vs_measured=flop_tok * best / (peak_measured * 1e12),
        mfu_vs_nominal=flop_tok * best / (peak_nominal * 1e12),
        host_copy_gain=best / runs["copy_per_batch"]["tokens_per_s"],
    )
    # one batch piece by piece
    rows = max(1, batch_tokens // (max_length + 1))
    ids = torch.from_numpy(np.stack(seqs[:rows])).to(device)
    body, head = model.base_model, model.get_output_embeddings()
    with torch.inference_mode():
        _sync(device)
        t0 = time.perf_counter()
        hidden = body(input_ids=ids, use_cache=False).last_hidden_state
        _sync(device)
        t1 = time.perf_counter()
        flat = hidden[:, :-1].reshape(-1, hidden.shape[-1])
        y = ids[:, 1:].reshape(-1)
        step = 4096
        nll = torch.cat([
            torch.nn.functional.cross_entropy(head(flat[k:k + step]).float(), y[k:k + step],
                                              reduction="none")
            for k in range(0, len(y), step)
        ])  # fmt: skip
        _sync(device)
        t2 = time.perf_counter()
        nll.double().cpu().numpy()
        t3 = time.perf_counter()
    total = t3 - t0
    out["time_split"] = {
        "body": (t1 - t0) / total,
        "lm_head_and_loss": (t2 - t1) / total,
        "host_copy": (t3 - t2) / total,
    }
    if gpu:
        out["peak_device_bytes"] = int(torch.cuda.max_memory_allocated())
    del model
    if gpu:
        torch.cuda.empty_cache()
    return out


def run_shapes(args: Any) -> dict[str, Any]:
    """``sigmap bench perplexity --shapes ...``: every requested shape, then a summary.

    Examples
    --------
    >>> from argparse import Namespace
    >>> from sigmap_lib.perf.shapes import run_shapes
    >>> args = Namespace(device="cpu", shapes=["llama-2-7b"], tokens=64, max_length=32,
    ...                  batch_tokens=64, peak_measured=790.0, peak_tflops=989.0,
    ...                  max_cpu_gib=1.0, seed=0)
    >>> [s.get("skipped", "")[:15] for s in run_shapes(args)["shapes"]]
    ['float32 weights']
    """
    from sigmap_lib.nll import resolve_device

    device = resolve_device(args.device)
    gpu = device.startswith("cuda")
    res = []
    for name in args.shapes:
        r = bench_shape(
            name,
            device=device,
            tokens=args.tokens or (262_144 if gpu else 4096),
            max_length=args.max_length or (2048 if gpu else 256),
            batch_tokens=args.batch_tokens or (65536 if gpu else 2048),
            peak_measured=args.peak_measured,
            peak_nominal=args.peak_tflops,
            max_cpu_gib=args.max_cpu_gib,
            seed=args.seed,
        )
        line = r.get("skipped") or (
            f"{r['runs']['one_copy']['tokens_per_s']:.0f} tokens/s, MFU "
            f"{100 * r['mfu_vs_measured']:.1f} % of {args.peak_measured:g}"
        )
        print(f"[bench perplexity] {name}: {line}", flush=True, file=__import__("sys").stderr)
        res.append(r)
    return {"bench": "perplexity-shapes", "device": device, "shapes": res,
            "peak_measured_tflops": args.peak_measured, "peak_nominal_tflops": args.peak_tflops,
            }  # fmt: skip

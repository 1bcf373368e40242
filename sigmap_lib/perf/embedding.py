"""`sigmap bench embedding`: the sentence encoder's time and memory per batch size.

Embeds the zoo's benchmark questions (16 benchmarks × 100 items, the texts the demo's
semantic level draws from; ``--texts N``: the first N) with the default encoder
(all-MiniLM-L6-v2) at each batch size of ``--batch-sizes``, each in a fresh process so
that every size starts from the same memory. Per size: seconds, texts per second, the
peak resident memory above the loaded encoder (``VmHWM`` reset after loading, as in
``sigmap bench perplexity``) and the largest difference of any embedding coordinate from
the first size's. :data:`sigmap_lib.overlap.DEFAULT_BATCH_SIZE` is chosen from these
numbers (docs/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def zoo_questions(n: int | None = None) -> list[str]:
    """The zoo's benchmark question texts (seed 0), benchmark by benchmark; the first ``n``."""
    from sigmap_lib.worlds.zoo import build_texts, build_zoo_benchmarks

    benchmarks = build_zoo_benchmarks(build_texts(seed=0), n_items=100, seed=0)
    texts = [item.text for b in benchmarks for item in b.items]
    return texts if n is None else texts[:n]


def _child(args: argparse.Namespace) -> dict:
    """One batch size in this process: load, warm up, reset the peak, embed, save."""
    import torch

    from sigmap_lib.overlap import embed_texts, load_encoder
    from sigmap_lib.perf.perplexity import _PeakRSS

    torch.set_num_threads(args.threads)
    texts = json.loads(Path(args.texts_file).read_text())
    encoder = load_encoder()
    embed_texts(texts[:2], encoder=encoder, batch_size=2)  # first-call setup not counted
    peak = _PeakRSS()
    t0 = time.perf_counter()
    vec = embed_texts(texts, encoder=encoder, batch_size=args.child)
    seconds = time.perf_counter() - t0
    np.save(args.out, vec)
    top = max(peak.peak(), peak.loaded)
    return {
        "seconds": round(seconds, 2),
        "texts_per_s": round(len(texts) / seconds, 1),
        "rss_loaded_gb": round(peak.loaded / 1e9, 3),
        "peak_above_loaded_gb": round((top - peak.loaded) / 1e9, 3),
        "peak_method": peak.method,
    }


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the JSON-able result dict (one entry per batch size)."""
    from sigmap_lib.overlap import DEFAULT_BATCH_SIZE

    ap = argparse.ArgumentParser(prog="sigmap bench embedding", description=__doc__)
    ap.add_argument("--texts", type=int, default=None, help="embed the first N questions")
    ap.add_argument("--batch-sizes", default="64,32,16,8", help="comma-separated")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the demo uses 1)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--texts-file", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        return _child(args)

    sizes = [int(s) for s in args.batch_sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1:
        ap.error("--batch-sizes needs positive integers")
    texts = zoo_questions(args.texts)
    out: dict = {
        "bench": "embedding",
        "texts": len(texts),
        "threads": args.threads,
        "default_batch_size": DEFAULT_BATCH_SIZE,
    }
    with tempfile.TemporaryDirectory() as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts))
        first: np.ndarray | None = None
        for bs in sizes:
            print(f"[bench embedding] batch size {bs} ...", file=sys.stderr, flush=True)
            vec_file = Path(tmp) / f"vec{bs}.npy"
            cmd = [
                sys.executable, "-m", "sigmap_lib.perf.embedding", "--child", str(bs),
                "--threads", str(args.threads), "--texts-file", str(texts_file),
                "--out", str(vec_file),
            ]  # fmt: skip
            run = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if run.returncode != 0:
                raise RuntimeError(
                    f"bench embedding: batch size {bs} failed:\n{run.stderr[-3000:]}"
                )
            res = json.loads(run.stdout.strip().splitlines()[-1])
            vec = np.load(vec_file)
            first = vec if first is None else first
            res["max_abs_diff_vs_first"] = float(np.abs(vec - first).max())
            out[f"batch_{bs}"] = res
            print(f"[bench embedding] batch size {bs}: {res}", file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(main()))

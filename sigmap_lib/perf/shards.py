"""``sigmap bench shards``: the sharded stage 1 + 2 at scale against the monolithic path.

Synthetic per-unit NLL of ``--models`` models is written in the shard layout (one
:class:`~sigmap_lib.nll.NLLStore` per model × shard cell, ``--shards`` shards of uneven size,
``--units`` units in all), with ``--benchmarks`` benchmarks whose scores are planted in a few
units. Then, timed in the same run on the same cells:

* **sharded** (the asset graph's path): per shard, the rank store of its cells
  (``build_rank_store``) and one screening partial for every benchmark
  (``screen_partial``), over shards in a process pool of 1 and of ``--workers`` processes;
  then the exact merges (top-K, histograms, bits-per-byte moments) and AIC forward selection
  on each benchmark's merged candidates;
* **monolithic** (the single-store path): one rank store of all units built from the same
  cells read as one array per model (:class:`~sigmap_lib.nll.ConcatArray`), one ``screen``
  pass, the same selection.

Reported: cells/s (units × models per second) of each, the speed-up of ``--workers``
processes over 1, the peak RSS of each path (sampled over the process and its workers), and
``identical_to_monolithic``: merged candidates, strengths and histograms equal, selected units
equal, bits-per-byte moments equal to float rounding, rank codes equal on a random subsample
of ``--subsample`` units.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

#: Units per block of the per-shard stage (ranks and screening).
CHUNK_UNITS = 1 << 19


def _log(msg: str) -> None:
    print(f"[bench shards] {msg}", file=sys.stderr, flush=True)


class _TreeRSS:
    """Peak resident memory of this process plus its children, sampled every 20 ms."""

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        total = self.proc.memory_info().rss
        for c in self.proc.children(recursive=True):
            try:
                total += c.memory_info().rss
            except Exception:  # a worker that just exited
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            time.sleep(0.02)

    def __enter__(self) -> _TreeRSS:
        self.peak = self._sample()
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()


def _sizes(d: int, n_shards: int, rng: np.random.Generator) -> list[int]:
    w = rng.uniform(0.5, 1.5, n_shards)
    sizes = np.floor(w / w.sum() * d).astype(np.int64)
    sizes[-1] += d - int(sizes.sum())
    return sizes.tolist()


def _generate(root: Path, sizes: list[int], m: int, n_bench: int, seed: int) -> dict:
    """Cells, per-shard unit bytes and scores with planted units (returns the design)."""
    from sigmap_lib.nll import NLLStore

    rng = np.random.default_rng(seed)
    d = int(sum(sizes))
    quality = rng.standard_normal(m)
    ability = rng.standard_normal((m, n_bench))
    scores = 0.5 * quality[:, None] + ability
    planted = {b: np.sort(rng.choice(d, 5, replace=False)) for b in range(n_bench)}
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = [f"m{j:02d}" for j in range(m)]
    for s, n in enumerate(sizes):
        lo = int(offsets[s])
        srng = np.random.default_rng([seed, s])
        block = srng.random((m, n), dtype=np.float32)  # uniform noise: cheap to draw at 6e9 cells
        block *= 3.0
        block += 1.0
        block -= 0.2 * quality[:, None].astype(np.float32)
        for b, units in planted.items():
            loc = units[(units >= lo) & (units < lo + n)] - lo
            if loc.size:  # better models less perplexed on the benchmark's units
                block[:, loc] -= (1.5 * ability[:, b])[:, None].astype(np.float32)
        np.abs(block, out=block)
        sdir = root / "nll" / f"shard{s:04d}"
        for j, key in enumerate(keys):
            st = NLLStore.create_or_open(
                sdir / key, n, [(0, n)], f"shard{s:04d}", chunk_units=1 << 20
            )
            st.write_shard(0, block[j])
        np.save(root / "nbytes" / f"shard{s:04d}.npy", srng.integers(1, 9, n).astype(np.int32))
        if s % 10 == 0:
            _log(f"generated shard {s + 1}/{len(sizes)} ({n:,} units × {m} models)")
    return {"keys": keys, "scores": scores, "planted": planted, "offsets": offsets}


def _shard_stage(args: tuple) -> dict:
    """One shard: rank store of its cells, then its screening partial (run in a worker)."""
    from sigmap_lib.nll import NLLStore, build_rank_store
    from sigmap_lib.signatures import screen_partial

    root, s, keys, scores, k = args
    root = Path(root)
    t0 = time.perf_counter()
    arrays = [NLLStore.open(root / "nll" / f"shard{s:04d}" / key).array for key in keys]
    nbytes = np.load(root / "nbytes" / f"shard{s:04d}.npy", mmap_mode="r")
    # half-size chunks: two workers hold two shards' blocks at once within the 2 GB budget
    store = build_rank_store(
        arrays, keys, nbytes, root / "ranks" / f"shard{s:04d}", chunk_units=CHUNK_UNITS
    )
    t1 = time.perf_counter()
    part = screen_partial(store, scores, k=k, key=f"shard{s:04d}", chunk_units=CHUNK_UNITS)
    (root / "screen").mkdir(exist_ok=True)
    (root / "screen" / f"shard{s:04d}.json").write_text(json.dumps(part.to_dict()))
    return {"ranks_s": t1 - t0, "screen_s": time.perf_counter() - t1}


def _select(nll_arrays: list, scores: np.ndarray, results: list) -> list[list[int]]:
    from sigmap_lib.signatures import forward_select, gather_units

    union = np.unique(np.concatenate([r.indices for r in results]))
    x_all = gather_units(nll_arrays, union)  # every benchmark's candidates read once
    out = []
    for b, res in enumerate(results):
        x = x_all[:, np.searchsorted(union, res.indices)]
        sel = forward_select(x, scores[:, b], "aic")
        out.append(sorted(res.indices[np.asarray(sel.selected, dtype=np.int64)].tolist()))
    return out


def _sharded(root: Path, n_shards: int, design: dict, k: int, workers: int) -> dict:
    from sigmap_lib.nll import ConcatArray, NLLStore, RankStore, merge_bpb_moments
    from sigmap_lib.signatures import ScreenPartial, merge_screen

    keys, scores = design["keys"], design["scores"]
    jobs = [(str(root), s, keys, scores, k) for s in range(n_shards)]
    t0 = time.perf_counter()
    if workers == 1:
        stats = [_shard_stage(j) for j in jobs]
    else:
        import multiprocessing

        # spawn: a forked child inherits this process's sampler thread and BLAS/numba pools
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            stats = list(pool.map(_shard_stage, jobs))
    t_shards = time.perf_counter() - t0
    t1 = time.perf_counter()
    parts = []
    for s in range(n_shards):
        p = ScreenPartial.from_dict(
            json.loads((root / "screen" / f"shard{s:04d}.json").read_text())
        )
        parts.append(p.rebase(int(design["offsets"][s])))
    results = merge_screen(parts, k=k)
    moments = merge_bpb_moments(
        RankStore.open(root / "ranks" / f"shard{s:04d}").moments() for s in range(n_shards)
    )
    arrays = [
        ConcatArray(
            [NLLStore.open(root / "nll" / f"shard{s:04d}" / key).array for s in range(n_shards)]
        )
        for key in keys
    ]
    selected = _select(arrays, scores, results)
    t_merge = time.perf_counter() - t1
    return {
        "results": results,
        "moments": moments,
        "selected": selected,
        "seconds": t_shards + t_merge,
        "shard_stage_s": t_shards,
        "merge_select_s": t_merge,
        "ranks_s": sum(x["ranks_s"] for x in stats),
        "screen_s": sum(x["screen_s"] for x in stats),
    }


def _monolithic(root: Path, n_shards: int, design: dict, k: int) -> dict:
    from sigmap_lib.nll import ConcatArray, NLLStore, build_rank_store
    from sigmap_lib.signatures import screen

    keys, scores = design["keys"], design["scores"]
    t0 = time.perf_counter()
    arrays = [
        ConcatArray(
            [NLLStore.open(root / "nll" / f"shard{s:04d}" / key).array for s in range(n_shards)]
        )
        for key in keys
    ]
    nbytes = ConcatArray(
        [np.load(root / "nbytes" / f"shard{s:04d}.npy", mmap_mode="r") for s in range(n_shards)]
    )
    store = build_rank_store(arrays, keys, nbytes, root / "whole")
    t1 = time.perf_counter()
    results = screen(store, scores, k=k)
    selected = _select(arrays, scores, results)
    return {
        "store": store,
        "results": results,
        "selected": selected,
        "seconds": time.perf_counter() - t0,
        "ranks_s": t1 - t0,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="sigmap bench shards")
    ap.add_argument("--units", type=float, default=2e8, help="corpus units d (default 2e8)")
    ap.add_argument("--models", type=int, default=32)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--benchmarks", type=int, default=8)
    ap.add_argument("--k", type=int, default=1000, help="screening candidates per benchmark")
    ap.add_argument("--workers", type=int, default=2, help="processes over shards (vs 1)")
    ap.add_argument("--subsample", type=int, default=100_000, help="units whose codes are compared")
    ap.add_argument("--dir", default=None, help="working folder (default: a temporary one)")
    ap.add_argument("--no-monolithic", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    d, m, S = int(args.units), args.models, args.shards
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sigmap-bench-shards-"))
    root = base / "bench-shards"
    shutil.rmtree(root, ignore_errors=True)
    (root / "nbytes").mkdir(parents=True)
    need = d * m * 4 + 2 * d * m
    free = shutil.disk_usage(base).free
    if free < need * 1.05:
        raise SystemExit(
            f"sigmap bench shards: {need / 1e9:.1f} GB needed in {base}, {free / 1e9:.1f} GB free"
        )
    rng = np.random.default_rng(args.seed)
    sizes = _sizes(d, S, rng)
    try:
        t0 = time.perf_counter()
        design = _generate(root, sizes, m, args.benchmarks, args.seed)
        t_gen = time.perf_counter() - t0
        _log(f"{d:,} units × {m} models in {S} shards written in {t_gen:.0f} s")
        runs = {}
        for w in sorted({1, args.workers}):
            shutil.rmtree(root / "ranks", ignore_errors=True)
            with _TreeRSS() as rss:
                runs[w] = _sharded(root, S, design, args.k, w)
            runs[w]["peak_rss_gb"] = rss.peak / 1e9
            _log(
                f"sharded, {w} worker(s): {runs[w]['seconds']:.1f} s, peak {rss.peak / 1e9:.2f} GB"
            )
        one, many = runs[1], runs[max(runs)]
        out: dict[str, Any] = {
            "bench": "shards",
            "units": d,
            "models": m,
            "shards": S,
            "benchmarks": args.benchmarks,
            "k": args.k,
            "cells": d * m,
            "shard_units_min": int(min(sizes)),
            "shard_units_max": int(max(sizes)),
            "generate_s": round(t_gen, 1),
            "sharded_1_worker_s": round(one["seconds"], 2),
            "sharded_cells_per_s_1_worker": d * m / one["seconds"],
            f"sharded_{max(runs)}_workers_s": round(many["seconds"], 2),
            f"sharded_cells_per_s_{max(runs)}_workers": d * m / many["seconds"],
            "speedup_workers": one["seconds"] / many["seconds"],
            "workers": max(runs),
            "shard_stage_s_1_worker": round(one["shard_stage_s"], 2),
            "merge_select_s": round(one["merge_select_s"], 2),
            "peak_rss_gb_sharded_1_worker": round(one["peak_rss_gb"], 3),
            f"peak_rss_gb_sharded_{max(runs)}_workers": round(many["peak_rss_gb"], 3),
            "planted_recall": float(
                np.mean(
                    [
                        len(set(one["selected"][b]) & set(design["planted"][b].tolist())) / 5
                        for b in range(args.benchmarks)
                    ]
                )
            ),
        }
        same = all(
            np.array_equal(a.indices, b.indices) and np.array_equal(a.strength, b.strength)
            for a, b in zip(one["results"], many["results"], strict=True)
        )
        if not args.no_monolithic:
            with _TreeRSS() as rss:
                mono = _monolithic(root, S, design, args.k)
            out["monolithic_s"] = round(mono["seconds"], 2)
            out["monolithic_cells_per_s"] = d * m / mono["seconds"]
            out["peak_rss_gb_monolithic"] = round(rss.peak / 1e9, 3)
            out["sharded_vs_monolithic_1_worker"] = mono["seconds"] / one["seconds"]
            sub = np.sort(rng.choice(d, min(args.subsample, d), replace=False))
            from sigmap_lib.nll import RankStore, ShardedRanks

            view = ShardedRanks.from_stores(
                [RankStore.open(root / "ranks" / f"shard{s:04d}") for s in range(S)], design["keys"]
            )
            codes_equal = bool(
                np.array_equal(
                    np.asarray(view.array()[sub]), np.asarray(mono["store"].array()[sub])
                )
            )
            same = (
                same
                and codes_equal
                and all(
                    np.array_equal(a.indices, b.indices)
                    and np.array_equal(a.strength, b.strength)
                    and np.array_equal(a.hist_counts, b.hist_counts)
                    for a, b in zip(one["results"], mono["results"], strict=True)
                )
                and one["selected"] == mono["selected"]
                and bool(np.allclose(one["moments"].mean, mono["store"].bpb_mean, rtol=1e-9))
                and bool(np.allclose(one["moments"].sd, mono["store"].bpb_sd, rtol=1e-9))
            )
            out["codes_equal_on_subsample"] = codes_equal
            out["subsample_units"] = int(sub.size)
        out["identical_to_monolithic"] = bool(same)
        out["cpu_count"] = os.cpu_count()
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)

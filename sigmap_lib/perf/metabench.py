"""``sigmap bench metabench``: the whole metabench pipeline on simulated full-size benchmarks.

Six benchmarks with the original sizes (ARC 1,172; GSM8K 1,319; HellaSwag 10,042;
MMLU 14,042; TruthfulQA 817; WinoGrande 1,267 items) x 5,000 models. Item parameters are
resampled from the real R-mirt parameters in ``../shared/data/metabench_irt`` and abilities
from the real θs of ``abilities_secondary.parquet`` (both when available; otherwise the
synthetic defaults of :func:`sigmap_lib.metabench.simulate_benchmarks`).
``--quick`` shrinks everything (1,000 models, sizes / 10, pool 120, 100 subsets);
``--scale`` and ``--benchmarks`` run intermediate sizes (used when the full size cannot
finish on a loaded machine).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

SIZES = {
    "arc": 1172,
    "gsm8k": 1319,
    "hellaswag": 10042,
    "mmlu": 14042,
    "truthfulqa": 817,
    "winogrande": 1267,
}


def _real_inputs() -> tuple[pd.DataFrame | None, np.ndarray | None]:
    from sigmap_lib.studies import shared_data_dir

    root = shared_data_dir() / "metabench_irt"
    if not root.exists():
        return None, None
    frames = []
    for f in sorted(root.glob("*_items.parquet")):
        d = pd.read_parquet(f)
        frames.append(
            d[["a1_fit350", "d_fit350", "g_fit350", "u_fit350"]].set_axis(
                ["a1", "d", "g", "u"], axis=1
            )
        )
    params = pd.concat(frames, ignore_index=True) if frames else None
    ab = pd.read_parquet(root / "abilities_secondary.parquet")
    cols = [f"theta_{b}" for b in SIZES]
    return params, ab[cols].to_numpy(float)


def _peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident set size in MiB of this process (or of its largest finished child
    process, ``RUSAGE_CHILDREN``; ``ru_maxrss`` is KiB on Linux)."""
    kb = resource.getrusage(who).ru_maxrss
    return round(kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024, 1)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished worker processes (all
    threads): less load-dependent than wall."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def _loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover - platform without getloadavg
        return None


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the result dict (the CLI prints it as one JSON line).

    The pipeline is :func:`sigmap_lib.metabench.fit_metabench`, run stage by stage here
    (same calls, same order) so that each benchmark's wall time can be reported; a
    progress line per benchmark goes to stderr.
    """
    from sigmap_lib import metabench as mb
    from sigmap_lib.metabench import check_inputs

    ap = argparse.ArgumentParser(prog="sigmap bench metabench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (a couple of minutes)")
    ap.add_argument("--models", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-subsets", type=int, default=None)
    ap.add_argument(
        "--scale",
        type=float,
        default=None,
        help="multiply the original benchmark sizes by this factor (default 1, --quick 0.1)",
    )
    ap.add_argument(
        "--benchmarks",
        default=None,
        help="comma-separated subset of " + ",".join(SIZES) + " (default: all six)",
    )
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS/LAPACK threads during the pipeline (default 1; 0 = library default). "
        "Multithreaded OpenBLAS on a busy 2-core machine made small solves ~25x slower.",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="benchmarks fitted in parallel processes (default 2; threads split between them)",
    )
    args = ap.parse_args(argv)
    n_models = args.models or (1000 if args.quick else 5000)
    scale = args.scale if args.scale is not None else (0.1 if args.quick else 1.0)
    names = list(SIZES) if not args.benchmarks else [b.strip() for b in args.benchmarks.split(",")]
    unknown = sorted(set(names) - set(SIZES))
    if unknown or len(names) < 2:
        raise SystemExit(f"sigmap bench metabench: need >= 2 of {list(SIZES)}, got {names}")
    sizes = {k: max(60, int(SIZES[k] * scale)) for k in names}  # --quick: v // 10
    config = {"pool_size": 120, "n_subsets": 100, "n_quant": 80} if args.quick else {}
    if args.n_subsets:
        config["n_subsets"] = args.n_subsets
    params, abilities = _real_inputs()
    if abilities is not None:
        abilities = abilities[:, [list(SIZES).index(k) for k in names]]
    load_start = _loadavg()
    t0 = time.perf_counter()
    print(f"simulating {n_models} models x {sum(sizes.values())} items", file=sys.stderr)
    responses, scores, _ = mb.simulate_benchmarks(
        n_models, sizes, seed=args.seed, item_params=params, abilities=abilities
    )
    t_sim = time.perf_counter() - t0
    t1 = time.perf_counter()
    cfg = mb.MetabenchConfig.from_kwargs(**config)
    blas = (
        threadpool_limits(limits=args.blas_threads, user_api="blas")
        if args.blas_threads > 0
        else contextlib.nullcontext()
    )
    with blas, warnings.catch_warnings():
        # statsmodels warns on every rank-deficient B-spline design (tied θ); harmless here
        warnings.simplefilter("ignore")
        check_inputs(responses, scores)
        split = mb.split_models(scores, test_frac=cfg.test_frac, seed=args.seed)

        def done(bm: str, f: Any, seconds: float) -> None:
            print(
                f"{bm}: {len(f.selected)}/{sizes[bm]} items, {f.irt_model}/{f.theta_method}, "
                f"{f.covariates}: test RMSE {f.test_rmse:.3f} (random {f.random_test_rmse:.3f}); "
                f"θ only {f.test_rmse_theta:.3f} (random % correct {f.random_test_rmse_percent:.3f}), "
                f"{seconds:.0f} s, load {_loadavg()}",
                file=sys.stderr,
            )

        fits, walls = mb.fit_benchmarks(
            responses, scores, split, seed=args.seed, config=cfg, n_jobs=args.jobs, on_done=done
        )
        bench_wall = {bm: round(w, 2) for bm, w in walls.items()}
        tj = time.perf_counter()
        joint = mb.fit_joint(fits, scores, split, config=cfg)
        t_joint = time.perf_counter() - tj
    fit = mb.MetabenchFit(config=cfg, seed=args.seed, split=split, benchmarks=fits, joint=joint)
    t_fit = time.perf_counter() - t1
    table = fit.rmse_table()
    n_total = sum(sizes.values())
    out = {
        "bench": "metabench",
        "quick": bool(args.quick),
        "seed": args.seed,
        "n_models": n_models,
        "n_items_total": n_total,
        "n_items_selected": fit.n_selected,
        "items_kept_pct": round(100.0 * fit.n_selected / n_total, 3),
        "real_params": params is not None,
        "config": {k: v for k, v in cfg.to_dict().items() if k in _REPORTED_CONFIG},
        "wall_s_simulate": round(t_sim, 2),
        "wall_s_pipeline": round(t_fit, 2),
        "wall_s_joint": round(t_joint, 2),
        "wall_s_total": round(time.perf_counter() - t0, 2),
        "cpu_s": round(_cpu_seconds(), 1),
        "peak_rss_mb": _peak_rss_mb(),
        "peak_rss_worker_mb": _peak_rss_mb(resource.RUSAGE_CHILDREN) if args.jobs > 1 else None,
        # upper bound of the memory in use at once: this process + every worker at its peak
        "peak_rss_bound_mb": round(
            _peak_rss_mb() + args.jobs * _peak_rss_mb(resource.RUSAGE_CHILDREN), 1
        )
        if args.jobs > 1
        else _peak_rss_mb(),
        "loadavg_start": load_start,
        "loadavg_end": _loadavg(),
        "cpu_count": os.cpu_count(),
        "blas_threads": args.blas_threads,
        "jobs": args.jobs,
        "grand_test_rmse": round(fit.grand_test_rmse, 4),
        "factor_spearman": round(fit.joint.factor_spearman, 4) if fit.joint else None,
        "mean_test_rmse": round(float(table["test_rmse"].mean()), 4),
        "mean_random_test_rmse": round(float(table["random_test_rmse"].mean()), 4),
        "mean_ratio_vs_random": round(
            float((table["test_rmse"] / table["random_test_rmse"]).mean()), 4
        ),
        "per_benchmark": {
            r.benchmark: {
                "n_items_total": int(sizes[r.benchmark]),
                "n_pool": int(r.n_pool),
                "n_items": int(r.n_items),
                "items_kept_pct": round(100.0 * r.n_items / sizes[r.benchmark], 3),
                "irt_model": r.irt_model,
                "theta_method": r.theta_method,
                "val_rmse": round(float(r.val_rmse), 4),
                "test_rmse": round(float(r.test_rmse), 4),
                "random_test_rmse": round(float(r.random_test_rmse), 4),
                "ratio_vs_random": round(float(r.test_rmse / r.random_test_rmse), 4),
                "covariates": r.covariates,
                "test_rmse_theta": round(float(r.test_rmse_theta), 4),
                "random_test_rmse_percent": round(float(r.random_test_rmse_percent), 4),
                "ratio_theta_vs_random_percent": round(
                    float(r.test_rmse_theta / r.random_test_rmse_percent), 4
                ),
                "test_rmse_joint": round(float(r.test_rmse_joint), 4),
                "wall_s": bench_wall[r.benchmark],
            }
            for r in table.itertuples()
        },
    }
    return out


_REPORTED_CONFIG = (
    "pool_size",
    "n_subsets",
    "irt_models",
    "theta_methods",
    "n_quant",
    "n_tau",
    "top_k",
    "lam",
    "gam_df",
    "n_random_baseline",
)


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(main()))

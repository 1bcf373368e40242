"""``sigmap bench metabench``: the whole metabench pipeline on simulated full-size benchmarks.

Six benchmarks with the original sizes (ARC 1,172; GSM8K 1,319; HellaSwag 10,042;
MMLU 14,042; TruthfulQA 817; WinoGrande 1,267 items) x 5,000 models. Item parameters are
resampled from the real R-mirt parameters in ``../shared/data/metabench_irt`` and abilities
from the real θs of ``abilities_secondary.parquet`` (both when available; otherwise the
synthetic defaults of :func:`sigmap_lib.metabench.simulate_benchmarks`).
``--quick`` shrinks everything (1,000 models, sizes / 10, pool 120, 100 subsets).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np
import pandas as pd

SIZES = {
    "arc": 1172,
    "gsm8k": 1319,
    "hellaswag": 10042,
    "mmlu": 14042,
    "truthfulqa": 817,
    "winogrande": 1267,
}


def _real_inputs() -> tuple[pd.DataFrame | None, np.ndarray | None]:
    from sigmap_lib.paths import shared_data_dir

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


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the result dict (the CLI prints it as one JSON line)."""
    from sigmap_lib import metabench as mb

    ap = argparse.ArgumentParser(prog="sigmap bench metabench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (a couple of minutes)")
    ap.add_argument("--models", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-subsets", type=int, default=None)
    args = ap.parse_args(argv)
    n_models = args.models or (1000 if args.quick else 5000)
    sizes = {k: max(60, v // 10) for k, v in SIZES.items()} if args.quick else dict(SIZES)
    config = {"pool_size": 120, "n_subsets": 100, "n_quant": 80} if args.quick else {}
    if args.n_subsets:
        config["n_subsets"] = args.n_subsets
    params, abilities = _real_inputs()
    t0 = time.perf_counter()
    print(f"simulating {n_models} models x {sum(sizes.values())} items", file=sys.stderr)
    responses, scores, _ = mb.simulate_benchmarks(
        n_models, sizes, seed=args.seed, item_params=params, abilities=abilities
    )
    t_sim = time.perf_counter() - t0
    t1 = time.perf_counter()
    fit = mb.fit_metabench(responses, scores, seed=args.seed, **config)
    t_fit = time.perf_counter() - t1
    table = fit.rmse_table()
    n_total = sum(sizes.values())
    out = {
        "bench": "metabench",
        "quick": bool(args.quick),
        "n_models": n_models,
        "n_items_total": n_total,
        "n_items_selected": fit.n_selected,
        "items_kept_pct": 100.0 * fit.n_selected / n_total,
        "real_params": params is not None,
        "wall_s_simulate": round(t_sim, 2),
        "wall_s_pipeline": round(t_fit, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "grand_test_rmse": fit.grand_test_rmse,
        "factor_spearman": fit.joint.factor_spearman if fit.joint else None,
        "mean_test_rmse": float(table["test_rmse"].mean()),
        "mean_random_test_rmse": float(table["random_test_rmse"].mean()),
        "per_benchmark": {
            r.benchmark: {
                "n_items": int(r.n_items),
                "irt_model": r.irt_model,
                "theta_method": r.theta_method,
                "test_rmse": round(float(r.test_rmse), 4),
                "random_test_rmse": round(float(r.random_test_rmse), 4),
                "ratio_vs_random": round(float(r.test_rmse / r.random_test_rmse), 4),
                "test_rmse_joint": round(float(r.test_rmse_joint), 4),
            }
            for r in table.itertuples()
        },
    }
    return out


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(main()))

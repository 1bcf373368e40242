"""``sigmap bench recovery``: planted-unit recall / precision on the synthetic world.

m = 32 models, the default synthetic world (``--d`` units), q = 1% screening, then forward
selection with aic, bic and ebic; also the fraction of benchmarks whose best screened
strength beats the 95% quantile of a permutation null.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    from sigmap_lib.signatures._signature import extract_signatures
    from sigmap_lib.worlds._synthetic import make_synthetic_world, planted_recovery

    ap = argparse.ArgumentParser(prog="sigmap bench recovery")
    ap.add_argument("--d", type=int, default=20000)
    ap.add_argument("--m", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--permutations", type=int, default=19)
    args = ap.parse_args(argv)
    out: dict[str, Any] = {
        "bench": "recovery",
        "m": args.m,
        "d": args.d,
        "load_avg": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="sigmap-recovery-") as tmp:
        w = make_synthetic_world(
            Path(tmp) / "world", n_models=args.m, n_units=args.d, seed=args.seed
        )
        arrays = [np.asarray(a) for a in w.nll_arrays()]
        values = np.stack(arrays, axis=1)
        for crit in ("aic", "bic", "ebic"):
            t = time.perf_counter()
            sigs = extract_signatures(
                values,
                w.scores,
                benchmark_names=w.benchmarks,
                q=0.01,
                criterion=crit,
                n_permutations=args.permutations if crit == "ebic" else 0,
                seed=args.seed,
            )
            rec = planted_recovery(w, sigs)
            row = {k: v for k, v in rec.items() if k != "per_benchmark"}
            row["seconds"] = time.perf_counter() - t
            row["mean_r2"] = float(np.mean([s.selection.r2 for s in sigs]))
            if crit == "ebic":
                row["beats_null_q95"] = float(
                    np.mean(
                        [s.null.real_best > np.quantile(s.null.best_strength, 0.95) for s in sigs]
                    )
                )
            out[crit] = row
            print(f"[bench recovery] {crit}: {row}", file=sys.stderr)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(main()))

"""``sigmap bench selection``: forward selection over d' candidates, m models.

Seconds per benchmark for :func:`sigmap_lib.signatures.forward_select` (AIC, which runs to
the ``k = m − 3`` cap on noise: the worst case) and the ratio to the naive greedy loop
refitting statsmodels OLS for every candidate at every step, extrapolated from a small d'
(naive cost = Σ_steps (d' − s) · t_fit(s), with t_fit measured per step size).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    import statsmodels.api as sm

    from sigmap_lib.signatures import forward_select

    ap = argparse.ArgumentParser(prog="sigmap bench selection")
    ap.add_argument("--d", type=float, default=1e6)
    ap.add_argument("--m", type=int, default=32)
    ap.add_argument("--naive-d", type=int, default=300)
    args = ap.parse_args(argv)
    d, m = int(args.d), args.m
    rng = np.random.default_rng(0)
    X = rng.standard_normal((m, d))
    y = X[:, 5] - 0.5 * X[:, 777] + 0.5 * rng.standard_normal(m)
    out: dict[str, Any] = {"bench": "selection", "d_prime": d, "m": m, "load_avg": os.getloadavg()}
    for crit in ("aic", "ebic"):
        t = time.perf_counter()
        res = forward_select(X, y, crit)
        out[f"{crit}_seconds"] = time.perf_counter() - t
        out[f"{crit}_k"] = res.k
        print(f"[bench selection] {crit}: {out[f'{crit}_seconds']:.2f}s k={res.k}", file=sys.stderr)
    k = out["aic_k"]
    # naive: time one statsmodels fit per model size, over a small candidate set
    ys = (y - y.mean()) / y.std()
    xs = X[:, : args.naive_d]
    xs = (xs - xs.mean(0)) / xs.std(0)
    t_fit = []
    for s in range(0, k + 1, max(1, k // 4)):
        cols = list(range(s))
        t = time.perf_counter()
        for j in range(s, args.naive_d):
            _ = sm.OLS(ys, sm.add_constant(xs[:, [*cols, j]], has_constant="add")).fit().ssr
        t_fit.append((s, (time.perf_counter() - t) / (args.naive_d - s)))
    sizes, per = zip(*t_fit)
    per_step = np.interp(np.arange(k + 1), sizes, per)
    naive = float(sum((d - s) * per_step[s] for s in range(k + 1)))
    out["naive_statsmodels_seconds_extrapolated"] = naive
    out["naive_fit_seconds_per_candidate"] = float(np.mean(per))
    out["speedup_vs_naive"] = naive / out["aic_seconds"]
    out["target_seconds"] = 10
    out["load_avg_end"] = os.getloadavg()
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(main()))

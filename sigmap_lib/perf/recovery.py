"""``sigmap bench recovery``: the evidence that the default signature test keeps its error rate.

Three parts, every number from fresh worlds (a new world every run, never reused):

1. **Null scenarios** (:func:`sigmap_lib.worlds.hard_world`, ``--runs`` runs each, ``--units``
   units, P = ``--permutations``): every unit loads strongly, unevenly and nonlinearly on
   general quality; the scores depend on quality (and family offsets) only, so any non-empty
   signature is a false discovery. Scenarios: independent scores at m = 8 … 64; scores =
   quality + noise at m = 16, 32, 64; logistic and convex scores; curved heteroscedastic
   units; t(3) noise; 20-item accuracies (ties); four model families with and without
   ``strata``; eight benchmarks per run, error per benchmark and with ``fwer="all"``.
   Reported: the family-wise error (share of runs with a non-empty signature; eight
   benchmarks: per benchmark and "any of the eight") with its Wilson 95 % interval, units per
   run and the median max-T threshold. Below the library's minimum number of models the
   library refuses; the scenario is then run through the reference implementation below, to
   show why (its threshold reaches |ρ| = 1: nothing can pass).
2. **Power** at planted |partial ρ| = 0.6 / 0.8 / 0.95 for m = 16 / 32 / 64 (``--power-runs``
   worlds per cell, 5 planted units, scores = quality + noise): recall and precision of the
   default (Spearman correlation of the residuals, single-step max-T), side by side with the
   variants tried: Pearson of the residuals (the library's ``partial_statistic="pearson"``)
   and Westfall–Young step-down max-T (the reference implementation), and the smallest
   detectable |partial ρ| (the median threshold).
3. **Methods side by side** on the planted synthetic world (m = 32): recall / precision /
   units of ``calibrated``, ``calibrated-marginal``, ``lasso`` and ``aic``.

The reference implementation (:func:`reference_test`) computes the statistic from its
definition on the full ``(d, m)`` matrix with NumPy/SciPy (ĝ, spline basis, residuals,
ranks, the permuted re-residualized score columns); the library's streamed pass must agree
with it (the sanity column ``reference_agrees``).

Targets (the default, every m at or above the minimum; families: with ``strata``): point
FWER ≤ 0.06 and Wilson upper bound ≤ 0.085 in every scenario; at ρ = 0.8, m = 32:
recall ≥ 0.5 and precision ≥ 0.95. One JSON line last on stdout.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

FWER_POINT_MAX = 0.06
FWER_UPPER_MAX = 0.085

# (name, scenario, m, strata, n_benchmarks, fwer)
SCENARIOS: list[tuple[str, str, int, bool, int, str]] = [
    *[(f"independent_m{m}", "independent", m, False, 1, "benchmark") for m in (8, 10, 12, 16)],
    *[(f"independent_m{m}", "independent", m, False, 1, "benchmark") for m in (32, 64)],
    *[(f"linear_m{m}", "linear", m, False, 1, "benchmark") for m in (12, 16, 32, 64)],
    ("logistic_m32", "logistic", 32, False, 1, "benchmark"),
    ("convex_m32", "convex", 32, False, 1, "benchmark"),
    ("curved_m32", "curved", 32, False, 1, "benchmark"),
    ("t3_m32", "t3", 32, False, 1, "benchmark"),
    ("accuracy_m32", "accuracy", 32, False, 1, "benchmark"),
    ("families_m32_no_strata", "families", 32, False, 1, "benchmark"),
    ("families_m32_strata", "families", 32, True, 1, "benchmark"),
    ("linear_m32_8bench", "linear", 32, False, 8, "benchmark"),
    ("linear_m32_8bench_fwer_all", "linear", 32, False, 8, "all"),
    *[(f"reallike_m{m}", "reallike", m, False, 1, "benchmark") for m in (16, 32, 64)],
    *[(f"hinge_m{m}", "hinge", m, False, 1, "benchmark") for m in (16, 32, 64)],
    *[(f"threshold_m{m}", "threshold", m, False, 1, "benchmark") for m in (16, 32, 64)],
    *[(f"step_m{m}", "step", m, False, 1, "benchmark") for m in (16, 32, 64)],
    *[(f"shrinking_m{m}", "shrinking", m, False, 1, "benchmark") for m in (16, 32, 64)],
]
#: Null scores built on the real matrix's own general quality (``shared/data/realmodels``):
#: (name, shape, m); m < 89 draws a random subset of the 89 real models each run
REAL_SHAPES = ("linear", "pc1", "convex", "hinge", "threshold", "step", "shrinking", "families")
REAL_SCENARIOS: list[tuple[str, str, int]] = [
    (f"real_{shape}_m{m}", shape, m)
    for m in (89, 32, 16)
    for shape in REAL_SHAPES
    if not (shape == "families" and m < 89)
]
POWER_M = (16, 32, 64)
POWER_RHO = (0.6, 0.8, 0.95)
VARIANTS = ("spearman_single_step", "pearson_single_step", "spearman_step_down")


def _log(msg: str) -> None:
    print(f"[bench recovery] {msg}", file=sys.stderr, flush=True)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n``.

    Examples
    --------
    >>> from sigmap_lib.perf.recovery import wilson
    >>> [round(x, 4) for x in wilson(15, 300)]
    [0.0305, 0.0809]
    """
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


# ----------------------------------------------------------------------------------------
# the reference implementation (full matrix, from the definition)


def reference_test(
    values: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
    *,
    strata: np.ndarray | None = None,
    n_permutations: int = 199,
    alpha: float = 0.05,
    statistic: str = "spearman",
    step_down: bool = False,
) -> tuple[np.ndarray, float]:
    """The calibrated test of one benchmark on the full ``(d, m)`` matrix.

    ``statistic="spearman"``: the library's default, the correlation of the ranks of the two
    residuals; ``"pearson"``: the Pearson correlation of the residuals themselves. ``step_down``: Westfall–Young step-down
    max-T (re-threshold on the units not yet rejected until nothing changes) instead of the
    single step. Returns the rejected units and the (first-step) threshold.
    """
    from scipy.stats import rankdata

    from sigmap_lib.signatures import (
        pooled_strata,
        quality_basis,
        quality_blocks,
        score_basis,
        stratified_permutations,
    )

    v = np.asarray(values, dtype=np.float64)
    d, m = v.shape
    g = -v.mean(axis=0)
    pooled = pooled_strata(strata)
    q0 = quality_basis(g, pooled)
    q = score_basis(q0, g, y)  # the scores' basis, widened as they need (⊇ q0)
    blocks = quality_blocks(g, pooled, scores=y)
    r = v - (v @ q0) @ q0.T

    def spread(e: np.ndarray) -> np.ndarray:  # exp of the OLS fit of log|e| on [1, z(g)]
        x = np.column_stack([np.ones(m), (g - g.mean()) / g.std()])
        a = np.log(np.abs(e) + 1e-9 * np.abs(e).max(axis=0))
        return np.exp(x @ np.linalg.solve(x.T @ x, x.T @ a))

    e = y - q @ (q.T @ y)
    s0 = spread(e[:, None])[:, 0]
    perms = stratified_permutations(rng, n_permutations, m, blocks)
    cols = np.column_stack([e] + [s0 * (e / s0)[p] for p in perms])
    cols = cols - q @ (q.T @ cols)
    cols = cols / spread(cols)
    cols = cols - q @ (q.T @ cols)
    if statistic == "spearman":
        cols = rankdata(cols, axis=0) - (m + 1) / 2.0
        r = rankdata(r, axis=1) - (m + 1) / 2.0
    elif statistic != "pearson":
        raise ValueError(statistic)
    cols = cols / np.linalg.norm(cols, axis=0)
    nr = np.linalg.norm(r, axis=1, keepdims=True)
    r = np.divide(r, nr, out=np.zeros_like(r), where=nr > 0)
    s = np.abs(r @ cols)
    obs, null = s[:, 0], s[:, 1:]
    alive = np.ones(d, dtype=bool)
    first_t = None
    while True:
        nmax = null[alive].max(axis=0) if alive.any() else np.zeros(n_permutations)
        t = float(np.quantile(np.append(nmax, obs[alive].max()), 1 - alpha, method="higher"))
        first_t = t if first_t is None else first_t
        new = alive & (obs > t)
        if not new.any():
            break
        alive &= ~new
        if not step_down:
            break
    return np.flatnonzero(~alive), float(first_t)


# ----------------------------------------------------------------------------------------
# part 1: null scenarios


def _null_scenario(spec: tuple, runs: int, d: int, p: int, seed: int) -> dict[str, Any]:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.signatures import MIN_MODELS_CALIBRATED, extract_signatures
    from sigmap_lib.worlds import hard_world

    name, scenario, m, use_strata, nb, fwer = spec
    idx = [s[0] for s in SCENARIOS].index(name)
    rng = np.random.default_rng([seed, idx, 22])
    hits = bench_hits = units = 0
    thresholds: list[float] = []
    refused = None
    t0 = time.perf_counter()
    for run in range(runs):
        w = hard_world(scenario, m, d, rng, n_benchmarks=nb)
        strata = w.strata if use_strata else None
        if m < MIN_MODELS_CALIBRATED:
            if refused is None:
                try:
                    extract_signatures(w.values, w.scores, n_permutations=p)
                except SigmapInputError as e:
                    refused = str(e)
            sel, t = reference_test(w.values, w.scores[:, 0], rng, n_permutations=p)
            found = [sel.size]
            thresholds.append(t)
        else:
            sigs = extract_signatures(
                w.values, w.scores, n_permutations=p, seed=seed * 100_003 + run, strata=strata,
                fwer=fwer,
            )  # fmt: skip
            found = [int(s.units.size) for s in sigs]
            thresholds.append(float(np.median([s.calibration.threshold for s in sigs])))
        hits += any(f > 0 for f in found)
        bench_hits += sum(f > 0 for f in found)
        units += sum(found)
    lo, hi = wilson(hits, runs)
    out: dict[str, Any] = {
        "scenario": scenario,
        "m": m,
        "strata": use_strata,
        "benchmarks": nb,
        "fwer_scope": fwer,
        "runs": runs,
        "fwer": hits / runs,
        "fwer_wilson95": [lo, hi],
        "units_per_run": units / runs,
        "median_threshold": float(np.median(thresholds)),
        "seconds_per_run": (time.perf_counter() - t0) / runs,
        "refused_by_library": refused,
    }
    if nb > 1:
        out["fwer_per_benchmark"] = bench_hits / (runs * nb)
        out["fwer_per_benchmark_wilson95"] = list(wilson(bench_hits, runs * nb))
        out["fwer_any_benchmark"] = hits / runs
    return out


# ----------------------------------------------------------------------------------------
# part 1b: null scores on the real matrix's loadings


def real_null_scores(
    shape: str, values: np.ndarray, rng: np.random.Generator, arc: np.ndarray | None = None
) -> np.ndarray:
    """Scores of the models of ``values (d, m)`` that depend on their general quality only.

    ``z`` = standardized ``ĝ`` (minus mean bits per byte): ``"linear"`` ``z + 0.5ε``;
    ``"pc1"`` the first principal component of the standardized documents ``+ 0.5ε``;
    ``"convex"`` ``exp(1.2z) + 0.5ε``; ``"hinge"`` ``max(z, 0) + 0.15ε`` (flat below the
    median: emergent); ``"threshold"`` ``σ(6(z − 0.3)) + 0.1ε``; ``"step"`` the real ARC-Easy
    accuracies ``arc`` shuffled within quintiles of ``ĝ``; ``"shrinking"``
    ``z + 0.5·exp(−0.5z)·ε``; ``"families"`` as ``"linear"`` (tested with the real families
    as strata).
    """
    m = values.shape[1]
    g = -values.mean(axis=0)
    z = (g - g.mean()) / g.std()
    eps = rng.standard_normal(m)
    if shape in ("linear", "families"):
        return z + 0.5 * eps
    if shape == "pc1":
        x = values - values.mean(axis=1, keepdims=True)
        x /= x.std(axis=1, keepdims=True)
        pc = np.linalg.svd(x, full_matrices=False)[2][0]
        pc = pc * np.sign(pc @ z)
        return (pc - pc.mean()) / pc.std() + 0.5 * eps
    if shape == "convex":
        return np.exp(1.2 * z) + 0.5 * eps
    if shape == "hinge":
        return np.maximum(z, 0.0) + 0.15 * eps
    if shape == "threshold":
        return 1.0 / (1.0 + np.exp(-6.0 * (z - 0.3))) + 0.1 * eps
    if shape == "shrinking":
        return z + 0.5 * np.exp(-0.5 * z) * eps
    if shape == "step":
        assert arc is not None
        q = np.searchsorted(np.quantile(z, [0.2, 0.4, 0.6, 0.8]), z)
        y = arc.copy()
        for k in range(5):
            i = np.flatnonzero(q == k)
            y[i] = y[rng.permutation(i)]
        return y
    raise ValueError(shape)


def real_null_draws(
    mm: Any, shape: str, m: int, runs: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """``runs`` fresh real-loading null draws of the perplexity-correlations models ``mm``:
    per run ``m`` random models (all at ``m = 89``), their values ``(d, m)``, null scores of
    ``shape`` (:func:`real_null_scores`) and, for ``"families"``, their families as strata."""
    arc = mm.scores()[:, mm.benchmarks.index("arc_easy")]
    n_models = mm.values.shape[1]
    for _ in range(runs):
        idx = np.sort(rng.choice(n_models, m, replace=False)) if m < n_models else np.arange(m)
        v = mm.values[:, idx]
        y = real_null_scores(shape, v, rng, arc[idx])
        yield v, y, mm.families[idx] if shape == "families" else None


def _real_null(spec: tuple, runs: int, p: int, seed: int, data: str) -> dict[str, Any]:
    from sigmap_lib.inputs import read_perplexity_correlations
    from sigmap_lib.signatures import extract_signatures

    name, shape, m = spec
    mm = read_perplexity_correlations(data)
    idx_spec = [s[0] for s in REAL_SCENARIOS].index(name)
    rng = np.random.default_rng([seed, idx_spec, 31])
    hits = units = 0
    t0 = time.perf_counter()
    for run, (v, y, strata) in enumerate(real_null_draws(mm, shape, m, runs, rng)):
        [sig] = extract_signatures(v, y, n_permutations=p, seed=seed * 100_003 + run, strata=strata)
        hits += not sig.empty
        units += sig.units.size
    lo, hi = wilson(hits, runs)
    return {
        "scenario": f"real {shape}",
        "m": m,
        "strata": shape == "families",
        "benchmarks": 1,
        "fwer_scope": "benchmark",
        "runs": runs,
        "fwer": hits / runs,
        "fwer_wilson95": [lo, hi],
        "units_per_run": units / runs,
        "median_threshold": float("nan"),
        "seconds_per_run": (time.perf_counter() - t0) / runs,
        "refused_by_library": None,
    }


def plant_documents(
    values: np.ndarray, rho: float, rng: np.random.Generator, n_planted: int = 5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plant ``n_planted`` documents of the real matrix ``values (d, m)`` at partial
    correlation ``rho`` with new scores given quality.

    Scores ``y = z(ĝ) + u`` (``u`` standardized noise); a planted document keeps its fit on
    the quality basis and gets residual ``sd_j·(−ρ·u + √(1 − ρ²)·ε)`` (``sd_j`` its own
    residual spread), so its partial correlation with ``y`` given quality is ``ρ`` in the
    signature's sign convention. Returns ``(values, y, planted_rows)``.
    """
    from sigmap_lib.signatures import quality_basis

    v = values.copy()
    d, m = v.shape
    g = -v.mean(axis=0)
    u = rng.standard_normal(m)
    u = (u - u.mean()) / u.std()
    y = (g - g.mean()) / g.std() + u
    q = quality_basis(g)
    rows = rng.choice(d, n_planted, replace=False)
    for j in rows:
        fit = q @ (q.T @ v[j])
        sd = (v[j] - fit).std()
        v[j] = fit + sd * (-rho * u + np.sqrt(1.0 - rho**2) * rng.standard_normal(m))
    return v, y, np.sort(rows)


def _real_family_power(rho: float, runs: int, p: int, seed: int, data: str) -> dict[str, Any]:
    from sigmap_lib.inputs import read_perplexity_correlations
    from sigmap_lib.signatures import extract_signatures

    mm = read_perplexity_correlations(data)
    rng = np.random.default_rng([seed, int(rho * 100), 37])
    acc = {k: {"tp": 0, "sel": 0, "planted": 0} for k in ("no_strata", "family_strata")}
    n_perm = None
    for run in range(runs):
        v, y, rows = plant_documents(mm.values, rho, rng)
        truth = set(rows.tolist())
        for key, strata in (("no_strata", None), ("family_strata", mm.families)):
            [sig] = extract_signatures(v, y, n_permutations=p, seed=run, strata=strata)
            if strata is not None:
                n_perm = sig.calibration.n_distinct_permutations
            a = acc[key]
            a["tp"] += len(truth & set(sig.units.tolist()))
            a["sel"] += sig.units.size
            a["planted"] += len(truth)
    out: dict[str, Any] = {"rho": rho, "runs": runs, "m": mm.values.shape[1]}
    for k, a in acc.items():
        out[k] = {
            "recall": a["tp"] / a["planted"],
            "precision": a["tp"] / a["sel"] if a["sel"] else float("nan"),
        }
    out["distinct_permutations_with_strata"] = float(n_perm) if n_perm else None
    return out


# ----------------------------------------------------------------------------------------
# part 2: power and variants


def _power_cell(m: int, rho: float, runs: int, d: int, p: int, seed: int) -> dict[str, Any]:
    from sigmap_lib.signatures import extract_signatures
    from sigmap_lib.worlds import hard_world

    rng = np.random.default_rng([seed, m, int(rho * 100), 23])
    acc = {v: {"tp": 0, "sel": 0, "planted": 0} for v in VARIANTS}
    agree = 0
    thresholds = []
    for run in range(runs):
        w = hard_world("linear", m, d, rng, planted_rho=rho, n_planted=5)
        planted = set(w.planted[0].tolist())
        [sig] = extract_signatures(w.values, w.scores, n_permutations=p, seed=run)
        thresholds.append(sig.calibration.threshold)
        [pear] = extract_signatures(
            w.values, w.scores, n_permutations=p, seed=run, partial_statistic="pearson"
        )
        results = {"spearman_single_step": sig.units, "pearson_single_step": pear.units}
        sub = np.random.default_rng([seed, m, run, 5])
        ref, _ = reference_test(w.values, w.scores[:, 0], sub, n_permutations=p)
        sub = np.random.default_rng([seed, m, run, 5])
        results["spearman_step_down"], _ = reference_test(
            w.values, w.scores[:, 0], sub, n_permutations=p, step_down=True
        )
        # the same statistic, other permutations: the rejected sets agree but for units
        # near the threshold
        agree += (
            len(set(ref.tolist()) & set(sig.units.tolist())) >= min(ref.size, sig.units.size) - 1
        )
        for v, units in results.items():
            acc[v]["tp"] += len(planted & set(np.asarray(units).tolist()))
            acc[v]["sel"] += int(np.asarray(units).size)
            acc[v]["planted"] += len(planted)
    out: dict[str, Any] = {"m": m, "rho": rho, "runs": runs}
    for v, a in acc.items():
        out[v] = {
            "recall": a["tp"] / a["planted"],
            "precision": a["tp"] / a["sel"] if a["sel"] else float("nan"),
        }
    out["smallest_detectable_rho"] = float(np.median(thresholds))
    out["reference_agrees"] = agree / runs
    return out


# ----------------------------------------------------------------------------------------
# part 3: methods side by side on the planted synthetic world


def _methods(d: int, tmp: Path) -> dict[str, Any]:
    from sigmap_lib.signatures import extract_signatures
    from sigmap_lib.worlds import make_synthetic_world, planted_recovery

    w = make_synthetic_world(tmp / "w", n_models=32, n_units=d, n_respondents=0, seed=0)
    values = np.stack([np.asarray(a) for a in w.nll_arrays()], axis=1)
    out = {}
    for meth in ("calibrated", "calibrated-marginal", "lasso", "aic"):
        t = time.perf_counter()
        sigs = extract_signatures(values, w.scores, benchmark_names=w.benchmarks, method=meth)
        rec = planted_recovery(w, sigs)
        out[meth] = {
            "recall": rec["recall"],
            "precision": rec["precision"],
            "units_per_benchmark": float(np.mean([s.units.size for s in sigs])),
            "seconds": time.perf_counter() - t,
        }
    return out


def _table(rows: dict[str, dict[str, Any]]) -> str:
    lines = ["| scenario | m | runs | FWER | Wilson 95 % | units/run | threshold |"]
    lines.append("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        f = r.get("fwer_per_benchmark", r["fwer"])
        lo, hi = r.get("fwer_per_benchmark_wilson95", r["fwer_wilson95"])
        extra = f" (any of 8: {r['fwer_any_benchmark']:.3f})" if "fwer_any_benchmark" in r else ""
        ref = " (reference; library refuses)" if r["refused_by_library"] else ""
        lines.append(
            f"| {name}{ref} | {r['m']} | {r['runs']} | {f:.3f}{extra} | [{lo:.3f}, {hi:.3f}] "
            f"| {r['units_per_run']:.2f} | {r['median_threshold']:.3f} |"
        )
    return "\n".join(lines)


def add_null_bench_arguments(
    ap: argparse.ArgumentParser, *, permutations: int, quick: str, real_data: str
) -> None:
    """Add the options the null-calibration benches share to ``ap``.

    Parameters
    ----------
    ap : argparse.ArgumentParser
    permutations : int
        Default of ``--permutations``.
    quick : str
        What ``--quick`` shrinks the bench to, for its help.
    real_data : str
        What the ``realmodels`` folder of ``--data`` adds, for its help.
    """
    ap.add_argument("--permutations", type=int, default=permutations)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--only", nargs="*", default=None, help="null scenarios to run (names)")
    ap.add_argument("--quick", action="store_true", help=f"smoke: {quick}")
    ap.add_argument(
        "--data",
        default=None,
        help=f"shared/data (default $SIGMAP_SHARED_DATA); its realmodels folder adds {real_data} "
        "(skipped when absent)",
    )


def realmodels_dir(data: str | None) -> Path:
    """The ``realmodels`` folder of the real-loading benches.

    Parameters
    ----------
    data : str or None
        The shared data folder (``--data``); None for :func:`sigmap_lib.studies.shared_data_dir`.

    Returns
    -------
    pathlib.Path
        ``<data>/realmodels`` (it may not exist).
    """
    from sigmap_lib.studies import shared_data_dir

    return (Path(data) if data else shared_data_dir()) / "realmodels"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="sigmap bench recovery")
    ap.add_argument("--runs", type=int, default=1000, help="fresh worlds per null scenario")
    ap.add_argument("--power-runs", type=int, default=100, help="fresh worlds per power cell")
    ap.add_argument("--units", type=int, default=10000, help="units d per world")
    add_null_bench_arguments(
        ap,
        permutations=199,
        quick="20 runs, d = 2000, P = 99",
        real_data="the real-loading null scenarios and the family power",
    )
    ap.add_argument("--skip-power", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true", help="only the real-loading parts")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.power_runs, args.units, args.permutations = 20, 5, 2000, 99
    from sigmap_lib.signatures import MIN_MODELS_CALIBRATED

    specs = [
        s for s in SCENARIOS if (args.only is None or s[0] in args.only) and not args.skip_synthetic
    ]
    real_dir = realmodels_dir(args.data)
    real_specs = (
        [s for s in REAL_SCENARIOS if args.only is None or s[0] in args.only]
        if real_dir.is_dir()
        else []
    )
    if not real_dir.is_dir():
        _log(f"{real_dir} is absent: the real-loading scenarios are skipped")
    out: dict[str, Any] = {
        "bench": "recovery",
        "units": args.units,
        "permutations": args.permutations,
        "runs_per_scenario": args.runs,
        "quick": bool(args.quick),
        "min_models": MIN_MODELS_CALIBRATED,
        "load_avg": os.getloadavg(),
    }
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        futs = {
            s[0]: pool.submit(
                _null_scenario, s, args.runs, args.units, args.permutations, args.seed
            )
            for s in specs
        }
        power = (
            {}
            if args.skip_power
            else {
                f"m{m}_rho{rho}": pool.submit(
                    _power_cell, m, rho, args.power_runs, args.units, args.permutations, args.seed
                )
                for m in POWER_M
                for rho in POWER_RHO
            }
        )
        for s in real_specs:
            futs[s[0]] = pool.submit(
                _real_null, s, args.runs, args.permutations, args.seed, str(real_dir)
            )
        fam = (
            {
                f"rho{rho}": pool.submit(
                    _real_family_power,
                    rho,
                    args.power_runs,
                    args.permutations,
                    args.seed,
                    str(real_dir),
                )
                for rho in (0.6, 0.8)
            }
            if real_specs and not args.skip_power
            else {}
        )
        nulls = {}
        for name, f in futs.items():
            nulls[name] = f.result()
            _log(f"{name}: {nulls[name]}")
        out["null"] = nulls
        out["power"] = {}
        for name, f in power.items():
            out["power"][name] = f.result()
            _log(f"power {name}: {out['power'][name]}")
        out["real_family_power"] = {k: f.result() for k, f in fam.items()}
        for k, v in out["real_family_power"].items():
            _log(f"real family power {k}: {v}")
    if not args.skip_power and not args.skip_synthetic:
        with tempfile.TemporaryDirectory(prefix="sigmap-recovery-") as tmp:
            out["methods_on_the_planted_world"] = _methods(
                20000 if not args.quick else 3000, Path(tmp)
            )
    met: dict[str, bool] = {}
    for name, r in nulls.items():
        if r["m"] < MIN_MODELS_CALIBRATED or (r["scenario"] == "families" and not r["strata"]):
            continue
        f = r.get("fwer_per_benchmark", r["fwer"]) if r["fwer_scope"] == "benchmark" else r["fwer"]
        hi = (
            r.get("fwer_per_benchmark_wilson95", r["fwer_wilson95"])[1]
            if r["fwer_scope"] == "benchmark"
            else r["fwer_wilson95"][1]
        )
        met[f"{name}_fwer"] = f <= FWER_POINT_MAX and hi <= FWER_UPPER_MAX
    fp = out.get("real_family_power", {}).get("rho0.8")
    if fp:
        met["real_family_strata_recall_at_least_half"] = (
            fp["family_strata"]["recall"] >= 0.5 * fp["no_strata"]["recall"]
        )
    cell = out["power"].get("m32_rho0.8")
    if cell:
        met["power_m32_rho0.8_recall"] = cell["spearman_single_step"]["recall"] >= 0.5
        met["power_m32_rho0.8_precision"] = cell["spearman_single_step"]["precision"] >= 0.95
    out["table"] = _table(nulls)
    _log("\n" + out["table"])
    out["targets"] = {"fwer_point_max": FWER_POINT_MAX, "fwer_wilson_upper_max": FWER_UPPER_MAX,
                      "m32_rho0.8": {"recall_min": 0.5, "precision_min": 0.95}}  # fmt: skip
    out["targets_met"] = met
    out["all_targets_met"] = all(met.values())
    out["wall_seconds"] = time.perf_counter() - t0
    out["load_avg_end"] = os.getloadavg()
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(main()))

"""``sigmap bench multires``: multi-resolution signatures against flat unit max-T, on fresh
clustered worlds (a new world every run, never reused).

1. **Null scenarios** (:func:`sigmap_lib.worlds.clustered_world`, ``--runs`` runs each):
   units of the hard kind in ``--null-documents`` documents of ``--null-units-per-document``
   units, documents in 8 sources; each document shares a document × model effect and a
   kink of its own in quality; the scores depend on quality only. Reported per scenario: the
   share of runs with a claim anywhere in the hierarchy (the family-wise error over all
   levels) with its Wilson 95 % interval, and the share with a claim at each level.
2. **Power** at ``m`` = ``--models`` on worlds of ``--documents`` documents of
   ``--units-per-document`` units (10 sources), 1 % of the documents planted: each unit of a
   planted document at partial ρ ``--rho`` with the scores given quality, with its own
   noise (``--power-runs`` worlds per cell, each drawn from its own seed, so a cell's runs
   are split among the workers, ``--runs-per-task`` at a time; with ``--ledger`` every
   finished run is appended to a JSONL file and a run already there is not computed again,
   so a long cell — d = 1e7 — is resumed across sittings). Reported: flat unit max-T's recall and
   precision of the planted units; the hierarchy's recall and precision of planted
   documents, of planted units (claimed at the unit level) and of sources holding a planted
   document (with the sources claimed per run); and the
   cost of the hierarchy's pass against the flat pass (median of the per-run ratio of wall
   times, both in the same process on the same world); the FDR mode at q = 0.05 and 0.1:
   its false-discovery proportion averaged over the runs and its recall of planted units.
3. **The FDR mode on real loadings** (``--data``, default ``$SIGMAP_SHARED_DATA``): null
   scores built from the 89 real models' own quality (linear, first component, convex,
   hinge, threshold, real ARC-Easy shuffled within quintiles, shrinking noise; families with
   the real families as strata), at m = 89 and 32: the share of runs with any claim.

Targets (issue: multi-resolution signatures): every null ≤ 0.06 with a Wilson upper bound
≤ 0.085 over the hierarchy; at m = 32 document recall ≥ 0.5 where flat unit max-T finds
< 0.1 of the planted units; the pass ≤ 1.5× the flat pass; the FDR mode ≤ q + 0.01 with
planted signal and, on every null, claims as rarely as the family-wise test. The last JSON
line is the result.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.perf.recovery import add_null_bench_arguments, realmodels_dir, wilson
from sigmap_lib.signatures import CalibratedMultiResolution, extract_signatures
from sigmap_lib.worlds import clustered_world

NULL_SCENARIOS = (
    "independent",
    "linear",
    "convex",
    "curved",
    "t3",
    "accuracy",
    "reallike",
    "hinge",
    "step",
    "threshold",
    "shrinking",
)
NULL_POINT_MAX, NULL_UPPER_MAX = 0.06, 0.085
FDR_NULL_Q = 0.05
FDR_QS = (0.05, 0.1)


def _log(msg: str) -> None:
    print(f"[bench multires] {msg}", file=sys.stderr, flush=True)


def _null(scenario: str, m: int, docs: int, per: int, runs: int, p: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, m, docs, per, len(scenario), sum(map(ord, scenario))])
    anywhere = fdr_any = 0
    per_level: dict[str, int] = {}
    for run in range(runs):
        cw = clustered_world(scenario, m, docs, per, rng, n_sources=8)
        levels = {"source": cw.sources, "document": cw.documents}
        method = CalibratedMultiResolution(levels=levels, n_permutations=p)
        [sig] = method.extract(cw.world.values, cw.world.scores, names=["b"], seed=run)
        anywhere += not sig.empty
        [flat] = extract_signatures(
            cw.world.values, cw.world.scores, n_permutations=p, seed=run, fdr=FDR_NULL_Q
        )
        fdr_any += not flat.empty
        for lv in sig.extra["levels"]:
            per_level[lv["level"]] = per_level.get(lv["level"], 0) + bool(lv["groups"])
    return {
        "scenario": scenario,
        "m": m,
        "documents": docs,
        "units": docs * per,
        "runs": runs,
        "fwer_hierarchy": anywhere / runs,
        "fwer_hierarchy_wilson95": list(wilson(anywhere, runs)),
        "per_level": {k: v / runs for k, v in per_level.items()},
        "per_level_wilson95": {k: list(wilson(v, runs)) for k, v in per_level.items()},
        f"fdr_q{FDR_NULL_Q}_any_claim": fdr_any / runs,
        f"fdr_q{FDR_NULL_Q}_any_claim_wilson95": list(wilson(fdr_any, runs)),
    }


def _real_fdr_null(shape: str, m: int, runs: int, p: int, seed: int, data: str) -> dict:
    """The FDR mode on null scores built from the 89 real models' own quality
    (:func:`~sigmap_lib.perf.recovery.real_null_scores`): share of runs with any claim."""
    from sigmap_lib.inputs import read_perplexity_correlations
    from sigmap_lib.perf.recovery import real_null_draws

    mm = read_perplexity_correlations(data)
    rng = np.random.default_rng([seed, m, sum(map(ord, shape)), 37])
    hits = 0
    for run, (v, y, strata) in enumerate(real_null_draws(mm, shape, m, runs, rng)):
        [sig] = extract_signatures(v, y, n_permutations=p, seed=run, strata=strata, fdr=FDR_NULL_Q)
        hits += not sig.empty
    return {
        "scenario": f"real {shape}",
        "m": m,
        "runs": runs,
        f"fdr_q{FDR_NULL_Q}_any_claim": hits / runs,
        f"fdr_q{FDR_NULL_Q}_any_claim_wilson95": list(wilson(hits, runs)),
    }


def _ratio(k: int, n: int) -> float:
    return k / n if n else float("nan")


_COUNTS = ("flat_tp", "flat_sel", "doc_tp", "doc_sel", "unit_tp", "unit_sel", "src_tp",
           "src_sel", "src_true")  # fmt: skip


def _power_cell(m: int, docs: int, per: int, rho: float, p: int, seed: int) -> str:
    """The key of a power cell in the ledger: every setting its worlds and tests depend on."""
    return f"m{m}_docs{docs}_per{per}_rho{rho}_P{p}_seed{seed}"


def _power_runs(
    m: int, docs: int, per: int, rho: float, p: int, seed: int, runs: list[int]
) -> list[dict]:
    """One record per run: a fresh world drawn from the run's own seed, so runs can be
    computed in any order, split among workers and resumed."""
    planted = max(1, docs // 100)
    out = []
    for run in runs:
        rng = np.random.default_rng([seed, m, docs, per, int(rho * 100), run])
        cw = clustered_world(
            "linear", m, docs, per, rng, n_sources=10, planted_rho=rho, planted_documents=planted
        )
        w, truth_units, truth_docs = cw.world, cw.world.planted[0], cw.planted_documents[0]
        t0 = time.perf_counter()
        [flat] = extract_signatures(w.values, w.scores, n_permutations=p, seed=run)
        t1 = time.perf_counter()
        levels = {"source": cw.sources, "document": cw.documents}
        method = CalibratedMultiResolution(levels=levels, n_permutations=p)
        [sig] = method.extract(w.values, w.scores, names=["b"], seed=run)
        t2 = time.perf_counter()
        src, doc, unit = (np.asarray(lv["groups"]) for lv in sig.extra["levels"])
        # a source holds signal when a planted document sits in it
        truth_src = np.unique(cw.sources[np.isin(cw.documents, truth_docs)])
        rec: dict[str, Any] = {
            "cell": _power_cell(m, docs, per, rho, p, seed),
            "run": run,
            "flat_tp": int(np.isin(flat.units, truth_units).sum()),
            "flat_sel": int(flat.units.size),
            "doc_tp": int(np.isin(doc, truth_docs).sum()),
            "doc_sel": int(doc.size),
            "unit_tp": int(np.isin(unit, truth_units).sum()),
            "unit_sel": int(unit.size),
            "src_tp": int(np.isin(src, truth_src).sum()),
            "src_sel": int(src.size),
            "src_true": int(truth_src.size),
            "cost_vs_flat": (t2 - t1) / (t1 - t0),
        }
        for q in FDR_QS:
            [f] = extract_signatures(w.values, w.scores, n_permutations=p, seed=run, fdr=q)
            hit = int(np.isin(f.units, truth_units).sum())
            rec[f"fdr_q{q}_fdp"] = (f.units.size - hit) / max(f.units.size, 1)
            rec[f"fdr_q{q}_tp"] = hit
        out.append(rec)
    return out


def _power_summary(m: int, docs: int, per: int, rho: float, records: list[dict]) -> dict:
    """A power cell's numbers from its per-run records."""
    runs = len(records)
    planted = max(1, docs // 100)
    c = {k: sum(r[k] for r in records) for k in _COUNTS}
    ratios = [r["cost_vs_flat"] for r in records]
    fdp = {q: [r[f"fdr_q{q}_fdp"] for r in records] for q in FDR_QS}
    n_units, n_docs = runs * planted * per, runs * planted
    return {
        "m": m,
        "documents": docs,
        "units": docs * per,
        "planted_documents": planted,
        "rho": rho,
        "runs": runs,
        "flat_unit_recall": _ratio(c["flat_tp"], n_units),
        "flat_unit_precision": _ratio(c["flat_tp"], c["flat_sel"]),
        "document_recall": _ratio(c["doc_tp"], n_docs),
        "document_precision": _ratio(c["doc_tp"], c["doc_sel"]),
        "multires_unit_recall": _ratio(c["unit_tp"], n_units),
        "multires_unit_precision": _ratio(c["unit_tp"], c["unit_sel"]),
        "sources_claimed_per_run": c["src_sel"] / runs,
        "source_recall": _ratio(c["src_tp"], c["src_true"]),
        "source_precision": _ratio(c["src_tp"], c["src_sel"]),
        **{f"fdr_q{q}": float(np.mean(fdp[q])) for q in FDR_QS},
        **{
            f"fdr_q{q}_se": float(np.std(fdp[q], ddof=1) / np.sqrt(runs)) if runs > 1 else 0.0
            for q in FDR_QS
        },
        **{
            f"fdr_q{q}_unit_recall": _ratio(sum(r[f"fdr_q{q}_tp"] for r in records), n_units)
            for q in FDR_QS
        },
        "cost_vs_flat_median": float(np.median(ratios)),
        "cost_vs_flat_q90": float(np.quantile(ratios, 0.9)),
    }


def _ledger_records(path: Path | None) -> dict[tuple[str, int], dict]:
    """The runs a ledger already holds, by (cell, run); a torn last line is dropped."""
    if path is None or not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by an interrupted append: that run is computed again
        out[(rec["cell"], int(rec["run"]))] = rec
    return out


def _append(path: Path | None, records: list[dict]) -> None:
    if path is None:
        return
    torn = False
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:  # its last byte only
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
    with path.open("a") as f:  # after a torn last line, on a line of its own
        f.write("\n" * torn + "".join(json.dumps(r) + "\n" for r in records))
        f.flush()
        os.fsync(f.fileno())


def _table(null: dict[str, dict], power: dict[str, dict], real: dict[str, dict]) -> str:
    rows = []
    if null:
        rows.append(
            "scenario      m   FWER(hier) [Wilson 95%]   source  document  unit   "
            f"FDR-mode any (q={FDR_NULL_Q}) [Wilson 95%]"
        )
    for r in null.values():
        lo, hi = r["fwer_hierarchy_wilson95"]
        lv = r["per_level"]
        rows.append(
            f"{r['scenario']:<12}{r['m']:>3}   {r['fwer_hierarchy']:.3f} [{lo:.3f}, {hi:.3f}]"
            f"      {lv.get('source', 0):.3f}   {lv.get('document', 0):.3f}   "
            f"{lv.get('unit', 0):.3f}   {r[f'fdr_q{FDR_NULL_Q}_any_claim']:.3f} "
            f"[{r[f'fdr_q{FDR_NULL_Q}_any_claim_wilson95'][0]:.3f}, "
            f"{r[f'fdr_q{FDR_NULL_Q}_any_claim_wilson95'][1]:.3f}]"
        )
    if power:
        rows.append(
            "m   d         docs    flat-unit-recall  doc-recall doc-precision  src-recall "
            "src-precision  cost   FDR q=0.05 (recall)   FDR q=0.1 (recall)"
        )
    for r in power.values():
        rows.append(
            f"{r['m']:<3} {r['units']:<9} {r['documents']:<7} {r['flat_unit_recall']:<17.3f} "
            f"{r['document_recall']:<11.3f}{r['document_precision']:<14.3f}"
            f"{r['source_recall']:<11.3f}{r['source_precision']:<14.3f}"
            f"{r['cost_vs_flat_median']:.2f}x  "
            f"{r['fdr_q0.05']:.3f} ({r['fdr_q0.05_unit_recall']:.3f})      "
            f"{r['fdr_q0.1']:.3f} ({r['fdr_q0.1_unit_recall']:.3f})"
        )
    if real:
        rows.append(f"real-loading null        m    FDR-mode any (q={FDR_NULL_Q}) [Wilson 95%]")
    for r in real.values():
        lo, hi = r[f"fdr_q{FDR_NULL_Q}_any_claim_wilson95"]
        rows.append(
            f"{r['scenario']:<24}{r['m']:<5}{r[f'fdr_q{FDR_NULL_Q}_any_claim']:.3f} "
            f"[{lo:.3f}, {hi:.3f}]"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(prog="sigmap bench multires", description=__doc__)
    ap.add_argument("--runs", type=int, default=300, help="fresh worlds per null scenario")
    ap.add_argument("--power-runs", type=int, default=300, help="fresh worlds per power cell")
    ap.add_argument("--models", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--null-models", type=int, default=32)
    ap.add_argument("--null-documents", type=int, default=200)
    ap.add_argument("--null-units-per-document", type=int, default=20)
    ap.add_argument("--documents", type=int, nargs="+", default=[1000])
    ap.add_argument("--units-per-document", type=int, default=100)
    ap.add_argument("--rho", type=float, default=0.6)
    add_null_bench_arguments(
        ap,
        permutations=99,
        quick="20 runs, small worlds",
        real_data="the FDR mode on real-loading null scores",
    )
    ap.add_argument(
        "--ledger",
        help="JSONL of finished power runs: a run already in it is not computed again "
        "(resume an interrupted or partial cell; cells sharing it by their settings)",
    )
    ap.add_argument(
        "--runs-per-task",
        type=int,
        default=10,
        help="power runs per worker task (each run draws its world from its own seed)",
    )
    ap.add_argument("--real-models", type=int, nargs="*", default=[89, 32])
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.power_runs, args.models = 20, 10, [32]
        args.null_documents, args.documents, args.units_per_document = 60, [200], 20
    from sigmap_lib.perf.recovery import REAL_SHAPES

    t0 = time.perf_counter()
    scen = [s for s in NULL_SCENARIOS if args.only is None or s in args.only]
    real_dir = realmodels_dir(args.data)
    real = [
        (shape, m)
        for m in args.real_models
        for shape in REAL_SHAPES
        if real_dir.is_dir() and not (shape == "families" and m < 89)
    ]
    if not real_dir.is_dir():
        _log(f"{real_dir} is absent: the real-loading FDR nulls are skipped")
    # spawned workers: the bench may run in a process that has used OpenMP (numba), which
    # a forked child must not inherit
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=spawn) as pool:
        nf = {
            s: pool.submit(
                _null,
                s,
                args.null_models,
                args.null_documents,
                args.null_units_per_document,
                args.runs,
                args.permutations,
                args.seed,
            )
            for s in scen
        }
        cells = {
            f"m{m}_docs{n}": (m, n, args.units_per_document, args.rho)
            for m in args.models
            for n in args.documents
        }
        ledger = Path(args.ledger) if args.ledger else None
        done = _ledger_records(ledger)
        pf = []
        for m, n, per, rho in cells.values():
            key = _power_cell(m, n, per, rho, args.permutations, args.seed)
            todo = [r for r in range(args.power_runs) if (key, r) not in done]
            _log(
                f"power {key}: {args.power_runs - len(todo)} runs in the ledger, {len(todo)} to go"
            )
            for i in range(0, len(todo), args.runs_per_task):
                chunk = todo[i : i + args.runs_per_task]
                pf.append(
                    pool.submit(_power_runs, m, n, per, rho, args.permutations, args.seed, chunk)
                )
        rf = {
            f"real_{shape}_m{m}": pool.submit(
                _real_fdr_null,
                shape,
                m,
                args.runs,
                args.permutations,
                args.seed,
                str(real_dir),
            )
            for shape, m in real
        }
        for fut in as_completed(pf):  # stored as they finish: an interrupted cell resumes
            recs = fut.result()
            _append(ledger, recs)
            done.update({(r["cell"], r["run"]): r for r in recs})
        null = {k: f.result() for k, f in nf.items()}
        real_null = {k: f.result() for k, f in rf.items()}
    power = {}
    for name, (m, n, per, rho) in cells.items():
        key = _power_cell(m, n, per, rho, args.permutations, args.seed)
        recs = [done[(key, r)] for r in range(args.power_runs)]
        power[name] = _power_summary(m, n, per, rho, recs)
    for k, v in null.items():
        _log(f"{k}: {v}")
    for k, v in power.items():
        _log(f"power {k}: {v}")
    for k, v in real_null.items():
        _log(f"real FDR null {k}: {v}")
    met = {
        f"{k}_null": r["fwer_hierarchy"] <= NULL_POINT_MAX
        and r["fwer_hierarchy_wilson95"][1] <= NULL_UPPER_MAX
        for k, r in null.items()
    }
    for k, r in (null | real_null).items():
        lo_hi = r[f"fdr_q{FDR_NULL_Q}_any_claim_wilson95"]
        met[f"{k}_fdr_mode_null"] = (
            r[f"fdr_q{FDR_NULL_Q}_any_claim"] <= NULL_POINT_MAX and lo_hi[1] <= NULL_UPPER_MAX
        )
    for k, r in power.items():
        if r["m"] == 32:
            met[f"{k}_document_recall"] = r["document_recall"] >= 0.5
            met[f"{k}_flat_finds_little"] = r["flat_unit_recall"] < 0.1
            met[f"{k}_cost"] = r["cost_vs_flat_median"] <= 1.5
        for q in FDR_QS:
            met[f"{k}_fdr_q{q}"] = r[f"fdr_q{q}"] <= q + 0.01
    table = _table(null, power, real_null)
    _log("\n" + table)
    return {
        "bench": "multires",
        "args": vars(args),
        "null": null,
        "power": power,
        "real_fdr_null": real_null,
        "table": table,
        "targets": {
            "null_point_max": NULL_POINT_MAX,
            "null_wilson_upper_max": NULL_UPPER_MAX,
            "m32": {"document_recall_min": 0.5, "flat_unit_recall_below": 0.1, "cost_max": 1.5},
        },
        "targets_met": met,
        "all_targets_met": all(met.values()),
        "wall_seconds": time.perf_counter() - t0,
        "load_avg_end": os.getloadavg(),
    }


if __name__ == "__main__":
    print(json.dumps(main()))

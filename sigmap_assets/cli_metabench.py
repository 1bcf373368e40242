"""``sigmap metabench export-tasks`` and ``sigmap metabench score``: the loop a model
evaluator runs — distil (or take metabench's published fits), run the few items with
lm-evaluation-harness, get θ and reconstructed scores with intervals.

    sigmap metabench export-tasks OUT --published B          # metabench version B items
    lm_eval --model hf --model_args pretrained=ORG/MODEL --include_path OUT \\
        --tasks sigmap_metabench_secondary --output_path LOGS --log_samples
    sigmap metabench score LOGS --published B                # θ, scores, 90 % intervals

``--fit PATH`` (default: the fit ``sigmap demo`` stored) uses a sigmap fit instead; its
items come from the world's catalog (``items:`` tables with ``context``/``choices``/``gold``)
and its scoring rules from the export's manifest (``score --tasks OUT``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sigmap_lib.errors import SigmapInputError


def _storage(args: argparse.Namespace):
    from sigmap_assets.resources import SigmapStorage, default_storage_root

    return SigmapStorage(root=str(args.storage or default_storage_root()))


def _shared(sub: str, given: str | None) -> Path:
    from sigmap_lib.studies import shared_data_dir

    return Path(given) if given else shared_data_dir() / sub


def _fit_items(args: argparse.Namespace, fit: Any) -> tuple[dict, dict]:
    """Item tables and scoring rules of a sigmap fit's benchmarks (``--items`` folder, else
    the world's catalog and truth)."""
    import polars as pl

    from sigmap_assets.resources import WorldResource
    from sigmap_assets.tables import fit_item_tables

    if args.items:
        return {
            bm: pl.read_parquet(Path(args.items) / f"{bm}.parquet") for bm in fit.benchmarks
        }, {}
    tables, metrics = fit_item_tables(WorldResource(storage=_storage(args)), list(fit.benchmarks))
    missing = sorted(set(fit.benchmarks) - set(tables))
    if missing:
        raise SigmapInputError(
            f"export-tasks: benchmark(s) {missing} have no item table with context/choices/gold "
            "in the world's catalog (pass --items DIR)"
        )
    return tables, metrics


def _scorer(args: argparse.Namespace):
    from sigmap_lib.metabench import MetabenchFit, MetabenchScorer

    if args.published:
        params = _shared("metabench_irt", args.params)
        return MetabenchScorer.from_published(params, args.published), None
    path = Path(args.fit) if args.fit else _storage(args).layout.metabench_fit()
    if not path.exists():
        raise SigmapInputError(f"no metabench fit at {path}: run `sigmap demo` or pass --fit PATH")
    fit = MetabenchFit.load(path)
    return MetabenchScorer.from_fit(fit, path), fit


def cmd_export_tasks(args: argparse.Namespace) -> int:
    from sigmap_lib.metabench import fit_tasks, published_tasks, write_lm_eval_tasks

    scorer, fit = _scorer(args)
    if args.published:
        tasks = published_tasks(
            _shared("metabench_items", args.items), args.published, item_ids=scorer.items
        )
        group = "sigmap_metabench" + ("" if args.published == "A" else "_secondary")
        source = {"kind": "published", "version": args.published, "fits": scorer.source["fits"]}
    else:
        questions, metrics = _fit_items(args, fit)
        tasks = fit_tasks(fit.selected, questions, metrics=metrics)
        group = "sigmap_fit"
        source = {"kind": "fit", "fit": scorer.source["path"]}
    out = write_lm_eval_tasks(args.out, tasks, group=group, source=source)
    n = sum(len(t.docs) for t in tasks)
    print(
        f"wrote {len(tasks)} tasks ({n} items) to {out}\n"
        f"  run:   lm_eval --model hf --model_args pretrained=MODEL --include_path {out} "
        f"--tasks {group} --output_path LOGS --log_samples\n"
        f"  score: sigmap metabench score LOGS "
        + (f"--published {args.published}" if args.published else f"--tasks {out}"),
        file=sys.stderr,
    )
    return 0


def _table(results: list[dict]) -> str:
    lines = [
        f"{'model':<40} {'benchmark':<14} {'items':>7} {'theta':>7} {'se':>6} {'score':>7}  90% interval"
    ]
    for r in results:
        for bm, b in sorted(r["benchmarks"].items()):
            lo, hi = b["score_interval"]
            lines.append(
                f"{r['model'][:40]:<40} {bm[:14]:<14} {b['items']:>3}/{b['items_total']:<3} "
                f"{b['theta']:>7.3f} {b['theta_se']:>6.3f} {b['score']:>7.2f}  [{lo:.2f}, {hi:.2f}]"
            )
        g = r["grand"]
        if g["score"] is not None:
            lo, hi = g["score_interval"]
            lines.append(
                f"{r['model'][:40]:<40} {'grand':<14} {'':>7} {'':>7} {'':>6} {g['score']:>7.2f}  [{lo:.2f}, {hi:.2f}]"
            )
    return "\n".join(lines)


def cmd_score(args: argparse.Namespace) -> int:
    import time

    from sigmap_lib.metabench import manifest_rules, published_rules, read_lm_eval_answers

    t0 = time.perf_counter()
    scorer, _ = _scorer(args)
    if args.published:
        rules = published_rules(args.published, scorer.items)
        if args.tasks:
            rules |= manifest_rules(args.tasks)
    else:
        if not args.tasks:
            raise SigmapInputError("score --fit needs --tasks OUT (the folder export-tasks wrote)")
        rules = manifest_rules(args.tasks)
    logs = read_lm_eval_answers(args.logs, rules, version=args.published)
    results = scorer.score(logs.answers, level=args.level)
    seconds = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"models": results, "seconds": round(seconds, 3)}, default=float))
    else:
        print(_table(results))
        print(f"({len(results)} model(s), {seconds:.2f} s)", file=sys.stderr)
    return 0


def add_parser(sub: Any) -> None:
    """Register ``sigmap metabench {export-tasks,score}``."""
    mb = sub.add_parser("metabench", help="lm-eval tasks out, θ and reconstructed scores in")
    msub = mb.add_subparsers(dest="metabench_command", required=True)
    for name, fn, helptext in (
        ("export-tasks", cmd_export_tasks, "write lm-eval tasks of a fit's items"),
        ("score", cmd_score, "θ and scores with intervals from lm-eval --log_samples output"),
    ):
        p = msub.add_parser(name, help=helptext)
        if name == "export-tasks":
            p.add_argument("out", help="folder to write (lm_eval --include_path OUT)")
        else:
            p.add_argument("logs", nargs="+", help="lm-eval output folders or samples files")
            p.add_argument("--tasks", help="the export-tasks folder (its sigmap_tasks.json)")
            p.add_argument("--json", action="store_true", help="one JSON line instead of a table")
            p.add_argument("--level", type=float, default=0.9, help="interval coverage (0.9)")
        src = p.add_mutually_exclusive_group()
        src.add_argument("--fit", help="a sigmap metabench fit folder (default: the demo's)")
        src.add_argument("--published", choices=["A", "B"], help="metabench's published fits")
        p.add_argument(
            "--params", help="metabench_irt folder (default ../shared/data/metabench_irt)"
        )
        if name == "export-tasks":
            p.add_argument(
                "--items",
                help="item texts: metabench_items folder (--published) or <bm>.parquet tables",
            )
        p.set_defaults(func=fn)

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

``score`` prints a table (``--json``: one JSON line with full model names) and, on stderr,
what it did not use: samples files of tasks the fit does not cover, benchmarks a model has
no answers for (and why its grand score is missing), benchmarks with fewer than
``MIN_ANSWERED_SHARE`` of their items answered, and logs ``--latest`` set aside.
``sigmap metabench validate`` measures the intervals' coverage on held-out real LLMs that
answered only part of the items.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sigmap_lib.errors import SigmapInputError

#: What each published version's fits in ``shared/data/metabench_irt`` cover (items per
#: benchmark, as exported; the data holds no HellaSwag fit of B and only ARC and GSM8K of A).
PUBLISHED_COVERAGE = {
    "B": {"arc": 100, "gsm8k": 249, "mmlu": 102, "truthfulqa": 136, "winogrande": 106},
    "A": {"arc": 145, "gsm8k": 237},
}


def _coverage_line(version: str) -> str:
    items = PUBLISHED_COVERAGE[version]
    from sigmap_lib.metabench import PUBLISHED_BENCHMARKS

    missing = [b for b in PUBLISHED_BENCHMARKS if b not in items]
    import textwrap

    return textwrap.fill(
        f"version {version}: {sum(items.values())} items in {len(items)} tasks "
        f"({', '.join(f'{b} {n}' for b, n in items.items())}); no fit of "
        f"{', '.join(missing)} in the data, so the grand score is the mean of these "
        f"{len(items)} benchmarks, not metabench's mean of all six",
        width=86,
        initial_indent="  ",
        subsequent_indent="    ",
    )


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
    covered = ", ".join(f"{t.benchmark} {len(t.docs)}" for t in tasks)
    missing = scorer.source.get("missing") or []
    print(
        f"wrote {len(tasks)} tasks ({n} items: {covered}) to {out}\n"
        + (
            f"  not covered: {', '.join(missing)} (no fit of version {args.published} in "
            f"{_shared('metabench_irt', args.params)}); the grand score is the mean of the "
            f"{len(tasks)} benchmarks above\n"
            if missing
            else ""
        )
        + f"  the folder is portable (paths relative to it): move or copy it anywhere\n"
        f"  run:   lm_eval --model hf --model_args pretrained=MODEL --include_path {out} "
        f"--tasks {group} --output_path LOGS --log_samples\n"
        f"  score: sigmap metabench score LOGS "
        + (f"--published {args.published}" if args.published else f"--tasks {out}"),
        file=sys.stderr,
    )
    return 0


def _table(results: list[dict]) -> str:
    """The score table; the model column is as wide as the longest label."""
    width = max([5, *(len(r.get("label", r["model"])) for r in results)])
    lines = [
        f"{'model':<{width}} {'benchmark':<14} {'items':>7} {'theta':>7} {'se':>6} "
        f"{'score':>7}  90% interval"
    ]
    for r in results:
        name = r.get("label", r["model"])
        for bm, b in sorted(r["benchmarks"].items()):
            lo, hi = b["score_interval"]
            lines.append(
                f"{name:<{width}} {bm[:14]:<14} {b['items']:>3}/{b['items_total']:<3} "
                f"{b['theta']:>7.3f} {b['theta_se']:>6.3f} {b['score']:>7.2f}  [{lo:.2f}, {hi:.2f}]"
            )
        g = r["grand"]
        if g["score"] is not None:
            lo, hi = g["score_interval"]
            lines.append(
                f"{name:<{width}} {'grand':<14} {'':>7} {'':>7} {'':>6} {g['score']:>7.2f}  "
                f"[{lo:.2f}, {hi:.2f}]"
            )
        else:
            lines.append(f"{name:<{width}} {'grand':<14} {'':>7} {'':>7} {'':>6} {'-':>7}  -")
    return "\n".join(lines)


def _warnings(results: list[dict], logs: Any, scorer: Any, rules: dict) -> list[str]:
    """What scoring did not use or cannot vouch for, one line each."""
    out = []
    if logs.ignored:
        out.append(
            f"{len(logs.ignored)} samples file(s) of task(s) this fit does not cover were not "
            f"used: {', '.join(logs.ignored_tasks)}"
        )
    for kept, dropped in logs.replaced:
        out.append(f"--latest: used {kept}, not the older {dropped}")
    missing = scorer.source.get("missing") or []
    if missing:
        out.append(
            f"the published version {scorer.source.get('version')} fits cover "
            f"{', '.join(scorer.benchmarks)}; no fit of {', '.join(missing)} in the data, so "
            "the grand score is the mean of the benchmarks covered"
        )
    tasks_of = {}
    for task, rule in rules.items():
        if not task.endswith("_permute"):
            tasks_of.setdefault(rule.benchmark, task)
    for r in results:
        name = r.get("label", r["model"])
        absent = sorted(set(scorer.benchmarks) - set(r["benchmarks"]))
        if absent:
            out.append(
                f"{name}: no samples for {', '.join(f'{b} (task {tasks_of.get(b, b)})' for b in absent)}"
            )
        if r["grand"]["score"] is None:
            out.append(f"{name}: no grand score: {r['grand']['reason']}")
        out.extend(f"{name}: {w}" for w in r["warnings"])
    return out


def _name_models(results: list[dict], logs: Any, name: str | None) -> None:
    """Display labels (``--name`` for a single model, else :func:`model_label`)."""
    if name is not None and len(results) != 1:
        raise SigmapInputError(
            f"--name {name!r} names one model, but the logs hold {len(results)}: "
            f"{', '.join(r['model'] for r in results)}; score one model's folder at a time"
        )
    for r in results:
        r["label"] = name if name is not None else logs.labels.get(r["model"], r["model"])


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
    absent = [p for p in args.logs if not Path(p).exists()]
    if absent:
        raise SigmapInputError(
            f"lm-eval output {', '.join(absent)} does not exist: pass the folder given to "
            "lm_eval --output_path (run with --log_samples), or its samples_*.jsonl files"
        )
    logs = read_lm_eval_answers(args.logs, rules, version=args.published, latest=args.latest)
    results = scorer.score(logs.answers, level=args.level)
    _name_models(results, logs, args.name)
    warnings = _warnings(results, logs, scorer, rules)
    seconds = time.perf_counter() - t0
    if args.json:
        doc = {"models": results, "warnings": warnings, "seconds": round(seconds, 3)}
        print(json.dumps(doc, default=float))
    else:
        print(_table(results))
    sys.stdout.flush()  # the table before the warnings when both go to one terminal
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"({len(results)} model(s), {seconds:.2f} s)", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from sigmap_lib.metabench import partial_answer_coverage

    data = Path(args.data) if args.data else _shared("", None)
    if not (data / "metabench_irt").is_dir():
        raise SigmapInputError(
            f"{data} has no metabench_irt folder: pass --data PATH (the shared/data folder) "
            "or set SIGMAP_SHARED_DATA"
        )
    try:
        shares = [float(x) for x in args.shares.split(",")]
    except ValueError as exc:
        raise SigmapInputError(
            f"--shares {args.shares!r}: expected comma-separated numbers, e.g. 0.25,0.5,1"
        ) from exc
    result = partial_answer_coverage(data, args.version, shares=shares, bounded=not args.unbounded)
    print(json.dumps(result, default=float))
    return 0


def add_parser(sub: Any) -> None:
    """Register ``sigmap metabench {export-tasks,score}``."""
    mb = sub.add_parser("metabench", help="lm-eval tasks out, θ and reconstructed scores in")
    msub = mb.add_subparsers(dest="metabench_command", required=True)
    versions = (
        "published versions (metabench's R fits in shared/data/metabench_irt):\n"
        + "\n".join(_coverage_line(v) for v in ("B", "A"))
    )
    for name, fn, helptext in (
        ("export-tasks", cmd_export_tasks, "write lm-eval tasks of a fit's items"),
        ("score", cmd_score, "θ and scores with intervals from lm-eval --log_samples output"),
    ):
        p = msub.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=versions,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "export-tasks":
            p.add_argument("out", help="folder to write (lm_eval --include_path OUT; portable)")
        else:
            p.add_argument("logs", nargs="+", help="lm-eval output folders or samples files")
            p.add_argument("--tasks", help="the export-tasks folder (its sigmap_tasks.json)")
            p.add_argument("--json", action="store_true", help="one JSON line instead of a table")
            p.add_argument("--level", type=float, default=0.9, help="interval coverage (0.9)")
            p.add_argument(
                "--latest",
                action="store_true",
                help="several logs of one model and task (lm-eval run again into the same "
                "folder): use the newest, not an error",
            )
            p.add_argument(
                "--name",
                help="the model's name in the table (one model only; default: lm-eval's "
                "model_name, a local path shortened to its last component)",
            )
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
    v = msub.add_parser(
        "validate",
        help="coverage of the intervals on held-out real LLMs answering part of the items",
    )
    v.add_argument("--data", help="the shared/data folder (default $SIGMAP_SHARED_DATA)")
    v.add_argument("--version", choices=["A", "B"], default="B")
    v.add_argument("--shares", default="0.25,0.5,1", help="shares of items answered (0.25,0.5,1)")
    v.add_argument(
        "--unbounded", action="store_true", help="without the score-range bounds (for comparison)"
    )
    v.set_defaults(func=cmd_validate)

"""`sigmap` — the command line.

    sigmap demo [--world zoo|synthetic|PATH] [--quick]   materialize the whole graph
    sigmap run                                           the same, on the configured world
    sigmap check [--world zoo|synthetic|PATH]            validate a world before any compute
    sigmap bench NAME [ARGS...]                          a benchmark; prints one JSON line last
    sigmap sync                                          add partitions for new models/benchmarks
    sigmap realdata overlap|metabench|heldout|scoring|signatures|findings
                                                   analyses of ../shared/data
    sigmap metabench export-tasks OUT [--fit P | --published A|B]   lm-eval tasks of a fit's items
    sigmap metabench score LOGS... [--fit P --tasks OUT | --published A|B] [--json]
                                                         θ, scores and intervals from lm-eval logs
    sigmap dev [--host 127.0.0.1] [--port 3000]          the Dagster UI on this storage
    sigmap status                                        what is materialized

Every command uses the storage root ``--storage`` (default ``$SIGMAP_STORAGE`` or
``./storage``) and a persistent Dagster home under it (``<storage>/.dagster``) unless
``DAGSTER_HOME`` is set, so runs started here show up in ``dagster dev``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from sigmap_assets.layout import StorageLayout

BENCHES = (
    "perplexity",
    "screening",
    "selection",
    "recovery",
    "multires",
    "overlap",
    "metabench",
    "segmentation",
    "shards",
    "embedding",
)


def _setup_env(storage: str | None) -> Path:
    root = (
        Path(storage or os.environ.get("SIGMAP_STORAGE") or Path.cwd() / "storage")
        .expanduser()
        .resolve()
    )
    root.mkdir(parents=True, exist_ok=True)
    os.environ["SIGMAP_STORAGE"] = str(root)
    if not os.environ.get("DAGSTER_HOME"):
        home = StorageLayout(str(root)).dagster_home()
        home.mkdir(parents=True, exist_ok=True)
        os.environ["DAGSTER_HOME"] = str(home)
    else:
        Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    home = Path(os.environ["DAGSTER_HOME"])
    if not (home / "dagster.yaml").exists():
        # no telemetry (there is no network anyway); everything else at its default
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return root


#: The code location: what `sigmap demo` / `sigmap run`, their lanes and `dagster dev` load.
CODE = "sigmap_assets.definitions:defs"


def _load_defs():
    from sigmap_assets.lanes import load_code

    return load_code(CODE)


def cmd_demo(args: argparse.Namespace) -> int:
    import logging
    import warnings

    from sigmap_assets.memory import cap_malloc_arenas

    cap_malloc_arenas(2)  # before the imports below start threads (the lanes set their own)
    import dagster as dg

    warnings.simplefilter("ignore")
    os.environ.setdefault("SIGMAP_PROGRESS", "1")
    logging.getLogger("dagster").setLevel(logging.WARNING)

    from sigmap_assets.demo import GraphRunner, runner_lock, runner_lock_path
    from sigmap_assets.resources import read_project_config, write_project_config

    if getattr(args, "configured_only", False) and not _configured(_storage_root(args.storage)):
        root = _storage_root(args.storage)
        print(f"sigmap run: no world is configured for the storage root {root} "
              f"({StorageLayout(str(root)).project_config()} is missing). `sigmap demo` "
              "builds and runs the embedded zoo world (~6 min on 2 cores); `sigmap demo --world PATH` "
              "runs your own world folder; afterwards `sigmap run` refreshes the configured "
              "one.", file=sys.stderr)  # fmt: skip
        return 2
    root = _setup_env(args.storage)
    if args.world:
        if args.world in ("zoo", "synthetic"):
            write_project_config(
                str(root), world=args.world, world_path="", world_quick=bool(args.quick)
            )
        else:
            path = Path(args.world).expanduser().resolve()
            if _stored_minimums(root, path) is None and read_project_config(str(root)).get(
                "minimums"
            ):  # minimums given for another world do not carry over
                print("sigmap: the --minimum values stored for the previous world are dropped "
                      "(this world's settings.yaml applies)", file=sys.stderr)  # fmt: skip
                write_project_config(str(root), minimums={})
            write_project_config(str(root), world="folder", world_path=str(path), world_quick=False)
    elif args.quick:
        write_project_config(str(root), world_quick=True)
    elif not _configured(root):  # `sigmap demo`: the embedded zoo, from now on `sigmap run`'s
        write_project_config(str(root), world="zoo", world_path="", world_quick=False)
    if getattr(args, "minimum", None):
        try:
            minimums = _parse_minimums(args.minimum)
        except ValueError as exc:
            print(f"sigmap: {exc}", file=sys.stderr)
            return 2
        stored = read_project_config(str(root)).get("minimums") or {}
        write_project_config(str(root), minimums={**stored, **minimums})  # merged, key by key
    if getattr(args, "strata", None):
        write_project_config(str(root), strata=args.strata)
    if not _preflight_before_run(root):
        return 1
    defs = _load_defs()
    # a new Dagster home's databases are created by the first process that opens it: two
    # at once would both stamp their schema versions (runs of one storage root share its lock)
    with runner_lock(runner_lock_path(str(root))):
        opened = dg.DagsterInstance.get()
    with opened as instance:
        runner = GraphRunner(
            defs,
            instance,
            cell_threads=_cell_threads(root),
            lanes=_lanes(root),
            code=CODE,
        )
        summary = runner.run()
    print_summary(summary, StorageLayout(str(root)), sys.stderr)
    return 1 if summary.get("failed") else 0


def _cell_threads(root: Path) -> int:
    """Torch threads per perplexity cell: 1 for the embedded worlds, whose models are tiny
    (their forward passes gain little from a second thread, and on a shared machine lose
    much: one cell of the zoo scored 125 k tokens in 7 s on 1 thread, 15-18 s on 2, at
    load 6 on 2 cores); as configured (``compute.threads``, else torch's default) for a
    world folder."""
    return 1 if _embedded_world(root) else 0


def _embedded_world(root: Path) -> bool:
    """Whether the storage root's world is an embedded one (zoo, synthetic)."""
    from sigmap_assets.resources import read_project_config

    return (read_project_config(str(root)).get("world") or "zoo") in ("zoo", "synthetic")


def _lanes(root: Path) -> int:
    """Steps (and partitions of a step) run at once: one per core, at most 2, for the
    embedded worlds, whose tiny models leave the cores idle between steps; 1 for a world
    folder, whose models may each need the whole machine (or the GPU)."""
    import os

    return max(1, min(2, os.cpu_count() or 1)) if _embedded_world(root) else 1


def skip_lines(skips: list[dict[str, str]]) -> list[str]:
    """The run's skips, one line per reason: whole assets with the same reason together,
    then benchmarks per (first) asset that skipped them."""
    whole: dict[str, list[str]] = {}
    parts: dict[tuple[str, str], list[str]] = {}
    seen: set[str] = set()
    for s in skips:
        if s["what"] == "*":
            whole.setdefault(s["reason"], []).append(s["asset"])
        elif s["what"] not in seen:  # a benchmark's first skip (later ones follow from it)
            seen.add(s["what"])
            parts.setdefault((s["asset"], s["reason"]), []).append(s["what"])
    lines = [f"{', '.join(dict.fromkeys(a))}: {r}" for r, a in whole.items()]
    for (asset, reason), what in parts.items():
        lines.append(
            f"benchmark{'s' if len(what) > 1 else ''} {', '.join(what)} ({asset}): {reason}"
        )
    return lines


def print_summary(summary: dict, layout: StorageLayout, stream) -> None:
    """The end of `sigmap demo/run`: what ran, was up to date, skipped (why), failed, and
    where the reports are — printed whatever happened."""
    failed = summary.get("failed", [])
    for f in failed:
        where = f" {f['partition']}" if f["partition"] else ""
        print(f"sigmap: {f['stage']}{where} failed: {f['error']}", file=stream)
    elsewhere = summary.get("elsewhere") or []
    print(
        f"\nDone in {summary['seconds']} s (ran: {', '.join(summary['ran']) or 'nothing'}; "
        + (
            f"ran by another sigmap process meanwhile: {', '.join(elsewhere)}; "
            if elsewhere
            else ""
        )
        + f"up to date: {', '.join(summary['skipped']) or 'nothing'}).",
        file=stream,
    )
    lines = skip_lines(summary.get("skips", []))
    if lines:
        print("Skipped on this world (reasons; the rest ran without them):", file=stream)
        for line in lines:
            print(f"  - {line}", file=stream)
    if summary.get("blocked"):
        print(f"Not run (a stage upstream failed): {', '.join(summary['blocked'])}", file=stream)
    for c in summary.get("checks_failed", []):
        print(
            f"Blocking check failed on {c['asset']} (stored and flagged in the UI; what reads "
            f"it should not use it): {c['check']}",
            file=stream,
        )
    print(
        f"  HTML report:   {layout.overlap_report()}\n"
        f"  metabench:     {layout.metabench_report()}\n"
        f"  plots:         {layout.plots_dir()}\n"
        f"  browse in the Dagster UI:  .venv/bin/sigmap --storage {layout.root} dev   "
        "(or: make dev)",
        file=stream,
    )
    if failed:
        print(
            f"sigmap: {len(failed)} failure(s) (listed above; full error reports under "
            f"{layout.run_logs_dir()}); everything else ran with the complete inputs",
            file=stream,
        )


def _stored_minimums(root: Path, folder: Path) -> dict | None:
    """The ``--minimum`` values stored for this storage root, when ``folder`` is the world
    they were given for (the configured one)."""
    from sigmap_assets.resources import read_project_config

    cfg = read_project_config(str(root))
    configured = cfg.get("world_path")
    if not configured or Path(configured).expanduser().resolve() != folder.resolve():
        return None
    return cfg.get("minimums") or None


def _configured(root: Path) -> bool:
    """A world was chosen for this storage root (``sigmap demo`` writes ``sigmap.yaml``)."""
    return Path(StorageLayout(str(root)).project_config()).exists()


def _storage_root(storage: str | None) -> Path:
    """The storage root as `_setup_env` finds it, without creating anything."""
    return (
        Path(storage or os.environ.get("SIGMAP_STORAGE") or Path.cwd() / "storage")
        .expanduser()
        .resolve()
    )


def _world_to_check(root: Path, world: str | None) -> tuple[str, Path]:
    """``(kind, folder)`` of ``--world`` (zoo | synthetic | PATH), else of the configured
    world exactly as `sigmap run` finds it (``<storage>/sigmap.yaml``, default zoo)."""
    from sigmap_assets.resources import SigmapStorage, WorldResource

    if world in ("zoo", "synthetic"):
        return world, Path(StorageLayout(str(root)).world_dir(world))
    if world:
        return "folder", Path(world).expanduser().resolve()
    res = WorldResource(storage=SigmapStorage(root=str(root)))
    return res.resolved_kind(), res.root()


def _print_problems(problems, stream) -> tuple[int, int]:
    errors = sum(p.severity == "error" for p in problems)
    for p in problems:
        print(p.line(), file=stream)
    return errors, len(problems) - errors


def _parse_minimums(items: list[str]) -> dict[str, int]:
    """``["score_models=3", ...]`` → ``{"score_models": 3}``, checked like settings.yaml."""
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.worlds import read_minimums

    out: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"--minimum {item!r}: expected KEY=N (e.g. score_models=3)")
        out[key.strip()] = int(value)
    try:
        read_minimums({}, out)
    except SigmapInputError as exc:
        raise ValueError(f"--minimum: {exc}") from exc
    return out


def _preflight_before_run(root: Path) -> bool:
    """`sigmap demo` / `sigmap run`: check a folder world before the run starts; prints
    its problems and returns False when there are errors (the embedded zoo and synthetic
    worlds are built by the run itself)."""
    from sigmap_lib.worlds import preflight_world

    try:
        kind, folder = _world_to_check(root, None)
    except ValueError as exc:
        print(f"sigmap: {exc}", file=sys.stderr)
        return False
    if kind != "folder":
        return True
    from sigmap_assets.resources import read_project_config

    overrides = read_project_config(str(root)).get("minimums") or None
    problems = preflight_world(folder, overrides=overrides)
    errors, warnings = _print_problems(problems, sys.stderr)
    if errors:
        print(f"sigmap: world {folder}: {errors} error(s), {warnings} warning(s); fix the "
              "errors first (listed above; `sigmap check` lists them again)", file=sys.stderr)  # fmt: skip
        return False
    if warnings:
        print(f"sigmap: world {folder}: {warnings} warning(s) (stages may be skipped)",
              file=sys.stderr)  # fmt: skip
    return True


def cmd_init_world(args: argparse.Namespace) -> int:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.worlds import init_world

    try:
        if args.source is None:
            root = init_world(args.path, tiny_models=not args.no_tiny_models)
        else:
            from sigmap_lib.worlds import world_from_perplexity_correlations

            kind, folder = args.source
            if kind != "perplexity-correlations":
                raise SigmapInputError(
                    f"init-world --from {kind}: unknown layout; known: perplexity-correlations"
                )
            root = world_from_perplexity_correlations(args.path, folder)
    except SigmapInputError as exc:
        print(f"sigmap: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {root} (see {root / 'README.md'}); run: sigmap demo --world {root}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from sigmap_lib.worlds import preflight_world

    root = _storage_root(args.storage)
    try:
        kind, folder = _world_to_check(root, args.world)
    except ValueError as exc:
        print(f"sigmap check: {exc}", file=sys.stderr)
        return 2
    if kind != "folder" and not folder.exists():
        print(f"sigmap check: the {kind} world is built by `sigmap demo` (not built yet at "
              f"{folder}); nothing to check")  # fmt: skip
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # as `sigmap demo/run` score: offline
    problems = preflight_world(folder, overrides=_stored_minimums(root, folder))
    errors, warnings = _print_problems(problems, sys.stdout)
    verdict = "ok" if not problems else f"{errors} error(s), {warnings} warning(s)"
    print(f"sigmap check: world {folder}: {verdict}")
    return 1 if errors else 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.name not in BENCHES:
        print(
            f"sigmap bench: unknown benchmark {args.name!r}; choose from {', '.join(BENCHES)}",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(f"sigmap_lib.perf.{args.name}")
    result = module.main(list(args.rest))
    print(json.dumps(result, default=float))
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    import dagster as dg

    from sigmap_assets.demo import sync_partitions

    _setup_env(args.storage)
    with dg.DagsterInstance.get() as instance:
        sync_partitions(instance, _load_defs().resources["world"], print)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import dagster as dg

    from sigmap_assets.skips import skips_of

    _setup_env(args.storage)
    defs = _load_defs()
    graph = defs.resolve_asset_graph()
    with dg.DagsterInstance.get() as instance:
        for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
            node = graph.get(key)
            if node.partitions_def is None:
                ev = instance.get_latest_materialization_event(key)
                state = "materialized" if ev else "missing"
                skip = skips_of(ev.asset_materialization.metadata).get("*") if ev else None
                if skip:
                    state = f"skipped on this world: {skip}"
            else:
                pdef = node.partitions_def
                if isinstance(pdef, dg.MultiPartitionsDefinition):
                    name = " × ".join(d.partitions_def.name for d in pdef.partitions_defs)
                    total = [
                        str(k) for k in pdef.get_partition_keys(dynamic_partitions_store=instance)
                    ]
                else:
                    name = pdef.name
                    total = instance.get_dynamic_partitions(name)
                done = {str(k) for k in instance.get_materialized_partitions(key)}
                state = f"{len(done & set(total))}/{len(total)} {name} partitions"
            print(f"{key.to_user_string():<24} {state}")
        for line in registry_lines(instance):
            print(line)
    return 0


def registry_lines(instance) -> list[str]:
    """The registry / catalog against the `models` / `benchmarks` partitions: entries
    removed from the world keep their partition and data (marked here; `sigmap gc` lists
    the data), new entries have none until the next `sigmap run` (or the sensor)."""
    from sigmap_assets.partitions import benchmarks_partitions, models_partitions
    from sigmap_assets.registry_sync import plan_benchmark_sync, plan_model_sync
    from sigmap_assets.resources import SigmapStorage, WorldResource
    from sigmap_lib.errors import SigmapInputError

    world = WorldResource(storage=SigmapStorage(root=os.environ["SIGMAP_STORAGE"]))
    out = []
    for pdef, plan_fn, fname in (
        (models_partitions, plan_model_sync, "models.yaml"),
        (benchmarks_partitions, plan_benchmark_sync, "catalog.yaml"),
    ):
        existing = list(instance.get_dynamic_partitions(pdef.name))
        path = world.file(fname)
        try:
            plan = plan_fn(path, set(existing))
        except (OSError, SigmapInputError, ValueError) as exc:
            out.append(f"{pdef.name}: {path} unreadable ({exc})")
            continue
        removed = [k for k in existing if k not in set(plan.known_keys)]
        out.append(
            f"{pdef.name}: {len(plan.known_keys)} in {path}, {len(existing)} partitions"
            + (
                f", {len(plan.new_keys)} without a partition yet (sigmap run adds them)"
                if plan.new_keys
                else ""
            )
        )
        for k in removed:
            out.append(
                f"  {k}: removed from {fname} (partition and data kept; `sigmap gc` lists its data)"
            )
    return out


def _registry_keys(storage) -> set[str] | None:
    """The model keys of the configured world's registry (None when it cannot be read:
    then no model's data counts as removed)."""
    from sigmap_assets.resources import WorldResource
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.inputs import read_registry

    try:
        return {s.key for s in read_registry(WorldResource(storage=storage).file("models.yaml"))}
    except (OSError, ValueError, SigmapInputError):
        return None


def cmd_gc(args: argparse.Namespace) -> int:
    from sigmap_assets.gc import remove, unused_paths
    from sigmap_assets.resources import SigmapStorage

    storage = SigmapStorage(root=str(_storage_root(args.storage)))
    if not storage.layout.is_local:
        print("sigmap gc: only local storage roots are supported", file=sys.stderr)
        return 2
    unused = unused_paths(storage, registry=_registry_keys(storage))
    for p, why in unused:
        print(f"{p}  ({why})")
    if not unused:
        print("sigmap gc: nothing unused")
    elif args.yes:
        print(f"sigmap gc: removed {len(unused)} item(s), {remove(unused) / 1e6:.1f} MB")
    else:
        print(f"sigmap gc: {len(unused)} unused item(s); run `sigmap gc --yes` to remove them")
    return 0


def cmd_realdata(args: argparse.Namespace) -> int:
    from sigmap_lib.studies import shared_data_dir

    data = Path(args.data).resolve() if args.data else shared_data_dir()
    if not data.exists():
        print(f"sigmap realdata: {data} does not exist (pass --data PATH)", file=sys.stderr)
        return 2
    if args.what == "overlap":
        from sigmap_lib.studies import real_data_overlap_summary

        result = real_data_overlap_summary(data)
    elif args.what == "scoring":
        from sigmap_lib.studies import published_scoring_validation

        result = {v: published_scoring_validation(data, v) for v in ("B", "A")}
    elif args.what == "signatures":
        from sigmap_lib.studies import real_model_signatures

        result = real_model_signatures(data)
    elif args.what == "findings":
        from sigmap_lib.studies import real_model_findings

        result = real_model_findings(data, null_runs=args.null_runs)
    elif args.what == "heldout":
        from sigmap_lib.studies import DEFAULT_STEMS, heldout_reconstruction

        result = {"fits": [heldout_reconstruction(data, stem) for stem in DEFAULT_STEMS]}
    else:
        from sigmap_lib.studies import real_data_validation

        result = real_data_validation(data)
    print(json.dumps(result, default=float))
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    _setup_env(args.storage)
    exe = Path(sys.executable).with_name("dg")
    cmd = [
        str(exe),
        "dev",
        "-m",
        "sigmap_assets.definitions",
        "-h",
        args.host,
        "-p",
        str(args.port),
    ]
    # run from the Dagster home: a .env in the caller's folder would override DAGSTER_HOME
    return subprocess.call(cmd, cwd=os.environ["DAGSTER_HOME"])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sigmap", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--storage", help="storage root (default $SIGMAP_STORAGE or ./storage)")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="materialize the whole graph on the embedded world")
    d.add_argument("--world", help="zoo (default), synthetic, or a world folder (docs/FORMATS.md)")
    d.add_argument("--quick", action="store_true", help="a smaller zoo (for a fast look)")
    d.add_argument(
        "--minimum",
        action="append",
        metavar="KEY=N",
        help="a stage minimum (score_models, coverage_models, signature_models, "
        "metabench_respondents, semantic_benchmarks; docs/OWN_WORLD.md), kept for later runs",
    )
    strata_help = (
        "family: the calibrated signature test permutes models within their registry family "
        "and regresses family effects out; none: no strata (kept for later runs)"
    )
    d.add_argument("--strata", choices=["family", "none"], help=strata_help)
    d.set_defaults(func=cmd_demo)
    r = sub.add_parser(
        "run", help="materialize everything missing or stale on the configured world"
    )
    r.add_argument("--strata", choices=["family", "none"], help=strata_help)
    r.set_defaults(func=cmd_demo, world=None, quick=False, minimum=None, configured_only=True)
    g = sub.add_parser("gc", help="list (--yes: remove) stored data no current key uses")
    g.add_argument("--yes", action="store_true", help="remove what is listed")
    g.set_defaults(func=cmd_gc)
    iw = sub.add_parser(
        "init-world", help="write a small complete example world to start from (docs/OWN_WORLD.md)"
    )
    iw.add_argument("path", help="the new world folder")
    iw.add_argument("--no-tiny-models", action="store_true", help="skip the two tiny real models")
    iw.add_argument(
        "--from",
        dest="source",
        nargs=2,
        metavar=("LAYOUT", "DIR"),
        help="build the world from per-unit values of many models instead: "
        "perplexity-correlations DIR (its bits-per-byte and error CSVs, e.g. "
        "../shared/data/realmodels)",
    )
    iw.set_defaults(func=cmd_init_world)
    c = sub.add_parser("check", help="validate a world (models, scores, catalog, items) before any "
                       "compute; exit 1 on errors")  # fmt: skip
    c.add_argument("--world", help="zoo, synthetic or a world folder (default: the configured "
                   "world, as `sigmap run` finds it)")  # fmt: skip
    c.set_defaults(func=cmd_check)
    b = sub.add_parser("bench", help="run a benchmark; prints one JSON line last")
    b.add_argument("name", help=", ".join(BENCHES))
    b.add_argument("rest", nargs=argparse.REMAINDER)
    b.set_defaults(func=cmd_bench)
    s = sub.add_parser("sync", help="add partitions for new registry models and catalog benchmarks")
    s.set_defaults(func=cmd_sync)
    st = sub.add_parser("status", help="what is materialized")
    st.set_defaults(func=cmd_status)
    rd = sub.add_parser("realdata", help="analyses of the real public data in ../shared/data")
    rd.add_argument(
        "what", choices=["overlap", "metabench", "heldout", "scoring", "signatures", "findings"]
    )
    rd.add_argument("--data", help="path to shared/data")
    rd.add_argument(
        "--null-runs", type=int, default=500, help="findings: fresh null draws per null kind"
    )
    rd.set_defaults(func=cmd_realdata)
    from sigmap_assets.cli_metabench import add_parser as add_metabench

    add_metabench(sub)
    dv = sub.add_parser("dev", help="start the Dagster UI (binds 127.0.0.1 unless told otherwise)")
    dv.add_argument("--host", default="127.0.0.1")
    dv.add_argument("--port", type=int, default=3000)
    dv.set_defaults(func=cmd_dev)
    return p


def _command_name(args: argparse.Namespace) -> str:
    """``sigmap metabench score`` etc.: the subcommand words of ``args``."""
    words = [args.command]
    sub = getattr(args, f"{args.command}_command", None)
    return " ".join(["sigmap", *words, *([sub] if sub else [])])


def _write_error_log(args: argparse.Namespace, name: str, argv: list[str]) -> Path | None:
    """The current exception's full traceback under ``<storage>/.sigmap/logs/`` (the
    folder `sigmap run` writes its failures to); None when nothing can be written there."""
    import time
    import traceback

    stamp = time.strftime("%Y%m%d-%H%M%S")
    slug = name.removeprefix("sigmap ").replace(" ", "-")
    try:
        folder = StorageLayout(str(_storage_root(args.storage))).run_logs_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{slug}-{stamp}-{os.getpid()}.log"
        path.write_text(f"sigmap {' '.join(argv)}\n\n{traceback.format_exc()}")
    except (OSError, ValueError):  # a read-only or remote storage root: no log
        return None
    return path


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. A :class:`~sigmap_lib.errors.SigmapInputError` (bad input: the
    message names what, where and the fix) prints one line and exits 1; its traceback goes
    to a log file under ``<storage>/.sigmap/logs/`` whose path ends the line."""
    from sigmap_lib.errors import SigmapInputError

    args = build_parser().parse_args(argv)
    if getattr(args, "storage", None) is None:
        args.storage = None
    try:
        return int(args.func(args) or 0)
    except SigmapInputError as exc:
        name = _command_name(args)
        log = _write_error_log(args, name, sys.argv[1:] if argv is None else list(argv))
        message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"{name}: {message}" + (f" (traceback: {log})" if log else ""), file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

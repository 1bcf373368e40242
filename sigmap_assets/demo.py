"""`sigmap demo` / `sigmap run`: materialize the whole graph in dependency order, in-process,
into the persistent Dagster instance (so every materialization is visible in the UI).

A step is "up to date" when its code version and the data versions of everything upstream
are the ones it last ran on (recorded under ``<storage>/.sigmap/steps.json``): a re-run with
nothing new only re-checks the world, then stops. Progress shows the stage, the partition and an ETA from
the previous run's durations (or built-in estimates on the first run).

What the world cannot support is *skipped* by the assets themselves, with a reason
(:mod:`sigmap_assets.skips`); the runner lists those skips in its summary. A failing
partition fails alone; a failing unpartitioned stage stops only the stages downstream of
it. Either way the run goes to the end and the summary is printed; full error reports
(stack traces) go to ``<storage>/.sigmap/logs/`` and only their last line to the console.
"""

from __future__ import annotations

import gc
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from sigmap_assets.memory import release_memory
from sigmap_assets.metadata import DATA_VERSION_TAG
from sigmap_assets.partitions import benchmarks_partitions, models_partitions
from sigmap_assets.versions import code_version
from sigmap_lib._util import atomic_write_json

# the console shows the runner's own lines; Dagster's event log (the UI) keeps every message
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass(frozen=True)
class Step:
    """One unit of demo work: some assets, for no partition / each model / a benchmark range."""

    stage: str
    assets: tuple[str, ...]
    partitions: str = "none"  # none | shards / cells (one run each) | benchmarks (one range run)
    always: bool = False  # roots that must re-read their sources every time
    estimate_s: float = 5.0  # first-run guess for the ETA and the lanes' order (the zoo's)


STEPS: tuple[Step, ...] = (
    Step("world", ("model_zoo",), always=True, estimate_s=190.0),
    Step("corpus", ("corpus_manifest",), estimate_s=5.0),
    Step("shards", ("corpus_shard",), partitions="shards", estimate_s=0.2),
    Step("registry", ("model_registry", "benchmark_catalog"), estimate_s=4.0),
    Step("scores", ("benchmark_scores",), estimate_s=4.0),
    Step("perplexity", ("token_nll",), partitions="cells", estimate_s=5.0),
    Step("ranks", ("nll_ranks",), partitions="shards", estimate_s=0.2),
    Step("coverage", ("rank_coverage",), estimate_s=3.0),
    Step("items", ("benchmark_items",), partitions="benchmarks", estimate_s=10.0),
    Step("shard screening", ("shard_screen",), partitions="shards", estimate_s=0.3),
    Step("screening", ("screened_candidates",), partitions="benchmarks", estimate_s=15.0),
    Step("signatures", ("signatures",), partitions="benchmarks", estimate_s=20.0),
    Step("overlap", ("performance_overlap", "semantic_overlap"), estimate_s=40.0),
    Step("signature overlap", ("signature_overlap",), estimate_s=15.0),
    Step("report", ("overlap_report",), estimate_s=40.0),
    Step("metabench pool", ("irt_item_pool",), partitions="benchmarks", estimate_s=10.0),
    Step("metabench fits", ("irt_fits",), partitions="benchmarks", estimate_s=50.0),
    Step("metabench selection", ("metabench_selection",), partitions="benchmarks", estimate_s=40.0),
    Step("metabench", ("metabench",), estimate_s=10.0),
)


def _expected_s(step: Step, durations: dict) -> float:
    """A step's expected seconds: its last duration, else its estimate (per partition for
    the shards / cells steps, counted as 16)."""
    return durations.get(
        step.stage, step.estimate_s * (16 if step.partitions in ("shards", "cells") else 1)
    )


def _fmt_s(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """One line per event on stderr: stage, partition, elapsed and ETA."""

    def __init__(self, total_estimate: float, stream=sys.stderr, lanes: int = 1) -> None:
        self.t0 = time.perf_counter()
        self.remaining = total_estimate
        self.stream = stream
        self.lanes = max(1, lanes)  # steps at once: the ETA counts the work as shared out
        self._lock = threading.Lock()

    def line(self, stage: str, what: str) -> None:
        el = time.perf_counter() - self.t0
        eta = self.remaining / self.lanes
        with self._lock:
            print(
                f"[{_fmt_s(el)} elapsed · ETA {_fmt_s(eta)}] {stage:<20} {what}",
                file=self.stream,
                flush=True,
            )

    def consumed(self, estimate: float) -> None:
        with self._lock:
            self.remaining = max(0.0, self.remaining - estimate)


@contextmanager
def _runs_in_threads(instance: dg.DagsterInstance) -> Iterator[None]:
    """Let in-process runs go on in several threads of this process at once.

    Two things Dagster does per run are process-wide, and this turns them off meanwhile:

    - Every run's log manager asks the instance for the handlers of its ``python_logs:
      dagster_handler_config``, and Dagster builds them with ``logging.config.dictConfig``
      even when that config is empty: dictConfig closes every logging handler under the
      logging module's lock, which deadlocks against a run logging in another thread. With
      no handler config there are no such handlers, so the instance returns none without
      calling dictConfig (an instance with such a config gets one lane: :class:`DemoRunner`).
    - Every step's stdout and stderr are captured by pointing file descriptors 1 and 2 at
      its log files (``os.dup2``) and back at the end: steps of two threads would swap the
      process's descriptors. The runs of the lanes keep no stdout / stderr files (their
      events and logs are in the event log as always); the console keeps its output.
    """
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    saved = instance.__dict__.get("get_yaml_python_handlers"), instance.compute_log_manager
    instance.get_yaml_python_handlers = lambda: []  # type: ignore[method-assign]
    instance._compute_log_manager = NoOpComputeLogManager()
    try:
        yield
    finally:
        if saved[0] is None:
            del instance.get_yaml_python_handlers
        else:
            instance.get_yaml_python_handlers = saved[0]  # type: ignore[method-assign]
        instance._compute_log_manager = saved[1]


def _latest_versions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions: Sequence[str] | None
) -> list[str]:
    if partitions is None:
        ev = instance.get_latest_materialization_event(key)
        if ev is None or ev.asset_materialization is None:
            return [f"{key.to_user_string()}:missing"]
        return [
            f"{key.to_user_string()}:{ev.asset_materialization.tags.get(DATA_VERSION_TAG, ev.run_id)}"
        ]
    name = key.to_user_string()
    # one query for every partition's latest data version (Dagster tags each materialization)
    latest = instance.event_log_storage.get_latest_tags_by_partition(
        key,
        dg.DagsterEventType.ASSET_MATERIALIZATION,
        [DATA_VERSION_TAG],
        asset_partitions=list(partitions),
    )
    out = []
    for p in partitions:
        version = latest.get(p, {}).get(DATA_VERSION_TAG)
        if version is None:  # never materialized, or by a run that set no data version
            recs = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[p]), limit=1
            ).records
            if not recs or recs[0].asset_materialization is None:
                out.append(f"{name}[{p}]:missing")
                continue
            version = recs[0].asset_materialization.tags.get(DATA_VERSION_TAG, recs[0].run_id)
        out.append(f"{name}[{p}]:{version}")
    return out


def failure_report(event) -> str:
    """The whole error of a step failure, stack traces and causes included (for the log file)."""
    data = getattr(event, "event_specific_data", None)
    err = getattr(data, "error", None)
    return err.to_string() if err is not None else (event.message or "failed")


def failure_message(event) -> str:
    """The innermost error message of a step failure (the user's error, not Dagster's wrapper)."""
    data = getattr(event, "event_specific_data", None)
    err = getattr(data, "error", None)
    if err is None:
        return event.message or "failed"
    while getattr(err, "cause", None) is not None:
        err = err.cause
    return f"{err.cls_name}: {err.message.strip()}"


class DemoRunner:
    def __init__(
        self,
        defs: dg.Definitions,
        instance: dg.DagsterInstance,
        state_path: Path,
        log: Callable[[str], None] | None = None,
        resources: dict | None = None,
        cell_threads: int = 0,
        lanes: int = 1,
    ) -> None:
        """``cell_threads``: torch's CPU threads while the perplexity cells are scored (0:
        as the compute resource and torch set them). ``lanes``: steps run at once (those
        whose upstream steps are done) and partitions of one step run at once; with more
        than one lane, torch keeps ``cell_threads`` threads for the whole run."""
        self.defs = defs
        self.cell_threads = max(0, int(cell_threads))
        self.lanes = max(1, int(lanes))
        if self.lanes > 1 and instance.get_python_log_dagster_handler_config():
            self.lanes = 1  # its handlers cannot be built while other runs log (_runs_in_threads)
        self._lock = threading.RLock()
        self.instance = instance
        self.state_path = state_path
        self.graph = defs.resolve_asset_graph()
        self.assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
        self.resources = resources if resources is not None else (defs.resources or {})
        self.state = json.loads(state_path.read_text()) if state_path.exists() else {}
        self.log = log or (lambda s: print(s, file=sys.stderr, flush=True))

    # -- bookkeeping ------------------------------------------------------------------
    def _save(self) -> None:
        with self._lock:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.state_path, self.state, sort_keys=True)

    def _record(self, table: dict, key: str, value) -> None:
        """``table[key] = value`` in the run's state, saved (safe from several lanes)."""
        with self._lock:
            table[key] = value
            self._save()

    def _partitions(self, name: str) -> list[str]:
        return list(self.instance.get_dynamic_partitions(name))

    def _all_keys(self, pdef) -> list[str]:
        if isinstance(pdef, dg.MultiPartitionsDefinition):
            return [str(k) for k in pdef.get_partition_keys(dynamic_partitions_store=self.instance)]
        return self._partitions(pdef.name)

    def _parent_keys(self, node, pdef, partition: str | None) -> list[str] | None:
        """The parent partitions one child partition reads (None: the parent is unpartitioned)."""
        own = node.partitions_def
        if pdef is None:
            return None
        if partition is None:
            return self._all_keys(pdef)
        if pdef == own:
            return [partition]
        if isinstance(own, dg.MultiPartitionsDefinition):  # a cell reads its row / column
            key = own.get_partition_key_from_str(partition)
            for dim in own.partitions_defs:
                if dim.partitions_def == pdef:
                    return [key.keys_by_dimension[dim.name]]
        if isinstance(pdef, dg.MultiPartitionsDefinition):  # a shard reads its cells
            for dim in pdef.partitions_defs:
                if dim.partitions_def == own:
                    return [
                        k
                        for k in self._all_keys(pdef)
                        if pdef.get_partition_key_from_str(k).keys_by_dimension[dim.name]
                        == partition
                    ]
        return self._all_keys(pdef)

    def _signature(self, asset: str, partition: str | None) -> str:
        node = self.graph.get(dg.AssetKey(asset))
        parts: list[str] = []
        for parent in sorted(node.parent_keys, key=lambda k: k.to_user_string()):
            pdef = self.graph.get(parent).partitions_def
            parts += _latest_versions(
                self.instance, parent, self._parent_keys(node, pdef, partition)
            )
        own = _latest_versions(
            self.instance, dg.AssetKey(asset), None if partition is None else [partition]
        )
        parts.append(f"code={code_version(asset)}")  # a new sigmap recomputes what it changed
        if asset == "token_nll" and partition is not None:
            parts.append(self._cell_fingerprint(partition))
        if asset == "signatures":  # `sigmap run --strata` / settings.yaml change a signature
            from sigmap_lib.errors import SigmapInputError

            try:
                parts.append(f"strata={self.resources['world'].strata()}")
            except SigmapInputError as exc:  # the signatures step fails with the reason
                parts.append(f"strata=invalid: {exc}")
        return hashlib.sha256("|".join(parts + own).encode()).hexdigest()[:20]

    def _cell_fingerprint(self, partition: str) -> str:
        """The model's files and scoring settings: weights overwritten in place, another
        tokenizer or dtype make its cells "to do" (and only its cells)."""
        from sigmap_assets.partitions import cells_partitions
        from sigmap_assets.state import StoredState
        from sigmap_lib.inputs import read_registry

        key = cells_partitions.get_partition_key_from_str(partition).keys_by_dimension
        path = self.resources["world"].file("models.yaml")
        stamp = (str(path), path.stat().st_mtime_ns)
        if getattr(self, "_specs", (None, None))[0] != stamp:  # read once per registry version
            self._specs = (stamp, {s.key: s for s in read_registry(path)})
        spec = self._specs[1].get(key["model"])
        if spec is None:
            return "unregistered"
        try:
            state = StoredState.read(self.resources["storage"])
            dtype = self.resources["compute"].scoring_dtype(spec)
            return state.cell_fingerprint(spec, key["shard"], dtype)
        except OSError as exc:  # a missing model folder: the cell's own run reports it
            return f"unreadable:{exc.errno}"

    def _materialize(
        self,
        assets: Sequence[str],
        partition: str | None = None,
        prange: tuple[str, str] | None = None,
    ) -> float:
        tags = {"sigmap/launched_by": "sigmap demo"}
        if prange:
            tags |= {
                "dagster/asset_partition_range_start": prange[0],
                "dagster/asset_partition_range_end": prange[1],
            }
        t0 = time.perf_counter()
        result = dg.materialize(
            self.assets,
            selection=list(assets),
            instance=self.instance,
            resources=self.resources,
            partition_key=partition,
            tags=tags,
            run_config=QUIET_RUN_CONFIG,
            raise_on_error=False,
        )
        if not result.success:
            events = [ev for ev in result.all_events if ev.is_step_failure]
            failures = [f"{ev.step_key}: {failure_message(ev)}" for ev in events]
            log = self._write_failure_log(result.run_id, assets, partition, events)
            raise RuntimeError(
                f"materializing {', '.join(assets)} failed:\n  "
                + "\n  ".join(failures)
                + (f"\n  (full error report: {log})" if log else "")
            )
        return time.perf_counter() - t0

    def _write_failure_log(self, run_id: str, assets, partition, events) -> Path | None:
        """The failed steps' full errors under ``.sigmap/logs/<run id>.log``."""
        from sigmap_assets.layout import StorageLayout

        try:
            folder = StorageLayout(self.resources["storage"].root).run_logs_dir()
        except (KeyError, ValueError, OSError):  # no local storage root: nowhere to write
            return None
        path = folder / f"{run_id}.log"
        text = [f"run {run_id}: {', '.join(assets)}" + (f" [{partition}]" if partition else "")]
        text += [f"\n--- step {ev.step_key}\n{failure_report(ev)}" for ev in events]
        path.write_text("\n".join(text) + "\n")
        return path

    def skips(self, step: Step) -> list[dict[str, str]]:
        """What the step's assets skipped in their latest materialization, with reasons."""
        from sigmap_assets.skips import skips_of

        if step.partitions in ("shards", "cells"):
            return []  # per-partition runs: a failing one is a failure, not a skip
        out = []
        for asset in step.assets:
            ev = self.instance.get_latest_materialization_event(dg.AssetKey(asset))
            mat = ev.asset_materialization if ev is not None else None
            for what, reason in skips_of(mat.metadata if mat is not None else {}).items():
                out.append({"stage": step.stage, "asset": asset, "what": what, "reason": reason})
        return out

    def _blocked_by(self, failed: set[str]) -> set[str]:
        """The failed assets and everything downstream of them."""
        out, todo = set(), [dg.AssetKey(a) for a in failed]
        while todo:
            key = todo.pop()
            if key.to_user_string() in out:
                continue
            out.add(key.to_user_string())
            todo += list(self.graph.get(key).child_keys)
        return out

    # -- partitions ---------------------------------------------------------------------
    def sync_partitions(self) -> None:
        from sigmap_assets.registry_sync import plan_benchmark_sync, plan_model_sync

        world = self.resources["world"]
        for pdef, plan_fn, fname in (
            (models_partitions, plan_model_sync, "models.yaml"),
            (benchmarks_partitions, plan_benchmark_sync, "catalog.yaml"),
        ):
            plan = plan_fn(world.file(fname), set(self._partitions(pdef.name)))
            if plan.new_keys:
                self.instance.add_dynamic_partitions(pdef.name, plan.new_keys)
                self.log(f"added {len(plan.new_keys)} {pdef.name} partitions")

    def _keys_for(self, step: Step) -> list[str]:
        from sigmap_lib.inputs import read_registry

        if step.partitions in ("shards", "cells"):
            from sigmap_assets.partitions import cell_key
            from sigmap_assets.state import StoredState

            shards = StoredState.read(self.resources["storage"]).shard_keys
            if step.partitions == "shards":
                return shards
            models = [s.key for s in read_registry(self.resources["world"].file("models.yaml"))]
            return [str(cell_key(m, sh)) for m in models for sh in shards]
        from sigmap_lib.inputs import benchmark_slug, read_catalog

        return [
            benchmark_slug(n) for n in read_catalog(self.resources["world"].file("catalog.yaml"))
        ]

    # -- the run -----------------------------------------------------------------------
    def step_deps(self, steps: Sequence[Step]) -> list[set[int]]:
        """For each step, the earlier steps it waits for: those holding an asset upstream of
        one of its assets, and the steps up to the registry (partitions are synced there)."""
        index = {a: i for i, st in enumerate(steps) for a in st.assets}
        names = [st.stage for st in steps]
        preamble = names.index("registry") if "registry" in names else -1
        out: list[set[int]] = []
        for j, st in enumerate(steps):
            todo = [dg.AssetKey(a) for a in st.assets]
            seen: set[dg.AssetKey] = set()
            deps = set(range(min(j, preamble + 1)))
            while todo:
                key = todo.pop()
                for parent in self.graph.get(key).parent_keys:
                    if parent not in seen:
                        seen.add(parent)
                        todo.append(parent)
                        i = index.get(parent.to_user_string())
                        if i is not None and i < j:
                            deps.add(i)
            out.append(deps)
        return out

    @staticmethod
    def _critical_path(
        steps: Sequence[Step], deps: Sequence[set[int]], durations: dict
    ) -> list[float]:
        """Per step, the expected seconds from its start to the end of the longest chain of
        steps waiting on it (its last duration, else its estimate): ready steps start
        longest chain first, so the lanes end together."""
        own = [_expected_s(s, durations) for s in steps]
        rank = list(own)
        for j in reversed(range(len(steps))):  # deps point backwards: dependents come later
            for i in deps[j]:
                rank[i] = max(rank[i], own[i] + rank[j])
        return rank

    def run(self, steps: Sequence[Step] = STEPS) -> dict:
        durations = self.state.get("durations", {})
        estimate = sum(_expected_s(s, durations) for s in steps)
        prog = Progress(estimate, lanes=self.lanes)
        summary: dict = {"ran": [], "skipped": [], "failed": [], "blocked": [], "skips": []}
        failed_assets: set[str] = set()

        def one(i: int) -> None:
            self._do_step(steps[i], f"{i + 1}/{len(steps)} {steps[i].stage}", prog, summary,
                          failed_assets, durations)  # fmt: skip

        # what is loaded by now (modules, the definitions, the instance) lives for the whole
        # run: kept out of every collection, so each one walks only what the steps allocate
        gc.collect()
        gc.freeze()
        try:
            self._run_steps(steps, one, durations)
        finally:
            gc.unfreeze()
        summary["seconds"] = round(time.perf_counter() - prog.t0, 1)
        return summary

    def _run_steps(
        self, steps: Sequence[Step], one: Callable[[int], None], durations: dict
    ) -> None:
        """Call ``one(i)`` for every step: in order, or with several lanes every step whose
        upstream steps are done, longest remaining chain first."""
        if self.lanes == 1:
            for i in range(len(steps)):
                one(i)
        else:  # every step whose upstream steps are done, `lanes` at once
            deps = self.step_deps(steps)
            rank = self._critical_path(steps, deps, durations)
            pending = sorted(range(len(steps)), key=lambda i: (-rank[i], i))
            done, running = set(), {}
            with (
                self._torch_threads(self.cell_threads),
                _runs_in_threads(self.instance),
                ThreadPoolExecutor(self.lanes, thread_name_prefix="sigmap-lane") as pool,
            ):
                while pending or running:
                    for i in [i for i in pending if deps[i] <= done]:
                        if len(running) >= self.lanes:
                            break
                        pending.remove(i)
                        running[pool.submit(one, i)] = i
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        done.add(running.pop(fut))
                        fut.result()  # a runner bug surfaces here; asset failures are recorded

    def _do_step(
        self,
        step: Step,
        label: str,
        prog: Progress,
        summary: dict,
        failed_assets: set[str],
        durations: dict,
    ) -> None:
        """Run one step (or record why not) into ``summary``."""
        t_stage = time.perf_counter()
        expected = _expected_s(step, durations)
        with self._lock:
            blocked = self._blocked_by(failed_assets) & set(step.assets)
        if blocked:
            prog.line(label, f"not run: upstream of {', '.join(sorted(blocked))} failed")
            with self._lock:
                summary["blocked"].append(step.stage)
            prog.consumed(expected)
            return
        try:
            expected = self._run_step(step, label, prog, summary, expected)
            skips = self.skips(step)
        except RuntimeError as exc:  # an unpartitioned / range stage: its downstream waits
            with self._lock:
                failed_assets |= set(step.assets)
                summary["failed"].append({"stage": step.stage, "partition": "", "error": str(exc)})
            prog.line(label, f"FAILED: {str(exc).splitlines()[1].strip()}")
            skips = []  # its last materialization is an earlier run's, not this one's
        with self._lock:
            summary["skips"] += skips
            ran = step.stage in summary["ran"]
        if ran:
            for sk in skips:
                if sk["what"] == "*":
                    prog.line(label, f"{sk['asset']} skipped: {sk['reason']}")
        prog.consumed(expected)
        with self._lock:
            if ran:
                durations[step.stage] = time.perf_counter() - t_stage
            self._record(self.state, "durations", durations)
        release_memory()

    @staticmethod
    @contextmanager
    def _torch_threads(n: int) -> Iterator[None]:
        """Torch's CPU threads set to ``n`` meanwhile (0: left as they are)."""
        if n <= 0:
            yield
            return
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _run_partitions(
        self,
        step: Step,
        label: str,
        prog: Progress,
        summary: dict,
        expected: float,
        keys: list[str],
        todo: list[str],
        sigs: dict,
    ) -> None:
        """One run per partition of ``todo`` (``lanes`` at once); a failing partition fails
        alone."""

        def one(j: int, k: str) -> None:
            prog.line(
                label,
                f"{step.assets[0]} · {k} ({j}/{len(todo)} to do, {len(keys)} {step.partitions})",
            )
            try:
                self._materialize(step.assets, partition=k)
            except RuntimeError as exc:  # only this partition fails; the rest go on
                with self._lock:
                    summary["failed"].append(
                        {"stage": step.stage, "partition": k, "error": str(exc)}
                    )
                prog.line(label, f"FAILED {k}: {str(exc).splitlines()[1].strip()}")
                return
            self._record(sigs, k, self._signature(step.assets[0], k))
            prog.consumed(expected / len(todo))  # ETA moves model by model

        if self.lanes == 1 or len(todo) < 2:
            for j, k in enumerate(todo, 1):
                one(j, k)
        else:
            with ThreadPoolExecutor(self.lanes, thread_name_prefix="sigmap-part") as pool:
                for fut in [pool.submit(one, j, k) for j, k in enumerate(todo, 1)]:
                    fut.result()
        if not todo:
            prog.line(label, f"{step.assets[0]}: all {len(keys)} {step.partitions} up to date")

    def _run_step(
        self, step: Step, label: str, prog: Progress, summary: dict, expected: float
    ) -> float:
        """One step: materialize what is not up to date (per partition for shards / cells).
        Returns the part of the step's ETA estimate still to be consumed."""
        if step.partitions == "none":
            sig = "|".join(self._signature(a, None) for a in step.assets)
            with self._lock:
                sigs = self.state.setdefault("signatures", {})
            if not step.always and sigs.get(step.stage) == sig:
                prog.line(label, f"{', '.join(step.assets)}: up to date")
                summary["skipped"].append(step.stage)
            else:
                prog.line(label, f"materializing {', '.join(step.assets)}")
                self._materialize(step.assets)
                sig = "|".join(self._signature(a, None) for a in step.assets)
                self._record(sigs, step.stage, sig)
                summary["ran"].append(step.stage)
            if step.stage == "registry":
                self.sync_partitions()
        elif step.partitions in ("shards", "cells"):
            keys = self._keys_for(step)
            with self._lock:
                sigs = self.state.setdefault("signatures", {}).setdefault(step.stage, {})
            todo = [k for k in keys if sigs.get(k) != self._signature(step.assets[0], k)]
            threads = self.cell_threads if step.partitions == "cells" and self.lanes == 1 else 0
            with self._torch_threads(threads):
                self._run_partitions(step, label, prog, summary, expected, keys, todo, sigs)
            (summary["ran"] if todo else summary["skipped"]).append(step.stage)
            return 0.0 if todo else expected
        else:
            keys = self._keys_for(step)
            if not keys:
                prog.line(label, f"{step.assets[0]}: no benchmarks in the catalog")
                summary["skipped"].append(step.stage)
                return expected
            with self._lock:
                sigs = self.state.setdefault("signatures", {})
            sig = "|".join(self._signature(step.assets[0], k) for k in keys)
            if sigs.get(step.stage) == sig:
                prog.line(label, f"{step.assets[0]}: all {len(keys)} benchmarks up to date")
                summary["skipped"].append(step.stage)
            else:
                prog.line(
                    label,
                    f"{step.assets[0]} · {len(keys)} benchmarks in one run ({keys[0]}…{keys[-1]})",
                )
                self._materialize(step.assets, prange=(keys[0], keys[-1]))
                sig = "|".join(self._signature(step.assets[0], k) for k in keys)
                self._record(sigs, step.stage, sig)
                summary["ran"].append(step.stage)
        return expected

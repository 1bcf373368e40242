"""`sigmap demo` / `sigmap run`: the daemon's own sensors and declarative automation, ticked
in-process until nothing more is requested, each request materialized into the persistent
Dagster instance (so every run is visible in the UI).

One idea of "current": what runs is what the ``sigmap_automation`` sensor would request
(:func:`dagster.evaluate_automation_conditions` over the asset graph, with the conditions of
:mod:`sigmap_assets.automation`), after the input observer has recorded the inputs and
settings that changed and the model and catalog sensors have added the new partitions (and
requested the cells of a model whose files changed in place). The steps come from the graph;
no list of steps is kept here. The automation cursor and the sensors' cursors live in the
instance's key-value store, so a run resumes where the previous one (or the daemon's tick
of the same conditions) left off, and a second run with nothing new requests nothing.

The only asset run every time is the world root (``model_zoo``: an unautomated asset that
reads no other asset), which re-checks the embedded world and keeps its data version when
nothing changed.

Requests of one tick run in dependency order; with ``lanes`` > 1, every request whose
requested upstream assets are done runs at once with others (up to ``lanes``), each in a
worker process (:mod:`sigmap_assets.lanes`). A failing
partition (a cell, a shard) fails alone; a failing unpartitioned asset or benchmark range
blocks what is downstream of it until a later request of it succeeds. Either way the run
goes to the end and the summary is printed; full error reports go to
``<storage>/.sigmap/logs/`` and only their last line to the console. What the world cannot support is *skipped* by the
assets themselves, with a reason (:mod:`sigmap_assets.skips`), and listed in the summary.

Runners started together on one storage root share the work: a tick's requests go on a
*board* in the instance's key-value store (:class:`~sigmap_assets.runboard.Board`), each
request is claimed by one runner, and the conditions are evaluated again only when no
request of the graph is left on the board, so nothing is computed twice. Every
read-modify-write of the shared state (the board, the automation and sensor cursors, the
world root) happens under one advisory file lock (:meth:`GraphRunner._locked`). A request
claimed, or a run left in progress, by a process of this host that has ended is dropped,
its run marked failed (:meth:`GraphRunner._recover`).
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg

from sigmap_assets.lanes import ChecksFailed, Lanes, materialize_request, torch_threads
from sigmap_assets.memory import release_memory
from sigmap_assets.runboard import (
    BOARD,
    HOST_TAG,
    POLL_S,
    REQUEST_TAG,
    UNFINISHED,
    Board,
    Owner,
    Request,
    runner_lock,
    runner_lock_path,
)

#: Keys of the runner's cursors and timings in the instance's key-value store.
AUTOMATION_CURSOR = "sigmap/run/automation"
SENSOR_CURSOR = "sigmap/run/sensor/"
DURATIONS = "sigmap/run/durations"
#: Seconds a request is expected to take before it has ever run (the ETA's first guess).
FIRST_GUESS_S = 5.0


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


def sync_partitions(
    instance: dg.DagsterInstance, world, log: Callable[[str], None] = lambda s: None
) -> None:
    """Add a ``models`` partition per new registry entry and a ``benchmarks`` partition per
    new catalog entry (what the model and catalog sensors add; never removes one)."""
    from sigmap_assets.partitions import benchmarks_partitions, models_partitions
    from sigmap_assets.registry_sync import plan_benchmark_sync, plan_model_sync

    for pdef, plan_fn, fname in (
        (models_partitions, plan_model_sync, "models.yaml"),
        (benchmarks_partitions, plan_benchmark_sync, "catalog.yaml"),
    ):
        plan = plan_fn(world.file(fname), set(instance.get_dynamic_partitions(pdef.name)))
        if plan.new_keys:
            instance.add_dynamic_partitions(pdef.name, plan.new_keys)
            log(f"added {len(plan.new_keys)} {pdef.name} partitions")


class GraphRunner:
    """Tick the daemon's sensors and automation in-process and run what they request.

    Parameters
    ----------
    defs : dagster.Definitions
        The code location (its assets, checks, sensors and resources).
    instance : dagster.DagsterInstance
        The persistent instance: runs, cursors and timings are stored there.
    log : callable, optional
        Where progress lines go (default: stderr).
    resources : dict, optional
        Resources for the runs (default: the definitions').
    cell_threads : int
        Torch's CPU threads while perplexity cells are scored (0: as configured).
    lanes : int
        Requests run at once (those whose requested upstream assets are done), each in a
        worker process of its own (:class:`~sigmap_assets.lanes.Lanes`). More than one needs
        ``code`` and a persistent instance.
    code : str, optional
        The code location's reference, ``module:attr`` (``Definitions`` or a function
        returning them), that the lanes' processes load: the same definitions as ``defs``.
    max_ticks : int
        Automation ticks before the run stops with what is still requested.
    """

    def __init__(
        self,
        defs: dg.Definitions,
        instance: dg.DagsterInstance,
        log: Callable[[str], None] | None = None,
        resources: dict | None = None,
        cell_threads: int = 0,
        lanes: int = 1,
        code: str | None = None,
        max_ticks: int = 40,
    ) -> None:
        self.defs = defs
        self.instance = instance
        self.graph = defs.resolve_asset_graph()
        self.resources = resources if resources is not None else (defs.resources or {})
        self._own_resources = resources is None  # the code location's: the lanes load them
        self.cell_threads = max(0, int(cell_threads))
        self.lanes = max(1, int(lanes))
        if self.lanes > 1 and (code is None or not instance.is_persistent):
            raise ValueError(
                f"{self.lanes} lanes need the code location's reference (code='module:attr') "
                "and a persistent Dagster instance (DAGSTER_HOME); give them or run one lane"
            )
        self.code = code
        self._lanes: Lanes | None = None  # the lanes' worker processes while requests run
        self.max_ticks = max_ticks
        self.log = log or (lambda s: print(s, file=sys.stderr, flush=True))
        self._lock = threading.RLock()
        self._me = Owner.this_process()  # the owner named on the runs and claims of this runner
        self._ancestry: dict[str, set[str]] = {}

    # -- the instance's key-value store ------------------------------------------------
    def _get(self, key: str) -> str | None:
        return self.instance.run_storage.get_cursor_values({key}).get(key)

    def _set(self, key: str, value: str) -> None:
        self.instance.run_storage.set_cursor_values({key: value})

    # -- the graph --------------------------------------------------------------------
    def _ancestors(self, name: str) -> set[str]:
        """The assets ``name`` reads, directly or not (Dagster's own graph walk; cached)."""
        if name not in self._ancestry:
            keys = self.graph.get_ancestor_asset_keys(dg.AssetKey(name))
            self._ancestry[name] = {k.to_user_string() for k in keys}
        return self._ancestry[name]

    def _closure(self, targets: Sequence[str] | None) -> set[str]:
        """The materializable assets ``targets`` need (all of them when None)."""
        names = [k.to_user_string() for k in self.graph.materializable_asset_keys]
        if targets is None:
            return set(names)
        need = set(targets).union(*(self._ancestors(t) for t in targets))
        return need & set(names)

    def _roots(self, selected: set[str]) -> list[str]:
        """Unautomated assets that read no other asset: run every time (the world)."""
        out = []
        for key in self.graph.toposorted_asset_keys:
            node = self.graph.get(key)
            if (
                key.to_user_string() in selected
                and node.is_materializable
                and node.automation_condition is None
                and not any(self.graph.get(p).is_materializable for p in node.parent_keys)
            ):
                out.append(key.to_user_string())
        return out

    # -- sensors and automation ----------------------------------------------------------
    def _sensor(self, name: str) -> list[Request]:
        """One tick of a sensor of the definitions, as the daemon handles its result (its
        cursor kept in the instance): observations recorded, partitions added; the run
        requests it makes (cells of a model whose files changed) returned."""
        sensor = self.defs.get_sensor_def(name)
        with (
            _quiet(),
            dg.build_sensor_context(
                instance=self.instance,
                cursor=self._get(SENSOR_CURSOR + name),
                resources={"world": self.resources["world"]},
            ) as ctx,
        ):
            result = sensor(ctx)
        if not isinstance(result, dg.SensorResult):
            return []
        for ev in result.asset_events or []:
            self.instance.report_runless_asset_event(ev)
        for req in result.dynamic_partitions_requests or []:
            if isinstance(req, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(
                    req.partitions_def_name, list(req.partition_keys)
                )
        if result.cursor is not None:
            self._set(SENSOR_CURSOR + name, result.cursor)
        return [
            Request(asset.to_user_string(), r.partition_key)
            for r in result.run_requests or []
            for asset in r.asset_selection or []
        ]

    def _tick(self, selection: dg.AssetSelection) -> dict[str, list[str | None]]:
        """One evaluation of the automation conditions (cursor kept in the instance): the
        requested partitions per asset (``[None]`` for an unpartitioned one)."""
        raw = self._get(AUTOMATION_CURSOR)
        result = dg.evaluate_automation_conditions(
            defs=self.defs,
            instance=self.instance,
            asset_selection=selection,
            cursor=dg.deserialize_value(raw) if raw else None,  # type: ignore[arg-type]
        )
        self._set(AUTOMATION_CURSOR, dg.serialize_value(result.cursor))
        out: dict[str, list[str | None]] = {}
        for key in self.graph.toposorted_asset_keys:
            if self.graph.get(key).automation_condition is None:
                continue
            keys = result.get_requested_partitions(key)
            if keys:
                out[key.to_user_string()] = sorted(keys, key=lambda k: "" if k is None else str(k))
        return out

    def _requests(self, asked: dict[str, list[str | None]]) -> list[Request]:
        """A tick's requests as runs: unpartitioned assets once; benchmarks as ranges of
        consecutive keys; other partitions one run each."""
        from sigmap_assets.partitions import benchmarks_partitions

        order = self.instance.get_dynamic_partitions(benchmarks_partitions.name)
        out: list[Request] = []
        for name, keys in asked.items():
            pdef = self.graph.get(dg.AssetKey(name)).partitions_def
            if keys == [None]:
                out.append(Request(name))
            elif pdef == benchmarks_partitions:
                idx = sorted(order.index(k) for k in keys if k in order)
                runs: list[list[int]] = []
                for i in idx:
                    if runs and i == runs[-1][-1] + 1:
                        runs[-1].append(i)
                    else:
                        runs.append([i])
                out += [Request(name, prange=(order[r[0]], order[r[-1]])) for r in runs]
            else:
                out += [Request(name, str(k)) for k in keys]
        return out

    # -- the run -----------------------------------------------------------------------
    def run(self, targets: Sequence[str] | None = None) -> dict:
        """Run until automation requests nothing more (``targets``: only these assets and
        what they need). Returns the summary: ``ran``, ``skipped`` (up to date),
        ``failed`` (with partition and error), ``blocked`` (downstream of a failure),
        ``skips`` (what the assets skipped, with reasons), ``checks_failed`` (blocking checks
        that flagged a stored result; not a failure of the run) and ``seconds``."""
        selected = self._closure(targets)
        selection = dg.AssetSelection.assets(*selected)
        durations = json.loads(self._get(DURATIONS) or "{}")
        automated = [
            k.to_user_string()
            for k in self.graph.toposorted_asset_keys
            if k.to_user_string() in selected and self.graph.get(k).automation_condition
        ]
        roots = self._roots(selected)
        prog = Progress(
            sum(durations.get(a, FIRST_GUESS_S) for a in [*roots, *automated]), lanes=self.lanes
        )
        self.summary: dict = {
            "ran": [], "skipped": [], "failed": [], "blocked": [], "skips": [], "checks_failed": [],
        }  # fmt: skip
        self._failed: set[str] = set()
        self._took: dict[str, float] = {}
        self._waiting: tuple[str, ...] = ()
        self._elsewhere: set[str] = set()  # assets of this graph other runners ran meanwhile
        gc.collect()
        gc.freeze()  # what is loaded by now lives for the whole run: kept out of collections
        try:
            # one writer of the world and of the sensors' cursors at a time: a second runner
            # waits here, then finds the world unchanged and the sensors with nothing new
            with self._locked(
                waiting="another sigmap process of this storage root is checking "
                "the world or choosing what to run"
            ):
                self._join()
                for name in roots:
                    self._one(Request(name), prog, durations, 1)
                if self._get(AUTOMATION_CURSOR) is None:
                    self._tick(selection)  # the first evaluation only records the state it finds
                sync_partitions(self.instance, self.resources["world"], self.log)
                extra = self._sensor("new_model_sensor") + self._sensor("catalog_sensor")
                self._sensor("input_observer")
            self._drive(selection, selected, [r for r in extra if r.asset in selected], prog)
        finally:
            gc.unfreeze()
            with self._locked():
                self._leave()
        ran = set(self.summary["ran"])
        self.summary["ran"] = [a for a in [*roots, *automated] if a in ran]
        elsewhere = self._elsewhere - ran
        self.summary["elsewhere"] = [a for a in automated if a in elsewhere]
        not_current = ran | {f["stage"] for f in self.summary["failed"]}
        self.summary["skipped"] = [
            a
            for a in automated
            if a not in not_current and a not in self.summary["blocked"] and a not in elsewhere
        ]
        # what every asset that ran or is current skipped (a failed one: its earlier run's)
        self.summary["skips"] = self._skips(
            [a for a in [*roots, *automated] if a not in self._failed]
        )
        for s in self.summary["skips"]:
            if s["what"] == "*" and s["asset"] in ran:
                prog.line(s["asset"], f"skipped: {s['reason']}")
        with self._locked():
            stored = json.loads(self._get(DURATIONS) or "{}")
            self._set(DURATIONS, json.dumps(stored | self._took, sort_keys=True))
        self.summary["seconds"] = round(time.perf_counter() - prog.t0, 1)
        return self.summary

    # -- runners sharing one instance ----------------------------------------------------
    def _lock_path(self) -> Path | None:
        """The lock of the shared state (:func:`runner_lock_path`): the storage root's, else
        one in the instance's folder; None for an instance in memory."""
        storage = self.resources.get("storage")
        path = runner_lock_path(getattr(storage, "root", None))
        if path is not None or not self.instance.is_persistent:
            return path
        try:
            return Path(self.instance.root_directory) / "sigmap-runner.lock"
        except (AttributeError, TypeError):
            return None

    @contextmanager
    def _locked(self, waiting: str | None = None) -> Iterator[None]:
        """Hold the runners' lock (:func:`runner_lock`)."""
        with runner_lock(self._lock_path(), waiting, self.log):
            yield

    def _board(self) -> Board:
        return Board.load(self._get(BOARD))

    def _join(self) -> None:
        """(Under the lock.) Clear what ended runners left behind, then enter the board; the
        first member starts with no failures of earlier runs."""
        board = self._board()
        self._recover(board, all_runs=True)
        if not board.members:
            board.failed = []
        board.members.append(self._me.key)
        graph_assets = {k.to_user_string() for k in self.graph.materializable_asset_keys}
        board.entries = [e for e in board.entries if e["asset"] in graph_assets]
        self._set(BOARD, board.dump())

    def _leave(self) -> None:
        """(Under the lock.) Leave the board; a request this runner claimed and did not finish
        (it stopped on an error) is dropped, as its run ended."""
        board = self._board()
        board.members = [m for m in board.members if m != self._me.key]
        board.entries = [e for e in board.entries if e["owner"] != self._me.key]
        self._set(BOARD, board.dump())

    def _recover(self, board: Board, all_runs: bool = False) -> None:
        """(Under the lock.) Runners of this host that ended without leaving the board: their
        claimed requests are dropped and their unfinished runs marked failed (so the
        conditions' ``in_progress`` no longer holds anything back); with ``all_runs``, every
        unfinished run of such a runner, on the board or not. Their unclaimed requests stay,
        for the runners at work now."""
        gone = {k for k in {*board.members, *(e["owner"] for e in board.entries)} if k}
        gone = {k for k in gone if k != self._me.key and Owner.from_key(k).gone()}
        runs = []
        if all_runs:
            runs = self.instance.get_runs(
                filters=dg.RunsFilter(statuses=UNFINISHED, tags={HOST_TAG: self._me.host})
            )
        elif gone:
            runs = [
                run
                for key in gone
                for run in self.instance.get_runs(
                    filters=dg.RunsFilter(statuses=UNFINISHED, tags=Owner.from_key(key).tags())
                )
            ]
        for run in runs:
            owner = Owner.from_tags(dict(run.tags))
            if owner is None or owner == self._me or not (owner.key in gone or owner.gone()):
                continue
            gone.add(owner.key)
            what = run.tags.get(REQUEST_TAG, run.job_name)
            message = (
                f"the sigmap process that ran it (pid {owner.pid} on {owner.host}) ended "
                "before the run finished"
            )
            self.instance.report_run_failed(run, message)
            self.log(f"sigmap: run {run.run_id} ({what}) marked failed: {message}")
        for key in gone:
            lost = [e for e in board.entries if e["owner"] == key]
            for e in lost:
                if e["partition"] is None and e["asset"] not in board.failed:
                    board.failed.append(e["asset"])
            if lost:
                self.log(
                    f"sigmap: the sigmap process {Owner.from_key(key).pid} ended; its "
                    f"{len(lost)} unfinished request(s) dropped: "
                    + ", ".join(Board.request(e).label() for e in lost)
                )
            board.entries = [e for e in board.entries if e["owner"] != key]
        board.members = [m for m in board.members if m not in gone]

    def _drive(
        self,
        selection: dg.AssetSelection,
        selected: set[str],
        extra: list[Request],
        prog: Progress,
    ) -> None:
        """Tick the conditions and run what they request, sharing the requests with the other
        runners of the instance.

        Under the lock, each pass: a finished request leaves the board; this runner claims the
        requests of its graph whose upstream requests are all finished (up to ``lanes``); and
        when no request of its graph is left on the board, neither its own nor another
        runner's, it evaluates the conditions and puts what they request on the board. The
        claim and the evaluation happen under the same lock, and the conditions are never
        evaluated while a request of the graph is unfinished (its run may not exist yet, and
        ``in_progress`` would not see it), so a request goes to exactly one runner. While only
        other runners have requests of its graph in flight, it waits (polling every
        ``POLL_S``) and evaluates again once they are done.
        """
        durations = json.loads(self._get(DURATIONS) or "{}")
        ticks = 0
        finished: list[tuple[Request, str]] = []
        running: dict[Future, Request] = {}
        with ExitStack() as stack:
            pool = None
            if self.lanes > 1:  # threads that wait for the lanes' processes
                stack.enter_context(self._lane_processes())
                pool = stack.enter_context(
                    ThreadPoolExecutor(self.lanes, thread_name_prefix="sigmap-lane")
                )
            while True:
                stop = False
                with self._locked():
                    board = self._board()
                    self._recover(board)
                    for r, outcome in finished:
                        self._finish(board, r, outcome)
                    finished = []
                    with self._lock:
                        self._failed = set(board.failed)
                    claimed = self._claim(board, selected, self.lanes - len(running))
                    mine = [e for e in board.entries if e["asset"] in selected]
                    self._elsewhere.update(
                        e["asset"] for e in mine if e["owner"] not in (None, self._me.key)
                    )
                    if not claimed and not running and not mine:
                        if ticks >= self.max_ticks:
                            self.log(f"sigmap: automation still requests work after {ticks} ticks")
                            stop = True
                        else:
                            ticks += 1
                            new = self._requests(self._tick(selection)) + extra
                            extra = []
                            board.add(new)
                            stop = not new
                            claimed = self._claim(board, selected, self.lanes)
                    self._set(BOARD, board.dump())
                if stop:
                    return
                for e in claimed:
                    r = Board.request(e)
                    if pool is None:
                        finished.append((r, self._one(r, prog, durations, e["of"])))
                    else:
                        running[pool.submit(self._one, r, prog, durations, e["of"])] = r
                if finished:
                    continue
                if running:
                    done, _ = wait(running, timeout=POLL_S, return_when=FIRST_COMPLETED)
                    for fut in done:
                        r = running.pop(fut)
                        finished.append((r, fut.result()))  # a runner bug surfaces here
                elif not claimed:
                    self._show_waiting(board, selected)
                    time.sleep(POLL_S)

    @contextmanager
    def _lane_processes(self) -> Iterator[None]:
        """The lanes' worker processes, started for the requests and stopped after."""
        assert self.code is not None
        resources = None if self._own_resources else self.resources
        self._lanes = Lanes(self.lanes, self.code, self.instance, resources, self.cell_threads)
        try:
            yield
        finally:
            self._lanes.close()
            self._lanes = None

    def _claim(self, board: Board, selected: set[str], free: int) -> list[dict]:
        """Claim up to ``free`` unclaimed requests of this runner's graph whose upstream
        requests on the board are all finished."""
        out: list[dict] = []
        for e in board.entries:
            if len(out) >= free:
                break
            if e["owner"] is not None or e["asset"] not in selected:
                continue
            upstream = self._ancestors(e["asset"])
            if any(o["asset"] in upstream for o in board.entries):
                continue
            e["owner"] = self._me.key
            out.append(e)
        return out

    def _finish(self, board: Board, r: Request, outcome: str) -> None:
        """A request of this runner is done: off the board; an unpartitioned asset's (or a
        range's) outcome sets whether what reads it may run."""
        entry = board.find(r, self._me.key)
        if entry is not None:
            board.entries.remove(entry)
        if r.partition is None:
            if outcome == "failed" and r.asset not in board.failed:
                board.failed.append(r.asset)
            elif outcome in ("ran", "checks_failed") and r.asset in board.failed:
                board.failed.remove(r.asset)

    def _show_waiting(self, board: Board, selected: set[str]) -> None:
        """One line each time what this runner waits for changes: the requests of its graph
        other runners are running, with their runs."""
        others = [
            e for e in board.entries if e["asset"] in selected and e["owner"] not in (None, self._me.key)
        ]  # fmt: skip
        labels = tuple(sorted(Board.request(e).label() for e in others))
        if not others or labels == self._waiting:
            self._waiting = labels
            return
        self._waiting = labels
        owner = Owner.from_key(others[0]["owner"])
        runs = self.instance.get_runs(
            filters=dg.RunsFilter(statuses=UNFINISHED, tags=owner.tags()), limit=1
        )
        what = (
            f"run {runs[0].run_id} ({runs[0].tags.get(REQUEST_TAG, labels[0])})"
            if runs
            else labels[0]
        )
        more = f" and {len(others) - 1} more request(s)" if len(others) > 1 else ""
        self.log(f"sigmap: waiting for {what}{more} of another sigmap process (pid {owner.pid})")

    def _one(self, r: Request, prog: Progress, durations: dict, of: int) -> str:
        """Materialize one request (or record why not) into the summary; returns the
        outcome: ``ran``, ``checks_failed``, ``failed`` or ``blocked``."""
        with self._lock:  # downstream of an asset whose latest attempt failed
            blocked = bool(self._ancestors(r.asset) & self._failed)
        expected = durations.get(r.asset, FIRST_GUESS_S) / max(1, of)
        if blocked:
            with self._lock:
                if r.asset not in self.summary["blocked"]:
                    self.summary["blocked"].append(r.asset)
                    prog.line(r.asset, "not run: something upstream of it failed")
            prog.consumed(expected)
            return "blocked"
        prog.line(r.asset, f"materializing {r.label()}")
        t0 = time.perf_counter()
        outcome = "ran"
        try:
            self._materialize(r)
        except ChecksFailed as exc:
            outcome = "checks_failed"
            with self._lock:
                if r.asset not in self.summary["ran"]:
                    self.summary["ran"].append(r.asset)
                self.summary["checks_failed"].extend(
                    {"asset": r.asset, "check": line} for line in exc.failures
                )
            prog.line(r.asset, f"stored, but a blocking check failed: {exc}")
        except RuntimeError as exc:
            outcome = "failed"
            with self._lock:
                if r.partition is None:  # an unpartitioned asset or a range: downstream waits
                    self._failed.add(r.asset)
                self.summary["failed"].append(
                    {"stage": r.asset, "partition": r.partition or "", "error": str(exc)}
                )
            prog.line(r.asset, f"FAILED {r.label()}: {str(exc).splitlines()[1].strip()}")
        else:
            with self._lock:
                if r.asset not in self.summary["ran"]:
                    self.summary["ran"].append(r.asset)
                if r.partition is None and r.asset in self._failed:  # a later attempt made it
                    self._failed.discard(r.asset)
                    self.summary["failed"] = [
                        f for f in self.summary["failed"]
                        if not (f["stage"] == r.asset and f["partition"] == "")
                    ]  # fmt: skip
        with self._lock:
            self._took[r.asset] = self._took.get(r.asset, 0.0) + time.perf_counter() - t0
        prog.consumed(expected)
        release_memory()
        return outcome

    def _materialize(self, r: Request) -> None:
        """One request as one run: in a lane process with several lanes, else here."""
        tags = self._me.tags()
        if self._lanes is not None:
            self._lanes.materialize(r, tags)
            return
        with torch_threads(self.cell_threads if r.asset == "token_nll" else 0):
            materialize_request(self.defs, self.instance, self.resources, r, tags)

    def _skips(self, assets: Sequence[str]) -> list[dict[str, str]]:
        """What the assets skipped in their latest materialization, with reasons (not the
        per-shard and per-cell assets: a failing partition is a failure, not a skip)."""
        from sigmap_assets.partitions import benchmarks_partitions
        from sigmap_assets.skips import skips_of

        out = []
        for asset in assets:
            pdef = self.graph.get(dg.AssetKey(asset)).partitions_def
            if pdef is not None and pdef != benchmarks_partitions:
                continue
            ev = self.instance.get_latest_materialization_event(dg.AssetKey(asset))
            mat = ev.asset_materialization if ev is not None else None
            for what, reason in skips_of(mat.metadata if mat is not None else {}).items():
                out.append({"stage": asset, "asset": asset, "what": what, "reason": reason})
        return out


@contextmanager
def _quiet() -> Iterator[None]:
    """Sensors' info lines kept off the console meanwhile (the runner prints its own)."""
    import logging

    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)

"""One request of `sigmap demo` / `sigmap run` materialized: in this process, or in a *lane*.

A request (an asset, one partition, or a range of benchmarks) is one Dagster run made with
:func:`dagster.materialize` into the persistent instance. With several lanes, each run goes
to a worker process of its own (:class:`Lanes`, a pool of ``spawn``-ed processes). Dagster
keeps some per-run state process-wide — a run's stdout/stderr capture repoints file
descriptors 1 and 2, and an instance with settings rebuilds its logging handlers with
``logging.config.dictConfig`` — so runs at once are runs in separate processes, as Dagster's
own run launchers do. A worker loads the code location from its reference (``module:attr``,
as ``dagster dev -m`` names one), opens the instance from its ``DAGSTER_HOME`` and keeps
both for every request it runs; the runner's threads only wait for the workers.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from sigmap_assets.memory import cap_malloc_arenas, release_memory
from sigmap_assets.runboard import REQUEST_TAG, UNFINISHED, Request

# the console shows the runner's own lines; Dagster's event log (the UI) keeps every message
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


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
    message = err.message.strip()
    head, sep, rest = message.partition(": ")  # "pkg.mod.Error: text" as Python prints it
    if sep and head.split(".")[-1] == err.cls_name:
        message = rest
    return f"{err.cls_name}: {message}"


class ChecksFailed(Exception):
    """A run whose asset materialized but whose blocking checks failed: the result is stored
    and flagged (what reads it should not use it); ``failures`` names each check."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__("; ".join(failures))
        self.failures = failures

    def __reduce__(self):  # back from a lane process with its list of failures
        return ChecksFailed, (self.failures,)


def _check_line(evaluation) -> str:
    """``check: key=value, ...`` of a failed check evaluation (its metadata, shortened)."""
    meta = ", ".join(
        f"{k}={str(getattr(v, 'value', v))[:120]}" for k, v in evaluation.metadata.items()
    )
    return f"{evaluation.check_name}" + (f" ({meta})" if meta else "")


def materialize_request(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    resources: dict,
    r: Request,
    tags: dict[str, str],
) -> None:
    """Materialize ``r`` (its asset and checks) as one run of ``instance``.

    Raises
    ------
    ChecksFailed
        The asset was stored but a blocking check failed.
    RuntimeError
        The run failed: ``materializing <request> failed:`` and one line per failed step; the
        steps' full errors are written to ``<storage>/.sigmap/logs/<run id>.log``.
    """
    tags = {"sigmap/launched_by": "sigmap run", REQUEST_TAG: r.label(), **tags}
    if r.prange:
        tags |= {
            "dagster/asset_partition_range_start": r.prange[0],
            "dagster/asset_partition_range_end": r.prange[1],
        }
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(
        [*assets, *(defs.asset_checks or [])],
        selection=[r.asset],
        instance=instance,
        resources=resources,
        partition_key=r.partition,
        tags=tags,
        run_config=QUIET_RUN_CONFIG,
        raise_on_error=False,
    )
    if result.success:
        return
    events = [ev for ev in result.all_events if ev.is_step_failure]
    checks = [e for e in result.get_asset_check_evaluations() if not e.passed]
    if checks and all("AssetCheckFailed" in failure_message(ev) for ev in events):
        raise ChecksFailed([_check_line(e) for e in checks])
    failures = [f"{ev.step_key}: {failure_message(ev)}" for ev in events]
    log = _write_failure_log(resources, result.run_id, r, events)
    raise RuntimeError(
        f"materializing {r.label()} failed:\n  "
        + "\n  ".join(failures or ["the run failed"])
        + (f"\n  (full error report: {log})" if log else "")
    )


def _write_failure_log(resources: dict, run_id: str, r: Request, events) -> Path | None:
    """The failed steps' full errors under ``.sigmap/logs/<run id>.log``."""
    from sigmap_assets.layout import StorageLayout

    try:
        folder = StorageLayout(resources["storage"].root).run_logs_dir()
    except (KeyError, ValueError, OSError):  # no local storage root: nowhere to write
        return None
    path = folder / f"{run_id}.log"
    text = [f"run {run_id}: {r.label()}"]
    text += [f"\n--- step {ev.step_key}\n{failure_report(ev)}" for ev in events]
    path.write_text("\n".join(text) + "\n")
    return path


def load_code(ref: str) -> dg.Definitions:
    """The definitions a code reference names: ``module:attr``, a ``Definitions`` or a
    function returning one."""
    module, _, attr = ref.partition(":")
    obj = getattr(importlib.import_module(module), attr or "defs")
    return obj() if callable(obj) else obj


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
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


# -- the worker processes -------------------------------------------------------------------
def resource_config(resources: dict) -> dict[str, tuple[type, dict] | Any]:
    """What rebuilds ``resources`` in another process: each configurable resource as its
    class and its configuration (``model_dump``: Dagster's resource objects themselves do not
    survive pickling); any other value as it is (it must pickle)."""
    return {
        k: (type(v), v.model_dump()) if isinstance(v, dg.ConfigurableResource) else v
        for k, v in resources.items()
    }


def resources_from(config: dict[str, tuple[type, dict] | Any]) -> dict:
    """The resources :func:`resource_config` describes."""
    return {
        k: v[0](**v[1]) if isinstance(v, tuple) and isinstance(v[0], type) else v
        for k, v in config.items()
    }


#: What a worker loaded once (its definitions, instance, resources and torch threads).
_WORKER: dict[str, Any] = {}


def _worker_start(code: str, home: str, resources: dict | None, threads: int) -> None:
    """A lane process's start: the runner's memory settings, then the code and the instance
    (an error here is kept and given as every request's failure)."""
    import logging
    import warnings

    cap_malloc_arenas(2)
    warnings.simplefilter("ignore")
    logging.getLogger("dagster").setLevel(logging.WARNING)
    os.environ["DAGSTER_HOME"] = home
    try:
        defs = load_code(code)
        _WORKER.update(
            defs=defs,
            instance=dg.DagsterInstance.get(),
            resources=(defs.resources or {}) if resources is None else resources_from(resources),
            threads=threads,
        )
    except Exception as exc:  # reported with each request
        _WORKER["error"] = f"{type(exc).__name__}: {exc}"


def _worker_run(r: Request, tags: dict[str, str]) -> None:
    w = _WORKER
    if "error" in w:
        raise RuntimeError(
            f"materializing {r.label()} failed:\n  its lane process could not load the code "
            f"location or the instance: {w['error']}"
        )
    try:
        with torch_threads(w["threads"]):
            materialize_request(w["defs"], w["instance"], w["resources"], r, tags)
    finally:
        release_memory()


class Lanes:
    """Worker processes that materialize requests, ``n`` at once.

    Parameters
    ----------
    n : int
        Worker processes.
    code : str
        The code location's reference (``module:attr``: ``Definitions`` or a function
        returning them) each worker loads.
    instance : dagster.DagsterInstance
        A persistent instance (the workers open it from its ``DAGSTER_HOME``).
    resources : dict, optional
        The runs' resources (default: the definitions' own, as each worker loads them).
    threads : int
        Torch's CPU threads in each worker (0: torch's default).
    """

    def __init__(
        self,
        n: int,
        code: str,
        instance: dg.DagsterInstance,
        resources: dict | None = None,
        threads: int = 0,
    ) -> None:
        if not instance.is_persistent:
            raise ValueError("lanes need a persistent Dagster instance (set DAGSTER_HOME)")
        config = None if resources is None else resource_config(resources)
        self._args = (code, str(instance.root_directory), config, threads)
        self._instance = instance
        self._n = n
        self._restart = threading.Lock()
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self._n,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_start,
            initargs=self._args,
        )

    def materialize(self, r: Request, tags: dict[str, str]) -> None:
        """Run ``r`` in a worker and wait (raises as :func:`materialize_request`). A worker
        that ends mid-run fails the request with one line and its run is marked failed (so
        automation does not see it in progress); the pool is started again."""
        pool = self._pool
        try:
            pool.submit(_worker_run, r, tags).result()
        except BrokenProcessPool as exc:
            with self._restart:
                if self._pool is pool:
                    self._pool = self._start()
            message = f"its lane process ended ({exc})"
            left = dg.RunsFilter(statuses=UNFINISHED, tags={**tags, REQUEST_TAG: r.label()})
            for run in self._instance.get_runs(filters=left):
                self._instance.report_run_failed(run, message)
            raise RuntimeError(f"materializing {r.label()} failed:\n  {message}") from None

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

"""A toy code location for the lanes' tests (:mod:`tests.assets.test_lanes`): what a lane's
process loads by reference, ``tests.assets.lane_code:defs``."""

from __future__ import annotations

import logging
import os
import sys
import time

import dagster as dg

from sigmap_assets.resources import SigmapStorage


@dg.asset
def where() -> dg.MaterializeResult:
    """The process and its open logging handlers, after printing and logging (what runs at
    once in one process would disturb)."""
    print("to stdout")
    print("to stderr", file=sys.stderr)
    logging.getLogger("lane").warning("logged")
    start = time.time()
    time.sleep(float(os.environ.get("LANE_SLEEP", "0")))
    return dg.MaterializeResult(metadata={"pid": os.getpid(), "start": start, "t": time.time()})


@dg.asset
def dies() -> None:
    os._exit(3)  # the process ends mid-run (killed, out of memory)


@dg.asset
def fails() -> None:
    raise ValueError("model m|x: no such file; give its path in models.yaml")


@dg.asset(check_specs=[dg.AssetCheckSpec("positive", asset="flagged", blocking=True)])
def flagged():
    yield dg.Output(-1)
    yield dg.AssetCheckResult(passed=False, metadata={"value": -1})


@dg.asset
def stored_at(storage: SigmapStorage) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"root": storage.root})


defs = dg.Definitions(
    assets=[where, dies, fails, flagged, stored_at],
    resources={"storage": SigmapStorage(root="/the/code/locations/own/root")},
)

"""Requests in lane processes (:mod:`sigmap_assets.lanes`): runs at once in separate
processes of the persistent instance, their failures as the runner reports them, a lane that
dies replaced, and an instance with logging handlers of its own served by every lane."""

from __future__ import annotations

import os
import pickle
import threading

import dagster as dg
import pytest

from sigmap_assets.demo import GraphRunner
from sigmap_assets.lanes import ChecksFailed, Lanes, resource_config, resources_from
from sigmap_assets.runboard import Request

CODE = "tests.assets.lane_code:defs"


def _metadata(instance: dg.DagsterInstance, asset: str, runs: list | None = None) -> list[dict]:
    """The metadata of ``asset``'s materializations (of ``runs`` only, when given)."""
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
    ids = None if runs is None else {r.run_id for r in runs}
    return [
        {k: v.value for k, v in r.asset_materialization.metadata.items()}  # type: ignore[union-attr]
        for r in records
        if ids is None or r.run_id in ids
    ]


def test_two_lanes_run_two_requests_at_once_in_their_own_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANE_SLEEP", "2")  # spawned workers inherit it
    handlers = {"handlers": {"h": {"class": "logging.StreamHandler", "level": "INFO"}}}
    with dg.instance_for_test(
        overrides={"python_logs": {"dagster_handler_config": handlers}}
    ) as instance:
        lanes = Lanes(2, CODE, instance)
        try:
            for r in [Request("where")] * 2:  # warm both workers (their first imports)
                lanes.materialize(r, {})
            threads = [
                threading.Thread(target=lanes.materialize, args=(Request("where"), {"n": str(i)}))
                for i in range(2)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        finally:
            lanes.close()
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"n": "0"})) + instance.get_runs(
            filters=dg.RunsFilter(tags={"n": "1"})
        )
        assert [r.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * 2
        last = _metadata(instance, "where", runs)
        assert {m["pid"] for m in last} != {os.getpid()} and len({m["pid"] for m in last}) == 2
        # both slept at the same time: each began before the other ended (however late a
        # loaded machine started them)
        assert max(m["start"] for m in last) < min(m["t"] for m in last)


def test_failures_come_back_as_the_runner_reports_them() -> None:
    with dg.instance_for_test() as instance:
        lanes = Lanes(1, CODE, instance)
        try:
            with pytest.raises(RuntimeError) as failed:
                lanes.materialize(Request("fails"), {})
            assert str(failed.value).splitlines()[:2] == [
                "materializing fails failed:",
                "  fails: ValueError: model m|x: no such file; give its path in models.yaml",
            ]
            with pytest.raises(ChecksFailed) as flagged:
                lanes.materialize(Request("flagged"), {})
            assert [f.split(" ")[0] for f in flagged.value.failures] == ["positive"]
            with pytest.raises(RuntimeError, match="its lane process ended"):
                lanes.materialize(Request("dies"), {"sigmap/pid": "1"})
            (run,) = instance.get_runs(filters=dg.RunsFilter(tags={"sigmap/request": "dies"}))
            assert run.status == dg.DagsterRunStatus.FAILURE  # not left in progress
            lanes.materialize(Request("where"), {})  # a new worker took its place
        finally:
            lanes.close()
        assert len(_metadata(instance, "where")) == 1


def test_a_lane_runs_with_the_runners_resources_or_the_code_locations(tmp_path) -> None:
    from sigmap_assets.resources import SigmapStorage, WorldResource

    storage = SigmapStorage(root=str(tmp_path))
    given = {"storage": storage, "world": WorldResource(storage=storage, kind="zoo", seed=3)}
    back = resources_from(pickle.loads(pickle.dumps(resource_config(given))))
    assert {k: v.model_dump() for k, v in back.items()} == {
        k: v.model_dump() for k, v in given.items()
    }
    with dg.instance_for_test() as instance:
        for resources, root in ((given, str(tmp_path)), (None, "/the/code/locations/own/root")):
            lanes = Lanes(1, CODE, instance, resources)
            try:
                lanes.materialize(Request("stored_at"), {})
            finally:
                lanes.close()
            assert _metadata(instance, "stored_at")[0]["root"] == root


def test_a_lane_that_cannot_load_the_code_fails_each_request_with_one_line() -> None:
    with dg.instance_for_test() as instance:
        lanes = Lanes(1, "tests.assets.no_such_module:defs", instance)
        try:
            for _ in range(2):
                with pytest.raises(RuntimeError) as failed:
                    lanes.materialize(Request("where"), {})
                assert str(failed.value).splitlines()[1] == (
                    "  its lane process could not load the code location or the instance: "
                    "ModuleNotFoundError: No module named 'tests.assets.no_such_module'"
                )
        finally:
            lanes.close()


def test_checks_failed_keeps_its_failures_across_processes() -> None:
    back = pickle.loads(pickle.dumps(ChecksFailed(["a (x=1)", "b"])))
    assert back.failures == ["a (x=1)", "b"] and str(back) == "a (x=1); b"


def test_lanes_need_the_code_and_a_persistent_instance() -> None:
    defs = dg.Definitions(assets=[])
    with dg.instance_for_test() as instance:
        with pytest.raises(ValueError, match="code='module:attr'"):
            GraphRunner(defs, instance, resources={}, lanes=2)
        assert GraphRunner(defs, instance, resources={}, lanes=2, code=CODE).lanes == 2
    with pytest.raises(ValueError, match="persistent"):
        Lanes(2, CODE, dg.DagsterInstance.ephemeral())

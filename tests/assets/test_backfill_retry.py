"""The automation backfill that Dagster's backfill daemon fails, and its retry.

The failing target is the one recorded under a real daemon: ``rank_coverage`` with every
``shard_screen`` partition, the shards stored as a key range. The root search of Dagster's
backfill daemon raises on it; the same target spelled out as keys passes, and the
``automation_backfill_retry`` sensor submits exactly that, once.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import json
import time

import dagster as dg
import pytest
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.errors import DagsterInvariantViolationError
from dagster._core.execution.asset_backfill import AssetBackfillData
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._utils.error import SerializableErrorInfo

from sigmap_assets.backfills import (
    FROM_AUTOMATION_TAG,
    RETRY_OF_TAG,
    ROOTS_ERROR,
    retry_request,
    spelled_out_target,
)
from sigmap_assets.defs.automation.sensors import automation_backfill_retry
from tests.assets.harness import as_automation_stores_it

SHARDS = ["a.jsonl.d0.0a19", "b.jsonl.d0.54b8", "c.jsonl.d0.c91e"]
BENCHMARKS = ["coding", "knowledge", "math"]


@functools.cache
def _defs() -> dg.Definitions:
    from sigmap_assets.definitions import defs

    return defs()


def _graph():
    return _defs().resolve_asset_graph()


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("shards", SHARDS)
        inst.add_dynamic_partitions("benchmarks", BENCHMARKS)
        inst.add_dynamic_partitions("models", ["org__m1", "org__m2"])
        inst.add_dynamic_partitions("scored_models", ["lm-eval-run"])
        yield inst


def _as_automation_stores_it(instance, assets: list[str]) -> AssetGraphSubset:
    return as_automation_stores_it(instance, _graph(), assets)


def _roots(instance, target: AssetGraphSubset) -> AssetGraphSubset:
    """Dagster's backfill daemon's root search on ``target``."""
    data = AssetBackfillData.from_asset_graph_subset(target, instance, time.time())
    view = AssetGraphView(
        temporal_context=TemporalContext(
            effective_dt=datetime.datetime.now(datetime.UTC), last_event_id=None
        ),
        instance=instance,
        asset_graph=_graph(),
    )
    with partition_loading_context(dynamic_partitions_store=instance):
        return data.get_target_root_asset_graph_subset(view)


def _failed_backfill(
    instance, target: AssetGraphSubset, *, message: str, tags=None, age_s: float = 60.0
) -> PartitionBackfill:
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=f"b{len(instance.get_backfills())}",
        backfill_timestamp=time.time() - age_s,
        tags={FROM_AUTOMATION_TAG: "true"} if tags is None else tags,
        dynamic_partitions_store=instance,
        asset_graph_subset=target,
        title=None,
        description=None,
        run_config=None,
    )
    error = SerializableErrorInfo(
        message=message, stack=[], cls_name="DagsterInvariantViolationError"
    )
    failed = backfill.with_status(BulkActionStatus.FAILED).with_error(error)
    instance.add_backfill(failed)
    return failed


def _keys(subset: AssetGraphSubset) -> set:
    return set(subset.iterate_asset_partitions())


def test_dagster_fails_the_recorded_target_and_passes_it_spelled_out(instance) -> None:
    target = _as_automation_stores_it(instance, ["rank_coverage", "shard_screen"])
    with pytest.raises(DagsterInvariantViolationError, match=ROOTS_ERROR):
        _roots(instance, target)
    backfill = _failed_backfill(instance, target, message=ROOTS_ERROR)
    spelled = spelled_out_target(backfill, _graph(), instance)
    with partition_loading_context(dynamic_partitions_store=instance):
        assert _keys(spelled) == _keys(target)
        assert len(_keys(spelled)) == 1 + len(SHARDS)
    assert _roots(instance, spelled).asset_keys == {dg.AssetKey("rank_coverage")}


@pytest.mark.parametrize("size", [2, 3])
def test_every_chain_automation_can_request_is_runnable_once_spelled_out(instance, size) -> None:
    """Every connected set of 2 or 3 automated assets, all partitions each: spelled out, the
    root search succeeds (stored as automation stores it, many fail)."""
    graph = _graph()
    automated = sorted(
        k.to_user_string()
        for k in graph.materializable_asset_keys
        if graph.get(k).automation_condition
    )
    failures_as_stored = 0
    for combo in itertools.combinations(automated, size):
        if not _connected(graph, combo):
            continue
        target = _as_automation_stores_it(instance, list(combo))
        try:
            _roots(instance, target)
        except DagsterInvariantViolationError:
            failures_as_stored += 1
        backfill = _failed_backfill(instance, target, message=ROOTS_ERROR)
        _roots(instance, spelled_out_target(backfill, graph, instance))  # must not raise
    assert failures_as_stored > 0  # the Dagster failure this module works around still exists


def _connected(graph, names) -> bool:
    keys = {dg.AssetKey(n) for n in names}
    first = next(iter(keys))
    seen, stack = {first}, [first]
    while stack:
        node = graph.get(stack.pop())
        for other in (*node.parent_keys, *node.child_keys):
            if other in keys and other not in seen:
                seen.add(other)
                stack.append(other)
    return seen == keys


def _tick(instance, cursor: str | None = None):
    with dg.build_sensor_context(instance=instance, cursor=cursor, definitions=_defs()) as ctx:
        return automation_backfill_retry(ctx), ctx


def test_the_sensor_submits_a_failed_automation_backfill_again_once(instance) -> None:
    target = _as_automation_stores_it(instance, ["rank_coverage", "shard_screen"])
    failed = _failed_backfill(
        instance, target, message=f"DagsterInvariantViolationError: {ROOTS_ERROR}. …"
    )
    result, _ = _tick(instance)
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests
    assert request.requires_backfill_daemon()
    assert request.tags == {RETRY_OF_TAG: failed.backfill_id}
    with partition_loading_context(dynamic_partitions_store=instance):
        assert _keys(request.asset_graph_subset) == _keys(target)
    assert json.loads(result.cursor) == [failed.backfill_id]
    again, _ = _tick(instance, result.cursor)  # handled: never submitted twice
    assert isinstance(again, dg.SkipReason)


def test_the_sensor_leaves_other_failures_alone(instance) -> None:
    target = _as_automation_stores_it(instance, ["rank_coverage", "shard_screen"])
    _failed_backfill(
        instance, target, message="DagsterUserCodeUnreachableError: the code server is down"
    )
    _failed_backfill(instance, target, message=ROOTS_ERROR, tags={})  # launched by a user
    _failed_backfill(
        instance,
        target,
        message=ROOTS_ERROR,
        tags={FROM_AUTOMATION_TAG: "true", RETRY_OF_TAG: "b0"},
        age_s=10,
    )
    _failed_backfill(instance, target, message=ROOTS_ERROR, age_s=2 * 3600)  # long ago
    result, _ = _tick(instance)
    assert isinstance(result, dg.SkipReason), result


def test_a_retry_drops_partitions_and_assets_that_no_longer_exist(instance) -> None:
    target = _as_automation_stores_it(instance, ["rank_coverage", "shard_screen"])
    failed = _failed_backfill(instance, target, message=ROOTS_ERROR)
    instance.delete_dynamic_partition("shards", SHARDS[1])
    request = retry_request(failed, _graph(), instance)
    with partition_loading_context(dynamic_partitions_store=instance):
        got = {
            (k.asset_key.to_user_string(), k.partition_key)
            for k in _keys(request.asset_graph_subset)
        }
    assert got == {("rank_coverage", None), *(("shard_screen", s) for s in (SHARDS[0], SHARDS[2]))}

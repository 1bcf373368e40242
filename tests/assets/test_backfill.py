"""Backfills: token_nll = one run per model × shard cell (gpu pool); screening/signatures = one
run for all benchmarks.

The run requests come from Dagster's own asset-backfill iteration
(`execute_asset_backfill_iteration_inner`, what the daemon runs for a backfill launched from
the UI or `dagster asset backfill`), so the backfill policies are tested as Dagster applies
them; the single-run range is then executed in-process to check the asset sees every key.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from tests.assets.harness import RANGE_END, RANGE_START, Project


def first_iteration(
    project: Project, asset: str, partitions: str | list[str]
) -> list[dg.RunRequest]:
    """The run requests of a backfill's first daemon iteration over these partitions of
    ``asset`` (a dynamic partitions name: all of its keys)."""
    keys = project.keys(partitions) if isinstance(partitions, str) else partitions
    return project.backfill_requests(asset, keys)


def test_token_nll_backfill_is_one_run_per_cell_in_the_gpu_pool(project: Project) -> None:
    from sigmap_assets.partitions import cell_key

    project.instance.add_dynamic_partitions("models", ["m-a", "m-b", "m-c"])
    project.instance.add_dynamic_partitions("shards", ["s-1", "s-2"])
    # "a model for all shards" (a new model) and "a shard for all models" (a new file)
    for cells in (
        [str(cell_key("m-b", s)) for s in ("s-1", "s-2")],
        [str(cell_key(m, "s-2")) for m in ("m-a", "m-b", "m-c")],
    ):
        requests = first_iteration(project, "token_nll", cells)
        # multi_run(1): one run per cell, each a one-key partition range
        assert sorted(r.tags[RANGE_START] for r in requests) == sorted(cells)
        assert all(r.tags[RANGE_START] == r.tags[RANGE_END] for r in requests)
        assert all(r.asset_selection == [dg.AssetKey("token_nll")] for r in requests)
    # each of those runs holds a slot of the `gpu` pool while token_nll executes
    assets_def = project.defs.resolve_asset_graph().get(dg.AssetKey("token_nll")).assets_def
    assert assets_def.op.pool == "gpu"
    assert assets_def.backfill_policy == dg.BackfillPolicy.multi_run(1)


def test_gpu_pool_limit_is_configurable(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.event_log_storage.set_concurrency_slots("gpu", 2)
        assert instance.event_log_storage.get_concurrency_info("gpu").slot_count == 2
        instance.event_log_storage.set_concurrency_slots("gpu", 1)
        assert instance.event_log_storage.get_concurrency_info("gpu").slot_count == 1


def test_signatures_backfill_is_one_run_over_the_full_range(project: Project) -> None:
    keys = ["b-1", "b-2", "b-3", "b-4", "b-5"]
    project.instance.add_dynamic_partitions("benchmarks", keys)
    for asset in ("screened_candidates", "signatures", "benchmark_items"):
        [request] = first_iteration(project, asset, "benchmarks")
        assert request.asset_selection == [dg.AssetKey(asset)]
        assert (request.tags[RANGE_START], request.tags[RANGE_END]) == (keys[0], keys[-1])


def test_single_run_sees_every_benchmark_in_one_invocation(project: Project) -> None:
    project.through("ranks")
    # what a token_nll backfill run executes: a one-key range (multi_run(1)) works like a key
    cell = project.cells()[0]
    one = project.materialize(["token_nll"], prange=(cell, cell))
    assert [e.partition for e in one.get_asset_materialization_events()] == [cell]
    bench = project.keys("benchmarks")
    assert len(bench) == 6
    result = project.materialize(["screened_candidates"], prange=(bench[0], bench[-1]))
    # one run, one step execution, one pass: the asset saw all six keys in one call
    runs = project.instance.get_runs(filters=dg.RunsFilter(tags={RANGE_START: bench[0]}))
    assert [r.run_id for r in runs] == [result.run_id]
    mats = result.get_asset_materialization_events()
    assert sorted(e.partition for e in mats) == sorted(bench)
    step_starts = [
        e
        for e in result.all_events
        if e.event_type_value == "STEP_START" and e.step_key == "screened_candidates"
    ]
    assert len(step_starts) == 1  # (its check, candidates_valid, is a step of its own)
    assert (
        result.get_asset_materialization_events()[0].materialization.metadata["benchmarks"].value
        == 6
    )
    layout = project.storage.layout
    assert all(layout.screening_candidates(k).exists() for k in bench)

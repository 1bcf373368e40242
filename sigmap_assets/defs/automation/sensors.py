"""Declarative automation and schedules: new inputs flow through the graph with no manual step.

- `sigmap_automation` evaluates every asset's automation condition (on by default): the
  readers of the user's files re-read a file when the input observer sees it change (a new
  corpus file: the corpus is re-planned, its new `shards` partitions get their units, NLL cells
  for every model, ranks and screens, then the merges — nothing computed before is redone);
- `nightly_score_refresh` re-reads the score sources (leaderboards, lm-eval folders) and
  the catalog every night; downstream aggregates then refresh by automation;
- `catalog_sensor` adds a `benchmarks` partition for each new benchmark of catalog.yaml;
- `automation_backfill_retry` submits again an automation backfill Dagster's daemon failed.
"""

import hashlib

import dagster as dg

from sigmap_assets.automation import SensorOutcome, sigmap_sensor, tick_seconds
from sigmap_assets.partitions import benchmarks_partitions
from sigmap_assets.resources import WorldResource

sigmap_automation = dg.AutomationConditionSensorDefinition(
    name="sigmap_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=tick_seconds(30),
    description="Evaluates the automation conditions of every sigmap asset.",
)

nightly_score_refresh = dg.ScheduleDefinition(
    name="nightly_score_refresh",
    cron_schedule="0 3 * * *",
    target=dg.AssetSelection.assets("benchmark_catalog", "benchmark_scores"),
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Re-reads the score sources and the catalog nightly (03:00).",
)


@sigmap_sensor(seconds=60)
def catalog_sensor(context: dg.SensorEvaluationContext, world: WorldResource) -> SensorOutcome:
    """When catalog.yaml changes, adds a `benchmarks` partition for each new benchmark
    (automation re-reads the catalog and the scores when the input observer sees it change)."""
    from sigmap_assets.registry_sync import plan_benchmark_sync

    path = world.file("catalog.yaml")
    if not path.exists():
        return dg.SkipReason(f"no catalog at {path} yet")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    if context.cursor == digest:
        return dg.SkipReason("catalog unchanged")
    plan = plan_benchmark_sync(
        path, set(context.instance.get_dynamic_partitions(benchmarks_partitions.name))
    )
    if plan.new_keys:
        context.log.info(f"new benchmarks: {', '.join(plan.new_keys)}")
    return dg.SensorResult(
        dynamic_partitions_requests=[benchmarks_partitions.build_add_request(plan.new_keys)]
        if plan.new_keys
        else [],
        cursor=digest,
    )


@sigmap_sensor(
    seconds=30,
    asset_selection=dg.AssetSelection.all(),  # what automation targets; no job is built
)
def automation_backfill_retry(context: dg.SensorEvaluationContext) -> SensorOutcome:
    """Submits again, once, an automation backfill that Dagster's backfill daemon failed
    before launching anything ('Unable to determine root partitions'), with its target
    spelled out as partition keys; automation never repeats a tick's request."""
    import json
    import time

    from sigmap_assets.backfills import failed_automation_backfills, retry_request

    handled: list[str] = json.loads(context.cursor) if context.cursor else []
    failed = [
        b
        for b in failed_automation_backfills(context.instance, now=time.time())
        if b.backfill_id not in handled
    ]
    if not failed:
        return dg.SkipReason("no failed automation backfill to submit again")
    graph = context.repository_def.asset_graph
    requests = [r for b in failed if (r := retry_request(b, graph, context.instance))]
    for b in failed:
        context.log.info(f"submitting automation backfill {b.backfill_id} again")
    cursor = json.dumps([*handled, *(b.backfill_id for b in failed)][-200:])
    return dg.SensorResult(run_requests=requests, cursor=cursor)

"""Declarative automation and schedules: new models flow through the graph with no manual step.

- `sigmap_automation` evaluates every asset's automation condition (on by default);
- `nightly_score_refresh` re-reads the score sources (leaderboards, lm-eval folders) and
  the catalog every night; downstream aggregates then refresh by automation;
- `catalog_sensor` re-reads catalog.yaml when it changes (new benchmarks → partitions);
- `corpus_sensor` re-plans the corpus when its files change (new files → new `shards`
  partitions; automation then builds their units, fills their NLL cells for every model, and
  refreshes their ranks and screens and the merges — nothing computed before is redone).
"""

import hashlib

import dagster as dg

from sigmap_assets.automation import tick_seconds
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


@dg.sensor(
    name="catalog_sensor",
    target=dg.AssetSelection.assets("benchmark_catalog", "benchmark_scores"),
    minimum_interval_seconds=tick_seconds(60),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="When catalog.yaml changes, re-reads it (adding `benchmarks` partitions) and the scores.",
)
def catalog_sensor(
    context: dg.SensorEvaluationContext, world: WorldResource
) -> dg.SensorResult | dg.SkipReason:
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
    if (
        not context.cursor
        and not plan.new_keys
        and context.instance.get_latest_materialization_event(dg.AssetKey("benchmark_catalog"))
    ):
        # first tick on an existing instance: remember the file, refresh nothing
        return dg.SensorResult(run_requests=[], cursor=digest)
    return dg.SensorResult(
        dynamic_partitions_requests=[benchmarks_partitions.build_add_request(plan.new_keys)]
        if plan.new_keys
        else [],
        run_requests=[dg.RunRequest(run_key=f"catalog:{digest}")],
        cursor=digest,
    )


def corpus_digest(corpus_dir) -> str:
    """Names, sizes and modification times of the corpus files (cheap: no file is read)."""
    from sigmap_lib.inputs import corpus_files, files_stamp

    return files_stamp(corpus_files(corpus_dir), root=corpus_dir)


@dg.sensor(
    name="corpus_sensor",
    target=dg.AssetSelection.assets("corpus_manifest"),
    minimum_interval_seconds=tick_seconds(60),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "When the corpus folder's files change (added, removed, rewritten), re-plans the shards "
        "(corpus_manifest): new shards become `shards` partitions and automation fills them."
    ),
)
def corpus_sensor(
    context: dg.SensorEvaluationContext, world: WorldResource
) -> dg.SensorResult | dg.SkipReason:
    corpus = world.root() / "corpus"
    if not corpus.is_dir():
        return dg.SkipReason(f"no corpus folder at {corpus} yet")
    try:
        digest = corpus_digest(corpus)
    except Exception as exc:  # an empty or unreadable folder: say so, try again next tick
        return dg.SkipReason(f"corpus {corpus}: {exc}")
    if context.cursor == digest:
        return dg.SkipReason("corpus files unchanged")
    if not context.cursor and context.instance.get_latest_materialization_event(
        dg.AssetKey("corpus_manifest")
    ):
        return dg.SensorResult(run_requests=[], cursor=digest)  # first tick: remember it
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"corpus:{digest}")], cursor=digest)

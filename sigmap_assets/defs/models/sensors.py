"""The new-model sensor: registry entries become `models` partitions (their `token_nll`
cells on every shard are then filled by automation, once each)."""

import json

import dagster as dg

from sigmap_assets.partitions import models_partitions
from sigmap_assets.registry_sync import plan_model_sync
from sigmap_assets.resources import WorldResource


@dg.sensor(
    name="new_model_sensor",
    target=dg.AssetSelection.assets("model_registry", "benchmark_scores"),
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Reads models.yaml; in one tick adds a `models` partition for every new model (a row of "
        "token_nll cells, one per shard, which automation then fills once each) and requests one "
        "run re-reading the registry and matching the scores to it. Removing a model from the "
        "file never deletes its partition or data."
    ),
)
def new_model_sensor(
    context: dg.SensorEvaluationContext, world: WorldResource
) -> dg.SensorResult | dg.SkipReason:
    path = world.file("models.yaml")
    if not path.exists():
        return dg.SkipReason(
            f"no registry at {path} yet (materialize model_zoo or write models.yaml)"
        )
    existing = set(context.instance.get_dynamic_partitions(models_partitions.name))
    plan = plan_model_sync(path, existing)
    cursor = json.dumps(sorted(set(plan.known_keys) | existing))
    if not plan.new_keys:
        return dg.SensorResult(
            skip_reason=f"{len(plan.known_keys)} models, none new", cursor=cursor
        )
    context.log.info(f"new models: {', '.join(plan.raw_ids[k] for k in plan.new_keys)}")
    # the registry and the scores matched to it: without the second, a new model's scores stay
    # unmatched (NaN) and screening ignores it until the nightly re-read
    registry_run = dg.RunRequest(
        asset_selection=[dg.AssetKey("model_registry"), dg.AssetKey("benchmark_scores")],
        run_key=f"model_registry:{','.join(sorted(plan.known_keys))}",
    )
    return dg.SensorResult(
        dynamic_partitions_requests=[models_partitions.build_add_request(plan.new_keys)],
        run_requests=[registry_run],
        cursor=cursor,
    )

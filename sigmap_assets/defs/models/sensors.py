"""The new-model sensor: registry entries become `models` partitions (their `token_nll`
cells on every shard are then filled by automation, once each; the registry itself is re-read
by automation when the input observer sees `models.yaml` change)."""

import json

import dagster as dg

from sigmap_assets.automation import SensorOutcome, sigmap_sensor
from sigmap_assets.partitions import cell_key, models_partitions, shards_partitions
from sigmap_assets.registry_sync import plan_model_sync
from sigmap_assets.resources import WorldResource


@sigmap_sensor(seconds=30, target=dg.AssetSelection.assets("token_nll"))
def new_model_sensor(context: dg.SensorEvaluationContext, world: WorldResource) -> SensorOutcome:
    """Reads models.yaml; in one tick adds a `models` partition for every new model (a row
    of token_nll cells, one per shard, which automation then fills once each). Automation
    re-reads the registry and the scores when the input observer sees the files change.
    Removing a model from the file never deletes its partition or data. A registered model
    whose files change in place (sizes or mtimes) gets its cells requested again (once per
    change): the registry names the files, not their content, so only this sensor sees that
    change, and only that model is rescored."""
    path = world.file("models.yaml")
    if not path.exists():
        return dg.SkipReason(
            f"no registry at {path} yet (materialize model_zoo or write models.yaml)"
        )
    existing = set(context.instance.get_dynamic_partitions(models_partitions.name))
    plan = plan_model_sync(path, existing)
    stamps = model_stamps(path)
    try:
        previous = json.loads(context.cursor) if context.cursor else {}
    except json.JSONDecodeError:
        previous = {}
    old_stamps = previous.get("stamps", {}) if isinstance(previous, dict) else {}
    cursor = json.dumps({"keys": sorted(set(plan.known_keys) | existing), "stamps": stamps})
    # a registered model whose files changed in place (weights, tokenizer): its cells again
    changed = sorted(
        k for k, v in stamps.items() if k in existing and k in old_stamps and old_stamps[k] != v
    )
    shards = list(context.instance.get_dynamic_partitions(shards_partitions.name))
    rescore = [
        dg.RunRequest(
            asset_selection=[dg.AssetKey("token_nll")],
            partition_key=str(cell_key(k, sh)),
            run_key=f"token_nll:{k}|{sh}:{stamps[k]}",
            tags={"sigmap/model": plan.raw_ids.get(k, k), "sigmap/reason": "model files changed"},
        )
        for k in changed
        for sh in shards
    ]
    if changed:
        context.log.info(f"model files changed: {', '.join(changed)} ({len(rescore)} cells)")
    if not plan.new_keys:
        if rescore:
            return dg.SensorResult(run_requests=rescore, cursor=cursor)
        return dg.SensorResult(
            skip_reason=f"{len(plan.known_keys)} models, none new", cursor=cursor
        )
    context.log.info(f"new models: {', '.join(plan.raw_ids[k] for k in plan.new_keys)}")
    return dg.SensorResult(
        dynamic_partitions_requests=[models_partitions.build_add_request(plan.new_keys)],
        run_requests=rescore,
        cursor=cursor,
    )


def model_stamps(registry) -> dict[str, str]:
    """Per registered model, a cheap identity of its files (sizes, mtimes; nothing read)."""
    from sigmap_lib.inputs import read_registry
    from sigmap_lib.nll import files_stamp, model_files

    out = {}
    for spec in read_registry(registry):
        try:
            out[spec.key] = files_stamp(model_files(spec))
        except OSError:
            out[spec.key] = "unreadable"
    return out

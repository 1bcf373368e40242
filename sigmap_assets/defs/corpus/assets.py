"""Corpus: which files make the in-the-wild corpus, their shards, and each shard's units."""

import hashlib

import dagster as dg

from sigmap_assets.automation import automated, input_condition, new_partition_condition
from sigmap_assets.config import SigmapConfig
from sigmap_assets.metadata import md_table, stored_table_metadata, table_metadata
from sigmap_assets.partitions import shards_partitions
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.state import StoredState
from sigmap_assets.tables import write_json, write_parquet


class CorpusConfig(SigmapConfig):
    shard_units: int = 65536
    """Target units per shard (documents are never split; a shard never spans files). Keep
    ``models × shards`` under Dagster's 100,000 partitions: at least
    ``sigmap_lib.inputs.default_shard_units(expected corpus units, expected models)`` (the
    sizing rule of docs/FORMATS.md). Changing it re-plans new or changed files only."""


@dg.asset(
    group_name="corpus",
    deps=["model_zoo", "corpus_files"],
    kinds={"parquet"},
    **automated(input_condition()),
)
def corpus_manifest(
    context: dg.AssetExecutionContext,
    config: CorpusConfig,
    world: WorldResource,
    storage: SigmapStorage,
) -> dg.MaterializeResult:
    """The corpus files (format, bytes, sha256) and their shards: stable, content-addressed
    slices of one file each. Unchanged files keep their shard keys (and every value computed
    on them); new files add shards; a changed file gets new keys; a removed file's shards
    leave the `shards` partitions (their data is kept). Adds the new `shards` partitions."""
    import polars as pl

    from sigmap_lib.inputs import corpus_file_rows, diff_plans, plan_corpus
    from sigmap_lib.worlds import check_world

    storage.layout.refuse_legacy()
    if config.shard_units < 1:
        raise dg.Failure(
            f"corpus_manifest: shard_units={config.shard_units} must be positive (units per "
            "shard; default 65536, sizing rule in docs/FORMATS.md)"
        )
    layout = check_world(world.root())
    rows = corpus_file_rows(layout.corpus, layout.corpus_files)
    state = StoredState.read(storage)
    previous = list(state.plan)
    plan = plan_corpus(layout.corpus, target_units=config.shard_units, previous=previous)
    diff = diff_plans(previous, plan)
    manifest = pl.DataFrame(rows)
    write_parquet(manifest, storage.layout.corpus_manifest())
    write_json(
        {
            "shards": [s.to_dict() for s in plan],
            "removed": sorted(set(state.removed) | set(diff.removed)),
            "shard_units": config.shard_units,
        },
        storage.layout.corpus_plan(),
    )
    known = set(context.instance.get_dynamic_partitions(shards_partitions.name))
    keys = [s.key for s in plan]
    new = [k for k in keys if k not in known]
    gone = sorted(known - set(keys))
    if new:
        context.instance.add_dynamic_partitions(shards_partitions.name, new)
    for k in gone:  # the data stays on disk; the shard only leaves the grid and the aggregates
        context.instance.delete_dynamic_partition(shards_partitions.name, k)
    fingerprint = hashlib.sha256("\n".join(keys).encode()).hexdigest()
    table = [
        {"shard": s.key, "file": s.file, "documents": s.n_documents, "units": s.n_units}
        for s in plan
    ]
    return dg.MaterializeResult(
        metadata={
            **table_metadata(manifest),
            "corpus_dir": dg.MetadataValue.path(str(layout.corpus)),
            "files": len(rows),
            "bytes": sum(r["bytes"] for r in rows),
            "shards": len(plan),
            "units": sum(s.n_units for s in plan),
            "new_shards": dg.MetadataValue.json(diff.new),
            "removed_shards": dg.MetadataValue.json(diff.removed),
            "changed_files": dg.MetadataValue.json(diff.changed_files),
            "removed_files": dg.MetadataValue.json(diff.removed_files),
            "plan": dg.MetadataValue.md(md_table(table, max_rows=50)),
            "fingerprint": fingerprint[:16],
        },
        data_version=dg.DataVersion(fingerprint[:16]),
    )


#: The data version of every `corpus_shard` partition. A shard key names its content (the
#: file's path and sha256, the unit pattern, the document range), so what is stored under one
#: key never changes and one version serves every partition (Dagster compares versions per
#: partition). It is also all a run over a range of shards can record: Dagster keeps one data
#: version per step output, shared by the partitions of the run, so the version a shard gets
#: does not depend on the run shape (one key, a range, all) that wrote it.
SHARD_DATA_VERSION = "content-addressed"


@dg.asset(
    group_name="corpus",
    partitions_def=shards_partitions,
    deps=[corpus_manifest],
    kinds={"parquet"},
    backfill_policy=dg.BackfillPolicy.multi_run(8),
    **automated(new_partition_condition()),
)
def corpus_shard(
    context: dg.AssetExecutionContext, world: WorldResource, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Each shard's documents segmented into model-independent units with UTF-8 byte offsets,
    written streaming (bounded memory) and atomically. A run covers one shard or a range of
    up to eight (a backfill, "Materialize all", automation filling several new shards); each
    shard gets its own metadata. A shard key names its content, so a stored shard is never
    rewritten; a file changed since planning is an error naming it (the shards the run
    wrote before it stay stored and are reused when the run is retried)."""
    state = StoredState.read(storage)
    rows = []
    for key in context.partition_keys:
        meta = build_shard(state, key, world)
        context.add_asset_metadata(meta, partition_key=key)
        rows.append({"shard": key, **{k: meta[k] for k in ("file", "units", "reused")}})
    return dg.MaterializeResult(
        metadata={"shards_in_run": len(rows), "run_shards": dg.MetadataValue.md(md_table(rows))},
        data_version=dg.DataVersion(SHARD_DATA_VERSION),
    )


def build_shard(state: StoredState, key: str, world: WorldResource) -> dict:
    """Write (or reuse) the store of shard ``key``; its materialization metadata."""
    from sigmap_lib.inputs import ShardStore, write_shard_store

    spec = shard_spec(state, key)
    out = state.layout.shard_store(key)
    try:
        store = ShardStore.open(out)
        reused = store.spec == spec
    except Exception:  # absent or incomplete: (re)write it
        reused = False
    if not reused:
        store = write_shard_store(spec, world.root() / "corpus", out)
    sample = []
    step = max(1, store.n_units // 6)
    for i in range(0, store.n_units, step)[:6]:
        left, unit = store.context(i, n_left=12)
        sample.append({"unit": i, "left context": left[-80:], "unit text": unit})
    return {
        **stored_table_metadata(state.layout.shard_units(key)),
        "file": spec.file,
        "documents": store.n_documents,
        "units": store.n_units,
        "bytes": store.n_bytes,
        "reused": reused,
        "store": dg.MetadataValue.path(str(out)),
        "sample_units": dg.MetadataValue.md(md_table(sample)),
    }


def shard_spec(state: StoredState, key: str):
    """The plan entry of shard ``key``; a Failure naming the plan when it is not there."""
    spec = state.shard_spec(key)
    if spec is not None:
        return spec
    raise dg.Failure(
        f"shard {key!r} is not in the current plan {state.layout.corpus_plan()} "
        "(its file was removed or changed; materialize corpus_manifest)"
    )

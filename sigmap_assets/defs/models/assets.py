"""Models: the registry, per-unit NLL per model × shard cell (the GPU step), per-shard ranks
and the coverage the aggregates use."""

import hashlib
import json
import threading
import time

import dagster as dg

from sigmap_assets.automation import (
    aggregate_condition,
    automated,
    cell_condition,
    input_condition,
)
from sigmap_assets.config import SigmapConfig
from sigmap_assets.layout import StorageLayout
from sigmap_assets.metadata import md_table, shard_metadata, table_metadata
from sigmap_assets.partitions import BY_SHARD, cells_partitions, shards_partitions
from sigmap_assets.resources import ComputeResource, SigmapStorage, WorldResource
from sigmap_assets.state import CurrentRanks, ShardRanks, StoredState, UsedShard
from sigmap_assets.tables import write_json, write_parquet

GPU_OP_TAGS = {
    "dagster-k8s/config": {
        "container_config": {
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
        },
        "pod_spec_config": {"node_selector": {"sigmap/accelerator": "gpu"}},
    }
}


@dg.asset(
    group_name="models",
    deps=["model_zoo", "registry_file"],
    kinds={"parquet"},
    **automated(input_condition()),
)
def model_registry(world: WorldResource, storage: SigmapStorage) -> dg.MaterializeResult:
    """The models of the registry (`models.yaml`): raw id, partition key, family, size, revision."""
    import polars as pl

    from sigmap_lib.inputs import read_registry

    path = world.file("models.yaml")
    specs = read_registry(path)
    rows = [
        {
            "model": s.id,
            "key": s.key,
            "path": str(s.path) if s.path else None,
            "gguf": str(s.gguf) if s.gguf else None,
            "revision": s.revision,
            "family": s.family,
            "n_params": s.n_params,
            "dtype": s.dtype,
            "nll_source": str(s.nll_source) if s.nll_source else None,
        }
        for s in specs
    ]
    table = pl.DataFrame(rows, infer_schema_length=None)
    write_parquet(table, storage.layout.registry_table())
    # registries without GGUF entries keep the data version they had before the column existed
    fp_rows = [{k: v for k, v in r.items() if k != "gguf" or v is not None} for r in rows]
    fp = hashlib.sha256(json.dumps(fp_rows, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return dg.MaterializeResult(
        metadata={
            **table_metadata(table),
            "registry": dg.MetadataValue.path(str(path)),
            "models": len(rows),
            "families": len({r["family"] for r in rows}),
            "table": dg.MetadataValue.md(
                md_table(
                    rows, ["model", "key", "family", "n_params", "revision", "dtype"], max_rows=60
                )
            ),
        },
        data_version=dg.DataVersion(fp),
    )


def registry_specs(world: WorldResource) -> list:
    """The registry entries, read from the world's models.yaml (the source of truth)."""
    from sigmap_lib.inputs import read_registry

    return read_registry(world.file("models.yaml"))


def registry_row(world: WorldResource, key: str):
    path = world.file("models.yaml")
    for spec in registry_specs(world):
        if spec.key == key:
            return spec
    raise dg.Failure(
        f"model partition {key!r} is not in the registry {path} "
        "(removed from models.yaml? its stored NLL is kept but no longer refreshed)"
    )


def registry_keys(world: WorldResource) -> tuple[list[str], dict[str, str]]:
    """Registry model keys in file order, and their raw ids."""
    specs = registry_specs(world)
    return [s.key for s in specs], {s.key: s.id for s in specs}


def open_shard(state: StoredState, shard_key: str):
    """The shard's store; a Dagster failure naming the step to run when it is missing."""
    from sigmap_lib.inputs import ShardStore

    try:
        return ShardStore.open(state.layout.shard_store(shard_key))
    except Exception as exc:
        raise dg.Failure(
            f"shard {shard_key}: no shard store ({exc}); materialize corpus_shard[{shard_key}]"
        ) from exc


@dg.asset(
    group_name="models",
    partitions_def=cells_partitions,
    deps=[dg.AssetDep("corpus_shard", partition_mapping=BY_SHARD), model_registry],
    kinds={"pytorch", "zarr"},
    pool="gpu",
    op_tags=GPU_OP_TAGS,
    backfill_policy=dg.BackfillPolicy.multi_run(1),
    **automated(cell_condition(ignore=("model_registry",))),
    description=(
        "Per-unit NLL (nats) of one model on one corpus shard (a cell of the models × shards "
        "grid): one zarr array per cell, committed block by block with checksums, so an "
        "interrupted cell resumes and a complete one is a no-op (the model is not even "
        "loaded). One run per cell, `gpu` pool, k8s GPU op tags: N GPUs work on N cells."
    ),
)
def token_nll(
    context: dg.AssetExecutionContext,
    storage: SigmapStorage,
    world: WorldResource,
    compute: ComputeResource,
) -> dg.MaterializeResult:
    from sigmap_lib.nll import NLLStore

    cell = cells_partitions.get_partition_key_from_str(str(context.partition_key))
    key, shard_key = cell.keys_by_dimension["model"], cell.keys_by_dimension["shard"]
    spec = registry_row(world, key)
    state = StoredState.read(storage)
    t0 = time.perf_counter()
    cell = state.token_cell(spec, shard_key, compute.scoring_dtype(spec))
    shard = open_shard(state, shard_key)
    fp, out = cell.fingerprint, cell.out
    if cell.done is not None and not cell.done.verify():  # complete: the model is not loaded
        stats = {"reused": True, "units": cell.done.n_units}
    elif spec.nll_source:
        from sigmap_lib.nll import import_nll

        stats = import_nll(
            spec.nll_source,
            shard,
            out,
            model_id=spec.id,
            unit_offset=cell.unit_offset,
            total_units=cell.total_units,
        )
    elif not world.units_have_text():
        raise dg.Failure(
            f"model {spec.id}: this world's units have no text (settings.yaml corpus: "
            "units_have_text: false), so no model can be scored on them; give the model its "
            "values (nll_source in models.yaml) or remove it"
        )
    elif cell_runner(compute, storage) == "slurm":  # one sbatch job (sigmap_assets.slurm)
        from sigmap_assets.slurm import score_cell_on_slurm

        stats = score_cell_on_slurm(context, spec, shard_key, fp, storage, world, compute)
    else:
        stats = score_cell(context, spec, shard, out, state.layout, compute, fp)
    stats = dict(stats)
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    meta = {"model": spec.id, "shard": shard_key, "store": dg.MetadataValue.path(str(out))}
    for k, v in stats.items():
        if isinstance(v, (int, float, str, bool)):
            meta[k] = v
    write_json({"fingerprint": fp, "model": spec.id}, state.layout.nll_cell_current(shard_key, key))
    meta["fingerprint"] = fp
    checksums = NLLStore.open(out).checksums
    version = hashlib.sha256(json.dumps(checksums, sort_keys=True).encode()).hexdigest()[:16]
    return dg.MaterializeResult(metadata=meta, data_version=dg.DataVersion(version))


def cell_runner(compute: ComputeResource, storage: SigmapStorage) -> str:
    """``local`` or ``slurm`` (:meth:`ComputeResource.cell_runner`); a bad value fails the
    cell with one line."""
    try:
        return compute.cell_runner(storage.root)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from None


#: The last model loaded by this thread, reused by the thread's next cell of the same
#: model (an in-process run scores a model's cells one after another; one model held at
#: a time per thread, so runs in several threads never share or swap a model).
_LAST_MODEL = threading.local()


def loaded_model(spec, compute: ComputeResource, gguf_cache, fingerprint: str):
    from sigmap_lib.nll import load_model

    dtype = compute.scoring_dtype(spec)
    key = (fingerprint, spec.source, compute.device, dtype, str(gguf_cache))
    if getattr(_LAST_MODEL, "key", None) != key:
        _LAST_MODEL.key = _LAST_MODEL.value = None  # drop the previous model first
        _LAST_MODEL.value = load_model(
            spec.source,
            device=compute.device,
            dtype=dtype,
            revision=spec.revision,
            gguf_cache=gguf_cache,
        )
        _LAST_MODEL.key = key
    return _LAST_MODEL.value


def score_cell(
    context, spec, shard, out, layout: StorageLayout, compute: ComputeResource, fingerprint: str
) -> dict:
    """Load the model and score the shard's pending blocks into the cell's store."""
    from sigmap_lib.nll import score_corpus

    if compute.threads:
        import torch

        torch.set_num_threads(compute.threads)
    gguf_cache = None
    if spec.gguf is not None:
        if layout.is_local:
            gguf_cache = layout.gguf_cache()
        else:
            context.log.info(
                f"{spec.id}: storage root {layout.root} is not local; the GGUF file is "
                "dequantized in memory (no cache)"
            )
    model, tokenizer = loaded_model(spec, compute, gguf_cache, fingerprint)

    def progress(p: dict) -> None:  # score_corpus reports one dict per committed block
        total = p["shards_done"] + p["shards_pending"]
        context.log.info(
            f"{spec.id}: block {p['shards_done']}/{total} ({p['tokens_per_s']:.0f} tokens/s)"
        )

    return score_corpus(
        model, tokenizer, shard, out, progress=progress, batch_tokens=compute.batch_tokens
    )


@dg.asset(
    group_name="models",
    partitions_def=shards_partitions,
    deps=[dg.AssetDep(token_nll, partition_mapping=BY_SHARD)],
    kinds={"zarr"},
    **automated(aggregate_condition()),
    description=(
        "One shard's (n_units, n_models) rank codes over the models whose cell on it is "
        "complete, with per-model bits-per-byte counts, sums and M2 (merged exactly across "
        "shards). Never waits for a missing or failed cell; rebuilt when the shard's set of "
        "complete cells changes (CPU, parallel over shards)."
    ),
)
def nll_ranks(
    context: dg.AssetExecutionContext, storage: SigmapStorage, world: WorldResource
) -> dg.MaterializeResult:
    from sigmap_lib.nll import RankStore, build_rank_store, rank_store_identity

    shard_key = context.partition_key
    state = StoredState.read(storage)
    shard = open_shard(state, shard_key)
    keys, raw = registry_keys(world)
    stores = {k: st for k in keys if (st := state.complete_cell(shard_key, k)) is not None}
    done = list(stores)
    missing = [raw[k] for k in keys if k not in stores]
    ident: str | None = None
    reused = False
    if len(done) >= 2:
        ident = rank_store_identity(shard_key, done, [stores[k].checksums for k in done])
        out = state.layout.shard_ranks(shard_key, ident)
        reused = out.exists()
        if reused:
            ranks = RankStore.open(out)
        else:
            arrays = [stores[k].array for k in done]
            ranks = build_rank_store(arrays, done, shard.unit_nbytes, out)
        table = [
            {"model": raw[k], "bpb_mean": float(m), "bpb_sd": float(s)}
            for k, m, s in zip(done, ranks.bpb_mean, ranks.bpb_sd)
        ]
    else:
        table = []
        context.log.warning(f"shard {shard_key}: {len(done)} complete cell(s); no ranks yet")
    built = ShardRanks(shard_key, shard.n_units, tuple(done), ident)
    write_json(built.to_dict(), state.layout.shard_ranks_current(shard_key))
    version = ident or "none:" + ",".join(done)
    return dg.MaterializeResult(
        metadata=shard_metadata(
            shard_key,
            shard.n_units,
            reused,
            models_used=len(done),
            models_missing=dg.MetadataValue.json(missing),
            bits_per_byte=dg.MetadataValue.md(
                md_table(sorted(table, key=lambda r: r["bpb_mean"]), max_rows=64)
            ),
        ),
        data_version=dg.DataVersion(hashlib.sha256(version.encode()).hexdigest()[:16]),
    )


class CoverageConfig(SigmapConfig):
    min_models: int = 0
    """Fewest models the aggregates use (rank correlations over fewer mean nothing); 0 = the
    world's minimum (``settings.yaml`` ``minimums: {coverage_models: N}``, default 3)."""


@dg.asset(
    group_name="models",
    deps=[dg.AssetDep(nll_ranks, partition_mapping=dg.AllPartitionMapping()), "corpus_manifest"],
    kinds={"json"},
    # a new plan matters here once the new shards' ranks exist (they come through nll_ranks)
    **automated(aggregate_condition(ignore=("corpus_manifest",))),
    description=(
        "Which models × shards cells the aggregates use: the models complete on every used "
        "shard, chosen for the most model-units (sigmap_lib.nll.select_coverage), with the "
        "missing cells and excluded shards reported and the bits-per-byte moments merged "
        "exactly. Screening, signatures and overlaps read this, never stall on a cell."
    ),
)
def rank_coverage(
    context: dg.AssetExecutionContext,
    config: CoverageConfig,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    from sigmap_lib.nll import select_coverage

    keys, raw = registry_keys(world)
    state = StoredState.read(storage)
    shards = []
    for s in state.plan:
        # a shard's ranks cover the models complete when it was built (and still registered)
        built = state.shard_ranks(s.key)
        shards.append((s.key, s.n_units, list(built.built_for(raw)), built.ranks))
    min_models = config.min_models or world.minimums().coverage_models
    cov = select_coverage([t[:3] for t in shards], keys, min_models=min_models)
    if not cov.models:
        raise dg.Failure(
            f"no shard has >= {min_models} models with complete NLL "
            f"({sum(len(t[2]) for t in shards)} complete cells over {len(shards)} shards): "
            "materialize token_nll cells and nll_ranks first"
        )
    used = [UsedShard(k, ranks, n) for k, n, _, ranks in shards if k in set(cov.shards)]
    ident = hashlib.sha256(
        json.dumps([cov.models, [(u.key, u.ranks) for u in used]]).encode()
    ).hexdigest()[:16]
    current = CurrentRanks(
        ident, tuple(cov.models), tuple(raw[k] for k in cov.models), tuple(used), cov
    )
    write_json(current.to_dict(), state.layout.ranks_current())
    ranks = state.open_ranks(current)
    table = [
        {"model": r, "bpb_mean": float(m), "bpb_sd": float(s)}
        for r, m, s in zip(current.raw_ids, ranks.bpb_mean, ranks.bpb_sd)
    ]
    return dg.MaterializeResult(
        metadata={
            "models_used": len(cov.models),
            "shards_used": len(cov.shards),
            "units": cov.n_units,
            "unit_coverage": round(cov.fraction, 6),
            "missing_cells": sum(len(v) for v in cov.missing.values()),
            "excluded_shards": dg.MetadataValue.json(cov.excluded_shards),
            "excluded_models": dg.MetadataValue.json([raw[k] for k in cov.excluded_models]),
            "grid": dg.MetadataValue.md(coverage_grid(keys, raw, [t[:3] for t in shards], cov)),
            "bits_per_byte": dg.MetadataValue.md(
                md_table(sorted(table, key=lambda r: r["bpb_mean"]), max_rows=64)
            ),
        },
        data_version=dg.DataVersion(ident),
    )


def coverage_grid(keys, raw, shards, cov, max_rows: int = 40, max_cols: int = 24) -> str:
    """Markdown models × shards grid: ✓ used, · complete but unused, ✗ missing."""
    used_m, used_s = set(cov.models), set(cov.shards)
    cols = shards[:max_cols]
    head = "| model | " + " | ".join(f"s{i}" for i in range(len(cols))) + " |"
    rows = [head, "|---|" + "---|" * len(cols)]
    for k in keys[:max_rows]:
        cells = []
        for sk, _, done in cols:
            if k not in done:
                cells.append("✗")
            else:
                cells.append("✓" if k in used_m and sk in used_s else "·")
        rows.append(f"| {raw[k]} | " + " | ".join(cells) + " |")
    legend = ", ".join(f"s{i} = `{sk}`" for i, (sk, _, _) in enumerate(cols))
    more = f" (first {max_cols} of {len(shards)} shards)" if len(shards) > max_cols else ""
    return "\n".join(rows) + f"\n\n✓ used · complete, unused ✗ missing{more}. {legend}"

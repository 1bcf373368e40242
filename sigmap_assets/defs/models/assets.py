"""Models: the registry, per-unit NLL per model × shard cell (the GPU step), per-shard ranks
and the coverage the aggregates use."""

import hashlib
import json
import time

import dagster as dg
import numpy as np

from sigmap_assets.automation import aggregate_condition, automated, cell_condition
from sigmap_assets.metadata import md_table
from sigmap_assets.partitions import BY_SHARD, cells_partitions, shards_partitions
from sigmap_assets.resources import ComputeResource, SigmapStorage, WorldResource
from sigmap_assets.tables import cell_dir, read_json, read_plan, write_json, write_parquet

GPU_OP_TAGS = {
    "dagster-k8s/config": {
        "container_config": {
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
        },
        "pod_spec_config": {"node_selector": {"sigmap/accelerator": "gpu"}},
    }
}


@dg.asset(group_name="models", deps=["model_zoo"], kinds={"parquet"})
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


def cell_fingerprint(storage: SigmapStorage, compute: ComputeResource, spec, shard_key: str) -> str:
    """The key of a cell's values besides the shard: the model's files and scoring settings
    (``sigmap_lib.nll.model_fingerprint``), or, for imported NLL, the shard's slice of it."""
    from sigmap_lib.nll import model_fingerprint

    if spec.nll_source:
        from sigmap_lib.inputs import ShardSpec, shard_offsets

        plan = [ShardSpec.from_dict(d) for d in read_plan(storage).get("shards", [])]
        spec_s = next((s for s in plan if s.key == shard_key), None)
        h = hashlib.sha256(f"import|{spec.id}|{spec.nll_source.name}".encode())
        if spec_s is not None and spec.nll_source.exists():
            from sigmap_lib.nll import open_nll_source

            values = open_nll_source(spec.nll_source)
            lo = shard_offsets(plan)[shard_key]
            h.update(np.ascontiguousarray(values[lo : lo + spec_s.n_units]).tobytes())
        return h.hexdigest()[:16]
    return model_fingerprint(
        spec,
        settings={"dtype": scoring_dtype(spec, compute)},
        cache_path=storage.layout.fingerprint_cache() if storage.layout.is_local else None,
    )


def scoring_dtype(spec, compute: ComputeResource) -> str:
    """The dtype a model is scored in: its registry ``dtype`` when set, else the compute
    resource's (``auto``: float32 on CPU, bfloat16/float16 on accelerators)."""
    return spec.dtype if spec.dtype != "auto" else compute.dtype


def complete_cell(storage: SigmapStorage, shard_key: str, model_key: str, fingerprint=None):
    """The NLL store of a complete cell (every block committed), else None: the latest one,
    or the one of ``fingerprint``."""
    from sigmap_lib.nll import NLLStore

    d = (
        cell_dir(storage, shard_key, model_key)
        if fingerprint is None
        else storage.layout.nll_cell(shard_key, model_key, fingerprint)
    )
    if d is None or not d.exists():
        return None
    try:
        st = NLLStore.open(d)
    except Exception:
        return None
    return st if st.is_complete() else None


def open_shard(storage: SigmapStorage, shard_key: str):
    from sigmap_lib.inputs import ShardStore

    try:
        return ShardStore.open(storage.layout.shard_store(shard_key))
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
    shard = open_shard(storage, shard_key)
    t0 = time.perf_counter()
    fp = cell_fingerprint(storage, compute, spec, shard_key)
    out = storage.layout.nll_cell(shard_key, key, fp)
    done = complete_cell(storage, shard_key, key, fp)
    if done is not None and not done.verify():  # complete for this key: the model is not loaded
        stats = {"reused": True, "units": done.n_units}
    elif spec.nll_source:
        from sigmap_lib.inputs import ShardSpec, shard_offsets
        from sigmap_lib.nll import import_nll

        plan = [ShardSpec.from_dict(d) for d in read_plan(storage)["shards"]]
        stats = import_nll(
            spec.nll_source,
            shard,
            out,
            model_id=spec.id,
            unit_offset=shard_offsets(plan)[shard_key],
            total_units=sum(s.n_units for s in plan),
        )
    else:
        stats = score_cell(context, spec, shard, out, storage, compute, fp)
    stats = dict(stats)
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    meta = {"model": spec.id, "shard": shard_key, "store": dg.MetadataValue.path(str(out))}
    for k, v in stats.items():
        if isinstance(v, (int, float, str, bool)):
            meta[k] = v
    write_json(
        {"fingerprint": fp, "model": spec.id}, storage.layout.nll_cell_current(shard_key, key)
    )
    meta["fingerprint"] = fp
    checksums = NLLStore.open(out).checksums
    version = hashlib.sha256(json.dumps(checksums, sort_keys=True).encode()).hexdigest()[:16]
    return dg.MaterializeResult(metadata=meta, data_version=dg.DataVersion(version))


#: The last model loaded in this process, reused by the next cell of the same model (an
#: in-process run scores a model's cells one after another; one model held at a time).
_LAST_MODEL: dict = {}


def loaded_model(spec, compute: ComputeResource, gguf_cache, fingerprint: str):
    from sigmap_lib.nll import load_model

    dtype = scoring_dtype(spec, compute)
    key = (fingerprint, spec.source, compute.device, dtype, str(gguf_cache))
    if _LAST_MODEL.get("key") != key:
        _LAST_MODEL.clear()  # drop the previous model before loading the next
        _LAST_MODEL["value"] = load_model(
            spec.source,
            device=compute.device,
            dtype=dtype,
            revision=spec.revision,
            gguf_cache=gguf_cache,
        )
        _LAST_MODEL["key"] = key
    return _LAST_MODEL["value"]


def score_cell(
    context, spec, shard, out, storage: SigmapStorage, compute: ComputeResource, fingerprint: str
) -> dict:
    """Load the model and score the shard's pending blocks into the cell's store."""
    from sigmap_lib.nll import score_corpus

    if compute.threads:
        import torch

        torch.set_num_threads(compute.threads)
    gguf_cache = None
    if spec.gguf is not None:
        if storage.layout.is_local:
            gguf_cache = storage.layout.gguf_cache()
        else:
            context.log.info(
                f"{spec.id}: storage root {storage.root} is not local; the GGUF file is "
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
    shard = open_shard(storage, shard_key)
    keys, raw = registry_keys(world)
    stores = {k: st for k in keys if (st := complete_cell(storage, shard_key, k)) is not None}
    done = list(stores)
    missing = [raw[k] for k in keys if k not in stores]
    info = {"key": shard_key, "n_units": shard.n_units, "models": done, "ranks": None}
    reused = False
    if len(done) >= 2:
        ident = rank_store_identity(shard_key, done, [stores[k].checksums for k in done])
        out = storage.layout.shard_ranks(shard_key, ident)
        reused = out.exists()
        if reused:
            ranks = RankStore.open(out)
        else:
            arrays = [stores[k].array for k in done]
            ranks = build_rank_store(arrays, done, shard.unit_nbytes, out)
        info["ranks"] = ident
        table = [
            {"model": raw[k], "bpb_mean": float(m), "bpb_sd": float(s)}
            for k, m, s in zip(done, ranks.bpb_mean, ranks.bpb_sd)
        ]
    else:
        table = []
        context.log.warning(f"shard {shard_key}: {len(done)} complete cell(s); no ranks yet")
    write_json(info, storage.layout.shard_ranks_current(shard_key))
    version = info["ranks"] or "none:" + ",".join(done)
    return dg.MaterializeResult(
        metadata={
            "shard": shard_key,
            "models_used": len(done),
            "models_missing": dg.MetadataValue.json(missing),
            "units": shard.n_units,
            "reused": reused,
            "bits_per_byte": dg.MetadataValue.md(
                md_table(sorted(table, key=lambda r: r["bpb_mean"]), max_rows=64)
            ),
        },
        data_version=dg.DataVersion(hashlib.sha256(version.encode()).hexdigest()[:16]),
    )


class CoverageConfig(dg.Config):
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
    plan = read_plan(storage).get("shards", [])
    entries = {}
    for s in plan:
        path = storage.layout.shard_ranks_current(s["key"])
        cur = read_json(path) if path.exists() else {"models": [], "ranks": None}
        # a shard's ranks cover the models complete when it was built (and still registered)
        entries[s["key"]] = cur
    shards = [
        (s["key"], s["n_units"], [k for k in entries[s["key"]]["models"] if k in raw])
        if entries[s["key"]]["ranks"]
        else (s["key"], s["n_units"], [])
        for s in plan
    ]
    min_models = config.min_models or world.minimums().coverage_models
    cov = select_coverage(shards, keys, min_models=min_models)
    if not cov.models:
        raise dg.Failure(
            f"no shard has >= {min_models} models with complete NLL "
            f"({sum(len(c) for _, _, c in shards)} complete cells over {len(plan)} shards): "
            "materialize token_nll cells and nll_ranks first"
        )
    used = [
        {"key": k, "ranks": entries[k]["ranks"], "n_units": n}
        for k, n, _ in shards
        if k in set(cov.shards)
    ]
    ident = hashlib.sha256(
        json.dumps([cov.models, [(u["key"], u["ranks"]) for u in used]]).encode()
    ).hexdigest()[:16]
    info = {
        "dir": ident,
        "models": cov.models,
        "raw_ids": [raw[k] for k in cov.models],
        "shards": used,
        "coverage": cov.to_dict(),
    }
    write_json(info, storage.layout.ranks_current())
    from sigmap_assets.tables import open_ranks

    ranks = open_ranks(storage, info)
    table = [
        {"model": r, "bpb_mean": float(m), "bpb_sd": float(s)}
        for r, m, s in zip(info["raw_ids"], ranks.bpb_mean, ranks.bpb_sd)
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
            "grid": dg.MetadataValue.md(coverage_grid(keys, raw, shards, cov)),
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

"""Models: the registry, per-model per-unit NLL (the GPU step) and the rank matrix."""

import hashlib
import json
import time

import dagster as dg

from sigmap_assets.automation import aggregate_condition, automated
from sigmap_assets.metadata import md_table
from sigmap_assets.partitions import models_partitions
from sigmap_assets.resources import ComputeResource, SigmapStorage, WorldResource
from sigmap_assets.tables import open_corpus, write_json, write_parquet

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


def nll_store_dir(storage: SigmapStorage, corpus_fingerprint: str, key: str):
    return storage.layout.nll_array(corpus_fingerprint, key)


@dg.asset(
    group_name="models",
    partitions_def=models_partitions,
    deps=["corpus_units", model_registry],
    kinds={"pytorch", "zarr"},
    pool="gpu",
    op_tags=GPU_OP_TAGS,
    backfill_policy=dg.BackfillPolicy.multi_run(1),
    automation_condition=None,  # runs come from new_model_sensor or a backfill only
    description=(
        "Per-unit NLL (nats) of one model over the whole corpus, a zarr array written shard by "
        "shard (each shard committed atomically with a checksum): an interrupted run resumes, "
        "a finished one is a no-op. Runs in the `gpu` pool; carries k8s GPU op tags."
    ),
)
def token_nll(
    context: dg.AssetExecutionContext,
    storage: SigmapStorage,
    world: WorldResource,
    compute: ComputeResource,
) -> dg.MaterializeResult:

    key = context.partition_key
    spec = registry_row(world, key)
    corpus = open_corpus(storage)
    out = nll_store_dir(storage, corpus.fingerprint, key)
    t0 = time.perf_counter()
    if spec.nll_source:
        from sigmap_lib.nll import import_nll

        stats = import_nll(spec.nll_source, corpus, out, model_id=spec.id)
    else:
        from sigmap_lib.nll import load_model, score_corpus

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
        model, tokenizer = load_model(
            spec.source,
            device=compute.device,
            dtype=compute.dtype,
            revision=spec.revision,
            gguf_cache=gguf_cache,
        )

        def progress(p: dict) -> None:  # score_corpus reports one dict per committed shard
            total = p["shards_done"] + p["shards_pending"]
            context.log.info(
                f"{spec.id}: shard {p['shards_done']}/{total} ({p['tokens_per_s']:.0f} tokens/s)"
            )

        stats = score_corpus(
            model, tokenizer, corpus, out, progress=progress, batch_tokens=compute.batch_tokens
        )
    stats = dict(stats)
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    meta = {"model": spec.id, "store": dg.MetadataValue.path(str(out))}
    for k, v in stats.items():
        if isinstance(v, (int, float, str, bool)):
            meta[k] = v
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    group_name="models",
    deps=[dg.AssetDep(token_nll, partition_mapping=dg.AllPartitionMapping())],
    kinds={"zarr"},
    **automated(aggregate_condition()),
    description=(
        "Unit-major (n_units, n_models) rank matrix over every model whose NLL is complete, plus "
        "per-model bits-per-byte mean/sd. Never waits for missing or failed models; rebuilt when "
        "the set of complete models changes."
    ),
)
def nll_ranks(
    context: dg.AssetExecutionContext, storage: SigmapStorage, world: WorldResource
) -> dg.MaterializeResult:
    from sigmap_lib.nll import NLLStore, RankStore, build_rank_store, rank_store_identity

    corpus = open_corpus(storage)
    complete, missing = [], []
    for spec in registry_specs(world):
        d = nll_store_dir(storage, corpus.fingerprint, spec.key)
        if d.exists() and NLLStore.open(d).is_complete():
            complete.append({"model": spec.id, "key": spec.key})
        else:
            missing.append(spec.id)
    if len(complete) < 3:
        raise dg.Failure(
            f"only {len(complete)} model(s) have complete NLL ({[r['model'] for r in complete]}); "
            "rank statistics need at least 3"
        )
    keys = [r["key"] for r in complete]
    stores = [NLLStore.open(nll_store_dir(storage, corpus.fingerprint, k)) for k in keys]
    ident = rank_store_identity(corpus.fingerprint, keys, [st.checksums for st in stores])
    out = storage.layout.rank_store(ident)
    reused = out.exists()
    if reused:
        ranks = RankStore.open(out)
    else:
        ranks = build_rank_store([st.array for st in stores], keys, corpus.unit_nbytes, out)
    write_json(
        {"dir": ident, "models": keys, "raw_ids": [r["model"] for r in complete]},
        storage.layout.ranks_current(),
    )
    table = [
        {"model": r["model"], "bpb_mean": float(m), "bpb_sd": float(s)}
        for r, m, s in zip(complete, ranks.bpb_mean, ranks.bpb_sd)
    ]
    return dg.MaterializeResult(
        metadata={
            "models_used": len(keys),
            "models_missing": dg.MetadataValue.json(missing),
            "units": ranks.n_units,
            "reused": reused,
            "store": dg.MetadataValue.path(str(out)),
            "bits_per_byte": dg.MetadataValue.md(
                md_table(sorted(table, key=lambda r: r["bpb_mean"]), max_rows=64)
            ),
        },
        data_version=dg.DataVersion(ident),
    )

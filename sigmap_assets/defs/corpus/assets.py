"""Corpus: which files make the in-the-wild corpus, and its model-independent units."""

import hashlib
import json

import dagster as dg

from sigmap_assets.metadata import md_table
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.tables import write_json, write_parquet


class CorpusConfig(dg.Config):
    shard_units: int = 65536
    """Units per shard (documents are never split): the unit of resumable NLL work."""


@dg.asset(group_name="corpus", deps=["model_zoo"], kinds={"parquet"})
def corpus_manifest(
    context: dg.AssetExecutionContext, world: WorldResource, storage: SigmapStorage
) -> dg.MaterializeResult:
    """The corpus files of the world (format, bytes, sha256), so a changed corpus is noticed."""
    import polars as pl

    from sigmap_lib.worlds import check_world

    layout = check_world(world.root())
    rows = []
    for p in layout.corpus_files:
        data = p.read_bytes()
        rows.append(
            {
                "file": str(p.relative_to(layout.corpus)),
                "format": p.suffix.lstrip("."),
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    manifest = pl.DataFrame(rows)
    fingerprint = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    write_parquet(manifest, storage.layout.corpus_manifest())
    return dg.MaterializeResult(
        metadata={
            "corpus_dir": dg.MetadataValue.path(str(layout.corpus)),
            "files": len(rows),
            "bytes": int(manifest["bytes"].sum()),
            "fingerprint": fingerprint[:16],
            "preview": dg.MetadataValue.md(md_table(rows, max_rows=20)),
        },
        data_version=dg.DataVersion(fingerprint[:16]),
    )


@dg.asset(group_name="corpus", deps=[corpus_manifest], kinds={"parquet"})
def corpus_units(
    context: dg.AssetExecutionContext,
    config: CorpusConfig,
    world: WorldResource,
    storage: SigmapStorage,
) -> dg.MaterializeResult:
    """Every document segmented into model-independent units with UTF-8 byte offsets.

    Rebuilt only when the corpus files or the sharding change; the store's fingerprint
    keys every per-model NLL array, so a changed corpus never mixes with old values.
    """
    import polars as pl

    from sigmap_lib.inputs import CorpusStore, build_corpus_store, read_corpus

    manifest = pl.read_parquet(storage.layout.corpus_manifest())
    source_fp = hashlib.sha256(
        (
            json.dumps(manifest.to_dicts(), sort_keys=True) + f"|shard_units={config.shard_units}"
        ).encode()
    ).hexdigest()
    store_dir = storage.layout.corpus_store()
    marker = storage.layout.corpus_source()
    reused = False
    if (
        marker.exists()
        and json.loads(marker.read_text()).get("source") == source_fp
        and store_dir.exists()
    ):
        store = CorpusStore.open(store_dir)
        reused = True
    else:
        docs = read_corpus(world.root() / "corpus")
        store = build_corpus_store(docs, store_dir, shard_units=config.shard_units)
        write_json({"source": source_fp, "fingerprint": store.fingerprint}, marker)
    sample = []
    step = max(1, store.n_units // 8)
    for i in range(0, store.n_units, step)[:8]:
        left, unit = store.context(i, n_left=12)
        sample.append({"unit": i, "left context": left[-80:], "unit text": unit})
    return dg.MaterializeResult(
        metadata={
            "documents": store.n_documents,
            "units": store.n_units,
            "shards": len(store.shards),
            "corpus_fingerprint": store.fingerprint[:16],
            "reused": reused,
            "store": dg.MetadataValue.path(str(store_dir)),
            "sample_units": dg.MetadataValue.md(md_table(sample)),
        },
        data_version=dg.DataVersion(store.fingerprint[:16]),
    )

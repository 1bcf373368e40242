"""Reading and writing the pipeline's small tables under the storage root (atomic writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sigmap_assets.resources import SigmapStorage
from sigmap_lib._util import atomic_file, atomic_write_json, json_default


def _remote(path: Any) -> bool:
    """An fsspec object-store path (``upath.UPath`` with a non-local protocol)."""
    return getattr(path, "protocol", "") not in ("", "file", "local")


def write_parquet(df: Any, path: Path) -> Path:
    """Write a polars frame atomically (local: a temporary sibling renamed into place;
    object stores replace whole objects atomically by themselves)."""
    if _remote(path):
        with path.open("wb") as fh:
            df.write_parquet(fh)
        return path
    with atomic_file(path) as tmp:
        df.write_parquet(tmp)
    return path


def write_json(obj: Any, path: Path) -> Path:
    """Write ``obj`` as indented JSON atomically (NumPy values allowed)."""
    if _remote(path):
        path.write_text(json.dumps(obj, indent=1, default=json_default))
        return path
    return atomic_write_json(path, obj)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def scores_long(storage: SigmapStorage):
    """The validated long score table (model, model_key, benchmark, benchmark_key, score)."""
    import polars as pl

    path = storage.layout.scores_table()
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: materialize benchmark_scores first")
    return pl.read_parquet(path)


def catalog_table(storage: SigmapStorage):
    import polars as pl

    return pl.read_parquet(storage.layout.catalog_table())


def read_plan(storage: SigmapStorage) -> dict:
    """The shard plan ``corpus_manifest`` wrote (``{"shards": [...], "removed": [...]}``;
    empty before the first run)."""
    path = storage.layout.corpus_plan()
    return read_json(path) if path.exists() else {}


def current_ranks(storage: SigmapStorage) -> dict:
    """The coverage ``rank_coverage`` chose: ``{"dir"`` (its identity), ``"models"``,
    ``"raw_ids"``, ``"shards"`` (key, rank store, units, per used shard), ...``}``."""
    path = storage.layout.ranks_current()
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: materialize nll_ranks and rank_coverage first")
    return read_json(path)


def open_ranks(storage: SigmapStorage, info: dict | None = None):
    """The used shards' rank codes of the used models, read as one RankStore."""
    from sigmap_lib.nll import RankStore, ShardedRanks

    info = current_ranks(storage) if info is None else info
    stores = [
        RankStore.open(storage.layout.shard_ranks(s["key"], s["ranks"])) for s in info["shards"]
    ]
    return ShardedRanks.from_stores(stores, info["models"])


def open_corpus(storage: SigmapStorage, info: dict | None = None):
    """The used shards' units as one corpus (global unit numbers of the aggregates)."""
    from sigmap_lib.inputs import ShardedCorpus, ShardStore

    info = current_ranks(storage) if info is None else info
    return ShardedCorpus(
        [ShardStore.open(storage.layout.shard_store(s["key"])) for s in info["shards"]]
    )


def cell_dir(storage: SigmapStorage, shard_key: str, model_key: str):
    """The store of the ``token_nll`` cell completed last (None if there is none)."""
    path = storage.layout.nll_cell_current(shard_key, model_key)
    if not path.exists():
        return None
    return storage.layout.nll_cell(shard_key, model_key, read_json(path)["fingerprint"])


def open_nll_arrays(
    storage: SigmapStorage, model_keys: list[str], info: dict | None = None
) -> list:
    """Per model, its NLL over the used shards (one lazily concatenated array each)."""
    from sigmap_lib.nll import ConcatArray, NLLStore

    info = current_ranks(storage) if info is None else info
    return [
        ConcatArray([NLLStore.open(cell_dir(storage, s["key"], k)).array for s in info["shards"]])
        for k in model_keys
    ]


def fit_item_tables(world: Any, benchmarks: list[str]) -> tuple[dict, dict]:
    """The world's loglikelihood item tables (``context``/``choices``/``gold``) of these
    benchmark keys, and their scoring rules (metric, threshold) from ``truth.json`` when the
    world states them (the zoo does); benchmarks without such a table are left out."""
    import polars as pl

    from sigmap_lib.inputs import benchmark_slug, read_catalog

    by_key = {benchmark_slug(b.name): b for b in read_catalog(world.file("catalog.yaml")).values()}
    truth_path = world.file("truth.json")
    truth = json.loads(truth_path.read_text()).get("benchmarks", {}) if truth_path.exists() else {}
    tables, metrics = {}, {}
    for key in benchmarks:
        b = by_key.get(key)
        if b is None or b.items is None:
            continue
        t = pl.read_parquet(b.items)
        if not {"item_id", "context", "choices", "gold"} <= set(t.columns):
            continue
        tables[key] = t
        rule = truth.get(b.name, {}) if isinstance(truth.get(b.name), dict) else {}
        if rule.get("metric"):
            metrics[key] = {
                "metric": rule["metric"],
                "threshold": rule.get("threshold_nats_per_byte"),
            }
    return tables, metrics

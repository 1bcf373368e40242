"""Reading and writing the pipeline's small tables under the storage root (atomic writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    """The JSON document stored at ``path``."""
    return json.loads((Path(path) if isinstance(path, str) else path).read_text())


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

"""Reading and writing the pipeline's small tables under the storage root (atomic writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sigmap_assets.resources import SigmapStorage


def write_parquet(df: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    df.write_parquet(tmp)
    tmp.replace(path)
    return path


def write_json(obj: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=_default))
    tmp.replace(path)
    return path


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def scores_long(storage: SigmapStorage):
    """The validated long score table (model, model_key, benchmark, benchmark_key, score)."""
    import polars as pl

    path = storage.path("tables", "benchmark_scores.parquet")
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: materialize benchmark_scores first")
    return pl.read_parquet(path)


def catalog_table(storage: SigmapStorage):
    import polars as pl

    return pl.read_parquet(storage.path("tables", "benchmark_catalog.parquet"))


def current_ranks(storage: SigmapStorage) -> dict:
    """``{"dir", "models", "raw_ids"}`` of the rank store nll_ranks last built."""
    path = storage.path("ranks", "CURRENT")
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: materialize nll_ranks first")
    info = read_json(path)
    info["path"] = storage.path("ranks", info["dir"])
    return info

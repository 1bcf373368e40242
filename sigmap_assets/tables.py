"""Reading and writing the pipeline's small tables under the storage root (atomic writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sigmap_assets.resources import SigmapStorage


def _atomic(path: Path, write) -> Path:
    """Write to a temporary sibling, then rename; on failure the old file stays and no
    temporary file is left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_parquet(df: Any, path: Path) -> Path:
    return _atomic(path, df.write_parquet)


def write_json(obj: Any, path: Path) -> Path:
    text = json.dumps(obj, indent=1, default=json_default)
    return _atomic(path, lambda tmp: tmp.write_text(text))


def json_default(o: Any) -> Any:
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


def open_corpus(storage: SigmapStorage):
    """The corpus store `corpus_units` built (units, documents, shards, fingerprint)."""
    from sigmap_lib.inputs import CorpusStore

    return CorpusStore.open(storage.path("corpus", "store"))

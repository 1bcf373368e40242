"""Persisting the per-benchmark stages of the metabench pipeline between assets.

Each stage of :mod:`sigmap_lib.metabench` (item pool → pool IRT fits → selection) is
stored in a folder of parquet + JSON files, written atomically (temporary sibling
folder, then rename), so the three stages can be separate partitioned assets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from sigmap_lib._util._atomic import atomic_dir
from sigmap_lib.errors import SigmapInputError


def _atomic_dir(dest: Path, write: Callable[[Path], None]) -> Path:
    with atomic_dir(dest) as tmp:
        write(tmp)
    return dest


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise SigmapInputError(
            f"{what}: {path} is missing (materialize the upstream metabench stage first)"
        )
    return path


def save_item_pool(pool, path: str | os.PathLike) -> Path:
    """Store a :class:`sigmap_lib.metabench.ItemPool`."""

    def write(tmp: Path) -> None:
        pool.item_stats.to_parquet(tmp / "item_stats.parquet")
        pool.roles.rename("role").to_frame().to_parquet(tmp / "roles.parquet")
        (tmp / "pool.json").write_text(
            json.dumps(
                {
                    "benchmark": pool.benchmark,
                    "pool_items": list(pool.pool_items),
                    "subsample_rmse": float(pool.subsample_rmse),
                }
            )
        )

    return _atomic_dir(Path(path), write)


def load_item_pool(path: str | os.PathLike):
    from sigmap_lib.metabench._pool import ItemPool

    p = Path(path)
    meta = json.loads(_need(p / "pool.json", "item pool").read_text())
    roles = pd.read_parquet(p / "roles.parquet")["role"]
    return ItemPool(
        benchmark=meta["benchmark"],
        item_stats=pd.read_parquet(p / "item_stats.parquet"),
        pool_items=list(meta["pool_items"]),
        roles=roles,
        subsample_rmse=float(meta["subsample_rmse"]),
    )


def save_pool_irt(pirt, path: str | os.PathLike) -> Path:
    """Store a :class:`sigmap_lib.metabench.PoolIrt` (parameters and θ per IRT model)."""

    def write(tmp: Path) -> None:
        names = {}
        for i, (model, params) in enumerate(pirt.params.items()):
            params.to_parquet(tmp / f"params_{i}.parquet")
            names[f"params_{i}"] = model
        for i, (key, th) in enumerate(pirt.thetas.items()):
            th.to_parquet(tmp / f"thetas_{i}.parquet")
            names[f"thetas_{i}"] = key
        pirt.cv.to_parquet(tmp / "cv.parquet")
        (tmp / "pool_irt.json").write_text(
            json.dumps({"benchmark": pirt.benchmark, "files": names})
        )

    return _atomic_dir(Path(path), write)


def load_pool_irt(path: str | os.PathLike):
    from sigmap_lib.metabench._pool import PoolIrt

    p = Path(path)
    meta = json.loads(_need(p / "pool_irt.json", "pool IRT fits").read_text())
    params, thetas = {}, {}
    for stem, key in meta["files"].items():
        frame = pd.read_parquet(p / f"{stem}.parquet")
        (params if stem.startswith("params_") else thetas)[key] = frame
    return PoolIrt(
        benchmark=meta["benchmark"],
        params=params,
        thetas=thetas,
        cv=pd.read_parquet(p / "cv.parquet"),
    )


def save_benchmark_fit(fit, split: pd.Series, config, path: str | os.PathLike) -> Path:
    """Store a :class:`sigmap_lib.metabench.BenchmarkFit` (as a one-benchmark MetabenchFit)."""
    from sigmap_lib.metabench._fit import MetabenchFit

    return MetabenchFit(
        config=config, seed=0, split=split, benchmarks={fit.benchmark: fit}, joint=None
    ).save(path)


def load_benchmark_fit(path: str | os.PathLike):
    from sigmap_lib.metabench._fit import MetabenchFit

    p = Path(path)
    _need(p / "metabench.json", "metabench selection")
    mf = MetabenchFit.load(p)
    return next(iter(mf.benchmarks.values()))

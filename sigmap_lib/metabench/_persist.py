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
    """Store a :class:`sigmap_lib.metabench.ItemPool`.

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     build_item_pool, load_item_pool, save_item_pool, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> pool = build_item_pool("arc", responses["arc"], scores["arc"], split_models(scores))
    >>> save_item_pool(pool, "arc-pool")
    PosixPath('arc-pool')
    >>> sorted(p.name for p in save_item_pool(pool, "arc-pool").iterdir())  # overwrites atomically
    ['item_stats.parquet', 'pool.json', 'roles.parquet']
    >>> back = load_item_pool("arc-pool")
    >>> back.benchmark, len(back.pool_items), back.roles.value_counts().to_dict()
    ('arc', 30, {'train': 159, 'test': 21, 'val': 19, 'outlier': 1})
    >>> back.pool_items == pool.pool_items, back.item_stats.equals(pool.item_stats)
    (True, True)
    """

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
    """Read a :class:`sigmap_lib.metabench.ItemPool` written by :func:`save_item_pool`.

    Examples
    --------
    The round trip is :func:`save_item_pool`'s example; a stage not written yet is named:

    >>> from sigmap_lib.metabench import load_item_pool
    >>> load_item_pool("arc-pool")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: item pool: arc-pool/pool.json is missing (materialize the upstream metabench stage first)
    """
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
    """Store a :class:`sigmap_lib.metabench.PoolIrt` (parameters and θ per IRT model).

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, build_item_pool, fit_pool_irt, load_pool_irt,
    ...     save_pool_irt, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> config = MetabenchConfig(**TINY_SETTINGS)  # tiny settings for a fast example
    >>> x, y = responses["arc"], scores["arc"]
    >>> pool = build_item_pool("arc", x, y, split_models(scores), config=config)
    >>> pool_irt = fit_pool_irt("arc", x, y, pool, config=config)
    >>> path = save_pool_irt(pool_irt, "arc-pool-irt")
    >>> sorted(p.name for p in path.iterdir())
    ['cv.parquet', 'params_0.parquet', 'pool_irt.json', 'thetas_0.parquet', 'thetas_1.parquet']
    >>> back = load_pool_irt(path)
    >>> back.benchmark, list(back.params), list(back.thetas)
    ('arc', ['2PL'], ['2PL/MAP', '2PL/EAPsum'])
    >>> back.params["2PL"].equals(pool_irt.params["2PL"])
    True
    >>> back.thetas["2PL/MAP"].round(2).head(2)
                 theta    se
    model
    model_00001  -0.88  0.34
    model_00003   0.15  0.37
    """

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
    """Read a :class:`sigmap_lib.metabench.PoolIrt` written by :func:`save_pool_irt`.

    Examples
    --------
    Each stage reads the folder of the one before, as the metabench assets do:

    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, build_item_pool, fit_pool_irt, load_item_pool,
    ...     load_pool_irt, save_item_pool, save_pool_irt, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> x, y = responses["arc"], scores["arc"]
    >>> config = MetabenchConfig(**TINY_SETTINGS)
    >>> _ = save_item_pool(build_item_pool("arc", x, y, split_models(scores), config=config), "pool")
    >>> pirt = fit_pool_irt("arc", x, y, load_item_pool("pool"), config=config)
    >>> load_pool_irt(save_pool_irt(pirt, "pool-irt")).thetas["2PL/EAPsum"].columns.tolist()
    ['theta', 'se']
    """
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
    """Store a :class:`sigmap_lib.metabench.BenchmarkFit` (as a one-benchmark MetabenchFit).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, build_item_pool, fit_pool_irt, load_benchmark_fit,
    ...     save_benchmark_fit, select_items, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> config = MetabenchConfig(**TINY_SETTINGS)  # tiny settings for a fast example
    >>> x, y, split = responses["arc"], scores["arc"], split_models(scores)
    >>> pool = build_item_pool("arc", x, y, split, config=config)
    >>> pool_irt = fit_pool_irt("arc", x, y, pool, config=config)
    >>> fit = select_items("arc", x, y, pool, pool_irt, config=config)
    >>> path = save_benchmark_fit(fit, split, config, "arc-selection")
    >>> sorted(p.name for p in path.iterdir())[:4]
    ['arc__gam.parquet', 'arc__item_stats.parquet', 'arc__params.parquet',
     'arc__pool_params.parquet']
    >>> back = load_benchmark_fit(path)
    >>> back.benchmark, back.irt_model, back.theta_method, back.selected == fit.selected
    ('arc', '2PL', 'EAPsum', True)
    >>> theta, answers = fit.thetas["theta"].to_numpy(), x[fit.selected].to_numpy()
    >>> bool(np.allclose(back.predict_scores(theta, answers), fit.predict_scores(theta, answers)))
    True
    """
    from sigmap_lib.metabench._fit import MetabenchFit

    return MetabenchFit(
        config=config, seed=0, split=split, benchmarks={fit.benchmark: fit}, joint=None
    ).save(path)


def load_benchmark_fit(path: str | os.PathLike):
    """Read the :class:`sigmap_lib.metabench.BenchmarkFit` written by :func:`save_benchmark_fit`.

    Examples
    --------
    One benchmark of a whole :func:`~sigmap_lib.metabench.fit_metabench` run:

    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, fit_metabench, load_benchmark_fit, save_benchmark_fit, simulate_benchmarks,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> mf = fit_metabench(responses, scores, **TINY_SETTINGS)
    >>> path = save_benchmark_fit(mf.benchmarks["gsm8k"], mf.split, mf.config, "gsm8k-selection")
    >>> back = load_benchmark_fit(path)
    >>> back.benchmark, back.selected == mf.selected["gsm8k"]
    ('gsm8k', True)
    """
    from sigmap_lib.metabench._fit import MetabenchFit

    p = Path(path)
    _need(p / "metabench.json", "metabench selection")
    mf = MetabenchFit.load(p)
    return next(iter(mf.benchmarks.values()))

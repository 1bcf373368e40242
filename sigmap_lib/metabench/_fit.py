"""metabench: distil benchmarks to a sparse item set with IRT (Kipnis et al., ICLR 2025).

Pipeline (``../shared/data/metabench_irt/ALGORITHM.md``), per benchmark:

1. :func:`split_models` — a common test split of the models present in every benchmark,
   stratified on the grand (mean normalised) score.
2. :func:`build_item_pool` — drop outlier models (total <= 0.1 % quantile), drop items
   (sd <= 0.01; guess-adjusted easiness > 0.7125; |point-biserial| < 0.05), hold out 10 %
   of training models as validation (stratified on the score), and cross-validated random
   subsampling to a pool (default 350 items): each of ``n_subsets`` random subsets is scored
   by the worst 5-fold validation RMSE of a spline ``score ~ s(subset mean)``; the minimax
   subset is kept. The original drew 10,000 subsets; the default here is 500 (the
   minimax RMSE curve is flat by then on our simulations and a subset costs ~5 ms).
3. :func:`fit_pool_irt` — 2PL/3PL(/4PL) EM fits on the pool (train + validation models),
   θ by MAP and EAPsum, and the cross-validated reconstruction RMSE of every
   (model, θ-method) pair (GAM ``score ~ s(θ)`` on train, RMSE on validation).
4. :func:`select_items` — information filtering (ALGORITHM.md §5: type-4 quantile bins of
   the θ grid, greedy low→high, ≤ 1 item per bin, threshold τ), refit on the selected
   items (train models only), θ, GAM, validation RMSE; objective RMSE + λ·n_items. The
   original tuned (model, θ method, grid type, τ) by Bayesian optimisation; here a grid:
   the ``top_k`` best (model, θ-method) pairs of step 3 × both grid types × ``n_tau``
   thresholds at quantiles of the items' peak information, with identical selections
   evaluated once. The best configuration is refitted (1000 EM cycles), the GAM
   ``score ~ s(θ)`` is fitted on train models and the test RMSE reported.

Joint (:func:`fit_joint`): the union of selections; the grand score and every benchmark's
score reconstructed from all benchmarks' θ jointly (additive GAM, or ridge on the θs where
the GAM is ill-posed: fewer than ``joint_rows_per_param`` training models per coefficient,
see :func:`fit_joint_model`); one-factor analysis of the θs and the Spearman correlation
of the factor score with the grand score.

:func:`fit_metabench` runs everything; :func:`score_new_models` scores models that only
answered the selected items. :class:`MetabenchFit` saves to / loads from a folder
(JSON + parquet, written atomically).
"""

from __future__ import annotations

import json
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import (
    GamModel,
    LinearPredictor,
    ScoreModel,
)
from sigmap_lib.metabench._common import check_inputs, split_models
from sigmap_lib.metabench._config import MetabenchConfig
from sigmap_lib.metabench._joint import JointFit, RidgeJoint, fit_joint
from sigmap_lib.metabench._pool import ItemPool, PoolIrt, build_item_pool, fit_pool_irt
from sigmap_lib.metabench._select import BenchmarkFit, select_items

# ---------------------------------------------------------------------------
# whole pipeline


@dataclass
class MetabenchFit:
    """Everything :func:`fit_metabench` produces (savable with :meth:`save` / :meth:`load`)."""

    config: MetabenchConfig
    seed: int
    split: pd.Series
    benchmarks: dict[str, BenchmarkFit]
    joint: JointFit | None

    @property
    def selected(self) -> dict[str, list[str]]:
        return {bm: list(f.selected) for bm, f in self.benchmarks.items()}

    @property
    def test_rmse(self) -> dict[str, float]:
        return {bm: float(f.test_rmse) for bm, f in self.benchmarks.items()}

    @property
    def grand_test_rmse(self) -> float:
        return float(self.joint.grand_test_rmse) if self.joint is not None else float("nan")

    @property
    def n_selected(self) -> int:
        return sum(len(v) for v in self.selected.values())

    def rmse_table(self) -> pd.DataFrame:
        """Per benchmark: items, model, θ method, val/test RMSE, random-subset RMSE (+ joint)."""
        rows = []
        for bm, f in self.benchmarks.items():
            rows.append(
                {
                    "benchmark": bm,
                    "n_items": len(f.selected),
                    "n_pool": f.n_pool,
                    "irt_model": f.irt_model,
                    "theta_method": f.theta_method,
                    "grid_type": f.grid_type,
                    "threshold": f.threshold,
                    "lambda": f.lam,
                    "covariates": f.covariates,
                    "val_rmse": f.val_rmse,
                    "test_rmse": f.test_rmse,
                    "test_rmse_theta": f.test_rmse_theta,
                    "random_test_rmse": f.random_test_rmse,
                    "random_test_rmse_percent": f.random_test_rmse_percent,
                    "test_rmse_joint": float(self.joint.rmse_table.loc[bm, "test_rmse_joint"])
                    if self.joint
                    else np.nan,
                }
            )
        return pd.DataFrame(rows)

    # -- persistence ---------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write to folder ``path`` atomically (temporary sibling folder, then rename)."""
        from sigmap_lib._util._atomic import atomic_dir

        dest = Path(path)
        with atomic_dir(dest) as tmp:
            meta: dict[str, Any] = {
                "format": "sigmap-metabench-1",
                "config": self.config.to_dict(),
                "seed": self.seed,
                "benchmarks": {},
            }
            self.split.rename("split").to_frame().to_parquet(tmp / "split.parquet")
            for bm, f in self.benchmarks.items():
                meta["benchmarks"][bm] = {
                    "irt_model": f.irt_model,
                    "theta_method": f.theta_method,
                    "grid_type": f.grid_type,
                    "threshold": f.threshold,
                    "lam": f.lam,
                    "selected": f.selected,
                    "val_rmse": f.val_rmse,
                    "test_rmse": f.test_rmse,
                    "random_test_rmse": f.random_test_rmse,
                    "n_pool": f.n_pool,
                    "gam": f.gam.to_dict(),
                    "info_grid": f.info_grid.tolist(),
                    "test_rmse_theta": f.test_rmse_theta,
                    "random_test_rmse_percent": f.random_test_rmse_percent,
                }
                if f.score_model is not None:
                    meta["benchmarks"][bm]["score_model"] = _save_score_model(
                        f.score_model, tmp, bm
                    )
                f.params.to_parquet(tmp / f"{bm}__params.parquet")
                f.pool_params.to_parquet(tmp / f"{bm}__pool_params.parquet")
                f.thetas.to_parquet(tmp / f"{bm}__thetas.parquet")
                f.search.to_parquet(tmp / f"{bm}__search.parquet")
                _gam_frame(f.gam).to_parquet(tmp / f"{bm}__gam.parquet")
                if f.item_stats is not None:
                    f.item_stats.to_parquet(tmp / f"{bm}__item_stats.parquet")
            if self.joint is not None:
                j = self.joint
                meta["joint"] = {
                    "benchmarks": j.benchmarks,
                    "grand_gam": j.grand_gam.to_dict(),
                    "bench_gams": {bm: g.to_dict() for bm, g in j.bench_gams.items()},
                    "grand_test_rmse": j.grand_test_rmse,
                    "factor_spearman": j.factor_spearman,
                    "factor_loadings": j.factor_loadings.to_dict(),
                    "models": j.joint_models,
                }
                j.rmse_table.to_parquet(tmp / "joint__rmse.parquet")
                j.thetas.assign(factor_score=j.factor_scores).to_parquet(
                    tmp / "joint__thetas.parquet"
                )
                _gam_frame(j.grand_gam).to_parquet(tmp / "joint__grand_gam.parquet")
                for bm, g in j.bench_gams.items():
                    _gam_frame(g).to_parquet(tmp / f"joint__{bm}__gam.parquet")
            (tmp / "metabench.json").write_text(json.dumps(meta, indent=1, default=float))
        return dest

    @classmethod
    def load(cls, path: str | os.PathLike) -> MetabenchFit:
        """Read a folder written by :meth:`save`."""
        src = Path(path)
        meta_path = src / "metabench.json"
        if not meta_path.exists():
            raise SigmapInputError(f"metabench: {meta_path} not found (not a saved MetabenchFit)")
        meta = json.loads(meta_path.read_text())
        cfg = MetabenchConfig.from_kwargs(**meta["config"])
        split = pd.read_parquet(src / "split.parquet")["split"]
        benches = {}
        for bm, m in meta["benchmarks"].items():
            stats_path = src / f"{bm}__item_stats.parquet"
            benches[bm] = BenchmarkFit(
                benchmark=bm,
                irt_model=m["irt_model"],
                theta_method=m["theta_method"],
                grid_type=int(m["grid_type"]),
                threshold=float(m["threshold"]),
                lam=float(m["lam"]),
                selected=list(m["selected"]),
                params=pd.read_parquet(src / f"{bm}__params.parquet"),
                pool_params=pd.read_parquet(src / f"{bm}__pool_params.parquet"),
                thetas=pd.read_parquet(src / f"{bm}__thetas.parquet"),
                gam=_gam_load(pd.read_parquet(src / f"{bm}__gam.parquet"), m["gam"]),
                val_rmse=float(m["val_rmse"]),
                test_rmse=float(m["test_rmse"]),
                random_test_rmse=float(m["random_test_rmse"]),
                n_pool=int(m["n_pool"]),
                search=pd.read_parquet(src / f"{bm}__search.parquet"),
                info_grid=np.asarray(m["info_grid"], float),
                item_stats=pd.read_parquet(stats_path) if stats_path.exists() else None,
                score_model=_load_score_model(m["score_model"], src, bm)
                if "score_model" in m
                else None,
                test_rmse_theta=float(m.get("test_rmse_theta", "nan")),
                random_test_rmse_percent=float(m.get("random_test_rmse_percent", "nan")),
            )
        joint = None
        if "joint" in meta:
            jm = meta["joint"]
            jt = pd.read_parquet(src / "joint__thetas.parquet")
            joint = JointFit(
                benchmarks=list(jm["benchmarks"]),
                grand_gam=_gam_load(
                    pd.read_parquet(src / "joint__grand_gam.parquet"), jm["grand_gam"]
                ),
                bench_gams={
                    bm: _gam_load(pd.read_parquet(src / f"joint__{bm}__gam.parquet"), g)
                    for bm, g in jm["bench_gams"].items()
                },
                rmse_table=pd.read_parquet(src / "joint__rmse.parquet"),
                grand_test_rmse=float(jm["grand_test_rmse"]),
                factor_loadings=pd.Series(jm["factor_loadings"], dtype=float),
                factor_spearman=float(jm["factor_spearman"]),
                factor_scores=jt.pop("factor_score"),
                thetas=jt,
                joint_models=jm.get("models", {}),
            )
        return cls(config=cfg, seed=int(meta["seed"]), split=split, benchmarks=benches, joint=joint)


def _gam_frame(g: GamModel | RidgeJoint) -> pd.DataFrame:
    df = pd.DataFrame(g.x_train, columns=[f"x{i}" for i in range(g.n_features)])
    df["y"] = g.y_train
    return df


def _gam_load(df: pd.DataFrame, meta: dict) -> GamModel | RidgeJoint:
    """A saved joint/score model: a GAM, or (``"kind": "ridge"``) the joint ridge fallback."""
    kind = RidgeJoint if meta.get("kind") == "ridge" else GamModel
    return kind.from_arrays(df.drop(columns="y").to_numpy(float), df["y"].to_numpy(float), meta)


def _save_score_model(m: ScoreModel, folder: Path, bm: str) -> dict:
    _gam_frame(m.gam).to_parquet(folder / f"{bm}__score_gam.parquet")
    meta: dict[str, Any] = {
        "covariates": m.covariates,
        "cv_rmse": m.cv_rmse,
        "gam": m.gam.to_dict(),
    }
    if m.linear is not None:
        pd.DataFrame({"coef": m.linear.coef, "item_mean": m.linear.item_means}).to_parquet(
            folder / f"{bm}__linear.parquet"
        )
        meta["linear"] = {"intercept": m.linear.intercept, "alpha": m.linear.alpha}
    return meta


def _load_score_model(meta: dict, folder: Path, bm: str) -> ScoreModel:
    linear = None
    if "linear" in meta:
        lf = pd.read_parquet(folder / f"{bm}__linear.parquet")
        linear = LinearPredictor(
            coef=lf["coef"].to_numpy(float),
            intercept=float(meta["linear"]["intercept"]),
            alpha=float(meta["linear"]["alpha"]),
            item_means=lf["item_mean"].to_numpy(float),
        )
    return ScoreModel(
        covariates=str(meta["covariates"]),
        gam=_gam_load(pd.read_parquet(folder / f"{bm}__score_gam.parquet"), meta["gam"]),
        linear=linear,
        cv_rmse={str(k): float(v) for k, v in meta.get("cv_rmse", {}).items()},
    )


def fit_metabench(
    responses: dict[str, pd.DataFrame],
    full_scores: pd.DataFrame,
    *,
    seed: int = 0,
    n_jobs: int = 1,
    **config: Any,
) -> MetabenchFit:
    """Run the whole metabench pipeline.

    Parameters
    ----------
    responses : dict benchmark -> DataFrame (models x items) of 0/1, index = model ids,
        columns = item ids.
    full_scores : DataFrame (models x benchmarks) of normalised full scores (0-100).
    seed : seed of the test split, validation split, subsampling and baselines.
    n_jobs : benchmarks fitted in parallel worker processes (see :func:`fit_benchmarks`).
    **config : any :class:`MetabenchConfig` field.

    Returns
    -------
    MetabenchFit with ``.selected``, ``.test_rmse``, ``.benchmarks`` (per-benchmark
    :class:`BenchmarkFit`), ``.joint`` (:class:`JointFit`, when >= 2 benchmarks), ``.split``.

    Examples
    --------
    >>> from sigmap_lib.metabench import TINY_SETTINGS, fit_metabench, simulate_benchmarks
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> fit = fit_metabench(responses, scores, seed=0, **TINY_SETTINGS)  # tiny settings: fast
    >>> {bm: len(items) for bm, items in fit.selected.items()}
    {'arc': 14, 'gsm8k': 14}
    >>> table = fit.rmse_table()
    >>> table[["benchmark", "n_items", "irt_model", "test_rmse", "random_test_rmse"]].round(1)
      benchmark  n_items irt_model  test_rmse  random_test_rmse
    0       arc       14       2PL        5.8               7.5
    1     gsm8k       14       2PL        6.2               7.9
    >>> round(fit.grand_test_rmse, 1)  # the mean score, from both benchmarks' theta jointly
    4.7
    """
    cfg = MetabenchConfig.from_kwargs(**config)
    check_inputs(responses, full_scores)
    scores = full_scores[list(responses)]
    split = split_models(scores, test_frac=cfg.test_frac, seed=seed)
    fits, _ = fit_benchmarks(responses, scores, split, seed=seed, config=cfg, n_jobs=n_jobs)
    joint = fit_joint(fits, scores, split, config=cfg) if len(fits) >= 2 else None
    return MetabenchFit(config=cfg, seed=seed, split=split, benchmarks=fits, joint=joint)


def _fit_benchmark(
    benchmark: str,
    responses: pd.DataFrame,
    scores: pd.Series,
    split: pd.Series,
    seed: int,
    cfg: MetabenchConfig,
) -> tuple[BenchmarkFit, float]:
    """Stages 2-4 for one benchmark (filter + pool -> IRT -> select/reconstruct), and the
    wall seconds they took."""
    import time

    t0 = time.perf_counter()
    responses = responses.copy()
    responses.columns = [str(c) for c in responses.columns]
    pool = build_item_pool(benchmark, responses, scores, split, seed=seed, config=cfg)
    pirt = fit_pool_irt(benchmark, responses, scores, pool, config=cfg)
    fit = select_items(benchmark, responses, scores, pool, pirt, seed=seed, config=cfg)
    return fit, time.perf_counter() - t0


def fit_benchmarks(
    responses: dict[str, pd.DataFrame],
    scores: pd.DataFrame,
    split: pd.Series,
    *,
    seed: int = 0,
    config: MetabenchConfig | None = None,
    n_jobs: int = 1,
    on_done: Any = None,
) -> tuple[dict[str, BenchmarkFit], dict[str, float]]:
    """Stages 2-4 (item pool, IRT fits, selection) for every benchmark, optionally in
    parallel processes.

    Each benchmark's fit depends only on its own data and seeds, so the results do not
    depend on ``n_jobs`` (up to floating-point summation order inside mirt's threaded EM).
    With ``n_jobs > 1`` the benchmarks (largest first) go to ``n_jobs`` spawned worker
    processes whose mirt (rayon) and BLAS pools get ``max(1, cpu_count // n_jobs)``
    threads each, so the cores are shared instead of oversubscribed.

    Returns the fits (in ``responses`` order) and each benchmark's wall seconds;
    ``on_done(benchmark, fit, seconds)`` is called as each finishes.

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, fit_benchmarks, simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> config = MetabenchConfig(**TINY_SETTINGS)  # tiny settings for a fast example
    >>> split = split_models(scores)
    >>> fits, seconds = fit_benchmarks(responses, scores, split, config=config)
    >>> {bm: (f.irt_model, len(f.selected)) for bm, f in fits.items()}
    {'arc': ('2PL', 14), 'gsm8k': ('2PL', 14)}
    >>> sorted(seconds) == ["arc", "gsm8k"]
    True
    """
    cfg = config or MetabenchConfig()
    if n_jobs < 1:
        raise SigmapInputError(f"metabench: n_jobs must be >= 1, got {n_jobs}")
    fits: dict[str, BenchmarkFit] = {}
    wall: dict[str, float] = {}

    def args(bm: str) -> tuple:
        return (bm, responses[bm], scores[bm], split, seed, cfg)

    if n_jobs == 1 or len(responses) == 1:
        for bm in responses:
            fits[bm], wall[bm] = _fit_benchmark(*args(bm))
            if on_done is not None:
                on_done(bm, fits[bm], wall[bm])
    else:
        from concurrent.futures import as_completed

        order = sorted(responses, key=lambda b: -responses[b].size)
        ex, futs = _submit_spawned(n_jobs, _fit_benchmark, {bm: args(bm) for bm in order})
        with ex:
            for fut in as_completed(futs):
                bm = futs[fut]
                fits[bm], wall[bm] = fut.result()
                if on_done is not None:
                    on_done(bm, fits[bm], wall[bm])
    return {bm: fits[bm] for bm in responses}, {bm: wall[bm] for bm in responses}


def _submit_spawned(n_jobs: int, fn: Any, jobs: dict[str, tuple]) -> tuple[Any, dict[Any, str]]:
    """A pool of ``n_jobs`` spawned processes with ``fn(*args)`` submitted for each job (in
    ``jobs`` order); mirt's (rayon) and BLAS pools get ``max(1, cpu_count // n_jobs)``
    threads in each worker. Returns the executor (to be closed) and ``{future: job}``."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    threads = str(max(1, (os.cpu_count() or 1) // n_jobs))
    env = {k: threads for k in ("RAYON_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # inherited by the workers, spawned during the submits
    try:
        ex = ProcessPoolExecutor(n_jobs, mp_context=mp.get_context("spawn"))
        futs = {ex.submit(fn, *args): job for job, args in jobs.items()}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return ex, futs


def _select_or_error(
    benchmark: str,
    responses: pd.DataFrame,
    scores: pd.Series,
    pool: ItemPool,
    pool_irt: PoolIrt,
    seed: int,
    config: MetabenchConfig,
) -> BenchmarkFit | Exception:
    try:
        return select_items(benchmark, responses, scores, pool, pool_irt, seed=seed, config=config)
    except Exception as exc:  # handed back to the caller, who decides what it means
        exc.add_note("".join(traceback.format_exception(exc)))  # the worker's traceback
        return exc


def select_items_many(
    jobs: dict[str, tuple[pd.DataFrame, pd.Series, ItemPool, PoolIrt]],
    *,
    seed: int = 0,
    config: MetabenchConfig | None = None,
    n_jobs: int = 1,
) -> dict[str, BenchmarkFit | Exception]:
    """:func:`select_items` for several benchmarks, optionally in parallel processes.

    Parameters
    ----------
    jobs : dict
        Benchmark -> ``(responses, scores, pool, pool_irt)``, the arguments of
        :func:`select_items` after the benchmark's name.
    seed, config
        As for :func:`select_items` (the same for every benchmark).
    n_jobs : int
        Worker processes (spawned; the largest benchmarks go first, and mirt's and the
        BLAS thread pools are shared out as in :func:`fit_benchmarks`). 1: in this
        process, one benchmark after another.

    Returns
    -------
    dict
        Benchmark -> its :class:`BenchmarkFit`, or the exception its selection raised
        (in ``jobs`` order). Each benchmark's selection depends only on its own data and
        the seed, so the fits do not depend on ``n_jobs`` (up to floating-point
        summation order inside mirt's threaded EM).

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchConfig, build_item_pool, fit_pool_irt, select_items_many,
    ...     simulate_benchmarks, split_models,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> split = split_models(scores)
    >>> config = MetabenchConfig(**TINY_SETTINGS)
    >>> jobs = {}
    >>> for bm in responses:
    ...     x, y = responses[bm], scores[bm]
    ...     pool = build_item_pool(bm, x, y, split, config=config)
    ...     jobs[bm] = (x, y, pool, fit_pool_irt(bm, x, y, pool, config=config))
    >>> fits = select_items_many(jobs, config=config)
    >>> {bm: len(f.selected) for bm, f in fits.items()}
    {'arc': 14, 'gsm8k': 14}
    """
    cfg = config or MetabenchConfig()
    if n_jobs < 1:
        raise SigmapInputError(f"metabench: n_jobs must be >= 1, got {n_jobs}")
    if n_jobs == 1 or len(jobs) <= 1:
        return {bm: _select_or_error(bm, *args, seed, cfg) for bm, args in jobs.items()}
    order = sorted(jobs, key=lambda b: -jobs[b][0].size)
    ex, futs = _submit_spawned(
        min(n_jobs, len(jobs)), _select_or_error, {bm: (bm, *jobs[bm], seed, cfg) for bm in order}
    )
    got: dict[str, BenchmarkFit | Exception] = {}
    with ex:
        for fut, bm in futs.items():
            got[bm] = fut.result()
    return {bm: got[bm] for bm in jobs}

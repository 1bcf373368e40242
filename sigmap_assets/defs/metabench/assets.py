"""metabench: a sparse benchmark distilled with IRT (METHODS Part II, ALGORITHM.md).

Per benchmark (single-run backfills over the `benchmarks` partitions): item filtering and
cross-validated subsampling to a pool → 2PL/3PL(/4PL) fits with θ by MAP/EAPsum →
information filtering, refit and GAM reconstruction. Then `metabench` joins them: the
union of selections, total-score reconstruction from all θs, one-factor analysis, an
export of the items and a report. Benchmarks without item-level responses are skipped.
"""

import json
import os
from collections.abc import Callable
from typing import Any

import dagster as dg

from sigmap_assets.automation import aggregate_condition, automated, partition_condition
from sigmap_assets.config import SigmapConfig
from sigmap_assets.metadata import image_md, md_table, table_metadata
from sigmap_assets.partitions import benchmarks_partitions
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.skips import asset_ran, asset_skip_reason, skip_asset, skipped_partitions
from sigmap_assets.state import StoredState
from sigmap_assets.tables import write_json
from sigmap_lib.errors import SigmapInputError


class MetabenchSettings(SigmapConfig):
    """Hyperparameters (`sigmap_lib.metabench.MetabenchConfig`). Unset fields take the world's
    recommendation (`settings.yaml` → `metabench:` in the world folder, e.g. a larger λ for
    benchmarks of 100 items) and then the library defaults (the paper's: pool 350, λ 0.005,
    200 θ bins)."""

    pool_size: int | None = None
    """Items kept per benchmark after the filters, before the IRT fit (library default 350)."""
    n_subsets: int | None = None
    """Random item subsets drawn in the selection search (default 500)."""
    irt_models: list[str] | None = None
    """IRT models fitted with mirt and compared: any of 2PL, 3PL, 4PL (default 2PL and 3PL)."""
    theta_methods: list[str] | None = None
    """Ability estimators compared: MAP, EAPsum (default both)."""
    n_quant: int | None = None
    """θ bins of the information-based item selection (default 200)."""
    lam: float | None = None
    """λ: the search objective's cost per selected item (validation RMSE + λ × items; default 0.005)."""
    test_frac: float | None = None
    """Share of the models held out as the test set (default 0.1)."""
    gam_df: int | None = None
    """Spline degrees of freedom of the score ~ s(θ) reconstruction GAM (default 20)."""
    seed: int = 0
    """Seed of the model split and the subset search."""

    def lib_config(self, world: WorldResource):
        from sigmap_lib.metabench import MetabenchConfig

        merged = dict(world.settings().get("metabench", {}))
        merged.update({k: v for k, v in self.model_dump().items() if v is not None and k != "seed"})
        return MetabenchConfig.from_kwargs(**merged)


def load_responses(storage: SigmapStorage):
    """Per benchmark key: the 0/1 matrix (models × items), and the full normalised scores
    (:func:`sigmap_lib.metabench.full_scores`) as a models × benchmarks frame."""
    import pandas as pd

    from sigmap_lib.metabench import full_scores

    out = {}
    for key in StoredState.read(storage).benchmark_keys:
        p = storage.layout.item_responses(key)
        if p.exists():
            df = pd.read_parquet(p).set_index("model")
            out[key] = df.astype("int8")
    return out, full_scores(out)


def common_split(storage: SigmapStorage, settings: MetabenchSettings, world: WorldResource):
    """``(responses, full scores, split)``; raises :class:`SigmapInputError` with the reason
    when this world cannot run metabench (no responses, too few respondents)."""
    from sigmap_lib.metabench import split_models

    responses, full = load_responses(storage)
    if not responses:
        raise SigmapInputError("no benchmark has item-level responses (catalog `responses:`)")
    need = world.minimums().metabench_respondents
    split = split_models(
        full, test_frac=settings.lib_config(world).test_frac, seed=settings.seed, min_models=need
    )
    return responses, full, split


def upstream_skipped(storage: SigmapStorage, asset: str) -> dg.MaterializeResult | None:
    """A stage after a skipped ``irt_item_pool`` is skipped for the same reason."""
    reason = asset_skip_reason(storage, "irt_item_pool")
    if reason is None:
        return None
    return skip_asset(storage, asset, reason, metadata={"skipped_because": "irt_item_pool"})


def mb_dir(storage: SigmapStorage, key: str, stage: str):
    return storage.layout.metabench_stage(key, stage)


def skip_reason(storage: SigmapStorage, key: str) -> str | None:
    """Why a benchmark dropped out of metabench (set by the stage that could not process it)."""
    p = storage.layout.metabench_skipped(key)
    return json.loads(p.read_text())["reason"] if p.exists() else None


class StageRunner:
    """Runs one per-benchmark metabench stage; ``rows`` is the asset's table."""

    def __init__(self, context: dg.AssetExecutionContext, storage: SigmapStorage) -> None:
        self.context, self.storage, self.rows = context, storage, []
        self.skipped: dict[str, str] = {}  # benchmark -> reason (the asset's skip metadata)

    def __call__(self, stage: str, fn: Callable[..., Any], key: str, *args: Any, **kw: Any) -> Any:
        """``fn(key, *args, **kw)``; ``None`` when benchmark ``key``'s input is unusable for
        the stage (``SigmapInputError``, or a fit that is not identifiable on its data:
        perfect separation, a singular system), after marking it skipped: a warning, the
        skip file the later stages read, and a row."""
        import numpy as np
        from statsmodels.tools.sm_exceptions import PerfectSeparationError

        try:
            return fn(key, *args, **kw)
        except SigmapInputError as exc:
            reason = f"{stage}: {exc}"
        except (PerfectSeparationError, np.linalg.LinAlgError) as exc:  # degenerate data
            reason = (
                f"{stage}: the fit is not identifiable on this benchmark's responses "
                f"({type(exc).__name__}: {exc}); more respondents or items are needed"
            )
        self.skip(key, stage, reason)
        return None

    def skip(self, key: str, stage: str, reason: str) -> None:
        """Mark benchmark ``key`` skipped at ``stage`` (the later stages read the mark)."""
        self.context.log.warning(f"metabench: benchmark {key} skipped at {reason}")
        write_json({"stage": stage, "reason": reason}, self.storage.layout.metabench_skipped(key))
        self.rows.append({"benchmark": key, "status": f"skipped ({reason})"})
        self.skipped[key] = reason


_common = dict(
    group_name="metabench",
    partitions_def=benchmarks_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    **automated(partition_condition()),
)


@dg.asset(deps=["benchmark_items"], kinds={"parquet"}, **_common)
def irt_item_pool(
    context: dg.AssetExecutionContext,
    config: MetabenchSettings,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """Common test split of models; items filtered (variance, guess-adjusted easiness,
    item–total correlation); cross-validated random subsampling to a pool."""
    from sigmap_lib.metabench import build_item_pool, save_item_pool

    run, cfg = StageRunner(context, storage), config.lib_config(world)
    try:
        responses, full, split = common_split(storage, config, world)
    except SigmapInputError as exc:  # this world cannot run metabench at all
        reason = f"metabench cannot run on this world: {exc}"
        for key in context.partition_keys:
            run.skip(key, "item pool", reason)
        return skip_asset(
            storage, "irt_item_pool", reason, outputs=[storage.layout.metabench_split()]
        )
    asset_ran(storage, "irt_item_pool")
    rows = run.rows
    for key in context.partition_keys:
        if key not in responses:
            run.skip(key, "item pool", "no item responses (catalog `responses:`)")
            continue
        x, y = responses[key], full[key]
        pool = run("item pool", build_item_pool, key, x, y, split, seed=config.seed, config=cfg)
        if pool is None:
            continue
        save_item_pool(pool, mb_dir(storage, key, "pool"))
        context.add_asset_metadata(table_metadata(pool.item_stats), partition_key=key)
        storage.layout.metabench_skipped(key).unlink(missing_ok=True)
        excluded = pool.item_stats["excluded_by"].fillna("").astype(str)
        rows.append(
            {
                "benchmark": key,
                "status": "ok",
                "items": responses[key].shape[1],
                "models": responses[key].shape[0],
                "excluded": int((excluded != "").sum()),
                "pool": len(pool.pool_items),
                "subsample val RMSE": pool.subsample_rmse,
            }
        )
    split_path = storage.layout.metabench_split()
    split_path.parent.mkdir(parents=True, exist_ok=True)
    split.rename("split").to_frame().to_parquet(split_path)
    return dg.MaterializeResult(
        metadata={
            **skipped_partitions(run.skipped),
            "pools": dg.MetadataValue.md(md_table(rows, max_rows=100)),
            "test_models": int((split == "test").sum()),
        }
    )


@dg.asset(deps=[irt_item_pool], kinds={"python"}, **_common)
def irt_fits(
    context: dg.AssetExecutionContext,
    config: MetabenchSettings,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """2PL/3PL(/4PL) IRT fits of each pool with `mirt`; θ by MAP and EAPsum; each
    (model, θ-method) ranked by cross-validated reconstruction RMSE."""
    from sigmap_lib.metabench import fit_pool_irt, load_item_pool, save_pool_irt

    if (skipped := upstream_skipped(storage, "irt_fits")) is not None:
        return skipped
    asset_ran(storage, "irt_fits")
    responses, full = load_responses(storage)
    run = StageRunner(context, storage)
    rows = run.rows
    for key in context.partition_keys:
        if key not in responses or skip_reason(storage, key):
            continue
        pool = load_item_pool(mb_dir(storage, key, "pool"))
        pirt = run(
            "IRT fit",
            fit_pool_irt,
            key,
            responses[key],
            full[key],
            pool,
            config=config.lib_config(world),
        )
        if pirt is None:
            continue
        save_pool_irt(pirt, mb_dir(storage, key, "irt"))
        for r in pirt.cv.to_dict(orient="records"):
            rows.append({"benchmark": key, **r})
    return dg.MaterializeResult(
        metadata={
            **skipped_partitions(run.skipped),
            "cross_validation": dg.MetadataValue.md(md_table(rows, max_rows=100)),
        }
    )


#: Worker processes of :func:`metabench_selection` (at most one per core): each
#: benchmark's selection refits IRT models for every candidate item set, independently of
#: the other benchmarks.
SELECTION_PROCESSES = 4


def _outcome(key: str, outcome: Any) -> Any:
    """A selection's fit, or the exception it raised, raised again here."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


@dg.asset(deps=[irt_fits], kinds={"parquet"}, **_common)
def metabench_selection(
    context: dg.AssetExecutionContext,
    config: MetabenchSettings,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """Information filtering over θ bins (R type-4 quantiles) with threshold λ, refit on the
    selected items, GAM reconstruction of the full score; test RMSE vs a random subset."""
    import pandas as pd

    from sigmap_lib.metabench import (
        load_item_pool,
        load_pool_irt,
        save_benchmark_fit,
        select_items_many,
    )

    if (skipped := upstream_skipped(storage, "metabench_selection")) is not None:
        return skipped
    asset_ran(storage, "metabench_selection")
    responses, full = load_responses(storage)
    split = pd.read_parquet(storage.layout.metabench_split())["split"]
    run, cfg = StageRunner(context, storage), config.lib_config(world)
    rows = run.rows
    jobs = {
        key: (
            responses[key],
            full[key],
            load_item_pool(mb_dir(storage, key, "pool")),
            load_pool_irt(mb_dir(storage, key, "irt")),
        )
        for key in context.partition_keys
        if key in responses and not skip_reason(storage, key)
    }
    n_jobs = max(1, min(SELECTION_PROCESSES, os.cpu_count() or 1))
    outcomes = select_items_many(jobs, seed=config.seed, config=cfg, n_jobs=n_jobs)
    for key, outcome in outcomes.items():
        fit = run("selection", _outcome, key, outcome)
        if fit is None:
            continue
        save_benchmark_fit(fit, split, cfg, mb_dir(storage, key, "selection"))
        context.add_asset_metadata(table_metadata(fit.params), partition_key=key)
        rows.append(
            {
                "benchmark": key,
                "items": responses[key].shape[1],
                "pool": fit.n_pool,
                "selected": len(fit.selected),
                "IRT": fit.irt_model,
                "θ": fit.theta_method,
                "score GAM on": fit.covariates,
                "test RMSE": fit.test_rmse,
                "random-subset RMSE": fit.random_test_rmse,
                "test RMSE, θ only": fit.test_rmse_theta,
            }
        )
    return dg.MaterializeResult(
        metadata={
            **skipped_partitions(run.skipped),
            "selection": dg.MetadataValue.md(md_table(rows, max_rows=100)),
        }
    )


def write_fit_tasks(fit, world: WorldResource, storage: SigmapStorage, context) -> object:
    """lm-eval tasks of the fit's items where the world has loglikelihood item tables
    (``sigmap metabench export-tasks`` does the same from the command line)."""
    from sigmap_assets.tables import fit_item_tables
    from sigmap_lib.metabench import fit_tasks, write_lm_eval_tasks

    tables, metrics = fit_item_tables(world, list(fit.benchmarks))
    if not tables:
        return None
    try:
        tasks = fit_tasks({k: fit.selected[k] for k in tables}, tables, metrics=metrics)
    except SigmapInputError as exc:
        context.log.warning(f"lm-eval tasks not written: {exc}")
        return None
    source = {"kind": "fit", "fit": str(storage.layout.metabench_fit())}
    return write_lm_eval_tasks(
        storage.layout.metabench_tasks(), tasks, group="sigmap_fit", source=source
    )


def benchmark_fits(storage: SigmapStorage, responses: dict) -> tuple[dict, dict]:
    """Each catalog benchmark's distilled fit (``metabench_selection``), or why it has none."""
    from sigmap_lib.metabench import load_benchmark_fit

    fits, skipped = {}, {}
    for key in StoredState.read(storage).benchmark_keys:
        if skip_reason(storage, key):
            skipped[key] = skip_reason(storage, key)
        elif key not in responses:
            skipped[key] = "no item responses (catalog `responses:`)"
        elif storage.layout.metabench_selection_fit(key).exists():
            fits[key] = load_benchmark_fit(mb_dir(storage, key, "selection"))
    return fits, skipped


@dg.asset(
    group_name="metabench",
    deps=[dg.AssetDep(metabench_selection, partition_mapping=dg.AllPartitionMapping())],
    **automated(aggregate_condition()),
    kinds={"parquet", "html"},
)
def metabench(
    context: dg.AssetExecutionContext,
    config: MetabenchSettings,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """The joint metabench: union of the selections, grand-score and per-benchmark
    reconstruction from all θs, one-factor analysis of the θs, export of the items
    (parquet + JSONL for an lm-eval-harness task) and a report."""
    import pandas as pd

    from sigmap_lib.metabench import MetabenchFit, export_items, fit_joint
    from sigmap_lib.reporting import metabench_report

    layout = storage.layout
    responses, full = load_responses(storage)
    fits, skipped = benchmark_fits(storage, responses)
    if not fits:
        return skip_metabench(storage, skipped)
    asset_ran(storage, "metabench")
    split = pd.read_parquet(layout.metabench_split())["split"]
    joint, joint_error = None, None
    if len(fits) >= 2:
        try:
            joint = fit_joint(fits, full[list(fits)], split, config=config.lib_config(world))
        except SigmapInputError as exc:
            joint_error = str(exc)
    fit = MetabenchFit(
        config=config.lib_config(world), seed=config.seed, split=split, benchmarks=fits, joint=joint
    )
    fit.save(layout.metabench_fit())
    questions = {k: pd.read_parquet(q) for k in fits if (q := layout.item_questions(k)).exists()}
    exported = export_items(fit, questions, layout.metabench_export(), list(questions))
    not_exported = {k: "no question texts (catalog `items:`)" for k in fits if k not in questions}
    tasks_dir = write_fit_tasks(fit, world, storage, context)
    n_items = sum(r.shape[1] for k, r in responses.items() if k in fits)
    report = metabench_report(
        fit,
        n_items,
        layout.plots_dir(),
        layout.metabench_report(),
        skipped=skipped,
        not_exported=not_exported,
        joint_error=joint_error,
    )
    write_json(report.summary, layout.metabench_summary())
    return dg.MaterializeResult(
        metadata={
            **skipped_partitions(skipped),
            "items_selected": fit.n_selected,
            "skipped_benchmarks": dg.MetadataValue.json(skipped),
            "items_total": int(n_items),
            "compression_pct": round(report.summary["compression_pct"], 2),
            "grand_test_rmse": fit.grand_test_rmse,
            "rmse": dg.MetadataValue.md(
                md_table(report.table.to_dict(orient="records"), max_rows=50)
            ),
            "reconstruction": dg.MetadataValue.md(
                image_md(report.reconstruction, "reconstructed vs true")
            ),
            "information": dg.MetadataValue.md(image_md(report.information, "test information")),
            "export": dg.MetadataValue.json({k: str(v) for k, v in exported.items()}),
            "not_exported": dg.MetadataValue.json(not_exported),
            "lm_eval_tasks": dg.MetadataValue.path(str(tasks_dir or "(no loglikelihood items)")),
            "report": dg.MetadataValue.path(str(report.html)),
        }
    )


def skip_metabench(storage: SigmapStorage, skipped: dict[str, str]) -> dg.MaterializeResult:
    """No benchmark could be distilled on this world: the stored fit, export and summary of
    an earlier run are removed (nothing scores new models with a fit that no longer follows
    from the data) and the report says why, benchmark by benchmark."""
    from sigmap_lib.reporting import Section, render_html_report

    pool_reason = asset_skip_reason(storage, "irt_item_pool")
    reason = (
        pool_reason  # the whole stage could not start: the same reason, once
        if pool_reason is not None and set(skipped.values()) == {pool_reason}
        else f"no benchmark could be distilled ({len(skipped)} skipped, each with its reason)"
    )
    rows = [{"benchmark": k, "reason": v} for k, v in skipped.items()]
    html = render_html_report(
        [
            Section(
                "Skipped",
                f"metabench was skipped on this world: {reason}",
                tables=[("benchmarks", rows)],
            )
        ],
        storage.layout.metabench_report(),
        title="sigmap — metabench",
    )
    layout = storage.layout
    return skip_asset(
        storage,
        "metabench",
        reason,
        outputs=[
            layout.metabench_fit(),
            layout.metabench_export(),
            layout.metabench_tasks(),
            layout.metabench_summary(),
        ],
        metadata={
            "report": dg.MetadataValue.path(str(html)),
            "skipped_benchmarks": dg.MetadataValue.json(skipped),
        },
    )

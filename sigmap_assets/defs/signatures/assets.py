"""Signatures: stage-1 screening over all corpus units, stage-2 forward selection (METHODS §2–3).

Both assets are partitioned per benchmark with a single-run backfill policy: a backfill
of every benchmark is ONE run and one streaming pass over the rank matrix.
"""

import dagster as dg
import numpy as np
import polars as pl

from sigmap_assets.automation import automated, partition_condition
from sigmap_assets.metadata import image_md, md_table
from sigmap_assets.partitions import benchmarks_partitions
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import (
    current_ranks,
    open_corpus,
    read_json,
    scores_long,
    write_json,
    write_parquet,
)


class ScreeningConfig(dg.Config):
    q: float = 0.01
    """Fraction of units kept per benchmark (ignored when k > 0)."""
    k: int = 0
    """Fixed number of candidates per benchmark (0 = use q)."""
    statistic: str = "thrush"
    """thrush | preselect: the statistic that ranks candidates."""
    two_sided: bool = True
    chunk_units: int = 1 << 18


def score_matrix(
    storage: SigmapStorage, model_keys: list[str], bench_keys: list[str]
) -> np.ndarray:
    """Scores ``(n_models, n_benchmarks)`` aligned with the rank store's model order (NaN = missing)."""
    import polars as pl

    from sigmap_lib.inputs.scores import to_wide

    long = scores_long(storage).filter(pl.col("model_key").is_not_null())
    long = long.select(
        pl.col("model_key").alias("model"), pl.col("benchmark_key").alias("benchmark"), "score"
    )
    _, _, values = to_wide(long, models=model_keys, benchmarks=bench_keys)
    return values


@dg.asset(
    group_name="signatures",
    partitions_def=benchmarks_partitions,
    deps=["nll_ranks", "benchmark_scores"],
    backfill_policy=dg.BackfillPolicy.single_run(),
    **automated(partition_condition()),
    kinds={"numpy", "parquet"},
)
def screened_candidates(
    context: dg.AssetExecutionContext, config: ScreeningConfig, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Stage 1: Thrush and pre-select rank correlations of every corpus unit with each benchmark,
    a running top-K per benchmark (fraction q, two-sided by default), and the histogram of all
    correlations — the sparsity evidence (spike at 0, thin tails)."""
    import polars as pl

    from sigmap_lib.nll import RankStore
    from sigmap_lib.reporting import correlation_histogram
    from sigmap_lib.signatures import screen, split_screenable

    keys = list(context.partition_keys)
    info = current_ranks(storage)
    ranks = RankStore.open(info["path"])
    y_all = score_matrix(storage, info["models"], keys)
    valid, skipped = split_screenable(y_all, keys)
    for key, reason in skipped.items():
        context.log.warning(f"benchmark {key} not screened: {reason}")
        write_parquet(
            pl.DataFrame(
                schema={
                    "unit": pl.Int64,
                    "thrush": pl.Float64,
                    "preselect": pl.Float64,
                    "strength": pl.Float64,
                }
            ),
            storage.layout.screening_candidates(key),
        )
        write_json(
            {"benchmark": key, "skipped": reason, "ranks_dir": info["dir"]},
            storage.layout.screening_summary(key),
        )
    keys = [keys[j] for j in valid]
    y = y_all[:, valid]
    results = (
        screen(
            ranks,
            y,
            q=config.q,
            k=config.k or None,
            two_sided=config.two_sided,
            statistic=config.statistic,
            chunk_units=config.chunk_units,
            benchmark_names=keys,
        )
        if keys
        else []
    )
    rows, plots = [], []
    for key, res in zip(keys, results):
        out = storage.layout.screening_dir(key)
        write_parquet(
            pl.DataFrame(
                {
                    "unit": res.indices,
                    "thrush": res.thrush,
                    "preselect": res.preselect,
                    "strength": res.strength,
                }
            ),
            out / "candidates.parquet",
        )
        summary = {
            "benchmark": key,
            "statistic": res.statistic,
            "two_sided": res.two_sided,
            "k": res.k,
            "n_units": res.n_units,
            "n_models": int(res.models_used.sum()),
            "models_used": [m for m, u in zip(info["models"], res.models_used) if u],
            "ranks_dir": info["dir"],
            "hist_edges": res.hist_edges,
            "hist_counts": res.hist_counts,
            "best": res.best,
        }
        write_json(summary, out / "summary.json")
        png = correlation_histogram(
            res.hist_edges,
            res.hist_counts,
            storage.layout.plot(f"screening_{key}.png"),
            title=f"{key}: {res.statistic} over {res.n_units:,} units",
        )
        plots.append((key, png))
        frac_small = (
            float(
                res.hist_counts[np.abs((res.hist_edges[:-1] + res.hist_edges[1:]) / 2) < 0.2].sum()
                / max(res.n_units, 1)
            )
            if res.statistic == "thrush"
            else float("nan")
        )
        rows.append(
            {
                "benchmark": key,
                "models": summary["n_models"],
                "units": res.n_units,
                "kept": len(res.indices),
                "best strength": res.best,
                "share |γ|<0.2": frac_small,
            }
        )
    md = "\n\n".join(image_md(p, f"{k}: distribution of all correlations") for k, p in plots[:12])
    return dg.MaterializeResult(
        metadata={
            "benchmarks": len(keys),
            "not_screened": dg.MetadataValue.json(skipped),
            "units_screened": ranks.n_units,
            "models": len(info["models"]),
            "summary": dg.MetadataValue.md(md_table(rows, max_rows=100)),
            "histograms": dg.MetadataValue.md(md),
        }
    )


UNIT_SCHEMA = {
    "order": pl.Int64,
    "unit": pl.Int64,
    "text": pl.String,
    "left_context": pl.String,
    "statistic": pl.Float64,
    "adjusted_p": pl.Float64,
    "coef": pl.Float64,
    "bootstrap_freq": pl.Float64,
    "doc": pl.Int64,
}


class SignatureConfig(dg.Config):
    method: str = "calibrated"
    """calibrated (default; the max-T test of the partial rank correlation given general
    quality, METHODS §3b) | calibrated-marginal (the same on the Thrush correlation) | lasso
    (the authors' published code, §2b) | aic | bic | ebic (the paper's text, §3)."""
    permutations: int = 199
    """Max-T permutations of the calibrated methods (999 for reported p-values)."""
    alpha: float = 0.05
    """Family-wise error level of the calibrated signatures."""
    shared_null: bool = True
    """One set of permuted score columns for all benchmarks scored by the same models."""
    gamma: float = 0.5
    """EBIC's γ."""
    loo: bool = True
    """Leave-one-model-out R² of the whole two-stage procedure (aic / bic / ebic)."""
    n_bootstrap: int = 50
    """Bootstrap resamples of models for per-unit selection frequencies (aic / bic / ebic)."""
    n_permutations: int = 19
    """Forward selection's permutation null (aic / bic / ebic)."""
    context_units: int = 20
    seed: int = 0


def open_nll_arrays(storage: SigmapStorage, model_keys: list[str]) -> list:
    from sigmap_assets.defs.models.assets import nll_store_dir
    from sigmap_lib.nll import NLLStore

    corpus = open_corpus(storage)
    return [NLLStore.open(nll_store_dir(storage, corpus.fingerprint, k)).array for k in model_keys]


def extract_options(config: SignatureConfig, settings) -> dict:
    """extract_signatures' arguments beyond the saved settings: the precision and extras of
    each method family (permutations, LOO R², bootstrap)."""
    if settings.resolved_method.startswith("calibrated"):
        return {"n_permutations": config.permutations, "seed": config.seed}
    if settings.resolved_method == "lasso":
        return {"seed": config.seed}
    return {
        "loo": config.loo,
        "n_bootstrap": config.n_bootstrap,
        "n_permutations": config.n_permutations,
        "seed": config.seed,
    }


@dg.asset(
    group_name="signatures",
    partitions_def=benchmarks_partitions,
    deps=[screened_candidates],
    backfill_policy=dg.BackfillPolicy.single_run(),
    **automated(partition_condition()),
    kinds={"parquet"},
)
def signatures(
    context: dg.AssetExecutionContext, config: SignatureConfig, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Each benchmark's signature, by default the calibrated max-T test over all corpus units
    (the units whose partial rank correlation with the scores, given general model quality,
    exceeds the permutation null's 95 % quantile of the maximum; family-wise error ≤ α). An
    empty signature is a result: nothing stands above chance at this m, d and α. Stores the
    units with their text and left context, statistic and adjusted p-value, and the
    calibration (threshold, null sample); the paper's modes (aic / bic / ebic, lasso) are
    the `method` option."""
    from sigmap_lib.nll import RankStore
    from sigmap_lib.reporting import null_threshold_plot
    from sigmap_lib.signatures import SignatureSettings, extract_signatures, signature_table

    keys = list(context.partition_keys)
    info = current_ranks(storage)
    screened = {k: read_json(storage.layout.screening_summary(k)) for k in keys}
    stale = [k for k, v in screened.items() if v["ranks_dir"] != info["dir"]]
    if stale:
        raise dg.Failure(
            f"screened_candidates for {stale} used other ranks than the current {info['dir']}: "
            "re-materialize screened_candidates first"
        )
    skipped = {k: v["skipped"] for k, v in screened.items() if "skipped" in v}
    for key, reason in skipped.items():
        write_parquet(pl.DataFrame(schema=UNIT_SCHEMA), storage.layout.signature_units(key))
        write_json(
            {"benchmark": key, "skipped": reason, "units": [], "ranks_dir": info["dir"]},
            storage.layout.signature_summary(key),
        )
    keys = [k for k in keys if k not in skipped]
    if not keys:
        return dg.MaterializeResult(
            metadata={"benchmarks": 0, "not_screened": dg.MetadataValue.json(skipped)}
        )
    first = screened[keys[0]]
    settings = SignatureSettings(
        k=first["k"],
        statistic=first["statistic"],
        two_sided=first["two_sided"],
        criterion=config.method if config.method in ("aic", "bic", "ebic") else "aic",
        gamma=config.gamma,
        method=config.method,
        alpha=config.alpha,
        shared_null=config.shared_null,
    )
    sigs = extract_signatures(
        RankStore.open(info["path"]),
        score_matrix(storage, info["models"], keys),
        nll_arrays=open_nll_arrays(storage, info["models"]),
        benchmark_names=keys,
        **settings.extract_kwargs(),
        **extract_options(config, settings),
    )
    corpus = open_corpus(storage)
    rows, tables, plots = [], [], []
    for key, sig in zip(keys, sigs):
        units = signature_table(sig, corpus, n_left=config.context_units)
        write_parquet(pl.DataFrame(units, schema=UNIT_SCHEMA), storage.layout.signature_units(key))
        summary = sig.summary() | {
            "ranks_dir": info["dir"],
            "models": info["models"],
            "config": config.model_dump(),
            "settings": settings.to_dict(),
        }
        write_json(summary, storage.layout.signature_summary(key))
        rows.append(signature_row(key, sig, summary))
        tables.append(signature_md(key, sig, units))
        cal = sig.calibration
        if cal is not None and cal.null_max.size and len(plots) < 12:
            plots.append(
                null_threshold_plot(
                    cal.null_max,
                    cal.threshold,
                    cal.observed_max,
                    storage.layout.plot(f"signature_null_{key}.png"),
                    title=f"{key}: max-T threshold vs the permutation null (P = {cal.n_permutations})",
                )
            )
    return dg.MaterializeResult(
        metadata={
            "benchmarks": len(keys),
            "not_screened": dg.MetadataValue.json(skipped),
            "method": config.method,
            "empty": dg.MetadataValue.json([r["benchmark"] for r in rows if r["units"] == 0]),
            "summary": dg.MetadataValue.md(md_table(rows, max_rows=100)),
            "signatures": dg.MetadataValue.md("\n\n".join(tables)),
            "null_plots": dg.MetadataValue.md(
                "\n\n".join(image_md(p) for p in plots) or "_(none)_"
            ),
            "mean_units": float(np.mean([r["units"] for r in rows])) if rows else 0.0,
        }
    )


def signature_row(key: str, sig, summary: dict) -> dict:
    """One benchmark's line of the UI summary table."""
    cal = summary.get("calibration") or {}
    return {
        "benchmark": key,
        "units": int(sig.units.size),
        "method": sig.method,
        "threshold": cal.get("threshold"),
        "null max (median)": (cal.get("null_max_summary") or {}).get("median"),
        "observed max": cal.get("observed_max"),
        "p (max)": cal.get("p_value"),
        "R²": summary.get("r2"),
        "LOO R²": summary.get("loo_r2"),
    }


def signature_md(key: str, sig, units: list[dict]) -> str:
    """One benchmark's signature as markdown: its units in context, or why it is empty."""
    if sig.empty:
        why = sig.calibration.reason if sig.calibration is not None else "no unit selected"
        return f"### {key}\n\n_{why}_"
    return f"### {key}\n\n" + md_table(
        [
            {
                "#": u["order"],
                "unit": repr(u["text"]),
                "left context": "…" + u["left_context"][-60:],
                "statistic": u["statistic"],
                "adjusted p": u["adjusted_p"],
                "coef": u["coef"],
            }
            for u in units
        ],
        max_rows=15,
    )

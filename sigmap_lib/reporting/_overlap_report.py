"""Assembling the overlap analyses (METHODS §5) into report sections and a findings summary.

Pure: takes the three overlap matrices and the benchmarks' metadata (plus optional
robustness variants, signature–content alignment and truth-based findings), runs the
tests of :mod:`sigmap_lib.overlap`, draws the plots of :mod:`sigmap_lib.reporting`, and
returns :class:`sigmap_lib.reporting.Section` objects and a JSON-able summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.overlap import LEVELS


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "n/a" if not np.isfinite(x) else f"{x:.3g}"
    return str(x)


def level_analyses(matrix: Any, meta: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Family/format Mann–Whitney tests, function matrix, spread and clustering of one level.

    Examples
    --------
    >>> from sigmap_lib.overlap import toy_overlap
    >>> from sigmap_lib.reporting import level_analyses
    >>> res = level_analyses(*toy_overlap())  # the matrix and its benchmarks' metadata
    >>> sorted(res)
    ['cluster', 'family', 'format', 'function', 'spread']
    >>> res["family"]["n_same"], res["format"]["n_same"], res["function"]["within_mean"]
    (1, 2, 0.75)
    >>> res["cluster"].order
    ['arc', 'arc_easy', 'gsm8k', 'math']
    """
    from sigmap_lib.overlap import cluster, function_matrix, group_test, spread

    sub = {k: v for k, v in meta.items() if k in matrix.labels}
    out = {
        "family": group_test(matrix, sub, by="family"),
        "format": group_test(matrix, sub, by="format"),
        "function": function_matrix(matrix, {k: v["function"] for k, v in sub.items()}),
        "spread": spread(matrix),
    }
    # benchmarks without a signature (NaN rows): left out of the tests (their pairs are not
    # finite) and of the clustering, and counted
    no_sig = dict((getattr(matrix, "extra", None) or {}).get("no_signature", {}))
    if no_sig:
        keep = [lab for lab in matrix.labels if lab not in no_sig]
        iu = np.triu_indices(len(matrix.labels), 1)
        out["left_out"] = {
            "benchmarks_without_signature": no_sig,
            "pairs_left_out": int((~np.isfinite(matrix.values[iu])).sum()),
            "pairs": len(iu[0]),
        }
        clustered = matrix.subset(keep) if len(keep) > 2 else None
    else:
        clustered = matrix if len(matrix.labels) > 2 else None
    out["cluster"] = cluster(clustered, fill_nan=0.0) if clustered is not None else None
    return out


def not_testable_reason(test: Mapping[str, Any]) -> str | None:
    """Why a same-group vs cross-group test has nothing to compare, or None when it has.

    Parameters
    ----------
    test : mapping
        A result of :func:`sigmap_lib.overlap.group_test` (``by``, ``n_same``, ``n_cross``,
        ``p``).

    Returns
    -------
    str or None
        ``"no finite pairs"``, ``"all benchmarks share one <by>"`` (no cross-group pair),
        ``"no two benchmarks share a <by>"`` (no same-group pair), ``"no finite <by>
        p-value"``, or None.

    Examples
    --------
    >>> from sigmap_lib.reporting import not_testable_reason
    >>> not_testable_reason({"by": "format", "n_same": 6, "n_cross": 0, "p": float("nan")})
    'all benchmarks share one format'
    >>> not_testable_reason({"by": "family", "n_same": 2, "n_cross": 4, "p": 0.1}) is None
    True
    """
    by = test.get("by", "group")
    if int(test.get("n_cross", 0)) == 0 and int(test.get("n_same", 0)) == 0:
        return "no finite pairs"
    if int(test.get("n_cross", 0)) == 0:
        return f"all benchmarks share one {by}"
    if int(test.get("n_same", 0)) == 0:
        return f"no two benchmarks share a {by}"
    p = test.get("p")
    if p is None or not np.isfinite(float(p)):
        return f"no finite {by} p-value"
    return None


def _claims(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = []
    for by in ("format", "family"):
        parts = []
        for level, res in results.items():
            t = res[by]
            why = not_testable_reason(t)
            if why:
                parts.append(f"{level}: not testable ({why})")
                continue
            parts.append(
                f"{level}: r_rb={_fmt(t['rank_biserial'])}, p={_fmt(t['p'])} "
                f"(same {_fmt(t['median_same'])} vs cross {_fmt(t['median_cross'])})"
            )
        lines.append(f"- Same-{by} vs cross-{by} (Mann–Whitney): " + "; ".join(parts) + ".")
    perf, sig = results.get("performance"), results.get("signature")
    if perf and sig:
        testable = [
            b
            for b in ("format", "family")
            if not_testable_reason(perf[b]) is None and not_testable_reason(sig[b]) is None
        ]
        untestable = {
            b: not_testable_reason(perf[b]) or not_testable_reason(sig[b])
            for b in ("format", "family")
            if b not in testable
        }
        conf_perf = any(perf[b]["p"] < 0.05 and perf[b]["rank_biserial"] > 0 for b in testable)
        conf_sig = any(sig[b]["p"] < 0.05 and sig[b]["rank_biserial"] > 0 for b in testable)
        if not testable:
            verdict = "is not testable here: " + "; ".join(
                f"{b}: {why}" for b, why in untestable.items()
            )
        else:
            verdict = {
                (
                    True,
                    False,
                ): "holds here: the performance level is inflated by shared format/family, the signature level is not",
                (
                    True,
                    True,
                ): "does not hold here: both the performance and the signature level are inflated by shared format/family",
                (
                    False,
                    False,
                ): "cannot be confirmed here: neither level shows a significant format/family inflation",
                (
                    False,
                    True,
                ): "is reversed here: the signature level shows a format/family inflation the performance level does not",
            }[(conf_perf, conf_sig)]
            if untestable:
                verdict += (
                    " ("
                    + "; ".join(f"{b}: not testable, {why}" for b, why in untestable.items())
                    + ")"
                )
        lines.append(
            f"- The paper's confound claim {verdict} (α = 0.05, one-sided reading of two-sided tests)."
        )
    sem = results.get("semantic")
    if sem:
        s = sem["spread"]
        lines.append(
            f"- Semantic overlaps: {100 * s['frac_in_band']:.0f}% of pairs in 0.1–0.4 "
            f"(median {_fmt(s['median'])}, IQR {_fmt(s['iqr'])})."
        )
    if perf:
        s = perf["spread"]
        lines.append(
            f"- Performance overlaps: median {_fmt(s['median'])}, IQR {_fmt(s['iqr'])}, "
            f"{100 * s['frac_above_05']:.0f}% of pairs above 0.5."
        )
    if sig:
        s = sig["spread"]
        lines.append(
            f"- Signature overlaps: median {_fmt(s['median'])}, IQR {_fmt(s['iqr'])}, "
            f"sd {_fmt(s['sd'])} — the spread is the discriminability of the level."
        )
        lo = sig.get("left_out")
        if lo:
            reasons = sorted(set(lo["benchmarks_without_signature"].values()))
            lines.append(
                f"- {len(lo['benchmarks_without_signature'])} benchmark(s) have no signature "
                f"({'; '.join(reasons)}): "
                f"{', '.join(sorted(lo['benchmarks_without_signature']))}. Their "
                f"{lo['pairs_left_out']} of {lo['pairs']} signature-level pairs are NaN and left "
                "out of the tests and the clustering."
            )
    for level, res in results.items():
        f = res["function"]
        lines.append(
            f"- {level}: within-function mean {_fmt(f['within_mean'])} vs cross-function "
            f"{_fmt(f['cross_mean'])} (function labels permuted: p = {_fmt(f['within_p'])})."
        )
    return lines


def build_overlap_report(
    levels: Mapping[str, Any],
    meta: Mapping[str, Mapping[str, str]],
    plots_dir: str | Path,
    *,
    robustness: Sequence[Any] = (),
    alignment: Mapping[str, Any] | None = None,
    extra_sections: Sequence[Any] = (),
    lead_sections: Sequence[Any] = (),
) -> tuple[list[Any], dict[str, Any]]:
    """Run the analyses of every level and lay them out as report sections.

    Parameters
    ----------
    levels : mapping level name -> OverlapMatrix
        Any of ``semantic``, ``performance``, ``signature`` (labels = benchmark keys).
    meta : mapping benchmark -> {"family", "format", "function"}
    plots_dir : folder for the PNGs (heatmaps, dendrograms, distributions).
    robustness : :class:`sigmap_lib.overlap.Variant` objects.
    alignment : result of :func:`sigmap_lib.overlap.signature_content_alignment`.
    extra_sections : further :class:`sigmap_lib.reporting.Section` objects (appended).
    lead_sections : sections placed right after the findings (e.g. :func:`honest_sections`).

    Returns
    -------
    sections : list of Section
    summary : dict
        JSON-able: per level the tests, spread and function means; the claims as text;
        the robustness agreements; the alignment per function; ``not_testable``: per level
        the family / format tests with nothing to compare and why.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.overlap import toy_overlap
    >>> from sigmap_lib.reporting import build_overlap_report, render_html_report
    >>> m, meta = toy_overlap("performance")
    >>> sections, summary = build_overlap_report({"performance": m}, meta, "plots")
    >>> [s.title for s in sections]
    ['Findings', 'The three levels side by side', 'Performance level']
    >>> summary["levels"]["performance"]["cluster_order"]
    ['arc', 'arc_easy', 'gsm8k', 'math']
    >>> sorted(p.name for p in Path("plots").iterdir())
    ['overlap_levels.png', 'report_performance_dendrogram.png', 'report_performance_heatmap.png']
    >>> render_html_report(sections, "overlap.html", title="Overlap").name
    'overlap.html'
    """
    import polars as pl

    from sigmap_lib.overlap import signed_units
    from sigmap_lib.reporting._html import Section
    from sigmap_lib.reporting._plots import dendrogram, heatmap, level_distributions

    plots_dir = Path(plots_dir)
    results = {lv: level_analyses(levels[lv], meta) for lv in LEVELS if lv in levels}
    claims = _claims(results)
    sections = [Section("Findings", "\n".join(claims)), *lead_sections]
    summary: dict[str, Any] = {"claims": claims, "levels": {}}
    summary["not_testable"] = {
        lv: {by: why for by in ("family", "format") if (why := not_testable_reason(res[by]))}
        for lv, res in results.items()
    }
    dist = level_distributions(
        {lv: levels[lv] for lv in results},
        plots_dir / "overlap_levels.png",
        title="Off-diagonal overlap values per level",
    )
    sections.append(
        Section(
            "The three levels side by side",
            "Distribution of the off-diagonal values.",
            images=[("levels", dist)],
        )
    )
    for lv, res in results.items():
        m = levels[lv]
        hm = heatmap(m, plots_dir / f"report_{lv}_heatmap.png", title=f"{lv} overlap (clustered)")
        images = [(f"{lv} heatmap", hm)]
        if len(m.labels) > 2:
            images.append(
                (
                    f"{lv} dendrogram",
                    dendrogram(
                        m,
                        plots_dir / f"report_{lv}_dendrogram.png",
                        title=f"{lv}: average linkage on 1 − overlap",
                    ),
                )
            )
        tests = pl.DataFrame(
            [
                {k: v for k, v in res[by].items() if not isinstance(v, (list, dict))} | {"by": by}
                for by in ("family", "format")
            ]
        )
        fm = res["function"]
        spread_df = pl.DataFrame([{k: v for k, v in res["spread"].items()}])
        text = (
            f"Within-function mean **{_fmt(fm['within_mean'])}** ({fm['n_within']} pairs) vs cross-function "
            f"**{_fmt(fm['cross_mean'])}** ({fm['n_cross']} pairs); one-sided p = "
            f"{_fmt(fm['within_p'])} with the function labels permuted among the benchmarks."
        )
        sections.append(
            Section(
                f"{lv.capitalize()} level",
                text,
                tables=[
                    ("Mann–Whitney: same vs cross group", tests),
                    ("function × function mean overlap", fm["frame"]),
                    ("spread of off-diagonal values", spread_df),
                ],
                images=images,
            )
        )
        summary["levels"][lv] = {
            "family": {k: v for k, v in res["family"].items() if not isinstance(v, (list, dict))},
            "format": {k: v for k, v in res["format"].items() if not isinstance(v, (list, dict))},
            "within_function_mean": fm["within_mean"],
            "cross_function_mean": fm["cross_mean"],
            "within_function_p": fm["within_p"],
            "spread": res["spread"],
            "cluster_order": list(res["cluster"].order)
            if res["cluster"] is not None
            else list(m.labels),
        }
        if "left_out" in res:
            summary["levels"][lv]["left_out"] = res["left_out"]
    if robustness:
        rows = [
            {
                "variant": v.name,
                "what": v.description,
                "agreement (Spearman of off-diagonal)": v.agreement,
                "pairs": v.n_pairs,
                "unit overlap with main (Jaccard)": v.extra.get("unit_jaccard"),
                "empty signatures": sum(
                    1 for u in v.signatures.values() if signed_units(u).units.size == 0
                ),
            }
            for v in robustness
        ]
        summary["robustness"] = rows
        sections.append(
            Section(
                "Robustness of the signature level",
                "Each variant recomputes the signature-level matrix; agreement = Spearman correlation "
                "of its off-diagonal values with the main matrix.",
                tables=[("variants", pl.DataFrame(rows))],
            )
        )
    if alignment is not None:
        per_b = alignment["per_benchmark"]
        per_f = alignment.get("per_function")
        summary["alignment"] = per_f.to_dicts() if per_f is not None else per_b.to_dicts()
        tables = [("per benchmark", per_b)] + (
            [("per function", per_f)] if per_f is not None else []
        )
        sections.append(
            Section(
                "Signature–content alignment",
                "Cosine between the mean embedding of a signature's units in their left context and "
                "the mean embedding of the benchmark's questions (the paper: only knowledge benchmarks "
                "reach about 0.4).",
                tables=tables,
            )
        )
    sections.extend(extra_sections)
    return sections, summary

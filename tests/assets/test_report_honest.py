"""The overlap report is honest about a small world (issue 17, item 7): a per-model table
(bits per byte, scores, used or dropped and why), the signature units in context with
their statistics, the skipped benchmarks and stages with their reasons, and a banner when
the signature level cannot mean anything (m models, P permutations)."""

from __future__ import annotations

import csv

from sigmap_lib.reporting import signature_resolution
from tests.assets.harness import Project


def _edit_world(project: Project) -> tuple[str, str]:
    """One model loses every score, and the catalog gains a benchmark nobody scored."""
    root = project.world.root()
    with open(root / "scores.csv", newline="") as f:
        rows = list(csv.reader(f))
    unscored = rows[-1][0]
    rows[-1] = [unscored] + [""] * (len(rows[-1]) - 1)  # every score missing
    with open(root / "scores.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    cat = root / "catalog.yaml"
    cat.write_text(
        cat.read_text()
        + "  orphan_bench:\n    family: ai2\n    format: cloze\n    function: math\n"
    )
    return unscored, "orphan_bench"


def test_report_shows_models_skips_and_the_banner(project: Project) -> None:
    from sigmap_assets.tables import read_json

    unscored, orphan = _edit_world(project)
    project.through("report")
    html = project.storage.layout.report("overlap_report.html").read_text()
    summary = read_json(project.storage.layout.report("overlap_summary.json"))

    # per-model table: every registry model, its bits per byte and status
    assert "<h2>Models</h2>" in html and "per model" in html
    by = {r["model"]: r for r in summary["models"]}
    assert len(by) == 12 and by[unscored]["status"] == "dropped"
    assert by[unscored]["reason"] == "no scores" and by[unscored]["bpb_mean"] > 0
    used = [r for r in summary["models"] if r["status"] == "used"]
    assert summary["models_used"] == len(used) == 11
    assert all(r["bpb_mean"] > 0 and r["bpb_sd"] > 0 and r["n_scores"] == 6 for r in used)
    assert unscored in html and "no scores" in html

    # skips with reasons: the unscored catalog benchmark
    skips = {(s["what"], s["stage"]): s["reason"] for s in summary["skipped"]}
    assert skips[(orphan, "scores")] == "in the catalog but no model has a score"
    assert "Skipped benchmarks and stages" in html and "no model has a score" in html

    # signature units in context with their statistics (aic mode of the harness, P = 3)
    rows = {r["benchmark"]: r for r in summary["signatures"]}
    assert rows and all(r["P"] == 3 for r in rows.values() if r.get("method"))
    assert "signature units in context" in html and "adjusted p" in html

    # the banner: P = 3 permutations cannot resolve α = 0.05 (1/(P+1) = 0.25)
    res = signature_resolution(11, 3, 0.05, n_units=summary["signature_resolution"]["n_units"])
    assert summary["signature_resolution"]["limited_by"] == res["limited_by"] == ["permutations"]
    assert summary["banner"] == res["banner"]
    assert '<div class="banner" role="alert">' in html and "cannot mean anything" in html
    assert "max(1/(P + 1), 2/m!)" in html  # the rule is stated
    assert all(r["attainable"] is False for r in rows.values() if r.get("method"))
    assert all(r["significant"] == 0 for r in rows.values() if r.get("method"))
    assert "0 have a signature above chance" in html

    # existing keys are untouched
    assert {"claims", "levels", "no_signature"} <= set(summary)


def test_the_report_config_is_the_robustness_and_alignment_options() -> None:
    """overlap_report passes its run config as robustness_and_alignment's keyword arguments."""
    import inspect

    from sigmap_assets.defs.overlap.assets import ReportConfig
    from sigmap_assets.defs.overlap.report import robustness_and_alignment

    params = inspect.signature(robustness_and_alignment).parameters
    keyword_only = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert set(ReportConfig().model_dump()) == keyword_only - {"max_questions"}

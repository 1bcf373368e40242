"""The report's honesty sections (issue 17, item 7): the small-world banner rule, the
"not testable" wording, the per-model table and the skip reasons."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sigmap_lib.overlap import OverlapMatrix
from sigmap_lib.reporting import (
    build_overlap_report,
    honest_sections,
    model_table,
    not_testable_reason,
    render_html_report,
    signature_resolution,
    signature_rows,
    skip_reasons,
)
from sigmap_lib.signatures import max_t_threshold


@pytest.mark.parametrize(
    "m, P, possible, limited",
    [
        (3, 199, False, ["models"]),
        (4, 199, False, ["models"]),  # 2/4! = 0.083 >= 0.05
        (5, 199, True, []),  # 2/5! = 0.0167
        (5, 19, False, ["permutations"]),  # 1/20 = α: the threshold is the largest value
        (5, 20, True, []),
        (12, 3, False, ["permutations"]),
        (4, 3, False, ["models", "permutations"]),
        (16, 199, True, []),
    ],
)
def test_resolution_rule(m, P, possible, limited) -> None:
    r = signature_resolution(m, P)
    assert r["possible"] is possible and r["limited_by"] == limited
    assert r["p_min"] == pytest.approx(max(1 / (P + 1), 2 / math.factorial(m)))
    assert r["min_models"] == 5 and r["min_permutations"] == 20
    assert (r["banner"] is None) is possible
    if not possible:
        assert r["level"] == "impossible" and "cannot mean anything" in r["banner"]
    assert "max(1/(P + 1), 2/m!)" in r["rule"]


def test_resolution_matches_the_threshold_rule() -> None:
    """The permutation floor agrees with max_t_threshold's best case for several α."""
    for alpha in (0.01, 0.05, 0.1, 0.2):
        for P in range(1, 130):
            best = max_t_threshold(np.zeros(P), 1.0, alpha) < 1.0
            assert signature_resolution(20, P, alpha)["possible"] is best, (alpha, P)
    assert signature_resolution(5, 199, 0.01)["min_models"] == 6  # 2/6! = 0.0028
    assert signature_resolution(4, 199, two_sided=False)["possible"]  # 1/24 < 0.05


def test_resolution_caution_when_the_units_cover_every_ordering() -> None:
    assert signature_resolution(6, 199, n_units=3000)["level"] == "caution"  # 360 orderings
    assert signature_resolution(12, 199, n_units=3000)["level"] is None
    assert signature_resolution(16, 199, n_units=177_111)["banner"] is None
    with pytest.raises(ValueError):
        signature_resolution(5, 199, alpha=1.5)


def _one_format(level: str, rng) -> tuple[OverlapMatrix, dict]:
    labels = tuple(f"b{i}" for i in range(6))
    a = rng.uniform(-0.3, 0.9, (6, 6))
    v = np.clip((a + a.T) / 2, -1, 1)
    np.fill_diagonal(v, 1.0)
    meta = {
        b: {"family": ["fA", "fB"][i % 2], "format": "loglik", "function": ["x", "y"][i // 3]}
        for i, b in enumerate(labels)
    }
    return OverlapMatrix(labels=labels, values=v, level=level), meta


def test_not_testable_on_a_one_format_catalog(tmp_path) -> None:
    rng = np.random.default_rng(3)
    perf, meta = _one_format("performance", rng)
    sig, _ = _one_format("signature", rng)
    _, summary = build_overlap_report({"performance": perf, "signature": sig}, meta, tmp_path)
    claims = "\n".join(summary["claims"])
    fmt = next(c for c in summary["claims"] if c.startswith("- Same-format"))
    assert "not testable (all benchmarks share one format)" in fmt
    assert "r_rb" not in fmt
    verdict = next(c for c in summary["claims"] if "confound claim" in c)
    assert "format: not testable, all benchmarks share one format" in verdict
    assert summary["not_testable"] == {
        "performance": {"format": "all benchmarks share one format"},
        "signature": {"format": "all benchmarks share one format"},
    }
    # family still varies: its test is run, so the verdict is about family only
    assert "family: not testable" not in claims

    # neither grouping varies: the claim is not testable at all (never "cannot be confirmed")
    for b in meta.values():
        b["family"] = "fA"
    _, summary = build_overlap_report({"performance": perf, "signature": sig}, meta, tmp_path)
    verdict = next(c for c in summary["claims"] if "confound claim" in c)
    assert "is not testable here" in verdict and "cannot be confirmed" not in verdict
    assert not_testable_reason({"by": "family", "n_same": 0, "n_cross": 5, "p": np.nan}) == (
        "no two benchmarks share a family"
    )


def test_model_table_used_and_dropped_with_reasons(tmp_path) -> None:
    rows = model_table(
        ["m1", "m2", "m3", "m4", "m5"],
        ["m1", "m2", "m5"],
        [1.10, 0.95, 1.30],
        [0.40, 0.35, 0.50],
        {
            "m1": {"arc": 0.61, "gsm8k": 0.20},
            "m2": {"arc": 0.55, "gsm8k": float("nan")},
            "m3": {"arc": 0.40},
            "ghost": {"arc": 0.9},
        },
        ["arc", "gsm8k"],
        partial_nll=["m3"],
    )
    by = {r["model"]: r for r in rows}
    assert [r["model"] for r in rows] == ["m1", "m2", "m3", "m4", "m5", "ghost"]
    assert by["m1"]["status"] == "used" and by["m1"]["reason"] == ""
    assert (by["m1"]["bpb_mean"], by["m1"]["bpb_sd"], by["m1"]["gsm8k"]) == (1.10, 0.40, 0.20)
    assert by["m2"]["gsm8k"] is None and by["m2"]["n_scores"] == 1  # NaN is no score
    assert by["m3"]["reason"] == "not in the coverage (complete on too few shards)"
    assert by["m3"]["bpb_mean"] is None and by["m3"]["arc"] == 0.40
    assert by["m4"]["reason"] == "no complete NLL; no scores"
    assert by["m5"]["reason"] == "no scores" and by["m5"]["bpb_mean"] == 1.30
    assert by["ghost"]["reason"] == "not in models.yaml; no complete NLL"

    skips = skip_reasons(
        ["arc", "gsm8k", "tied", "none"],
        scored=["arc", "gsm8k", "tied"],
        screening={"tied": {"skipped": "every score is tied"}},
        signatures={
            "arc": {"units": [4], "ranks_dir": "r1", "settings": {}},
            "gsm8k": {"units": [], "ranks_dir": "r0", "settings": {}},
        },
        current_ranks="r1",
        levels={"semantic": None, "signature": "needs >= 2 current signatures, found 1"},
    )
    assert [(s["what"], s["stage"]) for s in skips] == [
        ("gsm8k", "signature"),
        ("tied", "screening"),
        ("none", "scores"),
        ("signature", "overlap level"),
    ]
    assert skips[0]["reason"].startswith("stale")

    resolution = signature_resolution(3, 199)
    sections, summary = honest_sections(rows, skips, resolution)
    assert summary["models_used"] == 2  # m1, m2
    assert set(summary["models_dropped"]) == {"m3", "m4", "m5", "ghost"}
    assert summary["banner"] == resolution["banner"]
    page = render_html_report(sections, tmp_path / "report.html", banner=summary["banner"])
    html = page.read_text()
    assert 'class="banner"' in html and "no complete NLL; no scores" in html
    assert "every score is tied" in html and "per model" in html


def test_signature_rows_loo_and_attainability() -> None:
    cal = {
        "n_permutations": 199,
        "alpha": 0.05,
        "n_models": 12,
        "n_units": 3000,
        "p_value": 0.01,
        "adjusted_p": [0.01, 0.2],
    }
    rows = signature_rows(
        {
            "a": {"method": "aic", "units": [1, 2], "loo_r2": 0.3, "calibration": cal},
            "b": {"method": "calibrated", "units": [], "loo_r2": None, "calibration": cal},
            "c": {"benchmark": "c", "skipped": "all scores tied", "units": []},
        }
    )
    assert rows[0]["significant"] == 1
    assert rows[0]["LOO R²"] == 0.3 and rows[0]["attainable"] is True and rows[0]["note"] == ""
    assert rows[1]["LOO R²"] is None and rows[1]["note"].startswith("no signature above chance")
    assert rows[2]["note"] == "skipped: all scores tied"

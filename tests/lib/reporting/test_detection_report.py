"""The report says what the calibrated signatures could detect (the threshold as the smallest
detectable |partial ρ|, the models needed for 0.6 / 0.8), over which units the error is
controlled and whether model families were — read from real signatures' summaries."""

from __future__ import annotations

import re

import numpy as np

from sigmap_lib.reporting import detection_text, signature_rows, signature_sections
from sigmap_lib.signatures import extract_signatures, models_needed
from sigmap_lib.worlds import hard_world


def _summaries(**kw) -> dict:
    w = hard_world("families", 20, 600, np.random.default_rng(3), n_benchmarks=2)
    if kw.pop("strata", False):
        kw["strata"] = w.strata
    sigs = extract_signatures(w.values, w.scores, n_permutations=99, **kw)
    return {f"b{i}": s.summary() for i, s in enumerate(sigs)}


def test_threshold_models_needed_scope_and_family_are_stated(tmp_path) -> None:
    summ = _summaries()
    text = detection_text(summ)
    t = summ["b0"]["calibration"]["threshold"]
    assert "m = 20 models, d = 600 units (b0, b1): threshold" in text
    assert re.search(r"threshold (\d\.\d\d)", text).group(1) in (
        f"{t:.2f}",
        f"{min(s['calibration']['threshold'] for s in summ.values()):.2f}",
    )
    assert f"0.8 takes about {models_needed(0.8, 600)} models" in text
    assert f"0.6 about {models_needed(0.6, 600)} at this d" in text
    assert "over each benchmark's units; not controlled for model family" in text
    rows = signature_rows(summ)
    assert {r["controlled for family"] for r in rows} == {False}
    assert {r["FWER over"] for r in rows} == {"each benchmark's units"}
    [sec] = signature_sections(summ, {k: [] for k in summ}, tmp_path)
    assert "What these models can detect" in sec.text


def test_strata_and_fwer_all_are_stated() -> None:
    text = detection_text(_summaries(strata=True, fwer="all"))
    assert "over all benchmarks' units; controlled for model family" in text


def test_nothing_to_say_without_a_partial_test() -> None:
    assert detection_text(_summaries(method="calibrated-marginal")) == ""
    assert detection_text({"b": {"method": "aic", "calibration": None}}) == ""


def test_null_plots_drawn_by_the_signatures_step_are_reused(tmp_path) -> None:
    """A plot already drawn for a benchmark is shown as it is; the others are drawn."""
    summ = _summaries()
    earlier = tmp_path / "earlier.png"
    earlier.write_bytes(b"\x89PNG drawn by the signatures step")
    out = tmp_path / "plots"
    drawn = {"b0": earlier, "b1": tmp_path / "missing.png"}
    [sec] = signature_sections(summ, {k: [] for k in summ}, out, drawn=drawn)
    images = dict(sec.images)
    assert images["b0"] == earlier and earlier.read_bytes().endswith(b"signatures step")
    assert images["b1"] == out / "signature_null_b1.png" and images["b1"].is_file()
    assert sorted(p.name for p in out.iterdir()) == ["signature_null_b1.png"]

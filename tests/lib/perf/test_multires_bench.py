"""`sigmap bench multires --quick`: the JSON line carries the null table per level and the
power of documents against flat unit max-T."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_multires_quick_reports_null_and_power_per_level() -> None:
    cmd = [sys.executable, "-m", "sigmap_assets.cli", "bench", "multires", "--quick",
           "--only", "linear", "reallike", "--workers", "1", "--real-models", "32"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(res["null"]) == {"linear", "reallike"}
    for row in res["null"].values():
        assert row["runs"] == 20 and set(row["per_level"]) == {"source", "document", "unit"}
        lo, hi = row["fwer_hierarchy_wilson95"]
        assert lo <= row["fwer_hierarchy"] <= hi and row["fwer_hierarchy"] <= 0.25
    [power] = res["power"].values()
    assert power["m"] == 32 and power["planted_documents"] == 2
    assert power["document_recall"] > power["flat_unit_recall"]
    assert 0.0 <= power["source_recall"] <= 1.0
    if power["sources_claimed_per_run"] > 0:
        assert 0.0 <= power["source_precision"] <= 1.0
    else:  # no source claimed: no precision
        assert power["source_precision"] != power["source_precision"]
    assert power["cost_vs_flat_median"] > 0 and "m32_docs200_cost" in res["targets_met"]
    for q in (0.05, 0.1):
        assert 0.0 <= power[f"fdr_q{q}"] <= 1.0 and 0.0 <= power[f"fdr_q{q}_unit_recall"] <= 1.0
    for row in res["null"].values():
        assert 0.0 <= row["fdr_q0.05_any_claim"] <= 0.25
    real = res["real_fdr_null"]
    if real:  # ../shared/data present: every real-loading shape at m = 32
        assert {r["m"] for r in real.values()} == {32} and len(real) == 7
        assert all(r["runs"] == 20 and r["fdr_q0.05_any_claim"] <= 0.25 for r in real.values())

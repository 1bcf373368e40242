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


# a cell small enough for the fast suite: 300 units in 30 documents, 1 planted
_CELL = (16, 30, 10, 0.9, 99, 3)  # m, documents, units per document, rho, P, seed
_TIMING = "cost_vs_flat"


def _counts(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != _TIMING} for r in records]


def test_power_runs_do_not_depend_on_how_a_cell_is_split() -> None:
    from sigmap_lib.perf.multires import _power_runs

    together = _power_runs(*_CELL, [0, 1, 2])
    split = _power_runs(*_CELL, [2]) + _power_runs(*_CELL, [0, 1])
    assert _counts(together) == _counts(sorted(split, key=lambda r: r["run"]))
    assert [r["run"] for r in together] == [0, 1, 2]
    assert all(r["doc_sel"] >= r["doc_tp"] >= 0 and r[_TIMING] > 0 for r in together)


def test_a_ledger_resumes_a_cell_and_computes_only_the_missing_runs(tmp_path, capsys) -> None:
    from sigmap_lib.perf.multires import _power_cell, _power_runs, _power_summary, main

    m, docs, per, rho, p, seed = _CELL
    ledger = tmp_path / "runs.jsonl"
    argv = ["--only", "--real-models", "--models", str(m), "--documents", str(docs),
            "--units-per-document", str(per), "--rho", str(rho), "--permutations", str(p),
            "--seed", str(seed), "--workers", "1", "--runs-per-task", "2",
            "--ledger", str(ledger)]  # fmt: skip
    main([*argv, "--power-runs", "3"])
    assert len(ledger.read_text().splitlines()) == 3
    with ledger.open("a") as f:
        f.write('{"cell": "' + _power_cell(m, docs, per, rho, p, seed) + '", "ru')  # torn
    res = main([*argv, "--power-runs", "4"])
    assert "3 runs in the ledger, 1 to go" in capsys.readouterr().err
    text = ledger.read_text().splitlines()
    assert len(text) == 5 and text[3].endswith('"ru')  # the torn line stays, unread
    lines = [json.loads(x) for x in text[:3]]
    fourth = json.loads(text[4])
    assert fourth["run"] == 3 and sorted(r["run"] for r in lines) == [0, 1, 2]
    [power] = res["power"].values()
    want = _power_summary(m, docs, per, rho, [*sorted(lines, key=lambda r: r["run"]), fourth])
    assert json.dumps(power, sort_keys=True) == json.dumps(want, sort_keys=True)  # NaN too
    assert power["runs"] == 4 and power["document_recall"] > 0
    # the ledger's runs are the runs a fresh computation gives
    assert _counts([fourth]) == _counts(_power_runs(*_CELL, [3]))


def test_power_table_keeps_wide_cells_apart() -> None:
    from sigmap_lib.perf.multires import _table

    row = {"m": 32, "units": 10_000_000, "documents": 100_000, "flat_unit_recall": 0.0002,
           "document_recall": 0.504, "document_precision": 1.0, "source_recall": 0.009,
           "source_precision": 1.0, "cost_vs_flat_median": 1.11, "fdr_q0.05": 0.04,
           "fdr_q0.05_unit_recall": 0.095, "fdr_q0.1": 0.088, "fdr_q0.1_unit_recall": 0.18}  # fmt: skip
    header, line = _table({}, {"cell": row}, {}).splitlines()
    assert header.startswith("m ")  # no null header without null scenarios
    assert line.split()[:5] == ["32", "10000000", "100000", "0.000", "0.504"]

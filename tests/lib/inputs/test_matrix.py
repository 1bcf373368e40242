"""The perplexity-correlations reader: hand-checked values from the real files, and one clear
line for each kind of bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import read_perplexity_correlations
from sigmap_lib.inputs._matrix import BPB_FILE, ERROR_FILE


@pytest.mark.realdata
def test_reads_the_real_files(shared_data: Path) -> None:
    mm = read_perplexity_correlations(shared_data / "realmodels")
    assert mm.values.shape == (263, 89) and mm.errors.shape == (89, 9)
    assert len(set(mm.models)) == 89 and np.unique(mm.families).size == 39
    assert mm.models.count("LLM360/Amber") == 1  # listed twice, under two families
    # hand-checked in the CSVs: the first model column and the error table's first column
    i = mm.models.index("stabilityai/stablelm-2-1_6b")
    assert i == 0 and mm.families[i] == "stabilityai"
    assert mm.unit_ids[0] == " Defining Decay Down by David Plotz"
    assert mm.values[0, 0] == 0.6894926893503897 and mm.values[0, 1] == 0.6671294101262626
    j = mm.models.index("BEE-spoke-data/smol_llama-101M-GQA")
    b = mm.benchmarks.index("arc_easy")
    assert mm.errors[j, b] == pytest.approx(0.5673400673400674, rel=1e-15)
    assert mm.scores()[j, b] == pytest.approx(1 - 0.5673400673400674, rel=1e-15)
    lam = mm.benchmarks.index("lambada_openai")
    assert mm.scores()[j, lam] == pytest.approx(-np.log(mm.errors[j, lam]))
    assert 0.5 < mm.values.min() and mm.values.max() < 1.7  # bits per byte, README's range


def _write(folder: Path, cols: str, bpb_rows: str, err_rows: str) -> Path:
    (folder / BPB_FILE).write_text(f"id,{cols}\n{bpb_rows}")
    (folder / ERROR_FILE).write_text(f"benchmark,{cols}\n{err_rows}")
    return folder


COLS = "\"('a', 'o/m1')\",\"('b', 'o/m2')\""


def test_bad_inputs_name_the_file_and_column(tmp_path: Path) -> None:
    with pytest.raises(SigmapInputError, match="not found"):
        read_perplexity_correlations(tmp_path)
    _write(tmp_path, "m1,m2", "d1,0.9,1.0\n", "arc_easy,0.3,0.4\n")
    with pytest.raises(SigmapInputError, match="column 'm1' is not a"):
        read_perplexity_correlations(tmp_path)
    _write(tmp_path, COLS, "d1,0.9,\n", "arc_easy,0.3,0.4\n")
    with pytest.raises(SigmapInputError, match=r"non-finite value in column .*o/m2"):
        read_perplexity_correlations(tmp_path)
    _write(tmp_path, COLS, "d1,0.9,1.0\nd1,0.8,0.9\n", "arc_easy,0.3,0.4\n")
    with pytest.raises(SigmapInputError, match="document id 'd1' appears twice"):
        read_perplexity_correlations(tmp_path)
    (tmp_path / BPB_FILE).write_text(f"id,{COLS}\nd1,0.9,1.0\n")
    (tmp_path / ERROR_FILE).write_text("benchmark,\"('a', 'o/m1')\"\narc_easy,0.3\n")
    with pytest.raises(SigmapInputError, match=r"no column for model .*o/m2"):
        read_perplexity_correlations(tmp_path)


@pytest.mark.realdata
@pytest.mark.slow
def test_real_model_signatures_summary(shared_data: Path) -> None:
    from sigmap_lib.studies import real_model_signatures

    out = real_model_signatures(shared_data, n_permutations=199)
    assert out["models"] == 89 and out["families"] == 39
    assert out["first_factor_share"] > 0.99  # general quality dominates every document
    assert set(out["benchmarks"]) >= {"arc_easy", "lambada_openai"}
    row = out["benchmarks"]["lambada_openai"]
    assert row["calibrated"]["n_documents"] == len(row["calibrated"]["documents"])
    assert row["calibrated_families"]["n_distinct_permutations"] > 1e20
    assert row["aic"]["n_documents"] > 0  # AIC always claims something

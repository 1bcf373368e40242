"""Score, response and question readers on the real data in ../shared/data (skip if absent).

Expected counts are those of ../shared/data/README.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import metabench_questions, read_responses
from sigmap_lib.inputs.scores import match_models, read_score_sources, read_wide, to_wide

pytestmark = pytest.mark.realdata

V1_COUNTS = {
    "arc": 5335, "hellaswag": 5336, "mmlu": 5336,
    "truthfulqa": 5336, "winogrande": 6628, "gsm8k": 6781,
}  # fmt: skip


def test_leaderboard_v1(shared_data: Path) -> None:
    t = read_wide(shared_data / "leaderboard" / "open_llm_leaderboard_v1.csv")
    models, benches, values = to_wide(t)
    assert len(models) == 6986 and benches == list(V1_COUNTS)
    counts = dict(t.group_by("benchmark").len().iter_rows())
    assert counts == V1_COUNTS
    assert int((~np.isnan(values)).all(axis=1).sum()) == 5133  # rows with all six scores
    assert np.nanmin(values) >= 0 and np.nanmax(values) <= 100
    row = models.index("0-hero/Matter-0.1-7B")
    assert values[row, benches.index("arc")] == pytest.approx(61.774744027303754)


def test_leaderboard_v2_duplicates(shared_data: Path) -> None:
    path = shared_data / "leaderboard" / "open_llm_leaderboard_v2.csv"
    with pytest.raises(SigmapInputError) as exc:
        read_wide(path)
    msg = str(exc.value)
    assert "open_llm_leaderboard_v2.csv" in msg and "79 model(s) appear more than once" in msg
    raw = pl.read_csv(path)
    assert raw.height == 4576 and int(raw["name_duplicated"].sum()) == 158
    for mode in ("first", "mean"):
        t = read_wide(path, duplicates=mode)
        assert t["model"].n_unique() == 4576 - 79
        assert t["benchmark"].unique(maintain_order=True).to_list() == [
            "ifeval", "bbh", "math_lvl5", "gpqa", "musr", "mmlu_pro",
        ]  # fmt: skip
    # "mean" averages the two rows of a duplicated model
    dup = raw.filter(pl.col("name_duplicated")).sort("rank")
    name = dup["model"][0]
    expect = dup.filter(pl.col("model") == name)["ifeval"].mean()
    got = (
        read_wide(path, duplicates="mean")
        .filter((pl.col("model") == name) & (pl.col("benchmark") == "ifeval"))["score"]
        .item()
    )
    assert got == pytest.approx(expect)
    first = (
        read_wide(path, duplicates="first")
        .filter((pl.col("model") == name) & (pl.col("benchmark") == "ifeval"))["score"]
        .item()
    )
    assert first == pytest.approx(dup.filter(pl.col("model") == name)["ifeval"][0])


@pytest.mark.parametrize(
    ("stem", "n_models", "n_benchmarks"),
    [
        ("obscaling_base_llm_benchmark_eval", 148, 8),
        ("obscaling_base_llm_leaderboard_v2_eval", 72, 6),
        ("obscaling_base_llm_emergent_capability_eval", 84, 8),
        ("obscaling_instruct_llm_benchmark_eval", 27, 9),
        ("obscaling_base_llm_merged", 148, 22),
    ],
)
def test_obscaling(shared_data: Path, stem: str, n_models: int, n_benchmarks: int) -> None:
    t = read_wide(shared_data / "leaderboard" / f"{stem}.csv")
    assert t["model"].n_unique() == n_models
    benches = t["benchmark"].unique().to_list()
    assert len(benches) == n_benchmarks
    assert not {
        "Model Size (B)",
        "Pretraining Data Size (T)",
        "FLOPs (1E21)",
        "Model Family",
    } & set(benches)


def test_sources_and_matching_v1_obscaling(shared_data: Path) -> None:
    lb = shared_data / "leaderboard"
    table, rep = read_score_sources(
        [
            {"kind": "leaderboard", "path": "open_llm_leaderboard_v1.csv"},
            {"kind": "wide", "path": "obscaling_base_llm_benchmark_eval.csv", "scale": 100},
        ],
        base_dir=lb,
        min_models=200,
    )
    assert set(rep.dropped_benchmarks) == {"XWinograd", "HumanEval"} | (
        {"MMLU", "ARC-C", "HellaSwag", "Winograd", "TruthfulQA", "GSM8K"}
    )
    assert rep.models_per_benchmark == V1_COUNTS
    assert table.height == sum(V1_COUNTS.values()) == rep.n_scores
    assert table["model"].n_unique() == 6986
    v1_models = read_wide(lb / "open_llm_leaderboard_v1.csv")["model"].unique().to_list()
    obs = read_wide(lb / "obscaling_base_llm_benchmark_eval.csv")["model"].unique().to_list()
    res = match_models(obs, v1_models)
    exact = sum(1 for v in res.method.values() if v == "exact")
    assert exact == 120  # data README: 120 of the 148 base models are in the v1 file
    assert len(res.unmatched_scores) + len(res.mapping) == 148


RESPONSES = {
    "metabench_arc_main_train": (4280, 145, 0.609),
    "metabench_arc_secondary_train": (4280, 100, 0.612),
    "metabench_gsm8k_main_train": (5041, 237, 0.385),
    "metabench_gsm8k_secondary_train": (5041, 249, 0.382),
    "metabench_mmlu_secondary_train": (4278, 102, 0.614),
    "metabench_truthfulqa_secondary_train": (4280, 136, 0.387),
    "metabench_winogrande_secondary_train": (5476, 106, 0.752),
    "metabench_hellaswag_secondary_train": (4170, 58, 0.697),
}


@pytest.mark.parametrize("stem", list(RESPONSES))
def test_item_responses(shared_data: Path, stem: str) -> None:
    n_models, n_items, mean = RESPONSES[stem]
    rm = read_responses(shared_data / "item_responses" / f"{stem}.parquet", min_models=100)
    assert rm.matrix.shape == (n_models, n_items) and rm.matrix.dtype == np.int8
    assert set(np.unique(rm.matrix).tolist()) == {0, 1}
    assert rm.matrix.mean() == pytest.approx(mean, abs=5e-4)


QUESTIONS = {
    "arc": 145, "arc-secondary": 100, "gsm8k": 237, "gsm8k-secondary": 249,
    "hellaswag": 93, "hellaswag-secondary": 58, "mmlu": 96, "mmlu-secondary": 102,
    "truthfulqa": 154, "truthfulqa-secondary": 136, "winogrande": 133, "winogrande-secondary": 106,
}  # fmt: skip


@pytest.mark.parametrize("stem", list(QUESTIONS))
def test_metabench_questions(shared_data: Path, stem: str) -> None:
    q = metabench_questions(shared_data / "metabench_items" / f"{stem}.parquet")
    assert q.height == QUESTIONS[stem] and q.columns == ["item_id", "text"]
    assert q["item_id"].n_unique() == q.height
    assert (q["text"].str.len_chars() > 10).all()
    bm = stem.split("-")[0]
    version = "secondary" if stem.endswith("secondary") else "main"
    resp = shared_data / "item_responses" / f"metabench_{bm}_{version}_train.parquet"
    if resp.exists():  # item ids match the response matrix columns exactly
        cols = pl.read_parquet_schema(resp)
        assert set(q["item_id"]) == set(cols) - {"model"}


def test_metabench_question_totals(shared_data: Path) -> None:
    main = sum(v for k, v in QUESTIONS.items() if not k.endswith("secondary"))
    second = sum(v for k, v in QUESTIONS.items() if k.endswith("secondary"))
    assert (main, second) == (858, 751)
    q = metabench_questions(shared_data / "metabench_items" / "mmlu.parquet")
    assert q["item_id"].str.starts_with("mmlu.").all()
    assert q["item_id"].str.count_matches(r"\.").min() == 2  # mmlu.<subject>.<index>

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import (
    ResponseMatrix,
    metabench_questions,
    read_lm_eval_samples,
    read_questions,
    read_responses,
)
from tests.lib.helpers import input_error


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# --- wide / long tables -----------------------------------------------------------------


def test_wide_parquet_roundtrip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    mat = (rng.random((6, 4)) < 0.5).astype(np.int8)
    rm = ResponseMatrix([f"m{i}" for i in range(6)], ["q.1", "q.2", "q.10", "q.3"], mat, "mem")
    p = tmp_path / "resp.parquet"
    rm.to_polars().write_parquet(p)
    back = read_responses(p)
    assert back.models == rm.models and back.item_ids == rm.item_ids
    assert back.matrix.dtype == np.int8 and back.matrix.shape == (6, 4)
    np.testing.assert_array_equal(back.matrix, mat)
    assert back.source == str(p) and (back.n_models, back.n_items) == (6, 4)


def test_wide_csv_bool_float_and_long(tmp_path: Path) -> None:
    p = _write(tmp_path, "r.csv", "model,a,b,c\nm1,1,0.0,true\nm2,0,1.0,False\n")
    rm = read_responses(p)
    np.testing.assert_array_equal(rm.matrix, [[1, 0, 1], [0, 1, 0]])
    long = _write(tmp_path, "l.csv", "model,item,correct\nm1,a,1\nm1,b,0\nm2,b,1\nm2,a,0\n")
    rl = read_responses(long)
    assert rl.models == ["m1", "m2"] and rl.item_ids == ["a", "b"]
    np.testing.assert_array_equal(rl.matrix, [[1, 0], [0, 1]])
    pq = tmp_path / "l.parquet"
    pl.DataFrame({"llm": ["x", "y"], "q": ["i", "i"], "ok": [True, False]}).write_parquet(pq)
    r2 = read_responses(
        {"path": str(pq), "model_column": "llm", "item_column": "q", "correct_column": "ok"}
    )
    np.testing.assert_array_equal(r2.matrix, [[1], [0]])


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "fragments"),
    [
        (
            "w.csv",
            "model,a,b\nm1,1,2\nm2,0,1\n",
            {},
            ["non-binary", "item 'b' model 'm1' (line 2): '2'"],
        ),
        (
            "w.csv",
            "model,a,b\nm1,1,yes\nm2,0,1\n",
            {},
            ["non-binary", "item 'b' model 'm1'", "'yes'"],
        ),
        ("w.csv", "model,a,b\nm1,1,\nm2,0,1\n", {}, ["missing value", "item 'b' model 'm1'"]),
        ("w.csv", "model,a,b\nm1,1,0\nm1,0,1\n", {}, ["duplicate model", "'m1' (line 2, line 3)"]),
        ("w.csv", "model,a,a\nm1,1,0\nm2,0,1\n", {}, ["duplicate column name(s) ['a']"]),
        ("w.csv", "model,a\nm1,1\n", {}, ["only 1 model(s)", "min_models=2"]),
        ("w.csv", "model,a\nm1,1\nm2,0\n", {"min_models": 3}, ["only 2 model(s)", "min_models=3"]),
        ("w.csv", "llm,a\nm1,1\nm2,0\n", {}, ["model column 'model' not found"]),
        ("w.csv", "model\nm1\nm2\n", {}, ["no item columns"]),
        ("w.csv", "", {}, ["file is empty"]),
        ("w.csv", "model,a\n,1\nm2,0\n", {}, ["empty model id", "line 2"]),
        (
            "l.csv",
            "model,item,correct\nm1,a,1\nm1,a,0\nm2,a,1\n",
            {},
            ["duplicate (model, item)", "model 'm1' item 'a' (line 2, line 3)"],
        ),
        (
            "l.csv",
            "model,item,correct\nm1,a,1\nm1,b,0\nm2,a,1\n",
            {},
            ["missing value", "item 'b' model 'm2'"],
        ),
        (
            "l.csv",
            "model,item,correct\nm1,a,1\nm2,a,0.5\n",
            {},
            ["non-binary", "item 'a' model 'm2' (line 3): '0.5'"],
        ),
        ("l.csv", "model,item,correct\nm1,,1\nm2,a,0\n", {}, ["empty item id", "line 2"]),
        (
            "l.csv",
            "model,item,score\nm1,a,1\n",
            {"kind": "long"},
            ["column(s) ['correct'] not found"],
        ),
        ("w.csv", "model,a\nm1,1\nm2,0\n", {"kind": "grid"}, ["kind must be"]),
        ("w.csv", "model,a\nm1,1\nm2,0\n", {"task": "x"}, ["only apply to lm-eval"]),
    ],
)
def test_response_errors(
    tmp_path: Path, name: str, text: str, kwargs: dict, fragments: list[str]
) -> None:
    p = _write(tmp_path, "bad_" + name, text)
    input_error(lambda: read_responses(p, **kwargs), "bad_" + name, *fragments)


def test_response_matrix_validates() -> None:
    with pytest.raises(SigmapInputError, match="shape"):
        ResponseMatrix(["a"], ["i", "j"], np.zeros((1, 3)), "x")
    with pytest.raises(SigmapInputError, match="0 or 1"):
        ResponseMatrix(["a"], ["i"], np.array([[2]]), "x")
    with pytest.raises(SigmapInputError, match="duplicate model"):
        ResponseMatrix(["a", "a"], ["i"], np.zeros((2, 1)), "x")


# --- lm-eval samples --------------------------------------------------------------------


def _samples(folder: Path, task: str, stamp: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"samples_{task}_{stamp}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _rec(doc_id: int, acc: float, **extra: object) -> dict:
    return {
        "doc_id": doc_id,
        "doc": {"q": "?"},
        "target": "A",
        "acc": acc,
        "acc_norm": 1 - acc,
        **extra,
    }


def _lm_eval_samples_dir(root: Path) -> Path:
    out = root / "out"
    a = out / "org__a"
    (a).mkdir(parents=True)
    (a / "results_2024-01-01T00-00-00.1.json").write_text(
        json.dumps({"results": {}, "config": {"model_args": "pretrained=org/a"}})
    )
    _samples(a, "arc_easy", "2024-01-01T00-00-00.1", [_rec(2, 1.0), _rec(0, 0.0), _rec(1, 1.0)])
    # an older run of model a on the same task must be ignored
    _samples(a, "arc_easy", "2023-01-01T00-00-00.1", [_rec(0, 1.0), _rec(1, 1.0), _rec(2, 1.0)])
    _samples(a, "gsm8k", "2024-01-01T00-00-00.1", [
        _rec(0, 1.0, filter="strict-match"), _rec(0, 0.0, filter="flexible-extract"),
        _rec(1, 0.0, filter="strict-match"), _rec(1, 1.0, filter="flexible-extract"),
    ])  # fmt: skip
    b = out / "org__b"
    _samples(b, "arc_easy", "2024-02-01T00-00-00.1", [_rec(0, 1.0), _rec(1, 0.0), _rec(2, 0.0)])
    _samples(b, "gsm8k", "2024-01-01T00-00-00.1", [
        _rec(0, 1.0, filter="strict-match"), _rec(0, 1.0, filter="flexible-extract"),
        _rec(1, 1.0, filter="strict-match"), _rec(1, 1.0, filter="flexible-extract"),
    ])  # fmt: skip
    return out


def test_lm_eval_samples(tmp_path: Path) -> None:
    out = _lm_eval_samples_dir(tmp_path)
    rm = read_lm_eval_samples(out, task="arc_easy")
    assert rm.models == ["org/a", "org__b"]  # results file names model a; b falls back to folder
    assert rm.item_ids == ["arc_easy.0", "arc_easy.1", "arc_easy.2"]
    np.testing.assert_array_equal(rm.matrix, [[0, 1, 1], [1, 0, 0]])
    rn = read_lm_eval_samples(out, task="arc_easy", metric="acc_norm", benchmark="arc")
    assert rn.item_ids[0] == "arc.0"
    np.testing.assert_array_equal(rn.matrix, 1 - rm.matrix)
    g = read_responses(
        {"kind": "lm_eval", "path": str(out), "task": "gsm8k", "filter": "flexible-extract"}
    )
    np.testing.assert_array_equal(g.matrix, [[0, 1], [1, 1]])
    one = read_responses(
        next((out / "org__b").glob("samples_arc_easy_*.jsonl")), min_models=1, model="B"
    )
    assert one.models == ["B"] and one.n_items == 3


@pytest.mark.parametrize(
    ("case", "fragments"),
    [
        ("several_tasks", ["several tasks ['arc_easy', 'gsm8k']", "pass task="]),
        ("filters", ["several filters", "pass filter="]),
        ("unknown_task", ["no samples for task 'hellaswag'"]),
        ("bad_filter", ["filter 'x' not found"]),
    ],
)
def test_lm_eval_samples_options_errors(tmp_path: Path, case: str, fragments: list[str]) -> None:
    out = _lm_eval_samples_dir(tmp_path)
    kwargs = {
        "several_tasks": {},
        "filters": {"task": "gsm8k"},
        "unknown_task": {"task": "hellaswag"},
        "bad_filter": {"task": "gsm8k", "filter": "x"},
    }[case]
    input_error(lambda: read_lm_eval_samples(out, **kwargs), "out", *fragments)


@pytest.mark.parametrize(
    ("lines", "fragments"),
    [
        (['{"doc_id": 0, "acc": 1.0}', "{oops"], ["line 2 is not valid JSON"]),
        (['{"doc_id": 0, "acc": 0.5}'], ["line 1 (doc_id 0) has acc=0.5", "not 0 or 1"]),
        (['{"doc_id": 0, "f1": 0.5}'], ["has no metric 'acc'", "'f1'"]),
        (['{"acc": 1}'], ["line 1 has no integer 'doc_id'"]),
        (
            ['{"doc_id": 0, "acc": 1}', '{"doc_id": 0, "acc": 0}'],
            ["duplicate item doc_id 0 (lines 1 and 2)"],
        ),
        (["[1, 2]"], ["line 1 is not a JSON object"]),
        ([""], ["no samples"]),
    ],
)
def test_lm_eval_samples_file_errors(
    tmp_path: Path, lines: list[str], fragments: list[str]
) -> None:
    p = _write(tmp_path, "m/samples_task_2024-01-01T00-00-00.1.jsonl", "\n".join(lines) + "\n")
    name = "samples_task_2024-01-01T00-00-00.1.jsonl"
    input_error(lambda: read_lm_eval_samples(p, min_models=1), name, *fragments)


def test_lm_eval_samples_missing_items_and_min_models(tmp_path: Path) -> None:
    out = tmp_path / "o"
    _samples(out / "m1", "t", "2024-01-01T00-00-00.1", [_rec(0, 1.0), _rec(1, 0.0)])
    _samples(out / "m2", "t", "2024-01-01T00-00-00.1", [_rec(0, 1.0)])
    with pytest.raises(SigmapInputError) as exc:
        read_lm_eval_samples(out)
    msg = str(exc.value)
    assert "missing value" in msg and "item 't.1' model 'm2'" in msg and "m2/samples_t_" in msg
    _samples(
        out / "m2", "t", "2024-03-01T00-00-00.1", [_rec(0, 1.0), _rec(1, 1.0)]
    )  # newer, complete
    assert read_lm_eval_samples(out).matrix.tolist() == [[1, 0], [1, 1]]
    with pytest.raises(SigmapInputError, match="only 2 model"):
        read_lm_eval_samples(out, min_models=3)
    with pytest.raises(SigmapInputError, match="nowhere: no such file or folder"):
        read_lm_eval_samples(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SigmapInputError, match=r"empty: no samples_\*\.jsonl files found"):
        read_lm_eval_samples(tmp_path / "empty")


# --- questions --------------------------------------------------------------------------


def test_read_questions_formats(tmp_path: Path) -> None:
    pq = tmp_path / "q.parquet"
    pl.DataFrame({"item_id": ["a.1", "a.2"], "text": ["What?", "Why?"], "x": [1, 2]}).write_parquet(
        pq
    )
    q = read_questions(pq)
    assert q.columns == ["item_id", "text"] and q["item_id"].to_list() == ["a.1", "a.2"]
    js = _write(tmp_path, "q.jsonl", '{"id": 7, "question": "Q1"}\n\n{"id": 8, "question": "Q2"}\n')
    q2 = read_questions(js, text_column="question")
    assert q2["item_id"].to_list() == ["7", "8"] and q2["text"].to_list() == ["Q1", "Q2"]
    cs = _write(tmp_path, "bench.csv", 'text\n"a, b"\nc\n')
    assert read_questions(cs)["item_id"].to_list() == ["bench.0", "bench.1"]
    cs2 = _write(tmp_path, "k.csv", "key,text\nk1,a\nk2,b\n")
    assert read_questions(cs2, id_column="key")["item_id"].to_list() == ["k1", "k2"]


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "fragments"),
    [
        ("q.csv", "id,body\n1,a\n", {}, ["text column 'text' not found"]),
        ("q.csv", "id,text\n1,a\n2,\n", {}, ["1 empty question text(s) (line 3)"]),
        ("q.csv", "id,text\n1,a\n1,b\n", {}, ["duplicate item id(s) in column 'id': ['1']"]),
        ("q.csv", "id,text\n1,a\n", {"id_column": "key"}, ["id column 'key' not found"]),
        ("q.jsonl", '{"text": "a"}\nnot json\n', {}, ["line 2 is not valid JSON"]),
        ("q.jsonl", "", {}, ["file is empty"]),
        ("q.jsonl", '{"text": 3}\n', {}, ["not strings"]),
    ],
)
def test_read_questions_errors(
    tmp_path: Path, name: str, text: str, kwargs: dict, fragments: list[str]
) -> None:
    p = _write(tmp_path, "bad_" + name, text)
    input_error(lambda: read_questions(p, **kwargs), "bad_" + name, *fragments)


def test_metabench_questions_synthetic(tmp_path: Path) -> None:
    arc = tmp_path / "arc-secondary.parquet"
    pl.DataFrame(
        {
            "question": ["Which is a gas?"],
            "choices": [{"label": ["A", "B"], "text": ["air", "rock"]}],
            "metabench_idx": [12],
        }
    ).write_parquet(arc)
    q = metabench_questions(arc)
    assert q.to_dicts() == [{"item_id": "arc.12", "text": "Which is a gas?\nA. air\nB. rock"}]
    assert metabench_questions(arc, include_choices=False)["text"][0] == "Which is a gas?"
    mmlu = tmp_path / "mmlu.parquet"
    pl.DataFrame(
        {
            "question": ["2+2?"],
            "choices": [["3", "4"]],
            "metabench_idx": [5],
            "mb_sub_idx": ["math.5"],
        }
    ).write_parquet(mmlu)
    assert metabench_questions(mmlu).to_dicts() == [
        {"item_id": "mmlu.math.5", "text": "2+2?\nA. 3\nB. 4"}
    ]
    wg = tmp_path / "winogrande.parquet"
    pl.DataFrame({"sentence": ["The _ fell."], "metabench_idx": [1]}).write_parquet(wg)
    assert metabench_questions(wg)["item_id"].to_list() == ["winogrande.1"]
    with pytest.raises(
        SigmapInputError, match=r"winogrande\.parquet: column\(s\) \['ctx', 'endings'\]"
    ):
        metabench_questions(wg, benchmark="hellaswag")
    other = tmp_path / "squad.parquet"
    pl.DataFrame({"question": ["?"]}).write_parquet(other)
    with pytest.raises(
        SigmapInputError, match=r"squad\.parquet: unknown metabench benchmark 'squad'"
    ):
        metabench_questions(other)
    dup = tmp_path / "gsm8k.parquet"
    pl.DataFrame({"question": ["a", "b"], "metabench_idx": [1, 1]}).write_parquet(dup)
    with pytest.raises(
        SigmapInputError, match=r"gsm8k\.parquet: duplicate item id\(s\) \['gsm8k.1'\]"
    ):
        metabench_questions(dup)


def test_wide_parquet_bad_values(tmp_path: Path) -> None:
    p = tmp_path / "bad.parquet"
    pl.DataFrame({"model": ["a", "b"], "i1": [1, 2], "i2": [0, 1]}).write_parquet(p)
    with pytest.raises(
        SigmapInputError, match=r"bad\.parquet: 1 non-binary.*item 'i1' model 'b' \(row 1\): 2"
    ):
        read_responses(p)
    p2 = tmp_path / "nan.parquet"
    pl.DataFrame({"model": ["a", "b"], "i1": [1.0, float("nan")], "i2": [0, None]}).write_parquet(
        p2
    )
    with pytest.raises(
        SigmapInputError, match=r"nan\.parquet: 2 missing value\(s\) in 2 item\(s\)"
    ):
        read_responses(p2)

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import sigmap_lib.inputs.scores as sc
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import catalog_from_dict
from tests.lib.helpers import input_error

V1_LIKE = """\
name,link,complete,avg,arc,hellaswag,mmlu,available,moe,sha,precision,nparams,size
org/a,https://x,True,50.0,40.5,60.0,,True,False,abc123,float16,7.24B,7.24
org/b,https://y,False,55.0,,70.0,45.0,True,False,def456,bfloat16,error,-1
org/c,https://z,True,52.0,41.0,61.0,47.0,True,True,0a1b2c,4bit,offline,13
"""


def _csv(tmp_path: Path, text: str, name: str = "scores.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _rows(df: pl.DataFrame) -> set[tuple[str, str, float]]:
    return {(m, b, round(s, 9)) for m, b, s in df.iter_rows()}


# --- wide -------------------------------------------------------------------------------


def test_read_wide_leaderboard_skips_metadata(tmp_path: Path) -> None:
    t = sc.read_wide(_csv(tmp_path, V1_LIKE))
    assert t.columns == ["model", "benchmark", "score"]
    assert t.schema["score"] == pl.Float64
    assert _rows(t) == {
        ("org/a", "arc", 40.5),
        ("org/a", "hellaswag", 60.0),
        ("org/b", "hellaswag", 70.0),
        ("org/b", "mmlu", 45.0),
        ("org/c", "arc", 41.0),
        ("org/c", "hellaswag", 61.0),
        ("org/c", "mmlu", 47.0),
    }
    # file order: model rows, then benchmark columns
    assert t["model"].to_list()[:2] == ["org/a", "org/a"]
    models, benches, values = sc.to_wide(t)
    assert models == ["org/a", "org/b", "org/c"]
    assert benches == ["arc", "hellaswag", "mmlu"]
    assert values.shape == (3, 3) and np.isnan(values[0, 2]) and np.isnan(values[1, 0])


def test_read_wide_model_column_detection_and_options(tmp_path: Path) -> None:
    p = _csv(
        tmp_path,
        "Model,Model Family,Model Size (B),FLOPs (1E21),MMLU,ARC-C\nm1,F,7,84,0.4,0.5\nm2,F,13,,0.5,\n",
    )
    t = sc.read_wide(p)
    assert _rows(t) == {("m1", "MMLU", 0.4), ("m1", "ARC-C", 0.5), ("m2", "MMLU", 0.5)}
    t2 = sc.read_wide(p, benchmarks=["ARC-C"], rename={"ARC-C": "arc"})
    assert _rows(t2) == {("m1", "arc", 0.5)}
    t3 = sc.read_wide(p, model_column="Model Family", benchmarks=["MMLU"], duplicates="mean")
    assert _rows(t3) == {("F", "MMLU", 0.45)}


def test_read_wide_parquet(tmp_path: Path) -> None:
    p = tmp_path / "s.parquet"
    pl.DataFrame(
        {"model": ["a", "b"], "x": [1.0, None], "y": [2, 3], "rank": [1, 2], "flag": [True, False]}
    ).write_parquet(p)
    assert _rows(sc.read_wide(p)) == {("a", "x", 1.0), ("a", "y", 2.0), ("b", "y", 3.0)}


def test_read_wide_duplicates(tmp_path: Path) -> None:
    p = _csv(tmp_path, "model,x,y\na,1,2\nb,3,4\na,5,\nc,1,1\nc,1,1\n", "dup.csv")
    with pytest.raises(SigmapInputError) as exc:
        sc.read_wide(p)
    msg = str(exc.value)
    assert "dup.csv" in msg and "'a'" in msg and "line 2, line 4" in msg
    assert "duplicates='first'" in msg and "'c'" not in msg  # identical rows are no conflict
    assert _rows(sc.read_wide(p, duplicates="first")) == {
        ("a", "x", 1.0), ("a", "y", 2.0), ("b", "x", 3.0), ("b", "y", 4.0),
        ("c", "x", 1.0), ("c", "y", 1.0),
    }  # fmt: skip
    last = sc.read_wide(p, duplicates="last")
    assert ("a", "x", 5.0) in _rows(last) and not any(r[:2] == ("a", "y") for r in _rows(last))
    mean = sc.read_wide(p, duplicates="mean")
    assert ("a", "x", 3.0) in _rows(mean) and ("a", "y", 2.0) in _rows(mean)
    assert mean.filter(pl.col("model") == "c").height == 2
    with pytest.raises(SigmapInputError, match="duplicates must be"):
        sc.read_wide(p, duplicates="max")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "kwargs", "fragments"),
    [
        ("", {}, ["file is empty"]),
        ("model,x\n", {}, ["no data rows"]),
        ("who,x\na,1\n", {}, ["no model column", "who"]),
        ("model,x\na,1\n", {"model_column": "name"}, ["model column 'name' not found"]),
        ("model,x\na,1\n", {"benchmarks": ["y"]}, ["benchmark column(s) ['y'] not found"]),
        (
            "model,x\na,1\nb,oops\nc,2\n",
            {},
            ["column 'x'", "non-numeric", "line 3", "model 'b'", "'oops'"],
        ),
        ("model,x\na,1\nb,inf\nc,2\n", {}, ["column 'x'", "infinite", "model 'b'"]),
        ("model,x\na,1\n,2\n", {}, ["empty model id", "line 3"]),
        ("model,x,x\na,1,2\n", {}, ["duplicate column name(s) ['x']"]),
        ("model,x\na,\nb,NA\n", {"benchmarks": ["x"]}, ["no (non-missing) scores"]),
        ("model,x\na,\nb,NA\n", {}, ["no numeric score columns"]),
        ("model,note\na,hello\n", {}, ["no numeric score columns"]),
        ("model,x,y\na,1,2\n", {"rename": {"x": "y"}}, ["both become benchmark 'y'"]),
    ],
)
def test_read_wide_errors(tmp_path: Path, text: str, kwargs: dict, fragments: list[str]) -> None:
    p = _csv(tmp_path, text, "bad_scores.csv")
    input_error(lambda: sc.read_wide(p, **kwargs), "bad_scores.csv", *fragments)


def test_explicit_non_numeric_column_is_an_error(tmp_path: Path) -> None:
    p = _csv(tmp_path, "model,x,flag\na,1,True\n", "f.csv")
    with pytest.raises(SigmapInputError, match=r"f\.csv: column 'flag' has 1 non-numeric"):
        sc.read_wide(p, benchmarks=["x", "flag"])
    p2 = tmp_path / "f.parquet"
    pl.DataFrame({"model": ["a"], "x": [1.0], "flag": [True]}).write_parquet(p2)
    with pytest.raises(SigmapInputError, match=r"f\.parquet: column 'flag' holds true/false"):
        sc.read_wide(p2, benchmarks=["flag"])


def test_unsupported_and_missing_file(tmp_path: Path) -> None:
    p = _csv(tmp_path, "x", "s.xlsx")
    with pytest.raises(SigmapInputError, match=r"s\.xlsx: unsupported file type"):
        sc.read_wide(p)
    with pytest.raises(SigmapInputError, match=r"absent\.csv: file not found"):
        sc.read_wide(tmp_path / "absent.csv")


# --- long -------------------------------------------------------------------------------


def test_read_long(tmp_path: Path) -> None:
    p = _csv(tmp_path, "llm,task,value,extra\na,x,1\nb,x,2,z\na,y,NA\na,y2, 0.5 \n", "long.csv")
    t = sc.read_long(p, model_column="llm", benchmark_column="task", score_column="value")
    assert _rows(t) == {("a", "x", 1.0), ("b", "x", 2.0), ("a", "y2", 0.5)}
    t2 = sc.read_long(
        p, model_column="llm", benchmark_column="task", score_column="value",
        benchmarks=["x"], rename={"x": "X"},
    )  # fmt: skip
    assert _rows(t2) == {("a", "X", 1.0), ("b", "X", 2.0)}
    pq = tmp_path / "long.parquet"
    pl.DataFrame({"model": ["a", "a"], "benchmark": ["x", "y"], "score": [1, 2]}).write_parquet(pq)
    assert _rows(sc.read_long(pq)) == {("a", "x", 1.0), ("a", "y", 2.0)}


@pytest.mark.parametrize(
    ("text", "kwargs", "fragments"),
    [
        ("model,bench,score\na,x,1\n", {}, ["column(s) ['benchmark'] not found"]),
        (
            "model,benchmark,score\na,x,1\na,x,2\n",
            {},
            ["'a'", "'x'", "line 2, line 3", "different scores"],
        ),
        ("model,benchmark,score\na,x,1\nb,,2\n", {}, ["empty benchmark", "line 3"]),
        ("model,benchmark,score\na,x,1\nb,x,high\n", {}, ["column 'score'", "'high'", "model 'b'"]),
        ("model,benchmark,score\na,x,1\n", {"benchmarks": ["q"]}, ["benchmark(s) ['q'] not found"]),
    ],
)
def test_read_long_errors(tmp_path: Path, text: str, kwargs: dict, fragments: list[str]) -> None:
    p = _csv(tmp_path, text, "bad_long.csv")
    input_error(lambda: sc.read_long(p, **kwargs), "bad_long.csv", *fragments)


def test_read_long_identical_duplicates_collapse(tmp_path: Path) -> None:
    p = _csv(tmp_path, "model,benchmark,score\na,x,1\na,x,1.0\nb,x,2\n")
    assert sc.read_long(p).height == 2
    p2 = _csv(tmp_path, "model,benchmark,score\na,x,1\na,x,3\n", "d2.csv")
    assert _rows(sc.read_long(p2, duplicates="mean")) == {("a", "x", 2.0)}


# --- lm-eval ----------------------------------------------------------------------------


def _lm_eval_file(
    folder: Path, name: str, results: dict, *, model_name: str | None = None,
    model_args: str | dict | None = None, date: float | None = None, hib: dict | None = None,
) -> Path:  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    doc: dict = {"results": results, "config": {"model": "hf"}}
    if model_args is not None:
        doc["config"]["model_args"] = model_args
    if model_name is not None:
        doc["model_name"] = model_name
    if date is not None:
        doc["date"] = date
    if hib is not None:
        doc["higher_is_better"] = hib
    p = folder / name
    p.write_text(json.dumps(doc))
    return p


def _lm_eval_dir(root: Path) -> Path:
    a = root / "out" / "org__model-a"
    _lm_eval_file(
        a, "results_2024-05-01T10-00-00.000001.json",
        {
            "arc_challenge": {"alias": "arc_challenge", "acc,none": 0.40, "acc_stderr,none": 0.01,
                              "acc_norm,none": 0.45, "acc_norm_stderr,none": 0.01},
            "gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.10,
                      "exact_match,flexible-extract": 0.12, "exact_match_stderr,strict-match": "N/A"},
            "mmlu": {"alias": "mmlu", "acc,none": 0.5},
            "leaderboard": {"alias": "leaderboard"},  # group header: no metrics
        },
        model_args="pretrained=org/model-a,dtype=bfloat16",
    )  # fmt: skip
    # a later run of model a updates arc_challenge
    _lm_eval_file(
        a, "results_2024-06-01T10-00-00.000001.json",
        {"arc_challenge": {"acc,none": 0.41, "acc_norm,none": 0.47}},
        model_name="org/model-a",
    )  # fmt: skip
    b = root / "out" / "org__model-b"
    _lm_eval_file(
        b, "results.json",
        {"arc_challenge": {"acc,none": 0.30, "acc_norm,none": 0.33}, "mmlu": {"acc,none": 0.25}},
        model_args={"pretrained": "org/model-b"}, date=1.0,
    )  # fmt: skip
    return root / "out"


def test_read_lm_eval_results_default_metrics_and_latest(tmp_path: Path) -> None:
    t = sc.read_lm_eval_results(_lm_eval_dir(tmp_path))
    assert _rows(t) == {
        ("org/model-a", "arc_challenge", 0.47),  # acc_norm, latest file wins
        ("org/model-a", "gsm8k", 0.10),  # strict-match before flexible-extract
        ("org/model-a", "mmlu", 0.5),
        ("org/model-b", "arc_challenge", 0.33),
        ("org/model-b", "mmlu", 0.25),
    }


def test_read_lm_eval_results_metrics_tasks_rename(tmp_path: Path) -> None:
    root = _lm_eval_dir(tmp_path)
    t = sc.read_lm_eval_results(
        root, metrics={"arc_challenge": "acc", "gsm8k": "exact_match,flexible-extract"},
        tasks=["arc_challenge", "gsm8k"], rename={"arc_challenge": "arc"},
    )  # fmt: skip
    assert _rows(t) == {
        ("org/model-a", "arc", 0.41),
        ("org/model-a", "gsm8k", 0.12),
        ("org/model-b", "arc", 0.30),
    }
    t1 = sc.read_lm_eval_results(root / "org__model-b" / "results.json", model="renamed")
    assert set(t1["model"]) == {"renamed"}


def test_read_lm_eval_results_conflict_error(tmp_path: Path) -> None:
    root = _lm_eval_dir(tmp_path)
    with pytest.raises(SigmapInputError) as exc:
        sc.read_lm_eval_results(root, on_conflict="error")
    msg = str(exc.value)
    assert "org/model-a" in msg and "arc_challenge" in msg
    assert "results_2024-05-01T10-00-00.000001.json" in msg
    assert "results_2024-06-01T10-00-00.000001.json" in msg


@pytest.mark.parametrize(
    ("results", "extra", "kwargs", "fragments"),
    [
        ({"t": {"acc,none": 0.5}}, {"model_args": "dtype=float"}, {}, ["cannot tell the model"]),
        (
            {"t": {"word_perplexity,none": 20.0}},
            {},
            {},
            ["task 't' has none of the default metrics", "word_perplexity,none"],
        ),
        ({"t": {"acc,none": 0.5}}, {}, {"metrics": {"t": "f1"}}, ["task 't' has no metric 'f1'"]),
        ({"t": {"acc,none": 0.5}}, {}, {"tasks": ["u"]}, ["task(s) ['u'] not found"]),
        ({"t": {"acc,none": 0.5}}, {"hib": {"t": {"acc": False}}}, {}, ["lower-is-better"]),
        ({"t": {"acc,none": 0.5}}, {}, {"metrics": {"t": "alias"}}, ["not a finite number"]),
    ],
)
def test_read_lm_eval_results_errors(
    tmp_path: Path, results: dict, extra: dict, kwargs: dict, fragments: list[str]
) -> None:
    results = {k: {**v, "alias": k} for k, v in results.items()}
    args = extra.get("model_args", "pretrained=o/m")
    p = _lm_eval_file(
        tmp_path / "run", "results_bad.json", results, model_args=args, hib=extra.get("hib")
    )
    with pytest.raises(SigmapInputError) as exc:
        sc.read_lm_eval_results(tmp_path / "run", **kwargs)
    msg = str(exc.value)
    assert str(p) in msg or "run" in msg
    for f in fragments:
        assert f in msg


def test_read_lm_eval_results_bad_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results_x.json").write_text("{not json")
    with pytest.raises(SigmapInputError, match=r"results_x\.json: not valid JSON"):
        sc.read_lm_eval_results(tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text('{"foo": 1}')
    with pytest.raises(SigmapInputError, match=r"b/results\.json: no 'results' mapping"):
        sc.read_lm_eval_results(tmp_path / "b")
    (tmp_path / "c").mkdir()
    with pytest.raises(SigmapInputError, match="no results"):
        sc.read_lm_eval_results(tmp_path / "c")


# --- dispatch + sources + validation ----------------------------------------------------


def test_read_scores_dispatch(tmp_path: Path) -> None:
    _csv(tmp_path, V1_LIKE, "lb.csv")
    _csv(tmp_path, "model,benchmark,score\norg/a,x,0.5\n", "long.csv")
    lm = _lm_eval_dir(tmp_path)
    t = sc.read_scores(
        {"kind": "leaderboard", "path": "lb.csv", "benchmarks": ["arc"]}, base_dir=tmp_path
    )
    assert _rows(t) == {("org/a", "arc", 40.5), ("org/c", "arc", 41.0)}
    assert sc.read_scores({"kind": "wide", "path": str(tmp_path / "lb.csv")}).height == 7
    t2 = sc.read_scores({"kind": "long", "path": str(tmp_path / "long.csv"), "scale": 100})
    assert _rows(t2) == {("org/a", "x", 50.0)}
    t3 = sc.read_scores({"kind": "lm_eval", "path": str(lm), "tasks": ["mmlu"]})
    assert _rows(t3) == {("org/model-a", "mmlu", 0.5), ("org/model-b", "mmlu", 0.25)}
    with pytest.raises(SigmapInputError, match="kind must be one of"):
        sc.read_scores({"kind": "excel", "path": "x"})
    with pytest.raises(SigmapInputError, match="missing 'path'"):
        sc.read_scores({"kind": "wide"})
    with pytest.raises(
        SigmapInputError, match=r"lb\.csv \(kind 'wide'\): unknown option\(s\) \['colums'\]"
    ):
        sc.read_scores({"kind": "wide", "path": str(tmp_path / "lb.csv"), "colums": 1})
    with pytest.raises(SigmapInputError, match="scale must be a positive"):
        sc.read_scores({"kind": "wide", "path": str(tmp_path / "lb.csv"), "scale": -1})


def test_read_score_sources_concat_conflicts_and_min_models(tmp_path: Path) -> None:
    a = _csv(tmp_path, "model,x,y,z\nm1,1,2,9\nm2,3,4,\nm3,5,6,\n", "a.csv")
    b = _csv(tmp_path, "model,benchmark,score\nm1,x,1\nm4,x,7\nm4,w,1\n", "b.csv")
    table, rep = sc.read_score_sources(
        [{"kind": "wide", "path": str(a)}, {"kind": "long", "path": str(b)}], min_models=2
    )
    assert table.columns == ["model", "benchmark", "score"]
    assert _rows(table) == {
        ("m1", "x", 1.0), ("m2", "x", 3.0), ("m3", "x", 5.0), ("m4", "x", 7.0),
        ("m1", "y", 2.0), ("m2", "y", 4.0), ("m3", "y", 6.0),
    }  # fmt: skip
    assert set(rep.dropped_benchmarks) == {"z", "w"}
    assert any("appear in several sources" in w for w in rep.warnings)
    assert any("'z' (1)" in w for w in rep.warnings)
    assert rep.models_per_benchmark == {"x": 4, "y": 3}
    assert (rep.n_models, rep.n_benchmarks, rep.n_scores) == (4, 2, 7)
    assert rep.sources == [str(a), str(b)]
    assert json.dumps(rep.to_metadata())
    with pytest.raises(SigmapInputError, match=r"fewer than min_models=2.*'z' \(1\)"):
        sc.read_score_sources(
            [{"kind": "wide", "path": str(a)}, {"kind": "long", "path": str(b)}],
            min_models=2, strict=True,
        )  # fmt: skip
    c = _csv(tmp_path, "model,benchmark,score\nm2,x,3.5\n", "c.csv")
    with pytest.raises(SigmapInputError) as exc:
        sc.read_score_sources([{"kind": "wide", "path": str(a)}, {"kind": "long", "path": str(c)}])
    msg = str(exc.value)
    assert "'m2'" in msg and "'x'" in msg and "a.csv: 3" in msg and "c.csv: 3.5" in msg


def test_validate_scores_range_and_catalog() -> None:
    cat = catalog_from_dict(
        {
            "benchmarks": {
                "x": {"family": "f", "format": "m", "function": "r", "score_range": [0, 1]},
                "q": {"family": "f", "format": "m", "function": "r"},
            }
        }
    )
    t = pl.DataFrame(
        {
            "model": ["a", "b", "c", "a"],
            "benchmark": ["x", "x", "x", "y"],
            "score": [0.1, 0.9, 1.0, 5.0],
        }
    )
    out, rep = sc.validate_scores(t, catalog=cat, min_models=1)
    assert out.height == 4
    assert any("['y'] are not in the catalog" in w for w in rep.warnings)
    assert any("['q'] have no scores" in w for w in rep.warnings)
    bad = t.with_columns(
        pl.when(pl.col("model") == "b").then(1.5).otherwise(pl.col("score")).alias("score")
    )
    bad = bad.with_columns(pl.lit("leader.csv").alias("source"))
    with pytest.raises(SigmapInputError) as exc:
        sc.validate_scores(bad, catalog=cat, min_models=1)
    msg = str(exc.value)
    assert "benchmark 'x'" in msg and "model 'b' in leader.csv: 1.5" in msg and "[0, 1]" in msg


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        (pl.DataFrame({"model": ["a"], "benchmark": ["x"]}), "missing column(s) ['score']"),
        (
            pl.DataFrame({"model": ["a", "a"], "benchmark": ["x", "x"], "score": [1.0, 2.0]}),
            "duplicated (model, benchmark)",
        ),
        (pl.DataFrame({"model": ["a"], "benchmark": ["x"], "score": [float("nan")]}), "non-finite"),
        (pl.DataFrame({"model": [""], "benchmark": ["x"], "score": [1.0]}), "empty model"),
        (
            pl.DataFrame(schema={"model": pl.String, "benchmark": pl.String, "score": pl.Float64}),
            "no scores",
        ),
    ],
)
def test_validate_scores_errors(table: pl.DataFrame, fragment: str) -> None:
    with pytest.raises(SigmapInputError) as exc:
        sc.validate_scores(table, source="my.csv", min_models=1)
    assert "my.csv" in str(exc.value) and fragment in str(exc.value)


# --- wide <-> long ----------------------------------------------------------------------


def test_to_wide_from_wide_roundtrip() -> None:
    rng = np.random.default_rng(0)
    vals = rng.normal(size=(5, 3))
    vals[rng.random((5, 3)) < 0.3] = np.nan
    models, benches = [f"m{i}" for i in range(5)], ["a", "b", "c"]
    long = sc.from_wide(models, benches, vals)
    assert long.height == int((~np.isnan(vals)).sum())
    m2, b2, v2 = sc.to_wide(long, models=models, benchmarks=benches)
    assert m2 == models and b2 == benches
    np.testing.assert_array_equal(np.isnan(v2), np.isnan(vals))
    np.testing.assert_allclose(v2[~np.isnan(v2)], vals[~np.isnan(vals)])
    _, _, v3 = sc.to_wide(long, models=["zz", "m1"], benchmarks=["c"])
    assert np.isnan(v3[0, 0]) and (np.isnan(v3[1, 0]) == np.isnan(vals[1, 2]))
    with pytest.raises(SigmapInputError, match="shape"):
        sc.from_wide(models, benches, vals[:, :2])


# --- matching ---------------------------------------------------------------------------


def test_normalize_model_id() -> None:
    assert sc.normalize_model_id(" EleutherAI__Pythia-160m@main ") == "eleutherai/pythia-160m"
    assert sc.normalize_model_id("https://huggingface.co/Org/Name") == "org/name"
    assert sc.normalize_model_id("org/name@3f2a") == "org/name"


def test_match_models() -> None:
    registry = ["EleutherAI/pythia-160m", "org/Model", "org/model", "x/unused", "exact/id", "q/r"]
    scores = [
        "exact/id",  # exact
        "eleutherai__pythia-160m",  # normalized (slug + case)
        "ORG/MODEL",  # ambiguous: two registry ids normalize alike
        "Q/R", "q/r@main",  # both want q/r -> ambiguous
        "nobody/none",
    ]  # fmt: skip
    res = sc.match_models(scores, registry)
    assert res.mapping == {
        "exact/id": "exact/id",
        "eleutherai__pythia-160m": "EleutherAI/pythia-160m",
    }
    assert res.method == {"exact/id": "exact", "eleutherai__pythia-160m": "normalized"}
    assert res.ambiguous == {
        "ORG/MODEL": ["org/Model", "org/model"],
        "Q/R": ["q/r"],
        "q/r@main": ["q/r"],
    }
    assert res.unmatched_scores == ["ORG/MODEL", "Q/R", "q/r@main", "nobody/none"]
    assert res.unmatched_registry == ["org/Model", "org/model", "x/unused", "q/r"]
    # an exact match takes precedence over a normalized one for the same registry id
    res2 = sc.match_models(["q/r", "Q/R"], ["q/r"])
    assert res2.mapping == {"q/r": "q/r"} and res2.unmatched_scores == ["Q/R"]
    long = pl.DataFrame(
        {
            "model": ["exact/id", "eleutherai__pythia-160m", "nobody/none"],
            "benchmark": ["x"] * 3,
            "score": [1.0, 2.0, 3.0],
        }
    )
    out = sc.apply_model_match(long, res)
    assert out["model"].to_list() == ["exact/id", "EleutherAI/pythia-160m"]
    assert sc.apply_model_match(long, res, drop_unmatched=False).height == 3
    assert json.dumps(res.to_metadata())


def test_match_models_random_against_bruteforce() -> None:
    rng = np.random.default_rng(1)
    base = [f"org{i}/m{j}" for i in range(4) for j in range(4)]
    for _ in range(20):
        registry = list(rng.choice(base, size=8, replace=False))
        scores = []
        for s in rng.choice(base, size=10, replace=False):
            v = str(s)
            if rng.random() < 0.5:
                v = v.upper().replace("/", "__")
            scores.append(v)
        res = sc.match_models(scores, registry)
        for s, r in res.mapping.items():
            assert sc.normalize_model_id(s) == sc.normalize_model_id(r)
        assert len(set(res.mapping.values())) == len(res.mapping)  # one-to-one
        # ids unique after normalization here, so every matchable score id is matched
        expected = {
            s
            for s in scores
            if any(sc.normalize_model_id(s) == sc.normalize_model_id(r) for r in registry)
        }
        assert set(res.mapping) == expected

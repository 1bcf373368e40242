"""A matrix world: 89 real LLMs' per-document bits per byte (../shared/data/realmodels)
become a world with `sigmap init-world --from perplexity-correlations`, and `sigmap demo`
runs it end to end; adding a model imports only that model's values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import UnitValues, plan_corpus, read_perplexity_correlations
from sigmap_lib.nll import NLLStore
from sigmap_lib.worlds import write_matrix_world
from tests.assets.harness import run_cli

#: a catalog entry of an error-rate benchmark
ERROR_RATE = {
    "family": "f",
    "format": "mc",
    "function": "qa",
    "direction": "lower",
    "transform": "1 - x",
}


def test_matrix_world_units_are_one_per_record_and_bad_inputs_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    uv = UnitValues(
        values=rng.uniform(0.5, 1.5, (12, 5)),
        unit_ids=[f"  doc {j} , part  two " for j in range(12)],
        models=[f"org/m{k}" for k in range(5)],
    )
    entry = ERROR_RATE
    root = write_matrix_world(
        tmp_path / "w", uv, scores={"err": rng.uniform(0, 1, 5)}, catalog={"err": entry}
    )
    [spec] = plan_corpus(root / "corpus", target_units=1000)
    assert spec.n_units == spec.n_documents == 12  # one unit per record, spaces and all
    # each model's nll_source holds b · bytes · ln 2 nats per unit
    text = [
        json.loads(x)["text"]
        for x in (root / "corpus" / "units.units.jsonl").read_text().splitlines()
    ]
    nb = np.array([len(t.encode()) for t in text])
    for k, e in enumerate(yaml.safe_load((root / "models.yaml").read_text())["models"]):
        np.testing.assert_allclose(
            np.load(root / e["nll_source"]) / (nb * math.log(2)), uv.values[:, k], rtol=1e-14
        )
    assert yaml.safe_load((root / "settings.yaml").read_text()) == {
        "corpus": {"units_have_text": False}
    }
    with pytest.raises(SigmapInputError, match="exists"):
        write_matrix_world(root, uv, scores={"err": rng.uniform(0, 1, 5)}, catalog={"err": entry})
    with pytest.raises(SigmapInputError, match="4 values for 5 models"):
        write_matrix_world(tmp_path / "w2", uv, scores={"err": [0.1] * 4}, catalog={"err": entry})
    with pytest.raises(SigmapInputError, match="no catalog entry"):
        write_matrix_world(tmp_path / "w3", uv, scores={"acc": [0.1] * 5}, catalog={"err": entry})
    assert not (tmp_path / "w2").exists() and not (tmp_path / "w3").exists()


def _stored_cells(storage: Path) -> dict[str, int]:
    """Model key -> the newest modification time among its stored NLL cell's files (a run
    that only verifies a complete cell writes none of them)."""
    out = {}
    for cur in (storage / "nll" / "shards").glob("*/*/CURRENT"):
        cell = _current_cell(storage, cur.parent.name)
        out[cur.parent.name] = max(p.stat().st_mtime_ns for p in cell.rglob("*") if p.is_file())
    return out


def _current_cell(storage: Path, model_key: str) -> Path:
    [shard] = list((storage / "nll" / "shards").iterdir())
    fp = json.loads((shard / model_key / "CURRENT").read_text())["fingerprint"]
    return shard / model_key / fp


@pytest.mark.slow
@pytest.mark.realdata
def test_real_models_world_runs_end_to_end_and_a_new_model_imports_alone(
    tmp_path: Path, shared_data: Path
) -> None:
    world = tmp_path / "realmodels"
    out = run_cli(
        tmp_path,
        "init-world",
        str(world),
        "--from",
        "perplexity-correlations",
        str(shared_data / "realmodels"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    check = run_cli(tmp_path, "check", "--world", str(world))
    assert check.returncode == 0 and "0 error(s)" in check.stdout, check.stdout[-3000:]
    # hold one model back, run, then add it: only its cell is imported
    reg = yaml.safe_load((world / "models.yaml").read_text())
    last = reg["models"].pop()
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    out = run_cli(tmp_path, "demo", "--world", str(world), timeout=1800)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "semantic_overlap: needs question texts" in out.stderr
    storage = tmp_path / "storage"
    cells = _stored_cells(storage)
    assert len(cells) == 88
    reg["models"].append(last)
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    again = run_cli(tmp_path, "run", timeout=1800)
    assert again.returncode == 0, again.stderr[-4000:]
    after = _stored_cells(storage)
    assert len(after) == 89
    assert {k for k in after if cells.get(k) != after[k]} == {last["id"].replace("/", "__")}
    # the stored values are the file's bits per byte
    mm = read_perplexity_correlations(shared_data / "realmodels")
    k = mm.models.index("EleutherAI/pythia-160m")
    nll = NLLStore.open(_current_cell(storage, "EleutherAI__pythia-160m")).read()
    [shard] = list((storage / "corpus" / "shards").iterdir())
    nbytes = pl.read_parquet(shard / "units.parquet")["n_bytes"].to_numpy()
    np.testing.assert_allclose(nll / (nbytes * math.log(2)), mm.values[:, k], rtol=1e-6)
    # the scores are higher-is-better after the catalog's transforms
    scores = pl.read_parquet(storage / "tables" / "benchmark_scores.parquet")
    row = scores.filter(pl.col("model") == "EleutherAI/pythia-160m")
    got = dict(zip(row["benchmark"], row["score"]))
    j = mm.benchmarks.index
    assert got["arc_easy"] == pytest.approx(1 - mm.errors[k, j("arc_easy")], rel=1e-12)
    assert got["lambada_openai"] == pytest.approx(
        -np.log(mm.errors[k, j("lambada_openai")]), rel=1e-12
    )
    catalog = pl.read_parquet(storage / "tables" / "benchmark_catalog.parquet")
    assert set(catalog["transform"]) == {"1 - x", "-log(x)"}
    html = (storage / "reports" / "overlap_report.html").read_text()
    assert "Score directions" in html and "-log(x)" in html
    for b in mm.benchmarks:
        summary = json.loads((storage / "signatures" / b / "summary.json").read_text())
        assert summary["n_models"] == 89 and summary["method"] == "calibrated"


def test_check_names_each_problem_of_a_matrix_world_before_any_compute(tmp_path: Path) -> None:
    from sigmap_lib.worlds import preflight_world

    rng = np.random.default_rng(2)
    uv = UnitValues(values=rng.uniform(0.5, 1.5, (20, 6)), unit_ids=[f"d{j}" for j in range(20)],
                    models=[f"org/m{k}" for k in range(6)])  # fmt: skip
    entry = ERROR_RATE
    root = write_matrix_world(
        tmp_path / "w", uv, scores={"err": rng.uniform(0, 1, 6)}, catalog={"err": entry}
    )
    assert [p for p in preflight_world(root) if p.severity == "error"] == []
    bad = np.load(root / "nll" / "org__m1.npy")
    bad[7] = np.nan
    np.save(root / "nll" / "org__m1.npy", bad)
    np.save(root / "nll" / "org__m2.npy", np.ones(19))
    np.save(root / "nll" / "org__m3.npy", np.ones((20, 2)))
    reg = yaml.safe_load((root / "models.yaml").read_text())
    del reg["models"][4]["nll_source"]
    (root / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    (root / "scores.csv").write_text((root / "scores.csv").read_text() + "org/stranger,0.5\n")
    errors = [f"{p.entry}: {p.message}" for p in preflight_world(root) if p.severity == "error"]
    text = "\n".join(errors)
    assert "org/m1" in text and "value nan at unit 7 is not finite" in text
    assert "has 19 values for 20 corpus units" in text
    assert "has shape (20, 2), not one value per unit" in text
    assert "(id 'org/m4')" in text and "units have no text" in text
    everything = "\n".join(f"{p.entry}: {p.message}" for p in preflight_world(root))
    assert "org/stranger" in everything  # a score row that matches no registered model

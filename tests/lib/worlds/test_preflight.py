"""`preflight_world`: every mistake of a world folder is caught before any compute, with
a message naming the file, the entry and a fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from sigmap_lib.worlds import WorldProblem, make_synthetic_world, preflight_world


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, tiny_models: list[Path]) -> Path:
    """A small synthetic world (8 models with precomputed NLL, 2 benchmarks with items and
    responses, 28 respondents) plus two real tiny models (GPT-2, Llama) with scores."""
    root = tmp_path_factory.mktemp("preflight") / "world"
    make_synthetic_world(
        root, n_models=8, n_units=300, n_functions=2, n_benchmarks=2,
        planted_per_function=3, n_items=10, n_respondents=20, seed=2,
    )  # fmt: skip
    reg = yaml.safe_load((root / "models.yaml").read_text())
    for name, src in zip(["tiny-gpt2", "tiny-llama"], tiny_models, strict=True):
        shutil.copytree(src, root / "models" / name)
        reg["models"].append({"id": f"local/{name}", "path": f"models/{name}"})
    (root / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    scores = root / "scores.csv"
    scores.write_text(
        scores.read_text() + "local/tiny-gpt2,30.0,35.0\nlocal/tiny-llama,45.0,40.0\n"
    )
    return root


@pytest.fixture
def world(tmp_path: Path, template: Path) -> Path:
    dst = tmp_path / "world"
    shutil.copytree(template, dst)
    return dst


def _edit_registry(world: Path, model_id: str, **changes) -> None:
    reg = yaml.safe_load((world / "models.yaml").read_text())
    for e in reg["models"]:
        if e["id"] == model_id:
            e.update(changes)
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))


def _only(problems: list[WorldProblem], severity: str) -> list[str]:
    return [p.line() for p in problems if p.severity == severity]


def test_clean_world_has_no_problems(world: Path) -> None:
    assert preflight_world(world) == []


def test_mistyped_model_path_is_an_error_with_a_suggestion(world: Path) -> None:
    _edit_registry(world, "local/tiny-gpt2", path="models/tiny-gtp2")
    problems = preflight_world(world)
    assert len(_only(problems, "error")) == 1
    p = problems[0]
    assert (p.severity, p.file) == ("error", "models.yaml")
    assert p.entry == "models[8] (id 'local/tiny-gpt2')"
    assert "model path 'models/tiny-gtp2'" in p.message and "does not exist" in p.message
    assert "did you mean 'models/tiny-gpt2'?" in p.fix
    assert p.line().startswith("error: models.yaml: models[8] (id 'local/tiny-gpt2'): model path")


def test_missing_weights_and_pickle_only_weights(world: Path) -> None:
    gpt2, llama = world / "models" / "tiny-gpt2", world / "models" / "tiny-llama"
    for f in gpt2.glob("*.safetensors"):
        f.unlink()
    for f in llama.glob("*.safetensors"):
        f.rename(llama / "pytorch_model.bin")  # pickle-only: load_model refuses it
    errors = _only(preflight_world(world), "error")
    assert len(errors) == 2
    assert "local/tiny-gpt2" in errors[0] and "has no weights (no *.safetensors)" in errors[0]
    assert (
        "local/tiny-llama" in errors[1] and "only pickle weights (pytorch_model.bin)" in errors[1]
    )
    assert "safe_serialization=True" in errors[1]


def test_missing_tokenizer(world: Path) -> None:
    folder = world / "models" / "tiny-llama"
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    errors = _only(preflight_world(world), "error")
    assert len(errors) == 1
    assert "local/tiny-llama" in errors[0] and "has no tokenizer files" in errors[0]
    assert "tokenizer.save_pretrained" in errors[0]


def test_mistyped_id_in_scores_is_reported_with_a_suggestion(world: Path) -> None:
    scores = world / "scores.csv"
    scores.write_text(scores.read_text().replace("local/tiny-llama,", "local/tiny-lama,"))
    problems = preflight_world(world)
    assert [p.severity for p in problems] == ["warning"]
    p = problems[0]
    assert (p.file, p.entry) == ("models.yaml", "model 'local/tiny-llama'")
    assert "has no scores; did you mean 'local/tiny-lama' (in scores.csv)?" in p.message
    assert "rename 'local/tiny-lama' to 'local/tiny-llama' in scores.csv" in p.fix


def test_benchmark_missing_from_catalog_is_an_error(world: Path) -> None:
    scores = world / "scores.csv"
    header, rest = scores.read_text().split("\n", 1)
    bench = header.split(",")[1]
    scores.write_text(header.replace(bench, bench + "x") + "\n" + rest)
    problems = preflight_world(world)
    errors = [p for p in problems if p.severity == "error"]
    assert len(errors) == 1
    assert (errors[0].file, errors[0].entry) == ("scores.csv", f"benchmark '{bench}x'")
    assert f"scored but not in catalog.yaml; did you mean '{bench}'?" in errors[0].message
    # and the catalog's benchmark now has no scores
    assert any(p.entry == f"benchmark '{bench}'" and "has no scores" in p.message for p in problems)


def test_registry_model_without_scores_is_a_warning(world: Path) -> None:
    reg = yaml.safe_load((world / "models.yaml").read_text())
    extra = dict(reg["models"][0], id="synthetic/omega-99")
    reg["models"].append(extra)
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    problems = preflight_world(world)
    assert [p.line() for p in problems] == [
        "warning: models.yaml: model 'synthetic/omega-99': has no scores: its NLL is computed "
        "but it takes no part in signatures (fix: add its scores to scores.csv (under this id) "
        "or remove it from the registry)"
    ]


def test_several_mistakes_are_all_reported(world: Path) -> None:
    _edit_registry(world, "local/tiny-gpt2", path="models/nothing-like-it")
    _edit_registry(world, "local/tiny-llama", gguf="missing.gguf")
    _edit_registry(world, "synthetic/alpha-00", nll_source="nll/none.npy")
    errors = _only(preflight_world(world), "error")
    assert len(errors) == 3, errors
    assert "model path 'models/nothing-like-it'" in errors[1]
    assert "did you mean" not in errors[1]
    assert "gguf file 'missing.gguf'" in errors[2] and "does not exist" in errors[2]
    assert "nll_source 'nll/none.npy' does not exist" in errors[0]


def test_items_and_responses_files_vs_catalog(world: Path) -> None:
    cat = yaml.safe_load((world / "catalog.yaml").read_text())
    b0, b1 = list(cat["benchmarks"])
    cat["benchmarks"][b0]["items"] = f"items/{b0}.parquett"  # mistyped
    del cat["benchmarks"][b1]["responses"]  # file left behind, not referenced
    (world / "catalog.yaml").write_text(yaml.safe_dump(cat, sort_keys=False))
    problems = preflight_world(world)
    errors = [p for p in problems if p.severity == "error"]
    assert len(errors) == 1
    assert (errors[0].file, errors[0].entry) == ("catalog.yaml", f"benchmark '{b0}'")
    assert f"items file items/{b0}.parquett does not exist; did you mean '{b0}.parquet'?" in (
        errors[0].message
    )
    lines = _only(problems, "warning")
    assert any(f"responses/{b1}.parquet: benchmark '{b1}': not referenced by catalog.yaml" in x
               and f"add 'responses: responses/{b1}.parquet'" in x for x in lines)  # fmt: skip
    # the stages that need >= 2 benchmarks of each kind are reported as skipped
    assert any("semantic overlap needs >= 2" in x for x in lines)


def test_too_few_respondents_for_metabench(tmp_path: Path) -> None:
    root = tmp_path / "small"
    make_synthetic_world(
        root, n_models=6, n_units=200, n_functions=1, n_benchmarks=2,
        planted_per_function=2, n_items=8, n_respondents=0, seed=3,
    )  # fmt: skip
    lines = _only(preflight_world(root), "warning")
    assert len(lines) == 1
    assert "only 6 respondent(s) answered every benchmark" in lines[0]
    assert "metabench needs >= 20 (minimum metabench_respondents; it is skipped)" in lines[0]


def test_settings_and_missing_layout(world: Path) -> None:
    (world / "settings.yaml").write_text("metabench:\n  lamda: 0.05\n")
    (world / "catalog.yaml").unlink()
    errors = _only(preflight_world(world), "error")
    assert errors[0].startswith("error: catalog.yaml: -: missing from the world folder")
    assert any("settings.yaml: group 'metabench'" in x and "unknown option(s) ['lamda']" in x
               for x in errors)  # fmt: skip


def test_the_semantic_settings_group_is_checked(world: Path) -> None:
    (world / "settings.yaml").write_text("semantic:\n  max_questions: 40\n")
    assert not [x for x in _only(preflight_world(world), "error") if "settings.yaml" in x]
    for bad, why in (("-3", "must be an int >= 0, got -3"), ("many", "got 'many'")):
        (world / "settings.yaml").write_text(f"semantic:\n  max_questions: {bad}\n")
        assert any(
            "group 'semantic'" in x and why in x for x in _only(preflight_world(world), "error")
        )
    (world / "settings.yaml").write_text("semantic:\n  max_question: 40\n")
    assert any(
        "unknown option(s) ['max_question']" in x for x in _only(preflight_world(world), "error")
    )


def test_nll_source_may_be_a_zarr_array(world: Path) -> None:
    import numpy as np
    import zarr

    values = np.load(world / "nll" / "model_000.npy")
    arr = zarr.create_array(str(world / "nll" / "alpha.zarr"), shape=values.shape, dtype="f4")
    arr[:] = values
    _edit_registry(world, "synthetic/alpha-00", nll_source="nll/alpha.zarr")
    assert _only(preflight_world(world), "error") == []
    _edit_registry(world, "synthetic/alpha-00", nll_source="nll/beta.zarr")  # not there
    [err] = _only(preflight_world(world), "error")
    assert "nll_source 'nll/beta.zarr' does not exist (a .npy file or a zarr array)" in err


def test_minimums_of_the_world_decide_the_stage_warnings(world: Path) -> None:
    # 28 respondents: enough by default; a world asking for 40 is told metabench is skipped
    assert not any("metabench needs" in x for x in _only(preflight_world(world), "warning"))
    lines = _only(preflight_world(world, overrides={"metabench_respondents": 40}), "warning")
    assert any("metabench needs >= 40 (minimum metabench_respondents" in x for x in lines)
    lines = _only(preflight_world(world, overrides={"semantic_benchmarks": 3}), "warning")
    assert any("semantic overlap needs >= 3 (minimum semantic_benchmarks" in x for x in lines)


def test_the_signatures_settings_group_is_checked(world: Path) -> None:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.worlds import read_signature_settings

    (world / "settings.yaml").write_text("signatures:\n  strata: family\n")
    assert not [x for x in _only(preflight_world(world), "error") if "settings.yaml" in x]
    (world / "settings.yaml").write_text("signatures:\n  strata: size\n")
    assert any(
        "group 'signatures'" in x and "must be 'family' or 'none', got 'size'" in x
        for x in _only(preflight_world(world), "error")
    )
    (world / "settings.yaml").write_text("signatures:\n  stratum: family\n")
    assert any("unknown option(s) ['stratum']" in x for x in _only(preflight_world(world), "error"))
    assert read_signature_settings({}) == "none"
    with pytest.raises(SigmapInputError, match="strata"):
        read_signature_settings({"strata": True})

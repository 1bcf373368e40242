"""A small world (4 models) runs end to end through `sigmap demo --world` when its minimums
are set in settings.yaml (issue #17): stages that cannot run are skipped with their reason,
the run exits 0 and prints its summary; a wrong minimum is one clear error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.assets.harness import run_cli


def _sigmap(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(tmp_path, *args)


@pytest.fixture
def small_world(tmp_path: Path) -> Path:
    from sigmap_lib.worlds import make_synthetic_world

    root = tmp_path / "world"
    make_synthetic_world(
        root, n_models=4, n_units=2000, n_functions=2, n_benchmarks=4,
        planted_per_function=3, n_items=20, seed=2,
    )  # fmt: skip
    return root


@pytest.mark.slow
def test_four_model_world_runs_with_its_minimums_and_exits_0(
    tmp_path: Path, small_world: Path
) -> None:
    # without the setting: one error naming the file, the minimum and the fix; nothing runs
    out = _sigmap(tmp_path, "demo", "--world", str(small_world))
    assert out.returncode == 1
    assert "min_models=5" in out.stderr and "scores.csv" in out.stderr
    (small_world / "settings.yaml").write_text(yaml.safe_dump({"minimums": {"score_models": 3}}))
    out = _sigmap(tmp_path, "demo", "--world", str(small_world))
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Done in" in out.stderr and "HTML report" in out.stderr
    assert (tmp_path / "storage" / "reports" / "overlap_report.html").exists()
    # `sigmap run` on the configured world: nothing new, still exit 0 with the summary
    again = _sigmap(tmp_path, "run")
    assert again.returncode == 0 and "Done in" in again.stderr
    status = _sigmap(tmp_path, "status")
    assert status.returncode == 0, status.stderr[-2000:]
    line = next(x for x in status.stdout.splitlines() if x.startswith("token_nll"))
    assert "4/4 models × shards partitions" in line


def test_a_wrong_minimum_on_the_command_line_is_one_clear_error(
    tmp_path: Path, small_world: Path
) -> None:
    out = _sigmap(tmp_path, "demo", "--world", str(small_world), "--minimum", "score_model=3")
    assert out.returncode == 2
    assert "unknown key 'score_model'" in out.stderr and "score_models" in out.stderr


@pytest.mark.slow
def test_init_world_writes_an_example_that_sigmap_demo_runs(tmp_path: Path) -> None:
    out = _sigmap(tmp_path, "init-world", str(tmp_path / "mine"))
    assert out.returncode == 0, out.stderr
    root = tmp_path / "mine"
    assert (root / "models" / "tiny-gpt2" / "model.safetensors").exists()
    assert _sigmap(tmp_path, "init-world", str(root)).returncode == 1  # never overwritten
    check = _sigmap(tmp_path, "check", "--world", str(root))
    assert check.returncode == 0 and "0 error(s)" in check.stdout
    run = _sigmap(tmp_path, "demo", "--world", str(root))
    assert run.returncode == 0, run.stderr[-4000:]
    cov = yaml.safe_load((tmp_path / "storage" / "ranks" / "CURRENT").read_text())
    assert "local__tiny-gpt2" in cov["models"]  # scored here, from its safetensors


@pytest.mark.slow
def test_stored_minimums_merge_apply_to_check_and_are_dropped_for_another_world(
    tmp_path: Path, small_world: Path
) -> None:
    from sigmap_assets.resources import read_project_config

    storage = str(tmp_path / "storage")
    # a world that fails its check for another reason: the run stops before any compute
    broken = tmp_path / "broken"
    shutil.copytree(small_world, broken)
    shutil.rmtree(broken / "corpus")
    assert _sigmap(tmp_path, "demo", "--world", str(small_world), "--minimum",
                   "score_models=3").returncode == 0  # fmt: skip
    out = _sigmap(tmp_path, "check")  # the configured world, with its stored minimum
    assert out.returncode == 0 and "min_models=5" not in out.stdout, out.stdout
    out = _sigmap(tmp_path, "demo", "--world", str(small_world), "--minimum", "coverage_models=2")
    assert read_project_config(storage)["minimums"] == {"score_models": 3, "coverage_models": 2}
    out = _sigmap(tmp_path, "demo", "--world", str(broken))
    assert out.returncode == 1
    assert "--minimum values stored for the previous world are dropped" in out.stderr
    assert read_project_config(storage)["minimums"] == {}

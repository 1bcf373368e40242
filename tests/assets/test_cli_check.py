"""`sigmap check`: exit codes and output; `sigmap demo --world PATH` refuses a broken world
before the run starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sigmap_assets.cli import main
from sigmap_assets.resources import write_project_config


def _break_scores(world: Path) -> str:
    """Rename one benchmark column of scores.csv (not in the catalog any more)."""
    scores = world / "scores.csv"
    header, rest = scores.read_text().split("\n", 1)
    bench = header.split(",")[1]
    scores.write_text(header.replace(bench, bench + "_v2") + "\n" + rest)
    return bench


def test_check_clean_world_exits_0(synthetic_world: Path, tmp_path: Path, capsys) -> None:
    rc = main(["--storage", str(tmp_path / "s"), "check", "--world", str(synthetic_world)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.strip().splitlines()[-1] == f"sigmap check: world {synthetic_world}: ok"
    assert not (tmp_path / "s").exists()  # checking writes nothing


def test_check_errors_exit_1_and_name_file_entry_fix(
    synthetic_world: Path, tmp_path: Path, capsys
) -> None:
    bench = _break_scores(synthetic_world)
    rc = main(["--storage", str(tmp_path / "s"), "check", "--world", str(synthetic_world)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 1
    assert lines[0] == (
        f"error: scores.csv: benchmark '{bench}_v2': scored but not in catalog.yaml; did you "
        f"mean '{bench}'? (fix: rename the score column to the catalog's name, or add the "
        "benchmark to catalog.yaml)"
    )
    assert any(x.startswith(f"warning: catalog.yaml: benchmark '{bench}': has no scores")
               for x in lines)  # fmt: skip
    assert lines[-1].startswith(f"sigmap check: world {synthetic_world}: 1 error(s), ")


def test_check_warnings_only_exit_0(synthetic_world: Path, tmp_path: Path, capsys) -> None:
    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    reg["models"].append(dict(reg["models"][0], id="synthetic/unscored"))
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    rc = main(["--storage", str(tmp_path / "s"), "check", "--world", str(synthetic_world)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert lines[0].startswith("warning: models.yaml: model 'synthetic/unscored': has no scores")
    assert lines[-1].endswith(": 0 error(s), 1 warning(s)")


def test_check_defaults_to_the_configured_world(
    synthetic_world: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = tmp_path / "s"
    write_project_config(str(storage), world="folder", world_path=str(synthetic_world))
    _break_scores(synthetic_world)
    monkeypatch.setenv("SIGMAP_STORAGE", str(storage))
    assert main(["check"]) == 1
    assert f"world {synthetic_world}: 1 error(s)" in capsys.readouterr().out


def test_check_embedded_world_not_built_yet(tmp_path: Path, capsys) -> None:
    assert main(["--storage", str(tmp_path / "s"), "check"]) == 0  # default: the zoo
    assert "the zoo world is built by `sigmap demo`" in capsys.readouterr().out


def test_check_missing_folder_exits_1(tmp_path: Path, capsys) -> None:
    rc = main(["--storage", str(tmp_path / "s"), "check", "--world", str(tmp_path / "nope")])
    assert rc == 1
    assert "the world folder does not exist" in capsys.readouterr().out


def test_demo_refuses_a_broken_world_before_running(
    synthetic_world: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sigmap_assets.cli as cli

    # cmd_demo sets these for the process: let monkeypatch restore them afterwards
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "s" / ".dagster"))
    monkeypatch.setenv("SIGMAP_STORAGE", str(tmp_path / "s"))
    _break_scores(synthetic_world)

    def no_defs():
        raise AssertionError("the run started")

    monkeypatch.setattr(cli, "_load_defs", no_defs)
    rc = main(["--storage", str(tmp_path / "s"), "demo", "--world", str(synthetic_world)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "error: scores.csv: benchmark" in err and "fix the errors first" in err

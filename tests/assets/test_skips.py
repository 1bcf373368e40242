"""Stages a world cannot support are skipped with their reason, never failed (issue #17):
worlds without items, responses or scores for a benchmark run to the end with exit 0, and
the skips are in the run summary, the asset metadata and the reports; stored copies
follow the catalog; a real failure stops only what is downstream of it, the summary is
still printed and the stack trace goes to a log file."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from sigmap_assets.demo import GraphRunner
from sigmap_assets.skips import skips_of
from tests.assets.harness import make_project, run_cli


def _world(root: Path) -> Path:
    from sigmap_lib.worlds import make_synthetic_world

    make_synthetic_world(
        root, n_models=6, n_units=2000, n_functions=2, n_benchmarks=4,
        planted_per_function=3, n_items=20, seed=2,
    )  # fmt: skip
    settings = yaml.safe_load((root / "settings.yaml").read_text()) or {}
    settings["minimums"] = {"score_models": 3}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings))
    return root


def _edit_catalog(root: Path, edit) -> None:
    path = root / "catalog.yaml"
    cat = yaml.safe_load(path.read_text())
    edit(cat["benchmarks"])
    path.write_text(yaml.safe_dump(cat, sort_keys=False))


def _skip_block(stderr: str) -> str:
    """The summary's "Skipped on this world" lines."""
    assert "Skipped on this world" in stderr, stderr[-3000:]
    block = stderr.split("Skipped on this world", 1)[1].split("HTML report", 1)[0]
    return block


@pytest.mark.slow
def test_worlds_without_items_responses_or_scores_run_to_the_end_and_say_why(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path / "world")
    storage = tmp_path / "storage"

    def no_scores(b):
        b["extra_bench"] = {"family": "ai2", "format": "cloze", "function": "math",
                            "score_range": [0, 100]}  # fmt: skip

    _edit_catalog(world, no_scores)
    first = run_cli(tmp_path, "demo", "--world", str(world))
    assert first.returncode == 0, first.stderr[-4000:]
    block = _skip_block(first.stderr)
    assert (
        "benchmark extra_bench (benchmark_scores): in the catalog but no model has a score" in block
    )
    report = (storage / "reports" / "overlap_report.html").read_text()
    assert "extra_bench" in report and "no model has a score" in report
    assert (storage / "items" / "math_ai2_00" / "responses.parquet").exists()
    assert (storage / "overlap" / "semantic.parquet").exists()

    # items and responses removed from the catalog: stored copies follow, stages skip
    def strip(b):
        for entry in b.values():
            entry.pop("items", None)
            entry.pop("responses", None)

    _edit_catalog(world, strip)
    second = run_cli(tmp_path, "run")
    assert second.returncode == 0, second.stderr[-4000:]
    assert "Traceback" not in second.stderr and "WARNING" not in second.stderr
    block = _skip_block(second.stderr)
    assert "semantic_overlap: needs question texts (catalog `items:`) for >= 2 benchmarks" in block
    line = next(x for x in block.splitlines() if "metabench cannot run" in x)
    for asset in ("irt_item_pool", "irt_fits", "metabench_selection", "metabench"):
        assert asset in line  # one reason, said once for the four stages it stops
    assert "no benchmark has item-level responses" in line
    assert "extra_bench" in block  # still unscored
    for key in ("math_ai2_00", "coding_eleuther_03"):
        assert not (storage / "items" / key / "responses.parquet").exists()
        assert not (storage / "items" / key / "questions.parquet").exists()
    assert not (storage / "overlap" / "semantic.parquet").exists()  # no stale level
    assert not (storage / "metabench" / "fit").exists()  # no stale fit to score models with
    assert (storage / "overlap" / "performance.parquet").exists()  # the rest ran
    summary = json.loads((storage / "reports" / "overlap_summary.json").read_text())
    levels = {r["what"]: r["reason"] for r in summary["skipped"] if r["stage"] == "overlap level"}
    assert "needs question texts" in levels["semantic"]
    assert "not testable" not in levels["semantic"]
    mb_report = (storage / "reports" / "metabench_report.html").read_text()
    assert "metabench was skipped on this world" in mb_report
    assert "no benchmark has item-level responses" in mb_report
    # the asset metadata (what the UI shows) carries the same reason
    home = tmp_path / "home"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        ev = instance.get_latest_materialization_event(dg.AssetKey("semantic_overlap"))
        assert "needs question texts" in skips_of(ev.asset_materialization.metadata)["*"]
    # nothing new: up to date, the skips still listed, exit 0
    third = run_cli(tmp_path, "run")
    assert third.returncode == 0 and "ran: model_zoo;" in third.stderr
    assert "semantic_overlap: needs question texts" in _skip_block(third.stderr)
    status = run_cli(tmp_path, "status")
    line = next(x for x in status.stdout.splitlines() if x.startswith("semantic_overlap"))
    assert "skipped on this world: needs question texts" in line
    # responses back: the stages run again and their skip marks go
    _edit_catalog(
        world, lambda b: b["math_ai2_00"].update(responses="responses/math_ai2_00.parquet")
    )
    fourth = run_cli(tmp_path, "run")
    assert fourth.returncode == 0, fourth.stderr[-4000:]
    assert "metabench cannot run" not in fourth.stderr
    assert not (storage / ".sigmap" / "skipped" / "irt_item_pool.json").exists()
    assert (storage / "items" / "math_ai2_00" / "responses.parquet").exists()


def test_status_marks_registry_entries_removed_from_the_world(tmp_path: Path) -> None:
    world = _world(tmp_path / "world")
    registry = yaml.safe_load((world / "models.yaml").read_text())
    first_id = registry["models"][0]["id"]
    with _instance(tmp_path) as instance:
        instance.add_dynamic_partitions("models", ["synthetic__alpha-00", "synthetic__beta-01"])
    assert first_id == "synthetic/alpha-00"
    registry["models"] = registry["models"][1:]
    (world / "models.yaml").write_text(yaml.safe_dump(registry))
    from sigmap_assets.resources import write_project_config

    write_project_config(str(tmp_path / "storage"), world="folder", world_path=str(world))
    out = run_cli(tmp_path, "status")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    models = next(x for x in lines if x.startswith("models:"))
    assert "5 in " in models and "2 partitions" in models and "4 without a partition" in models
    assert any(
        "synthetic__alpha-00: removed from models.yaml" in x and "data kept" in x for x in lines
    ), out.stdout
    assert not any("synthetic__beta-01: removed" in x for x in lines)


def _instance(tmp_path: Path) -> dg.DagsterInstance:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return dg.DagsterInstance.from_config(str(home))


@pytest.mark.slow
def test_a_failing_stage_stops_only_its_downstream_and_its_trace_goes_to_a_log(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path / "world")
    with dg.instance_for_test() as instance:
        project = make_project(tmp_path, world, instance)
        # a directory where performance_overlap writes its table: a real (storage) error
        (tmp_path / "storage" / "overlap" / "performance.parquet").mkdir(parents=True)
        lines: list[str] = []
        runner = GraphRunner(project.defs, instance, log=lines.append, resources=project.resources)
        summary = runner.run()
    failed = [f for f in summary["failed"]]
    assert [f["stage"] for f in failed] == ["performance_overlap"], failed
    assert "performance_overlap" in failed[0]["error"]
    assert "IsADirectoryError" in failed[0]["error"]
    assert summary["blocked"] == ["overlap_report"]  # downstream of the overlaps only
    assert "metabench" in summary["ran"]  # not downstream: ran
    log = Path(failed[0]["error"].split("full error report: ", 1)[1].rstrip(")"))
    assert log.parent == tmp_path / "storage" / ".sigmap" / "logs"
    text = log.read_text()
    assert "Traceback" in text or 'File "' in text
    assert "IsADirectoryError" in text


def test_sigmap_run_on_a_fresh_storage_root_says_what_to_do_instead_of_building_the_zoo(
    tmp_path: Path,
) -> None:
    out = run_cli(tmp_path, "run")
    assert out.returncode == 2
    assert "no world is configured" in out.stderr and "sigmap demo --world PATH" in out.stderr
    assert not (tmp_path / "storage" / "worlds").exists()  # nothing was built


def test_matrix_check_of_a_skipped_level_passes_with_the_reason(tmp_path) -> None:
    """A level skipped on a world (no signature anywhere, no items) has no matrix: its
    blocking check passes and says why, so the report downstream still runs; a level that
    simply has not run fails its check."""
    import dagster as dg

    from sigmap_assets.defs.overlap.checks import signature_matrix_valid
    from sigmap_assets.resources import SigmapStorage
    from sigmap_assets.skips import skip_level

    storage = SigmapStorage(root=str(tmp_path / "storage"))
    missing = signature_matrix_valid(storage=storage)
    assert isinstance(missing, dg.AssetCheckResult) and not missing.passed
    assert "run signature_overlap" in missing.metadata["skipped"].value
    skip_level(storage, "signature", "no benchmark has a signature at m = 12")
    res = signature_matrix_valid(storage=storage)
    assert res.passed and res.metadata["skipped"].value == "no benchmark has a signature at m = 12"

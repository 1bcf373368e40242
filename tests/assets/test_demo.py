"""`sigmap demo` / `sigmap run` (:class:`sigmap_assets.demo.GraphRunner`): the daemon's own
sensors and automation conditions, ticked in-process. From a fresh world every automated
asset is reached and every check reports; a change reruns what it affects and nothing else
(the same requests the daemon's tick computes); a second run does nothing; two lanes store
what one lane stores."""

from __future__ import annotations

import hashlib
import io
import itertools
from pathlib import Path

import dagster as dg
import pytest
import yaml

from sigmap_assets.demo import AUTOMATION_CURSOR, GraphRunner
from sigmap_assets.resources import write_project_config
from tests.assets.harness import Project, demo_runner, make_project, project_defs, split_corpus

THROUGH_COVERAGE = ["rank_coverage"]

#: Assets no change of the table below may rerun unless it names them.
CELLS = {"corpus_shard", "token_nll", "nll_ranks"}
METABENCH = {"irt_item_pool", "irt_fits", "metabench_selection", "metabench"}


def _stored(project: Project, folder: str) -> dict[str, str]:
    """Relative path -> sha256 of every file under a storage folder."""
    root = Path(project.storage.layout.path(folder))
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _runs(project: Project, asset: str) -> list[tuple[float, float, str]]:
    """(start, end, partition) of every run that materialized ``asset``, by start."""
    recs = project.instance.fetch_materializations(dg.AssetKey(asset), limit=10_000).records
    out = []
    for rec in recs:
        run = project.instance.get_run_record_by_id(rec.run_id)
        assert run is not None and run.start_time is not None and run.end_time is not None
        out.append((run.start_time, run.end_time, rec.partition_key or ""))
    return sorted(out)


def _materialized(project: Project) -> dict[str, int]:
    """Materializations so far per asset."""
    graph = project.defs.resolve_asset_graph()
    out = {}
    for key in graph.materializable_asset_keys:
        recs = project.instance.fetch_materializations(key, limit=10_000).records
        out[key.to_user_string()] = len(recs)
    return out


def _ran_since(project: Project, before: dict[str, int]) -> set[str]:
    after = _materialized(project)
    return {a for a, n in after.items() if n > before.get(a, 0)}


def _check_results(project: Project) -> dict[str, list[bool]]:
    """Per asset check: whether each evaluation passed."""
    out: dict[str, list[bool]] = {}
    for check in project.defs.asset_checks or []:
        for key in check.check_keys:
            recs = project.instance.event_log_storage.get_asset_check_execution_history(
                key, limit=100
            )
            out[key.name] = [r.status.value for r in recs]
    return out


def _automated(project: Project) -> set[str]:
    graph = project.defs.resolve_asset_graph()
    return {
        k.to_user_string()
        for k in graph.materializable_asset_keys
        if graph.get(k).automation_condition is not None
    }


@pytest.mark.slow
def test_a_fresh_world_reaches_every_asset_then_changes_rerun_only_what_they_affect(
    project: Project, synthetic_world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.assets.test_automation import add_corpus_file, add_model

    summary = demo_runner(project).run()
    assert not summary["failed"] and not summary["blocked"], summary
    assert set(summary["ran"]) == _automated(project) | {"model_zoo"}, summary
    assert summary["skipped"] == []
    checks = _check_results(project)
    assert checks and all(checks.values()), checks  # every check was evaluated
    assert not [k for k, v in checks.items() if "EXECUTION_FAILED" in v], checks  # no crash
    # the only failing check is a warning evaluated with the scores, before any cell exists
    assert {k for k, v in checks.items() if "FAILED" in v} <= {"scored_models_have_nll"}, checks

    # a second run: nothing new, nothing runs but the world's re-check
    before = _materialized(project)
    again = demo_runner(project).run()
    assert again["ran"] == ["model_zoo"] and set(again["skipped"]) == _automated(project)
    assert _ran_since(project, before) == {"model_zoo"}

    def change(edit, *, runs: set[str], never: set[str], defs=None) -> dict:
        edit()
        before = _materialized(project)
        runner = GraphRunner(
            defs or project.defs, project.instance, log=lambda s: None,
            resources=project.resources,
        )  # fmt: skip
        out = runner.run()
        ran = _ran_since(project, before) - {"model_zoo"}
        assert runs <= ran, (runs - ran, out)
        assert not ran & never, (ran & never, out)
        return out

    storage = str(project.storage.root)
    upstream_of_signatures = _automated(project) - {
        "signatures", "signature_overlap", "overlap_report",
    }  # fmt: skip
    # a setting: the strata (too few models per family here: signatures fail with the reason,
    # what reads them waits), then back to none
    out = change(
        lambda: write_project_config(storage, strata="family"),
        runs=set(), never=upstream_of_signatures | {"signature_overlap", "overlap_report"},
    )  # fmt: skip
    assert [f["stage"] for f in out["failed"]] == ["signatures"], out
    assert "4 strata" in out["failed"][0]["error"]
    assert out["blocked"] == ["signature_overlap", "overlap_report"] or set(out["blocked"]) <= {
        "signature_overlap",
        "overlap_report",
    }
    # back to none: the signatures are computed again, equal the ones the overlaps were
    # computed from (same data version), so nothing downstream runs
    change(
        lambda: write_project_config(storage, strata="none"),
        runs={"signatures"},
        never=upstream_of_signatures | {"signature_overlap", "overlap_report"},
    )
    # a minimum: only the coverage reads it (same models pass: its data version holds)
    change(
        lambda: write_project_config(storage, minimums={"coverage_models": 4}),
        runs={"rank_coverage"},
        never=CELLS | METABENCH | {"benchmark_scores", "semantic_overlap", "performance_overlap"},
    )
    # a code version: the overlap step's assets and what reads them
    from sigmap_assets import versions

    monkeypatch.setitem(versions.STEP_VERSIONS, "overlap", versions.STEP_VERSIONS["overlap"] + 1)
    change(
        lambda: None,
        runs={"performance_overlap", "semantic_overlap", "signature_overlap", "overlap_report"},
        never=upstream_of_signatures - {"performance_overlap", "semantic_overlap"},
        defs=project_defs(),
    )
    monkeypatch.undo()
    demo_runner(project).run()  # back to the code version of the installed sigmap

    # a score: the score matrix and everything computed from it, never the cells
    def edit_score() -> None:
        lines = (synthetic_world / "scores.csv").read_text().splitlines()
        row = lines[1].split(",")
        row[1] = str(round(float(row[1]) * 0.5 + 0.01, 6))
        lines[1] = ",".join(row)
        (synthetic_world / "scores.csv").write_text("\n".join(lines) + "\n")

    change(
        edit_score,
        runs={"benchmark_scores", "performance_overlap", "screened_candidates", "signatures"},
        never=CELLS | METABENCH | {"semantic_overlap", "corpus_manifest"},
    )
    # a corpus file: its shard's cells only; a model: its cells only
    cells_before = {p for _, _, p in _runs(project, "token_nll")}
    change(
        lambda: add_corpus_file(synthetic_world),
        runs={"corpus_manifest", "corpus_shard", "token_nll", "nll_ranks", "rank_coverage"},
        never=METABENCH | {"benchmark_scores", "semantic_overlap", "performance_overlap"},
    )
    # (the imported NLL files grew: the model sensor asks for every model's cells again, as
    # the daemon's does; a complete cell with the same values is a no-op)
    cells = {p for _, _, p in _runs(project, "token_nll")}
    (new_shard,) = {c.split("|")[1] for c in cells - cells_before}
    assert cells - cells_before == set(project.cells()) - cells_before
    assert len(cells - cells_before) == len(project.keys("models"))
    assert new_shard in project.keys("shards")
    change(
        lambda: add_model(synthetic_world, "new/model"),
        runs={"model_registry", "benchmark_scores", "token_nll", "nll_ranks", "rank_coverage"},
        never={"corpus_shard", "corpus_manifest", "semantic_overlap"},
    )
    added = {p for _, _, p in _runs(project, "token_nll")} - cells
    assert added == set(project.cells(["new__model"]))
    assert demo_runner(project).run()["ran"] == ["model_zoo"]  # settled


def test_a_run_with_no_cursor_records_the_state_before_it_requests(project: Project) -> None:
    """The first evaluation of the conditions records the state it finds (as the daemon's
    first tick does); the cursor is kept in the instance for the next run."""
    runner = demo_runner(project)
    assert runner._get(AUTOMATION_CURSOR) is None
    asked = runner._tick(dg.AssetSelection.assets("model_registry"))
    assert asked == {}
    assert runner._get(AUTOMATION_CURSOR) is not None


def test_requests_become_runs_by_partitions(project: Project) -> None:
    """Unpartitioned assets run once, benchmarks in ranges of consecutive keys, shards and
    cells one run each."""
    project.instance.add_dynamic_partitions("benchmarks", ["a", "b", "c", "d"])
    runner = demo_runner(project)
    got = runner._requests(
        {"performance_overlap": [None], "signatures": ["a", "b", "d"], "nll_ranks": ["s1", "s2"]}
    )
    assert [(r.asset, r.partition, r.prange) for r in got] == [
        ("performance_overlap", None, None),
        ("signatures", None, ("a", "b")),
        ("signatures", None, ("d", "d")),
        ("nll_ranks", "s1", None),
        ("nll_ranks", "s2", None),
    ]


@pytest.mark.slow
def test_two_lanes_store_what_one_lane_stores(
    tmp_path: Path, synthetic_world_template: Path
) -> None:
    import shutil

    stored = {}
    world = tmp_path / "world"  # one world (manifests name its files) and two storage roots
    shutil.copytree(synthetic_world_template, world)
    split_corpus(world)
    for lanes in (1, 2):
        with dg.instance_for_test() as instance:
            project = make_project(tmp_path / f"p{lanes}", world, instance)
            summary = demo_runner(project, lanes=lanes).run(THROUGH_COVERAGE)
            assert not summary["failed"] and not summary["blocked"], summary
            cells = project.cells()
            assert len(cells) == 24
            runs = _runs(project, "token_nll")
            assert sorted(p for _, _, p in runs) == sorted(cells)  # each cell once
            if lanes == 2:  # two cells were scored at the same time
                assert any(b[0] < a[1] for a, b in itertools.pairwise(runs)), runs
                # and no request began before the end of a request upstream of it
                (cov,) = _runs(project, "rank_coverage")
                assert cov[0] >= max(end for _, end, _ in _runs(project, "nll_ranks"))
                assert min(s for s, _, _ in runs) >= max(
                    e for _, e, _ in _runs(project, "corpus_shard")
                )
            stored[lanes] = {f: _stored(project, f) for f in ("nll", "ranks")}
            # a second two-lane run finds everything up to date
            again = demo_runner(project, lanes=lanes).run(THROUGH_COVERAGE)
            assert again["ran"] == ["model_zoo"] and "token_nll" in again["skipped"], again
    for folder in stored[1]:
        one, two = stored[1][folder], stored[2][folder]
        assert sorted(one) == sorted(two), folder
        assert [f for f in one if one[f] != two[f]] == [], folder


def test_a_changed_registry_file_is_seen_by_the_runner_and_the_daemon_alike(
    project: Project, synthetic_world: Path
) -> None:
    """One input change, two paths: the input observer's tick (the daemon) and the runner
    record the same observation, so both see the same new data version."""
    from sigmap_assets.defs.inputs.sensors import changed_inputs

    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    first = changed_inputs(project.instance, project.world)
    assert {e.asset_key.to_user_string() for e in first} >= {"registry_file", "signature_strata"}
    for ev in first:
        project.instance.report_runless_asset_event(ev)
    assert changed_inputs(project.instance, project.world) == []
    reg["models"] = reg["models"][:-1]
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    assert [
        e.asset_key.to_user_string() for e in changed_inputs(project.instance, project.world)
    ] == ["registry_file"]


def test_a_failing_blocking_check_flags_the_stored_result_and_the_run_goes_on() -> None:
    """A blocking check that fails (as metabench's RMSE ceiling can on a small world) leaves
    the asset stored and flagged: listed under ``checks_failed`` with its metadata, not as a
    failure of the run; an asset that raises is a failure."""
    from sigmap_assets.demo import ChecksFailed, Progress, Request

    @dg.asset
    def flagged() -> int:
        return 1

    @dg.asset_check(asset=flagged, blocking=True)
    def under_ceiling() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=False, metadata={"rmse": 10.15, "ceiling": 10.0})

    @dg.asset
    def broken() -> int:
        raise ValueError("no such file")

    defs = dg.Definitions(assets=[flagged, broken], asset_checks=[under_ceiling])
    with dg.DagsterInstance.ephemeral() as instance:
        runner = GraphRunner(defs, instance, log=lambda s: None, resources={})
        with pytest.raises(ChecksFailed) as exc:
            runner._materialize(Request("flagged"))
        assert exc.value.failures == ["under_ceiling (rmse=10.15, ceiling=10.0)"]
        assert instance.get_latest_materialization_event(dg.AssetKey("flagged")) is not None
        runner.summary = {"ran": [], "failed": [], "blocked": [], "checks_failed": []}
        runner._failed, runner._took = set(), {}
        prog = Progress(1.0, stream=io.StringIO())
        runner._one(Request("flagged"), prog, {}, 1)
        runner._one(Request("broken"), prog, {}, 1)
    assert runner.summary["ran"] == ["flagged"]
    assert runner.summary["checks_failed"] == [
        {"asset": "flagged", "check": "under_ceiling (rmse=10.15, ceiling=10.0)"}
    ]
    assert [f["stage"] for f in runner.summary["failed"]] == ["broken"]
    assert "ValueError: no such file" in runner.summary["failed"][0]["error"]

"""`sigmap demo`'s lanes: the steps whose upstream steps are done, and the partitions of one
step, run at once; what they store equals a one-lane run's, and no step starts before the
steps upstream of it end."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import dagster as dg
import pytest

from sigmap_assets.demo import STEPS, DemoRunner
from tests.assets.harness import Project, demo_runner, make_project, split_corpus

THROUGH_COVERAGE = STEPS[: [s.stage for s in STEPS].index("coverage") + 1]


def _runner(project: Project, lanes: int) -> DemoRunner:
    return demo_runner(project, lanes=lanes)


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


def test_each_step_waits_for_every_step_upstream_of_it(project: Project) -> None:
    deps = _runner(project, 2).step_deps(STEPS)
    graph = project.defs.resolve_asset_graph()
    step_of = {a: i for i, s in enumerate(STEPS) for a in s.assets}
    names = [s.stage for s in STEPS]
    for j, step in enumerate(STEPS):
        assert all(i < j for i in deps[j]), step.stage
        ancestors, todo = set(), [dg.AssetKey(a) for a in step.assets]
        while todo:
            for parent in graph.get(todo.pop()).parent_keys:
                if parent not in ancestors:
                    ancestors.add(parent)
                    todo.append(parent)
        want = {step_of[k.to_user_string()] for k in ancestors if k.to_user_string() in step_of}
        assert want - {j} <= deps[j], step.stage
        assert set(range(min(j, names.index("registry") + 1))) <= deps[j], step.stage
    # what the lanes are for: metabench and the semantic level never wait for the cells
    for stage in ("overlap", "metabench pool", "metabench fits", "metabench selection"):
        assert names.index("perplexity") not in deps[names.index(stage)], stage
    assert names.index("signatures") in deps[names.index("report")]


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
            summary = _runner(project, lanes).run(THROUGH_COVERAGE)
            assert not summary["failed"] and not summary["blocked"], summary
            cells = project.cells()
            assert len(cells) == 24
            state = json.loads(project.storage.layout.demo_state().read_text())
            assert sorted(state["signatures"]["perplexity"]) == sorted(cells)  # none lost
            runs = _runs(project, "token_nll")
            assert sorted(p for _, _, p in runs) == sorted(cells)  # each cell once
            if lanes == 2:  # two cells were scored at the same time
                assert any(b[0] < a[1] for a, b in itertools.pairwise(runs)), runs
                # and no step began before the end of a step upstream of it
                (cov,) = _runs(project, "rank_coverage")
                assert cov[0] >= max(end for _, end, _ in _runs(project, "nll_ranks"))
                assert min(s for s, _, _ in runs) >= max(
                    e for _, e, _ in _runs(project, "corpus_shard")
                )
            stored[lanes] = {f: _stored(project, f) for f in ("nll", "ranks")}
            # a second two-lane run finds everything up to date
            again = _runner(project, lanes).run(THROUGH_COVERAGE)
            assert "perplexity" in again["skipped"] and not again["ran"][1:], again
    for folder in stored[1]:
        one, two = stored[1][folder], stored[2][folder]
        assert sorted(one) == sorted(two), folder
        assert [f for f in one if one[f] != two[f]] == [], folder


def test_latest_versions_read_each_partitions_latest_materialization() -> None:
    """The runner's staleness check reads every partition's data version in one query; it
    equals the latest materialization's, and a partition never materialized is missing."""
    from sigmap_assets.demo import _latest_versions
    from sigmap_assets.metadata import DATA_VERSION_TAG

    parts = dg.StaticPartitionsDefinition(["a", "b", "c"])

    @dg.asset(partitions_def=parts)
    def x(context) -> dg.Output[int]:  # dagster reads the bare name: no string annotation
        return dg.Output(1, data_version=dg.DataVersion(f"v-{context.run_id[:8]}"))

    with dg.DagsterInstance.ephemeral() as instance:
        for p in ("a", "b", "a"):  # "a" twice: its second run is the latest
            dg.materialize([x], partition_key=p, instance=instance)
        key = dg.AssetKey("x")
        expected = []
        for p in ("a", "b", "c"):
            recs = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[p]), limit=1
            ).records
            tag = recs[0].asset_materialization.tags[DATA_VERSION_TAG] if recs else "missing"
            expected.append(f"x[{p}]:{tag}")
        assert _latest_versions(instance, key, ["a", "b", "c"]) == expected
        assert expected[2] == "x[c]:missing" and expected[0] != expected[1]

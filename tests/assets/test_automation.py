"""Refresh when new models arrive: the new-model sensor plus declarative automation, no manual step.

Each tick of the `sigmap_automation` sensor is reproduced in-process with
`dg.evaluate_automation_conditions` (carrying its cursor from tick to tick), each sensor tick
with `dg.build_sensor_context`; what the daemon would launch is materialized in-process.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import dagster as dg
import numpy as np
import yaml

from sigmap_assets.defs.automation.sensors import (
    catalog_sensor,
    nightly_score_refresh,
    sigmap_automation,
)
from sigmap_assets.defs.models.sensors import new_model_sensor
from tests.assets.harness import Project

#: Dependency order of everything automation may request (what one daemon launch runs).
ORDER = [
    "nll_ranks",
    "benchmark_items",
    "screened_candidates",
    "signatures",
    "performance_overlap",
    "semantic_overlap",
    "signature_overlap",
    "overlap_report",
]
FAST = {
    "signatures": {"method": "aic", "n_bootstrap": 0, "n_permutations": 0, "loo": False},
    "signature_overlap": {"n_permutations": 2, "n_bootstrap": 20},
    "overlap_report": {"n_model_subsets": 1, "robustness": False, "alignment": False},
}


def requested(result) -> dict[str, set]:
    """Asset name → requested partition keys (``{None}`` for an unpartitioned asset)."""
    out: dict[str, set] = {}
    for subset in result._requested_subsets:  # the public getters need a key each
        if isinstance(subset.key, dg.AssetKey):
            name = subset.key.to_user_string()
            out[name] = set(result.get_requested_partitions(subset.key))
    return {k: v for k, v in out.items() if v}


def tick(project: Project, cursor=None):
    return dg.evaluate_automation_conditions(
        defs=project.defs, instance=project.instance, cursor=cursor
    )


def sensor_tick(project: Project, cursor: str | None):
    with dg.build_sensor_context(
        instance=project.instance, cursor=cursor, resources={"world": project.world}
    ) as ctx:
        result = new_model_sensor(ctx)
    for req in result.dynamic_partitions_requests or []:  # what the daemon does with the result
        project.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def launch(project: Project, run_requests) -> dict[str, bool]:
    """Execute the sensor's run requests in-process; partition key → success."""
    outcome = {}
    for req in run_requests:
        names = [k.to_user_string() for k in req.asset_selection]
        res = project.materialize(names, partition=req.partition_key, raise_on_error=False)
        outcome[req.partition_key or ",".join(names)] = res.success
    return outcome


def run_requested(project: Project, asked: dict[str, set]) -> None:
    """Materialize what automation requested, in dependency order (one run per asset)."""
    unknown = set(asked) - set(ORDER)
    assert not unknown, f"automation requested unexpected assets {unknown}"
    bench = project.keys("benchmarks")
    for name in ORDER:
        if name not in asked:
            continue
        cfg = {"ops": {name: {"config": FAST[name]}}} if name in FAST else None
        if asked[name] == {None}:
            project.materialize([name], run_config=cfg)
        else:
            assert asked[name] == set(bench), f"{name}: expected every benchmark, got {asked[name]}"
            project.materialize([name], prange=(bench[0], bench[-1]), run_config=cfg)


def add_model(world: Path, model_id: str, source_index: int = 0) -> None:
    """A new registry entry with imported NLL (a perturbed copy of an existing model) and scores."""
    rng = np.random.default_rng(7)
    base = np.load(world / "nll" / f"model_{source_index:03d}.npy")
    nll = (base * 1.03 + rng.gamma(2.0, 0.05, size=base.shape)).astype(base.dtype)
    np.save(world / "nll" / "model_new.npy", nll)
    reg = yaml.safe_load((world / "models.yaml").read_text())
    reg["models"].append({"id": model_id, "family": "epsilon", "nll_source": "nll/model_new.npy"})
    (world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    lines = (world / "scores.csv").read_text().splitlines()
    row = lines[1].split(",")
    (world / "scores.csv").write_text("\n".join([*lines, ",".join([model_id, *row[1:]])]) + "\n")


def settle(project: Project, cursor, max_ticks: int = 6):
    """Tick and launch what was requested until a tick requests nothing; the ticks' requests."""
    ticks = []
    for _ in range(max_ticks):
        result = tick(project, cursor)
        cursor = result.cursor
        asked = requested(result)
        if not asked:
            return ticks, cursor
        ticks.append(asked)
        run_requested(project, asked)
    raise AssertionError(f"automation did not settle in {max_ticks} ticks: {ticks}")


def first_tick(ticks: list[dict], name: str) -> int:
    hits = [i for i, asked in enumerate(ticks) if name in asked]
    assert len(hits) == 1, f"{name} requested in ticks {hits} (expected exactly once): {ticks}"
    return hits[0]


def test_new_models_flow_through_the_graph_without_stalling(
    project: Project, synthetic_world: Path
) -> None:
    # the 12th model of the registry cannot be loaded: its run fails
    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    broken_id = reg["models"][-1]["id"]
    reg["models"][-1]["nll_source"] = "nll/does_not_exist.npy"
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    project.materialize(["model_zoo"])
    project.materialize(["corpus_manifest", "corpus_units"])
    project.materialize(["benchmark_catalog"])
    t0 = tick(project)  # the automation sensor is running before any model arrives
    assert requested(t0) == {}

    # sensor tick: 12 partitions and 12 token_nll runs (one per model) + the registry/scores run
    s1 = sensor_tick(project, None)
    assert len(project.keys("models")) == 12
    nll_runs = [r for r in s1.run_requests if r.partition_key]
    assert sorted(r.partition_key for r in nll_runs) == sorted(project.keys("models"))
    assert all(r.asset_selection == [dg.AssetKey("token_nll")] for r in nll_runs)
    registry_runs = [r for r in s1.run_requests if not r.partition_key]
    assert [set(r.asset_selection) for r in registry_runs] == [
        {dg.AssetKey("model_registry"), dg.AssetKey("benchmark_scores")}
    ]
    ran = launch(project, registry_runs + nll_runs)
    broken_key = nll_runs[-1].partition_key
    assert [k for k, ok in ran.items() if not ok] == [broken_key]

    # automation: 11 complete + 1 failed model → the ranks are requested (no stall), with
    # performance overlap (new scores); token_nll never (its runs come from the sensor)
    t1 = tick(project, t0.cursor)
    assert requested(t1) == {"nll_ranks": {None}, "performance_overlap": {None}}
    project.materialize(["nll_ranks"])
    ranks_meta = project.instance.get_latest_materialization_event(
        dg.AssetKey("nll_ranks")
    ).asset_materialization.metadata
    assert ranks_meta["models_used"].value == 11
    assert ranks_meta["models_missing"].value == [broken_id]
    # after the ranks: every benchmark's screening and signatures, in one launch; nothing twice
    t2 = tick(project, t1.cursor)
    bench = set(project.keys("benchmarks"))
    assert requested(t2) == {"screened_candidates": bench, "signatures": bench}
    t2 = tick(project, t2.cursor)
    assert requested(t2) == {}
    run_requested(
        project, {"screened_candidates": bench, "signatures": bench, "performance_overlap": {None}}
    )
    t2 = tick(project, t2.cursor)
    assert requested(t2) == {"signature_overlap": {None}, "overlap_report": {None}}
    run_requested(project, requested(t2))
    cursor = t2.cursor

    # the nightly re-read of unchanged score sources triggers nothing (same data version)
    project.materialize(["benchmark_catalog", "benchmark_scores"])
    t3 = tick(project, cursor)
    assert requested(t3) == {}

    # a model is added to models.yaml: the sensor adds only its partition and requests its run
    add_model(synthetic_world, "synthetic/epsilon-new")
    s2 = sensor_tick(project, s1.cursor)
    new_runs = [r for r in s2.run_requests if r.partition_key]
    assert [r.partition_key for r in new_runs] == ["synthetic__epsilon-new"]
    assert len(project.keys("models")) == 13
    t4 = tick(project, t3.cursor)  # automation does not request the new partition's run itself
    assert requested(t4) == {}
    ran = launch(project, s2.run_requests)
    assert ran == {"model_registry,benchmark_scores": True, "synthetic__epsilon-new": True}

    # after its token_nll: the ranks again, then screening/signatures of every benchmark, the
    # overlaps and the report — each once (the new model's scores also change performance overlap)
    ticks, cursor = settle(project, t4.cursor)
    assert ticks[0] == {"nll_ranks": {None}, "performance_overlap": {None}}
    i_ranks, i_screen, i_sig = (
        first_tick(ticks, n) for n in ("nll_ranks", "screened_candidates", "signatures")
    )
    i_sov = first_tick(ticks, "signature_overlap")
    assert i_ranks < i_screen == i_sig < i_sov
    # the report follows each of its two updates (scores → performance; ranks → signatures)
    reports = [i for i, t in enumerate(ticks) if "overlap_report" in t]
    assert len(reports) <= 2 and reports[-1] >= i_sov
    assert all("token_nll" not in t for t in ticks)
    ranks_meta = project.instance.get_latest_materialization_event(
        dg.AssetKey("nll_ranks")
    ).asset_materialization.metadata
    assert ranks_meta["models_used"].value == 12
    screening = project.storage.layout.screening_summary(project.keys("benchmarks")[0])
    assert "synthetic__epsilon-new" in yaml.safe_load(screening.read_text())["models_used"]

    # the same registry again: no new partition, no run
    s3 = sensor_tick(project, s2.cursor)
    assert not s3.run_requests and not s3.dynamic_partitions_requests


def test_automation_sensor_schedule_and_catalog_sensor_are_declared_on(project: Project) -> None:
    defs = project.defs
    sensor = defs.get_sensor_def("sigmap_automation")
    assert sensor is sigmap_automation or sensor.name == sigmap_automation.name
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    graph = defs.resolve_asset_graph()
    targeted = sensor.asset_selection.resolve(graph)
    assert {
        dg.AssetKey(k) for k in ["nll_ranks", "screened_candidates", "signatures", "overlap_report"]
    } <= targeted

    schedule = defs.get_schedule_def("nightly_score_refresh")
    assert schedule.cron_schedule == nightly_score_refresh.cron_schedule == "0 3 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    job = defs.resolve_job_def(schedule.job_name)
    assert job.asset_layer.executable_asset_keys == {
        dg.AssetKey("benchmark_catalog"),
        dg.AssetKey("benchmark_scores"),
    }
    [req] = list(
        schedule.evaluate_tick(dg.build_schedule_context(instance=project.instance)).run_requests
    )
    assert not req.partition_key


def test_catalog_sensor_requests_a_refresh_only_when_the_file_changes(
    project: Project, synthetic_world: Path
) -> None:
    def run(cursor):
        with dg.build_sensor_context(
            instance=project.instance, cursor=cursor, resources={"world": project.world}
        ) as ctx:
            return catalog_sensor(ctx)

    catalog = synthetic_world / "catalog.yaml"
    digest = hashlib.sha256(catalog.read_bytes()).hexdigest()[:16]
    r1 = run(None)
    assert r1.cursor == digest
    assert [r.run_key for r in r1.run_requests] == [f"catalog:{digest}"]
    [add] = r1.dynamic_partitions_requests
    assert add.partitions_def_name == "benchmarks" and len(add.partition_keys) == 6
    project.instance.add_dynamic_partitions("benchmarks", list(add.partition_keys))

    assert isinstance(run(r1.cursor), dg.SkipReason)  # unchanged file: no run

    cat = yaml.safe_load(catalog.read_text())
    entry = next(iter(cat["benchmarks"].values()))
    cat["benchmarks"]["extra_bench"] = dict(entry)
    catalog.write_text(yaml.safe_dump(cat, sort_keys=False))
    r3 = run(r1.cursor)
    assert r3.cursor != r1.cursor and len(r3.run_requests) == 1
    [add] = r3.dynamic_partitions_requests
    assert list(add.partition_keys) == ["extra_bench"]
    assert isinstance(run(r3.cursor), dg.SkipReason)


def test_automated_assets_are_derived_from_their_own_conditions() -> None:
    """Every asset with an automation condition carries the automation tag and no other does
    (both come from one ``automated(...)`` call), and the tag selection resolves to them."""
    from sigmap_assets.automation import AUTOMATED, AUTOMATED_TAG
    from sigmap_assets.definitions import defs as project_defs

    graph = project_defs().resolve_asset_graph()
    with_condition = {
        k.to_user_string()
        for k in graph.get_all_asset_keys()
        if graph.get(k).automation_condition is not None
    }
    tagged = {
        k.to_user_string()
        for k in graph.get_all_asset_keys()
        if graph.get(k).tags.get(AUTOMATED_TAG) == "true"
    }
    assert tagged == with_condition
    assert {k.to_user_string() for k in AUTOMATED.resolve(graph)} == with_condition
    assert set(ORDER) <= with_condition and "token_nll" not in with_condition
    assert {"irt_item_pool", "irt_fits", "metabench_selection", "metabench"} <= with_condition

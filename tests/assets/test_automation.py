"""Refresh when inputs change: the input observer and the partition sensors plus declarative
automation, no manual step.

Each tick of the `sigmap_automation` sensor is reproduced in-process with
`dg.evaluate_automation_conditions` (carrying its cursor from tick to tick), each sensor tick
with `dg.build_sensor_context`; what the daemon would launch is materialized in-process.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import yaml

from sigmap_assets.defs.automation.sensors import (
    catalog_sensor,
    nightly_score_refresh,
    sigmap_automation,
)
from sigmap_assets.defs.inputs.sensors import input_observer
from sigmap_assets.defs.models.sensors import new_model_sensor
from sigmap_assets.metadata import DATA_VERSION_TAG
from tests.assets.harness import Project

FAST = {
    "signatures": {"method": "aic", "n_bootstrap": 0, "n_permutations": 0, "loo": False},
    "signature_overlap": {"n_permutations": 2, "n_bootstrap": 20},
    "overlap_report": {"n_model_subsets": 1, "robustness": False, "alignment": False},
}
#: Not run here when automation requests them (slow, and not what these tests are about).
SKIP = {"irt_item_pool", "irt_fits", "metabench_selection", "metabench", "scored_models"}


def requested(result) -> dict[str, set]:
    """Asset name → requested partition keys (``{None}`` for an unpartitioned asset)."""
    out: dict[str, set] = {}
    for subset in result._requested_subsets:  # the public getters need a key each
        if isinstance(subset.key, dg.AssetKey):
            name = subset.key.to_user_string()
            out[name] = {
                None if k is None else str(k) for k in result.get_requested_partitions(subset.key)
            }
    return {k: v for k, v in out.items() if v}


def tick(project: Project, cursor=None):
    return dg.evaluate_automation_conditions(
        defs=project.defs, instance=project.instance, cursor=cursor
    )


def sensor_tick(project: Project, sensor, cursor: str | None):
    with dg.build_sensor_context(
        instance=project.instance, cursor=cursor, resources={"world": project.world}
    ) as ctx:
        result = sensor(ctx)
    if isinstance(result, dg.SkipReason):
        return result
    for req in result.dynamic_partitions_requests or []:  # what the daemon does with the result
        project.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def observe_inputs(project: Project) -> set[str]:
    """A tick of the input observer, its observations recorded as the daemon records them
    (it never requests a run); the inputs it observed."""
    result = sensor_tick(project, input_observer, None)
    if isinstance(result, dg.SkipReason):
        return set()
    assert not result.run_requests
    for ev in result.asset_events:
        project.instance.report_runless_asset_event(ev)
    return {ev.asset_key.to_user_string() for ev in result.asset_events}


def force_new_input_versions(project: Project, tag: str) -> None:
    """An observation with a new data version for every input (as if each file changed)."""
    for name in ("registry_file", "catalog_file", "corpus_files", "score_sources", "lm_eval_logs"):
        project.instance.report_runless_asset_event(
            dg.AssetObservation(asset_key=name, tags={DATA_VERSION_TAG: f"{tag}-{name}"})
        )


def topo_order(project: Project) -> list[str]:
    graph = project.defs.resolve_asset_graph()
    return [k.to_user_string() for k in graph.toposorted_asset_keys]


def run_requested(project: Project, asked: dict[str, set], failures: dict) -> None:
    """Materialize what automation requested, in dependency order, as the daemon would: an
    unpartitioned asset once, all benchmarks in one range run, other keys one run each (the
    corpus plan with the project's shard size)."""
    bench = project.keys("benchmarks")
    for name in topo_order(project):
        if name not in asked or name in SKIP:
            continue
        cfg = {"ops": {name: {"config": FAST[name]}}} if name in FAST else None
        if name == "corpus_manifest":
            cfg = project.corpus_config
        keys = asked[name]
        if keys == {None}:
            res = project.materialize([name], run_config=cfg, raise_on_error=False)
            if not res.success:
                failures.setdefault(name, set()).add(None)
        elif keys == set(bench):
            project.materialize([name], prange=(bench[0], bench[-1]), run_config=cfg)
        else:
            for k in sorted(keys):
                res = project.materialize([name], partition=k, run_config=cfg, raise_on_error=False)
                if not res.success:
                    failures.setdefault(name, set()).add(k)


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


def add_corpus_file(world: Path, n_docs: int = 3, words: int = 60) -> int:
    """A new corpus file (sorted last) and its NLL appended to every imported model array."""
    from sigmap_lib.inputs import segment_units

    rng = np.random.default_rng(5)
    vocab = ["river", "stone", "cloud", "garden", "lantern", "harbor", "signal"]
    lines, n = [], 0
    for i in range(n_docs):
        text = " ".join(rng.choice(vocab, words)) + "\n"
        n += len(segment_units(text))
        lines.append(json.dumps({"id": f"new:{i}", "text": text}))
    (world / "corpus" / "zz_new.jsonl").write_text("\n".join(lines) + "\n")
    for p in sorted((world / "nll").glob("model_*.npy")):
        old = np.load(p)
        np.save(p, np.concatenate([old, rng.gamma(2.0, 1.0, n).astype(old.dtype)]))
    return n


def settle(project: Project, cursor, max_ticks: int = 10):
    """Tick and launch what was requested until a tick requests nothing: the ticks' requests
    and the failed partitions."""
    ticks: list[dict] = []
    failures: dict = {}
    for _ in range(max_ticks):
        result = tick(project, cursor)
        cursor = result.cursor
        asked = {k: v for k, v in requested(result).items() if k not in SKIP}
        if not asked:
            return ticks, cursor, failures
        ticks.append(asked)
        run_requested(project, asked, failures)
    raise AssertionError(f"automation did not settle in {max_ticks} ticks: {ticks}")


def all_requested(ticks: list[dict], name: str) -> list:
    """Every partition of ``name`` requested over the ticks (repeats kept)."""
    return [k for t in ticks for k in sorted(t.get(name, ()), key=str)]


def once_each(ticks: list[dict], name: str) -> set:
    keys = all_requested(ticks, name)
    assert len(keys) == len(set(keys)), f"{name}: a partition was requested twice: {ticks}"
    return set(keys)


def latest_meta(project: Project, name: str, partition: str | None = None) -> dict:
    if partition is None:
        ev = project.instance.get_latest_materialization_event(dg.AssetKey(name))
        return ev.asset_materialization.metadata
    recs = project.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), asset_partitions=[partition]), limit=1
    ).records
    return recs[0].asset_materialization.metadata


READERS = {"model_registry", "benchmark_catalog", "benchmark_scores", "corpus_manifest"}


def test_new_models_and_corpus_files_flow_through_the_graph_without_stalling(
    project: Project, synthetic_world: Path
) -> None:
    from sigmap_assets.partitions import cell_key

    # the 12th model of the registry cannot be loaded: its cells fail
    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    broken_id = reg["models"][-1]["id"]
    reg["models"][-1]["nll_source"] = "nll/does_not_exist.npy"
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    t0 = tick(project)  # the automation sensor runs before any input is observed: nothing
    assert requested(t0) == {}

    # the input observer records the inputs; the model sensor adds 12 `models` partitions
    # (36 cells with the shards to come) and requests nothing
    assert {"registry_file", "catalog_file", "corpus_files", "score_sources"} <= observe_inputs(
        project
    )
    s1 = sensor_tick(project, new_model_sensor, None)
    assert not s1.run_requests and len(project.keys("models")) == 12
    broken = next(k for k in project.keys("models") if k.replace("__", "/") == broken_id)

    # automation reads the inputs (registry, catalog, scores, corpus plan: one tick), builds
    # every shard once, fills every cell once (the broken model's fail, never retried), ranks
    # each shard, chooses the coverage (11 models), screens every shard and merges: no stall
    ticks, cursor, failures = settle(project, t0.cursor)
    assert READERS <= set(ticks[0]), ticks[0]
    shards = project.keys("shards")
    assert len(shards) == 3
    for name in READERS:
        once_each(ticks, name)
    assert once_each(ticks, "corpus_shard") == set(shards)
    cells = {str(cell_key(m, s)) for m in project.keys("models") for s in shards}
    assert once_each(ticks, "token_nll") == cells
    assert failures == {"token_nll": {str(cell_key(broken, s)) for s in shards}}
    assert once_each(ticks, "nll_ranks") == set(shards)
    for name in ("rank_coverage", "screened_candidates", "signatures", "signature_overlap"):
        once_each(ticks, name)
    cov = latest_meta(project, "rank_coverage")
    assert cov["models_used"].value == 11 and cov["shards_used"].value == 3
    assert cov["missing_cells"].value == 3
    assert latest_meta(project, "nll_ranks", shards[0])["models_missing"].value == [broken_id]
    assert project.storage.layout.signature_summary(project.keys("benchmarks")[0]).exists()

    # the nightly re-read of unchanged score sources triggers nothing (same data version)
    project.materialize(["benchmark_catalog", "benchmark_scores"])
    ticks, cursor, _ = settle(project, cursor)
    assert ticks == []
    # a new data version of every input (as if each file were touched): the readers re-read
    # them once; what they read is unchanged (same data versions), so nothing else runs
    force_new_input_versions(project, "changed")
    ticks, cursor, _ = settle(project, cursor)
    assert [set(t) for t in ticks] == [READERS], ticks

    # a model is added: the sensor adds its partition; the observer sees the registry and the
    # scores change; automation re-reads them and fills the new model's 3 cells only
    add_model(synthetic_world, "synthetic/epsilon-new")
    s2 = sensor_tick(project, new_model_sensor, s1.cursor)
    assert not s2.run_requests and len(project.keys("models")) == 13
    assert {"registry_file", "score_sources"} <= observe_inputs(project)
    ticks, cursor, failures = settle(project, cursor)
    new = "synthetic__epsilon-new"
    assert {"model_registry", "benchmark_scores"} <= set(ticks[0])
    assert once_each(ticks, "token_nll") == {str(cell_key(new, s)) for s in shards}
    assert not failures
    assert once_each(ticks, "nll_ranks") == set(shards)
    assert latest_meta(project, "rank_coverage")["models_used"].value == 12
    screening = project.storage.layout.screening_summary(project.keys("benchmarks")[0])
    assert new in yaml.safe_load(screening.read_text())["models_used"]

    # a corpus file is added: the observer sees the folder change; automation re-plans the
    # corpus, builds the new shard, fills its cells for every model (and only those), ranks
    # that shard only, merges again
    add_corpus_file(synthetic_world)
    assert observe_inputs(project) == {"corpus_files"}
    ticks, cursor, failures = settle(project, cursor)
    assert "corpus_manifest" in ticks[0], ticks[0]
    [added] = [s for s in project.keys("shards") if s not in shards]
    assert once_each(ticks, "corpus_shard") == {added}
    assert once_each(ticks, "token_nll") == {
        str(cell_key(m, added)) for m in project.keys("models")
    }
    assert failures == {"token_nll": {str(cell_key(broken, added))}}
    assert once_each(ticks, "nll_ranks") == {added}
    cov = latest_meta(project, "rank_coverage")
    assert cov["models_used"].value == 12 and cov["shards_used"].value == 4
    screens = [latest_meta(project, "shard_screen", s) for s in shards]
    assert all(m["reused"].value for m in screens)  # the old shards' partials were kept

    # the same registry and corpus again: nothing new
    s3 = sensor_tick(project, new_model_sensor, s2.cursor)
    assert not s3.run_requests and not s3.dynamic_partitions_requests
    assert observe_inputs(project) == set()
    assert settle(project, cursor)[0] == []


def test_automation_sensor_schedule_and_catalog_sensor_are_declared_on(project: Project) -> None:
    defs = project.defs
    sensor = defs.get_sensor_def("sigmap_automation")
    assert sensor is sigmap_automation or sensor.name == sigmap_automation.name
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    graph = defs.resolve_asset_graph()
    targeted = sensor.asset_selection.resolve(graph)
    assert {
        dg.AssetKey(k)
        for k in [
            "corpus_shard",
            "token_nll",
            "nll_ranks",
            "rank_coverage",
            "shard_screen",
            "screened_candidates",
            "signatures",
            "overlap_report",
        ]
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


def test_catalog_sensor_adds_partitions_only_when_the_file_changes(
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
    assert r1.cursor == digest and not r1.run_requests
    [add] = r1.dynamic_partitions_requests
    assert add.partitions_def_name == "benchmarks" and len(add.partition_keys) == 6
    project.instance.add_dynamic_partitions("benchmarks", list(add.partition_keys))

    assert isinstance(run(r1.cursor), dg.SkipReason)  # unchanged file

    cat = yaml.safe_load(catalog.read_text())
    entry = next(iter(cat["benchmarks"].values()))
    cat["benchmarks"]["extra_bench"] = dict(entry)
    catalog.write_text(yaml.safe_dump(cat, sort_keys=False))
    r3 = run(r1.cursor)
    assert r3.cursor != r1.cursor and not r3.run_requests
    [add] = r3.dynamic_partitions_requests
    assert list(add.partition_keys) == ["extra_bench"]
    project.instance.add_dynamic_partitions("benchmarks", ["extra_bench"])
    assert isinstance(run(r3.cursor), dg.SkipReason)
    cat["benchmarks"]["extra_bench"]["function"] = "other"  # changed, but no new benchmark
    catalog.write_text(yaml.safe_dump(cat, sort_keys=False))
    r4 = run(r3.cursor)
    assert isinstance(r4, dg.SensorResult) and not r4.run_requests
    assert not r4.dynamic_partitions_requests and r4.cursor != r3.cursor


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
    assert {
        "token_nll",
        "nll_ranks",
        "rank_coverage",
        "shard_screen",
        "signatures",
    } <= with_condition
    assert READERS <= with_condition  # the readers of the user's inputs
    assert {"irt_item_pool", "irt_fits", "metabench_selection", "metabench"} <= with_condition


def test_tick_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import sigmap_assets.defs.automation.sensors as automation_sensors
    import sigmap_assets.defs.models.sensors as model_sensors
    from sigmap_assets.automation import TICK_ENV, tick_seconds

    monkeypatch.delenv(TICK_ENV, raising=False)
    assert tick_seconds(30) == 30
    for bad in ("0", "-5", "fast", "2.5"):
        monkeypatch.setenv(TICK_ENV, bad)
        with pytest.raises(ValueError, match=f"{TICK_ENV}={bad!r}: expected a positive"):
            tick_seconds(30)
    monkeypatch.setenv(TICK_ENV, "7")
    try:
        for module in (automation_sensors, model_sensors):
            importlib.reload(module)
        assert automation_sensors.sigmap_automation.minimum_interval_seconds == 7
        assert automation_sensors.catalog_sensor.minimum_interval_seconds == 7
        assert model_sensors.new_model_sensor.minimum_interval_seconds == 7
    finally:
        monkeypatch.delenv(TICK_ENV)
        for module in (automation_sensors, model_sensors):
            importlib.reload(module)
    assert automation_sensors.catalog_sensor.minimum_interval_seconds == 60

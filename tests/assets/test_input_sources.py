"""The user's inputs are observable source assets: lineage starts at the files, each
observation's data version is the file's content (or the folder's stamp), the observer sensor
records only changes, and an observation never starts an automation run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import yaml

from sigmap_assets.automation import input_condition
from sigmap_assets.defs.inputs.assets import user_inputs
from sigmap_assets.defs.inputs.sensors import input_observer, last_observed
from sigmap_assets.fingerprints import ABSENT, SETTINGS
from sigmap_assets.metadata import DATA_VERSION_TAG
from tests.assets.harness import Project

INPUTS = {
    "registry_file": {"model_registry", "benchmark_scores"},
    "catalog_file": {"benchmark_catalog", "benchmark_scores"},
    "corpus_files": {"corpus_manifest"},
    "score_sources": {"benchmark_scores"},
    "lm_eval_logs": {"scored_models"},
}


def sha16(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def observe(project: Project, names: list[str] | None = None) -> dict[str, str]:
    """Run `user_inputs` (what "Observe sources" in the UI launches); name → data version."""
    result = project.materialize(names or sorted(INPUTS))
    out = {}
    for ev in result.all_events:
        if ev.event_type_value == "ASSET_OBSERVATION":
            obs = ev.event_specific_data.asset_observation
            out[obs.asset_key.to_user_string()] = obs.tags[DATA_VERSION_TAG]
    return out


def observer_tick(project: Project):
    """One tick of `input_observer`, its observations recorded as the daemon records them."""
    with dg.build_sensor_context(
        instance=project.instance, resources={"world": project.world}
    ) as ctx:
        result = input_observer(ctx)
    if isinstance(result, dg.SensorResult):
        assert not result.run_requests and not result.dynamic_partitions_requests
        for ev in result.asset_events:
            project.instance.report_runless_asset_event(ev)
    return result


def observed(result) -> dict[str, str]:
    if isinstance(result, dg.SkipReason):
        return {}
    return {e.asset_key.to_user_string(): e.tags[DATA_VERSION_TAG] for e in result.asset_events}


def test_lineage_starts_at_the_users_files(project: Project) -> None:
    graph = project.defs.resolve_asset_graph()
    assert {k.to_user_string() for k in user_inputs.keys} == set(INPUTS) | set(SETTINGS)
    for name, (readers, _) in SETTINGS.items():  # each setting: exactly the assets reading it
        node = graph.get(dg.AssetKey(name))
        assert node.is_observable and node.group_name == "settings", name
        assert {k.to_user_string() for k in node.child_keys} == set(readers), name
    for name, readers in INPUTS.items():
        node = graph.get(dg.AssetKey(name))
        assert node.is_observable and not node.is_materializable, name
        assert node.group_name == "inputs"
        children = {k.to_user_string() for k in node.child_keys}
        assert children == readers, name
    # the readers of the files re-read them when an observation changes; the lm-eval folders
    # are scored per folder by their sensor, never all at once for one observation
    reader = input_condition().label
    for name in ("registry_file", "catalog_file", "corpus_files", "score_sources"):
        for child in graph.get(dg.AssetKey(name)).child_keys:
            assert graph.get(child).automation_condition.label == reader, child
    assert graph.get(dg.AssetKey("scored_models")).automation_condition is None


def test_observing_gives_the_content_of_files_and_the_stamp_of_folders(
    project: Project, synthetic_world: Path
) -> None:
    from sigmap_lib.inputs import corpus_files, files_stamp

    got = observe(project)
    corpus = synthetic_world / "corpus"
    assert got == {
        "registry_file": sha16(synthetic_world / "models.yaml"),
        "catalog_file": sha16(synthetic_world / "catalog.yaml"),
        "corpus_files": files_stamp(corpus_files(corpus), root=corpus),
        "score_sources": sha16(synthetic_world / "scores.csv"),
        "lm_eval_logs": ABSENT,  # no lm-eval folder in this world
    }
    # one input alone (the UI can observe a subset)
    reg = yaml.safe_load((synthetic_world / "models.yaml").read_text())
    reg["models"].pop()
    (synthetic_world / "models.yaml").write_text(yaml.safe_dump(reg))
    assert observe(project, ["registry_file"]) == {
        "registry_file": sha16(synthetic_world / "models.yaml")
    }
    assert got["registry_file"] != sha16(synthetic_world / "models.yaml")


def test_score_sources_cover_scores_yaml_and_the_files_it_names(
    project: Project, synthetic_world: Path
) -> None:
    (synthetic_world / "extra").mkdir()
    (synthetic_world / "extra" / "more.csv").write_text("model,b0\nm1,1.0\n")
    specs = {"sources": [{"kind": "wide", "path": "scores.csv"}, {"kind": "wide", "path": "extra"}]}
    (synthetic_world / "scores.yaml").write_text(yaml.safe_dump(specs))
    first = observe(project, ["score_sources"])["score_sources"]
    assert first != sha16(synthetic_world / "scores.csv")
    assert observe(project, ["score_sources"])["score_sources"] == first  # stable
    with (synthetic_world / "scores.csv").open("a") as fh:  # a named file changes
        fh.write("\n")
    second = observe(project, ["score_sources"])["score_sources"]
    assert second != first
    (synthetic_world / "extra" / "new.csv").write_text("model,b0\nm2,2.0\n")  # a named folder
    assert observe(project, ["score_sources"])["score_sources"] not in (first, second)


def test_the_observer_records_each_change_once_and_launches_nothing(
    project: Project, synthetic_world: Path
) -> None:
    first = observed(observer_tick(project))  # nothing observed yet: every input that exists
    assert set(first) == set(INPUTS) - {"lm_eval_logs"} | set(SETTINGS)  # no lm-eval folder
    assert first["registry_file"] == sha16(synthetic_world / "models.yaml")
    assert isinstance(observer_tick(project), dg.SkipReason)  # unchanged

    (synthetic_world / "catalog.yaml").write_text(
        (synthetic_world / "catalog.yaml").read_text() + "\n# edited\n"
    )
    (synthetic_world / "corpus" / "zz_new.txt").write_text("a new corpus file\n")
    second = observed(observer_tick(project))
    assert set(second) == {"catalog_file", "corpus_files"}
    assert second["catalog_file"] == sha16(synthetic_world / "catalog.yaml")
    assert second["corpus_files"] != first["corpus_files"]
    assert isinstance(observer_tick(project), dg.SkipReason)
    # a setting that changes results (`sigmap run --minimum coverage_models=5`): that one only
    from sigmap_assets.resources import write_project_config

    write_project_config(str(project.storage.root), minimums={"coverage_models": 5})
    assert set(observed(observer_tick(project))) == {"coverage_minimum"}
    write_project_config(str(project.storage.root), minimums={"coverage_models": 5})
    assert isinstance(observer_tick(project), dg.SkipReason)  # the same value: no change
    # the world's signature method and error mode: `signature_mode` only
    settings = synthetic_world / "settings.yaml"
    before = settings.read_text() if settings.exists() else ""
    settings.write_text(before + "\nsignatures:\n  fdr: 0.1\n")
    assert set(observed(observer_tick(project))) == {"signature_mode"}
    settings.write_text(before + "\nsignatures:\n  fdr: 0.1\n  strata: none\n")
    assert isinstance(observer_tick(project), dg.SkipReason)  # the same values in effect

    # an lm-eval folder appears; the UI observed it first: the sensor does not repeat it
    logs = synthetic_world / "lm_eval_logs" / "m1"
    logs.mkdir(parents=True)
    (logs / "samples_arc.jsonl").write_text(json.dumps({"doc_id": 0}) + "\n")
    ui = observe(project, ["lm_eval_logs"])["lm_eval_logs"]
    assert ui != ABSENT
    assert last_observed(project.instance, dg.AssetKey("lm_eval_logs")) == ui
    assert isinstance(observer_tick(project), dg.SkipReason)


def test_the_observer_skips_while_the_world_is_not_set(tmp_path: Path) -> None:
    from sigmap_assets.resources import SigmapStorage, WorldResource

    world = WorldResource(storage=SigmapStorage(root=str(tmp_path / "s")), kind="folder")
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance, resources={"world": world}) as ctx:
            result = input_observer(ctx)
    assert isinstance(result, dg.SkipReason)
    assert "world kind 'folder' needs a path" in str(result.skip_message)

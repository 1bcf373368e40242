"""The new-model sensor adds each new model once and requests one token_nll run per model."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from sigmap_assets.defs.models.sensors import new_model_sensor
from sigmap_assets.resources import SigmapStorage, WorldResource


def _world(tmp_path: Path, ids: list[str]) -> WorldResource:
    root = tmp_path / "world"
    root.mkdir(exist_ok=True)
    (root / "models.yaml").write_text(
        yaml.safe_dump({"models": [{"id": i, "family": "f"} for i in ids]})
    )
    return WorldResource(
        storage=SigmapStorage(root=str(tmp_path / "storage")), kind="folder", path=str(root)
    )


def _tick(instance: dg.DagsterInstance, world: WorldResource, cursor: str | None):
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"world": world}
    ) as ctx:
        result = new_model_sensor(ctx)
    # what the daemon does with the result
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def test_sensor_adds_new_models_once_and_requests_one_run_each(tmp_path: Path) -> None:
    with dg.instance_for_test() as instance:
        world = _world(tmp_path, ["EleutherAI/pythia-160m", "gpt2"])
        r1 = _tick(instance, world, None)
        assert sorted(instance.get_dynamic_partitions("models")) == [
            "EleutherAI__pythia-160m",
            "gpt2",
        ]
        nll_runs = [r for r in r1.run_requests if r.partition_key]
        assert sorted(r.partition_key for r in nll_runs) == ["EleutherAI__pythia-160m", "gpt2"]
        assert len({r.run_key for r in r1.run_requests}) == len(r1.run_requests)
        assert nll_runs[0].tags["sigmap/model"] in {"EleutherAI/pythia-160m", "gpt2"}

        # same registry again: nothing new
        r2 = _tick(instance, world, r1.cursor)
        assert not r2.run_requests and not r2.dynamic_partitions_requests

        # one model added, one removed: only the new one is requested, nothing is deleted
        world = _world(tmp_path, ["gpt2", "org/new-model"])
        r3 = _tick(instance, world, r2.cursor)
        assert [r.partition_key for r in r3.run_requests if r.partition_key] == ["org__new-model"]
        assert sorted(instance.get_dynamic_partitions("models")) == [
            "EleutherAI__pythia-160m",
            "gpt2",
            "org__new-model",
        ]


def test_sensor_skips_without_registry(tmp_path: Path) -> None:
    with dg.instance_for_test() as instance:
        world = WorldResource(
            storage=SigmapStorage(root=str(tmp_path)), kind="folder", path=str(tmp_path / "nowhere")
        )
        with dg.build_sensor_context(instance=instance, resources={"world": world}) as ctx:
            result = new_model_sensor(ctx)
        assert isinstance(result, dg.SkipReason)

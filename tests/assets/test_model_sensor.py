"""The new-model sensor adds each new model once (its token_nll cells are then filled by
automation) and requests one registry/scores re-read per change."""

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


def test_sensor_adds_new_models_once_and_requests_no_run(tmp_path: Path) -> None:
    """New models become partitions; the registry is re-read by automation (its input is
    observed), the cells are filled by automation: the sensor requests nothing."""
    with dg.instance_for_test() as instance:
        world = _world(tmp_path, ["EleutherAI/pythia-160m", "gpt2"])
        r1 = _tick(instance, world, None)
        assert sorted(instance.get_dynamic_partitions("models")) == [
            "EleutherAI__pythia-160m",
            "gpt2",
        ]
        assert not r1.run_requests

        # same registry again: nothing new
        r2 = _tick(instance, world, r1.cursor)
        assert not r2.run_requests and not r2.dynamic_partitions_requests

        # one model added, one removed: only the new one is added, nothing is deleted
        world = _world(tmp_path, ["gpt2", "org/new-model"])
        r3 = _tick(instance, world, r2.cursor)
        [add] = r3.dynamic_partitions_requests
        assert list(add.partition_keys) == ["org__new-model"] and not r3.run_requests
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


def test_sensor_requests_the_cells_of_a_model_whose_files_changed(tmp_path: Path) -> None:
    import os

    root = tmp_path / "world"
    (root / "models" / "a").mkdir(parents=True)
    (root / "models" / "b").mkdir(parents=True)
    for n in ("a", "b"):
        (root / "models" / n / "model.safetensors").write_bytes(b"x" * 10)
    (root / "models.yaml").write_text(
        yaml.safe_dump(
            {"models": [{"id": f"local/{n}", "path": f"models/{n}"} for n in ("a", "b")]}
        )
    )
    world = WorldResource(
        storage=SigmapStorage(root=str(tmp_path / "storage")), kind="folder", path=str(root)
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("shards", ["s1", "s2"])
        r1 = _tick(instance, world, None)
        assert not [r for r in r1.run_requests if r.partition_key]
        r2 = _tick(instance, world, r1.cursor)
        assert not r2.run_requests  # nothing changed
        w = root / "models" / "a" / "model.safetensors"
        w.write_bytes(b"y" * 10)  # same size, new content and mtime
        st = w.stat()
        os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        r3 = _tick(instance, world, r2.cursor)
        assert sorted(r.partition_key for r in r3.run_requests) == ["local__a|s1", "local__a|s2"]
        assert all(r.asset_selection == [dg.AssetKey("token_nll")] for r in r3.run_requests)
        r4 = _tick(instance, world, r3.cursor)
        assert not r4.run_requests  # requested once per change

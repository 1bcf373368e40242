"""The code location loads, validates with the Dagster CLI, and its graph is as reviewed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from sigmap_assets.definitions import defs

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("graph_snapshot.json")


def _partitions_name(pdef) -> str | None:
    if isinstance(pdef, dg.DynamicPartitionsDefinition):
        return pdef.name
    if isinstance(pdef, dg.MultiPartitionsDefinition):
        return " × ".join(f"{d.name}:{d.partitions_def.name}" for d in pdef.partitions_defs)
    return None


def graph_snapshot() -> dict:
    d = defs()
    graph = d.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "partitions": _partitions_name(node.partitions_def),
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "checks": sorted(c.name for c in node.check_keys),
            "automation": node.automation_condition.get_label()
            if node.automation_condition
            else None,
        }
    return {
        "assets": assets,
        "sensors": sorted(s.name for s in d.sensors or []),
        "schedules": sorted(s.name for s in d.schedules or []),
        "resources": sorted((d.resources or {}).keys()),
    }


def test_graph_snapshot_matches() -> None:
    """Any change to keys, partitions, deps, checks or automation shows up in review.

    Regenerate with ``SIGMAP_UPDATE_SNAPSHOT=1 pytest tests/assets/test_definitions.py``.
    """
    snap = graph_snapshot()
    if os.environ.get("SIGMAP_UPDATE_SNAPSHOT") or not SNAPSHOT.exists():
        SNAPSHOT.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    assert snap == json.loads(SNAPSHOT.read_text())


def test_dagster_definitions_validate(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "SIGMAP_STORAGE": str(tmp_path / "storage")}
    exe = Path(sys.executable).with_name("dagster")
    out = subprocess.run(
        [str(exe), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_dg_check_defs(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "SIGMAP_STORAGE": str(tmp_path / "storage")}
    exe = Path(sys.executable).with_name("dg")
    out = subprocess.run(
        [str(exe), "check", "defs"], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run(
        [str(exe), "list", "defs"], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "token_nll" in out.stdout


def test_token_nll_runs_on_the_gpu_pool_with_k8s_tags() -> None:
    node = defs().resolve_asset_graph().get(dg.AssetKey("token_nll"))
    assets_def = node.assets_def
    op = assets_def.op
    assert op.pool == "gpu"
    tag = op.tags["dagster-k8s/config"]
    limits = (json.loads(tag) if isinstance(tag, str) else tag)["container_config"]["resources"][
        "limits"
    ]
    assert limits["nvidia.com/gpu"] == "1"
    assert assets_def.backfill_policy == dg.BackfillPolicy.multi_run(1)


def test_every_sensor_is_described_and_runs_by_default() -> None:
    """The UI shows each sensor's docstring (``@sigmap_sensor``) and starts it running."""
    sensors = {s.name: s for s in defs().sensors or []}
    assert {"input_observer", "new_model_sensor", "catalog_sensor"} <= set(sensors)
    for name, sensor in sensors.items():
        assert sensor.description and len(sensor.description) > 40, name
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING, name

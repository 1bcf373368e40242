"""Scored models in the graph: the lm-eval logs sensor adds one `scored_models` partition per
model folder, requests a run per change, and the asset scores the model with the fit."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from sigmap_assets.defs.metabench.scored import lm_eval_logs_sensor
from sigmap_lib.irt import estimate_theta
from sigmap_lib.metabench import MetabenchFit, load_benchmark_fit, load_item_pool
from tests.assets.harness import Project

pytestmark = pytest.mark.slow


def _tick(project: Project):
    with dg.build_sensor_context(
        instance=project.instance, resources={"world": project.world}
    ) as ctx:
        result = lm_eval_logs_sensor(ctx)
    for req in getattr(result, "dynamic_partitions_requests", None) or []:
        project.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    return result


def _write_logs(root: Path, model: str, fit: MetabenchFit, seed: int) -> None:
    folder = root / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"model_name": model}))
    rng = np.random.default_rng(seed)
    for bm, items in fit.selected.items():
        lines = [
            json.dumps({"doc_id": i, "doc": {"item_id": it}, "acc": float(rng.random() < 0.6)})
            for i, it in enumerate(items)
        ]
        (folder / f"samples_sigmap_{bm}_2026-01-01T00-00-00.jsonl").write_text("\n".join(lines))


def _assert_table(project: Project, asset: str, key: str, frame: pd.DataFrame) -> None:
    """The partition's row count and columns in the UI are those of the stored table."""
    from sigmap_assets.metadata import COLUMN_SCHEMA, ROW_COUNT

    [record] = project.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    meta = record.asset_materialization.metadata
    assert meta[ROW_COUNT].value == len(frame), (asset, key)
    names = [c.name for c in meta[COLUMN_SCHEMA].schema.columns]
    assert names == [str(c) for c in frame.columns], (asset, key)


def test_logs_sensor_and_scored_models(project: Project) -> None:
    project.through("items")
    brange = project._brange()
    for stage in ("irt_item_pool", "irt_fits", "metabench_selection"):
        project.materialize([stage], prange=brange)
    project.materialize(["metabench"])
    fit = MetabenchFit.load(project.storage.layout.metabench_fit())
    layout = project.storage.layout
    assert fit.benchmarks
    for key in fit.benchmarks:  # each pool and selection is a table in the UI
        assert layout.metabench_selection_fit(key).exists()
        pool = load_item_pool(layout.metabench_stage(key, "pool"))
        _assert_table(project, "irt_item_pool", key, pool.item_stats)
        selection = load_benchmark_fit(layout.metabench_stage(key, "selection"))
        _assert_table(project, "metabench_selection", key, selection.params)

    assert isinstance(_tick(project), dg.SkipReason)  # no logs yet
    logs = project.world.lm_eval_logs()
    _write_logs(logs, "org/new-model", fit, seed=1)
    _write_logs(logs, "org/other", fit, seed=2)
    r1 = _tick(project)
    assert sorted(project.instance.get_dynamic_partitions("scored_models")) == [
        "org__new-model",
        "org__other",
    ]
    keys1 = {r.partition_key: r.run_key for r in r1.run_requests}
    assert {r.partition_key: r.run_key for r in _tick(project).run_requests} == keys1  # idempotent

    res = project.materialize(["scored_models"], partition="org__new-model")
    meta = res.get_asset_materialization_events()[0].materialization.metadata
    assert "org/new-model" in meta["scores"].value and "90% interval" in meta["scores"].value
    stored = json.loads(project.storage.layout.scored_model("org__new-model").read_text())
    [model] = stored["models"]
    assert model["model"] == "org/new-model"
    for bm, f in fit.benchmarks.items():
        samples = next((logs / "org__new-model").glob(f"samples_sigmap_{bm}_*.jsonl"))
        acc = {
            json.loads(x)["doc"]["item_id"]: json.loads(x)["acc"]
            for x in samples.read_text().splitlines()
        }
        ref = estimate_theta(f.params, pd.DataFrame([acc], index=["m"])[f.selected], f.theta_method)
        assert model["benchmarks"][bm]["theta"] == pytest.approx(
            float(ref["theta"].iloc[0]), abs=1e-9
        )
        lo, hi = model["benchmarks"][bm]["score_interval"]
        assert lo <= model["benchmarks"][bm]["score"] <= hi
    assert model["grand"]["score"] is not None

    _write_logs(logs, "org/new-model", fit, seed=3)  # a new run of the same model
    keys2 = {r.partition_key: r.run_key for r in _tick(project).run_requests}
    assert keys2["org__other"] == keys1["org__other"]
    assert keys2["org__new-model"] != keys1["org__new-model"]

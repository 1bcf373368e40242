"""The whole graph runs in-process on a small synthetic world, and a second run is a no-op."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from tests.assets.harness import Project


def test_graph_end_to_end_on_synthetic_world(project: Project) -> None:
    project.through("report")
    layout = project.storage.layout
    report = layout.report("overlap_report.html")
    assert report.exists() and report.stat().st_size > 10_000
    summary = json.loads(layout.report("overlap_summary.json").read_text())
    assert set(summary["levels"]) == {"semantic", "performance", "signature"}
    # the planted world: every benchmark's signature finds a planted unit of its function
    assert summary["planted_recovery"]["hit_rate"] >= 0.5
    # a signature is stored with its units' text and left context
    key = project.keys("benchmarks")[0]
    units = pl.read_parquet(layout.signature_units(key))
    assert units.height >= 1 and units["text"].str.len_chars().min() > 0
    sig = np.load(layout.overlap_arrays("signature"))
    v = sig["values"]
    assert np.allclose(np.diag(v), 1) and np.allclose(v, v.T, equal_nan=True)
    assert np.nanmin(sig["p_value"]) > 0
    # each model's signature score: the mean z-scored bits per byte over the signature's
    # units, each unit oriented by its stored statistic (coefficient where it has none)
    from sigmap_assets.state import StoredState

    inputs = StoredState.read(project.storage).signature_inputs(project.keys("benchmarks"))
    nbytes, mean, sd = inputs.corpus.unit_nbytes, inputs.ranks.bpb_mean, inputs.ranks.bpb_sd
    labels = sig["labels"].tolist()
    for k, units in inputs.signatures.items():
        if units.size == 0:
            continue
        table = pl.read_parquet(layout.signature_units(k))
        expected = np.zeros(len(inputs.models))
        for u, stat, coef in zip(units, table["statistic"], table["coef"]):
            o = np.sign(stat) if np.isfinite(stat) else -np.sign(coef)
            for i, arr in enumerate(inputs.nll_arrays):
                bpb = float(arr[int(u)]) / (nbytes[int(u)] * np.log(2))
                expected[i] += o * (bpb - mean[i]) / sd[i] / units.size
        np.testing.assert_allclose(sig["model_scores"][:, labels.index(k)], expected, rtol=1e-5)


def test_benchmark_with_constant_scores_is_skipped_not_fatal(project: Project) -> None:
    """One benchmark whose scores are all equal is reported as not screenable; the
    single-run screening and selection still serve every other benchmark."""
    world = Path(project.world.path)
    scores = pl.read_csv(world / "scores.csv")
    victim = scores.columns[1]
    scores.with_columns(pl.lit(50.0).alias(victim)).write_csv(world / "scores.csv")
    project.through("signatures")
    layout = project.storage.layout
    keys = project.keys("benchmarks")
    summary = json.loads(layout.screening_summary(victim).read_text())
    assert "constant" in summary["skipped"]
    assert json.loads(layout.signature_summary(victim).read_text())["skipped"]
    others = [k for k in keys if k != victim]
    for k in others:
        assert len(json.loads(layout.signature_summary(k).read_text())["units"]) >= 1

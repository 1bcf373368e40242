"""The calibrated default end to end: signatures (empty ones included) pass the blocking
check, empty signatures give NaN signature-level pairs with their reason, and the report and
the UI metadata say "no signature above chance"."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tests.assets.harness import Project

pytestmark = pytest.mark.slow


def test_calibrated_default_with_empty_signatures_end_to_end(project: Project) -> None:
    project.through("screening")
    res = project.materialize(
        ["signatures"],
        prange=project._brange(),
        run_config={"ops": {"signatures": {"config": {"permutations": 99}}}},
    )
    layout = project.storage.layout
    keys = project.keys("benchmarks")
    checks = res.get_asset_check_evaluations()  # one per benchmark, and the range's overall
    assert {c.partition for c in checks} == {*keys, None}
    assert all(c.passed for c in checks), [c.metadata for c in checks if not c.passed]
    empty = []
    for k in keys:
        s = json.loads(layout.signature_summary(k).read_text())
        assert s["method"] == "calibrated" and s["calibration"]["n_permutations"] == 99
        units = pl.read_parquet(layout.signature_units(k))
        assert set(units.columns) >= {"statistic", "adjusted_p", "left_context"}
        if s["empty"]:
            empty.append(k)
            assert "no unit above the max-T threshold" in s["calibration"]["reason"]
        else:
            assert (units["adjusted_p"] <= 0.05).all()
            assert (units["statistic"].abs() > s["calibration"]["threshold"]).all()
    assert empty, "12 models and d = 3,000: some benchmark has no signature above chance"
    meta = res.get_asset_materialization_events()[0].materialization.metadata
    assert sorted(meta["empty"].value) == sorted(empty)
    assert "_no unit above the max-T threshold" in meta["signatures"].value
    assert "data:image/png;base64" in meta["null_plots"].value  # threshold vs null, per benchmark

    project.through("overlap")  # the harness re-runs signatures in the paper's mode:
    project.materialize(  # run the calibrated default again, then the overlaps
        ["signatures"],
        prange=project._brange(),
        run_config={"ops": {"signatures": {"config": {"permutations": 99}}}},
    )
    project.materialize(
        ["signature_overlap"],
        run_config={
            "ops": {"signature_overlap": {"config": {"n_permutations": 3, "n_bootstrap": 20}}}
        },
    )
    npz = np.load(layout.overlap_arrays("signature"))
    labels = npz["labels"].tolist()
    assert sorted(npz["no_signature_labels"].tolist()) == sorted(empty)
    v = npz["values"]
    for k in empty:
        i = labels.index(k)
        assert np.isnan(np.delete(v[i], i)).all()
    project.materialize(
        ["overlap_report"],
        run_config={
            "ops": {"overlap_report": {"config": {"n_model_subsets": 1, "alignment": False}}}
        },
    )
    html = layout.report("overlap_report.html").read_text()
    assert "no signature above chance at m = 12" in html
    summary = json.loads(layout.report("overlap_summary.json").read_text())
    assert sorted(summary["no_signature"]) == sorted(empty)
    assert summary["levels"]["signature"]["left_out"]["pairs_left_out"] > 0


def test_the_world_settings_choose_the_strata_unless_the_run_says(
    project: Project, synthetic_world
) -> None:
    """settings.yaml → `signatures: strata: family` stratifies the calibrated test by the
    registry family (here 4 families of 12 models: too few residual degrees of freedom,
    refused with the reason); a run config `strata: none` takes precedence."""
    import yaml

    settings = synthetic_world / "settings.yaml"
    current = (yaml.safe_load(settings.read_text()) if settings.exists() else None) or {}
    settings.write_text(yaml.safe_dump(current | {"signatures": {"strata": "family"}}))
    registry = yaml.safe_load((synthetic_world / "models.yaml").read_text())["models"]
    assert len({m["family"] for m in registry}) == 4
    project.through("screening")
    layout = project.storage.layout

    def run(strata: str):
        return project.materialize(
            ["signatures"],
            prange=project._brange(),
            raise_on_error=False,
            run_config={"ops": {"signatures": {"config": {"permutations": 19, "strata": strata}}}},
        )

    res = run("")  # the world's setting: family
    assert not res.success
    failure = next(e for e in res.all_events if e.event_type_value == "STEP_FAILURE")
    assert "12 scored models in 4 strata" in str(failure.event_specific_data.error)
    res = run("none")  # the run config wins
    assert res.success
    s = json.loads(layout.signature_summary(project.keys("benchmarks")[0]).read_text())
    assert s["strata"] is None and s["strata_labels"] is None

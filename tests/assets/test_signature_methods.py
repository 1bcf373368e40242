"""A signature method registered by a user runs through the graph: one class and one table
row, then the `method` option of the signatures asset selects it, its blocking check judges
it by its class attributes, and the signature level's null re-extracts with it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

from sigmap_lib.signatures import (
    SIGNATURE_METHODS,
    Interval,
    Signature,
    SignatureMethod,
    register_method,
    screen,
)
from tests.assets.harness import Project

pytestmark = pytest.mark.slow


class StrongestUnits(SignatureMethod):
    """A toy method: each benchmark's ``n`` units of largest |Thrush correlation|."""

    name: ClassVar[str] = "toy-strongest"
    reads_values: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {"n": [Interval(int, 1, None)]}

    def __init__(self, *, n: int = 3, two_sided: bool = True) -> None:
        self.n = n
        self.two_sided = two_sided

    def _extract(self, source, scores, run):
        found = screen(
            source,
            scores,
            k=self.n,
            two_sided=self.two_sided,
            chunk_units=run.chunk_units,
            benchmark_names=run.names,
        )
        used = ~np.isnan(scores)
        return [
            Signature(name, r.indices, used[:, b], method=self.name)
            for b, (name, r) in enumerate(zip(run.names, found))
        ]


@pytest.fixture
def toy_method() -> Iterator[type[SignatureMethod]]:
    register_method(StrongestUnits)
    yield StrongestUnits
    del SIGNATURE_METHODS[StrongestUnits.name]


def test_a_registered_method_runs_through_the_graph(project: Project, toy_method) -> None:
    project.through("screening")
    config = {"method": toy_method.name}
    res = project.materialize(
        ["signatures"],
        prange=project._brange(),
        run_config={"ops": {"signatures": {"config": config}}},
    )
    checks = res.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks), [c.metadata for c in checks]
    layout = project.storage.layout
    keys = project.keys("benchmarks")
    for k in keys:
        s = json.loads(layout.signature_summary(k).read_text())
        assert s["method"] == toy_method.name and len(s["units"]) == 3, s
        assert s["settings"]["method"] == toy_method.name
        assert s["calibration"] is None
    res = project.materialize(
        ["signature_overlap"],
        run_config={
            "ops": {"signature_overlap": {"config": {"n_permutations": 3, "n_bootstrap": 10}}}
        },
    )
    assert res.success
    npz = np.load(layout.overlap_arrays("signature"))
    assert sorted(npz["labels"].tolist()) == sorted(keys)
    assert np.isfinite(npz["values"]).all()  # every pair: each signature has its 3 units


def test_an_unknown_method_fails_the_asset_with_one_line(project: Project) -> None:
    project.through("screening")
    res = project.materialize(
        ["signatures"],
        prange=project._brange(),
        run_config={"ops": {"signatures": {"config": {"method": "stepwise"}}}},
        raise_on_error=False,
    )
    assert not res.success
    text = " ".join(
        e.event_specific_data.error.to_string()
        for e in res.all_events
        if e.event_type_value == "STEP_FAILURE"
    )
    assert "unknown signature method 'stepwise'; known: calibrated" in text


def test_a_request_of_only_skipped_benchmarks_stores_their_reasons(project: Project) -> None:
    """A benchmark that screening skipped (as it writes it: no candidates, the reason), run
    alone: the signature stores the reason and the run succeeds."""
    from sigmap_assets.tables import write_json

    project.through("screening")
    layout = project.storage.layout
    key = project.keys("benchmarks")[0]
    screen = json.loads(layout.screening_summary(key).read_text())
    why = "only 3 scored models; screening needs >= 4"
    write_json(
        {"benchmark": key, "skipped": why, "ranks_dir": screen["ranks_dir"]},
        layout.screening_summary(key),
    )
    res = project.materialize(["signatures"], partition=key)
    assert res.success
    s = json.loads(layout.signature_summary(key).read_text())
    assert s["skipped"] == why and s["units"] == []


def test_multiresolution_and_fdr_run_through_the_graph(project: Project) -> None:
    """The world's `signatures:` settings choose the method: sources and documents tested
    beside units, their claims stored per level; the signature level's null re-extracts
    with the same levels; then the false-discovery mode from the run config."""
    project.through("screening")
    settings = project.world.root() / "settings.yaml"
    settings.write_text(
        "signatures:\n  method: calibrated-multiresolution\n  levels: [source, document]\n"
    )
    res = project.materialize(["signatures"], prange=project._brange())
    checks = res.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks), [c.metadata for c in checks]
    layout, keys = project.storage.layout, project.keys("benchmarks")
    ran = 0
    for k in keys:
        s = json.loads(layout.signature_summary(k).read_text())
        if "skipped" in s:
            continue
        ran += 1
        assert s["method"] == "calibrated-multiresolution"
        assert s["settings"]["hierarchy"] == "source,document"
        assert [lv["level"] for lv in s["levels"]] == ["source", "document", "unit"]
        assert all(isinstance(d, int) for d in s["levels"][1]["groups"])
        assert all(src.endswith((".txt", ".jsonl", ".parquet")) for src in s["levels"][0]["groups"])
    assert ran >= 2
    import polars as pl

    for k in keys:  # each stored unit names the level of the claim that holds it
        table = pl.read_parquet(layout.signature_units(k))
        assert set(table["level"].to_list()) <= {"source", "document", "unit"}
    for level in ("", "document"):
        config = {"n_permutations": 3, "n_bootstrap": 10, "level": level}
        res = project.materialize(
            ["signature_overlap"], run_config={"ops": {"signature_overlap": {"config": config}}}
        )
        assert res.success
        (mat,) = res.get_asset_materialization_events()
        assert mat.materialization.metadata["claims"].value == (level or "all")
    config = {"n_permutations": 3, "level": "paragraph"}
    res = project.materialize(
        ["signature_overlap"],
        run_config={"ops": {"signature_overlap": {"config": config}}},
        raise_on_error=False,
    )
    from sigmap_assets.lanes import failure_message

    (failure,) = res.get_step_failure_events()
    assert failure_message(failure).startswith(
        "SigmapInputError: signature_overlap: level='paragraph' is not a level of the signatures"
    )
    res = project.materialize(
        ["signatures"],
        prange=project._brange(),
        run_config={"ops": {"signatures": {"config": {"method": "calibrated", "fdr": 0.1}}}},
    )
    assert res.success
    for k in keys:
        s = json.loads(layout.signature_summary(k).read_text())
        if "skipped" not in s:
            assert s["calibration"]["fdr"] == 0.1 and s["settings"]["fdr"] == 0.1

"""Asset checks keep one status per partition: per token_nll cell, per benchmark for the
screening and the signatures (also when one run covers a range of benchmarks), so the UI's
Partitions tab shows each cell's and each benchmark's check."""

from __future__ import annotations

import dagster as dg
import numpy as np
import polars as pl
import pytest

from sigmap_assets.defs.signatures.checks import candidate_problems
from tests.assets.harness import Project

pytestmark = pytest.mark.slow


def _statuses(project: Project, asset: str, check: str) -> dict[str, str]:
    key = dg.AssetCheckKey(dg.AssetKey(asset), check)
    recs = project.instance.event_log_storage.get_asset_check_execution_history(key, limit=1000)
    out: dict[str, str] = {}
    for r in sorted(recs, key=lambda r: r.id):  # oldest first: the latest wins
        if r.partition is not None:
            out[r.partition] = r.status.value
    return out


def test_one_check_status_per_cell_and_per_benchmark(project: Project) -> None:
    project.through("signatures")
    cells = _statuses(project, "token_nll", "token_nll_valid")
    assert set(cells) == set(project.cells()) and set(cells.values()) == {"SUCCEEDED"}
    benchmarks = set(project.keys("benchmarks"))
    for asset, check in (
        ("screened_candidates", "candidates_valid"),
        ("signatures", "signature_valid"),
    ):
        got = _statuses(project, asset, check)
        assert set(got) == benchmarks, (check, got)
        assert set(got.values()) == {"SUCCEEDED"}, (check, got)


def test_candidate_problems_are_named() -> None:
    good = pl.DataFrame({"unit": [4, 1, 9], "strength": [0.9, 0.5, 0.2]})
    assert candidate_problems(good) is None
    assert "repeated" in candidate_problems(good.with_columns(pl.Series("unit", [4, 4, 9])))
    assert "strongest first" in candidate_problems(
        good.with_columns(pl.Series("strength", [0.1, 0.5, 0.2]))
    )
    assert "non-finite" in candidate_problems(
        good.with_columns(pl.Series("strength", [0.9, np.nan, 0.2]))
    )

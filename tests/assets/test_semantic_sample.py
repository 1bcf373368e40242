"""`semantic_overlap` embeds a seeded sample of each benchmark's questions when the world's
`settings.yaml` (`semantic: max_questions`) or the run config caps them."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from sigmap_lib.overlap import load_overlap_matrix
from tests.assets.harness import Project


def _semantic(project: Project, **config) -> tuple[int, np.ndarray]:
    project.materialize(
        ["semantic_overlap"],
        run_config={"ops": {"semantic_overlap": {"config": {"T": 50, **config}}}},
    )
    ev = project.instance.get_latest_materialization_event(dg.AssetKey("semantic_overlap"))
    meta = ev.asset_materialization.metadata
    layout = project.storage.layout
    matrix = load_overlap_matrix(
        layout.overlap_table("semantic"), layout.overlap_arrays("semantic")
    )
    return int(meta["questions"].value), np.asarray(matrix.values)


@pytest.mark.slow
def test_the_world_settings_cap_the_embedded_questions(
    project: Project, synthetic_world: Path
) -> None:
    project.materialize(["model_zoo"])
    project.materialize(["model_registry", "benchmark_catalog"])
    project.sync()
    project.materialize(["benchmark_items"], prange=project._brange())
    n_all, full = _semantic(project)
    assert n_all == 6 * 30  # the small world: 6 benchmarks of 30 questions
    (synthetic_world / "settings.yaml").write_text("semantic:\n  max_questions: 12\n")
    n_cap, capped = _semantic(project)
    assert n_cap == 6 * 12
    assert not np.allclose(capped, full)  # another sample, another estimate
    np.testing.assert_allclose(np.diag(capped), np.diag(full))  # self-similarity stays 1
    assert _semantic(project, max_questions=0)[0] == n_all  # the run config wins: all
    assert _semantic(project, max_questions=5)[0] == 6 * 5

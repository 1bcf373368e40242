"""Checks on the overlap matrices: symmetric, unit diagonal, values in [−1, 1]."""

import dagster as dg
import numpy as np

from sigmap_assets.defs.overlap.assets import (
    performance_overlap,
    semantic_overlap,
    signature_overlap,
)
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.skips import asset_skip_reason
from sigmap_assets.state import StoredState


def matrix_problems(values: np.ndarray) -> list[str]:
    v = np.asarray(values, dtype=float)
    problems = []
    if v.ndim != 2 or v.shape[0] != v.shape[1]:
        return [f"not square: {v.shape}"]
    both = np.isfinite(v) & np.isfinite(v.T)
    if not np.allclose(v[both], v.T[both], atol=1e-9) or not np.array_equal(
        np.isnan(v), np.isnan(v.T)
    ):
        problems.append("not symmetric")
    if not np.allclose(np.diag(v), 1.0, atol=1e-9):
        problems.append(f"diagonal is not 1: {np.diag(v)[:10].tolist()}")
    f = v[np.isfinite(v)]
    if f.size and (f.min() < -1 - 1e-9 or f.max() > 1 + 1e-9):
        problems.append(f"values outside [-1, 1]: min {f.min():.4g}, max {f.max():.4g}")
    return problems


def _make_check(asset, name: str):
    @dg.asset_check(
        asset=asset,
        name=f"{name}_matrix_valid",
        blocking=True,
        description="Symmetric, unit diagonal, values in [−1, 1].",
    )
    def _check(storage: SigmapStorage) -> dg.AssetCheckResult:
        m = StoredState.read(storage).load_matrix(name)
        if m is None:  # the level was skipped on this world (its reason is recorded) or not run
            reason = asset_skip_reason(storage, f"{name}_overlap")
            return dg.AssetCheckResult(
                passed=reason is not None,
                metadata={"skipped": reason or f"no stored {name} matrix: run {name}_overlap"},
            )
        problems = matrix_problems(m.values)
        return dg.AssetCheckResult(
            passed=not problems,
            metadata={
                "problems": dg.MetadataValue.json(problems),
                "nan_pairs": int(np.isnan(m.values).sum() // 2),
            },
        )

    return _check


performance_matrix_valid = _make_check(performance_overlap, "performance")
semantic_matrix_valid = _make_check(semantic_overlap, "semantic")
signature_matrix_valid = _make_check(signature_overlap, "signature")

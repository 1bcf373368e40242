"""Checks on signatures: non-empty, finite coefficients."""

import dagster as dg
import numpy as np

from sigmap_assets.defs.signatures.assets import signatures
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import read_json


def _keys(context: dg.AssetCheckExecutionContext) -> list[str]:
    ctx = context.op_execution_context
    return list(ctx.partition_keys) if ctx.has_partition_key_range or ctx.has_partition_key else []


@dg.asset_check(
    asset=signatures,
    blocking=True,
    description="Each signature selects >= 1 unit with finite coefficients and R² in [0, 1].",
)
def signature_nonempty_finite(
    context: dg.AssetCheckExecutionContext, storage: SigmapStorage
) -> dg.AssetCheckResult:
    problems = {}
    for key in _keys(context):
        s = read_json(storage.layout.signature_summary(key))
        if "skipped" in s:
            continue  # not screenable (constant scores): reported by the asset, nothing to check
        coef = np.asarray(s["coef"], dtype=float)
        if len(s["units"]) == 0:
            problems[key] = "empty signature (no unit lowered the criterion)"
        elif not np.all(np.isfinite(coef)):
            problems[key] = "non-finite coefficients"
        elif not (0.0 <= s["r2"] <= 1.0 + 1e-9):
            problems[key] = f"R² {s['r2']} outside [0, 1]"
    return dg.AssetCheckResult(
        passed=not problems, metadata={"problems": dg.MetadataValue.json(problems)}
    )

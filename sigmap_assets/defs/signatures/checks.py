"""Checks on signatures: finite values and a consistent stored calibration. An empty
signature ("no signature above chance") is a valid result, not a failure."""

import dagster as dg
import numpy as np

from sigmap_assets.defs.signatures.assets import signatures
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import read_json


def _keys(context: dg.AssetCheckExecutionContext) -> list[str]:
    ctx = context.op_execution_context
    return list(ctx.partition_keys) if ctx.has_partition_key_range or ctx.has_partition_key else []


def signature_problems(s: dict) -> str | None:
    """What is wrong with one stored signature summary (None when nothing is)."""
    method = s.get("method", s.get("criterion", "aic"))
    units = s["units"]
    coef = np.asarray([np.nan if c is None else c for c in s["coef"]], dtype=float)
    if len(coef) != len(units):
        return f"{len(coef)} coefficients for {len(units)} units"
    if method in ("aic", "bic", "ebic", "lasso") and units and not np.all(np.isfinite(coef)):
        return "non-finite coefficients"
    if "r2" in s and units and not (0.0 <= s["r2"] <= 1.0 + 1e-9):
        return f"R² {s['r2']} outside [0, 1]"
    cal = s.get("calibration")
    if method.startswith("calibrated"):
        if not cal:
            return "no stored calibration"
        null = np.asarray([np.nan if v is None else v for v in cal["null_max"]], dtype=float)
        if len(null) != cal["n_permutations"] or not np.all(np.isfinite(null)):
            return (
                f"null sample of {len(null)} (P = {cal['n_permutations']}) with non-finite values"
            )
        t = cal["threshold"]
        if t is None or not np.isfinite(t):
            return "non-finite threshold"
        if cal["units"] != units:
            return "calibration units differ from the signature's"
        strength = np.abs(np.asarray(cal["values"], dtype=float))
        if units and not np.all(strength > t):
            return "a signature unit does not exceed the threshold"
        p = np.asarray(cal["adjusted_p"], dtype=float)
        if units and not np.all((p > 0) & (p <= 1)):
            return "adjusted p-values outside (0, 1]"
        if not units and not cal.get("reason"):
            return "empty signature without a reason"
    return None


@dg.asset_check(
    asset=signatures,
    blocking=True,
    description=(
        "Each signature is finite and consistent with its stored calibration: for the "
        "calibrated methods a finite threshold and null sample of P values, every unit above "
        "the threshold with an adjusted p in (0, 1], and a reason when it is empty (an empty "
        "signature is a result, not a failure); finite coefficients and R² in [0, 1] for the "
        "fitted methods."
    ),
)
def signature_valid(
    context: dg.AssetCheckExecutionContext, storage: SigmapStorage
) -> dg.AssetCheckResult:
    problems, empty = {}, []
    for key in _keys(context):
        s = read_json(storage.layout.signature_summary(key))
        if "skipped" in s:
            continue  # not screenable (constant scores): reported by the asset, nothing to check
        if not s["units"]:
            empty.append(key)
        why = signature_problems(s)
        if why:
            problems[key] = why
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "problems": dg.MetadataValue.json(problems),
            "empty_signatures": dg.MetadataValue.json(empty),
        },
    )

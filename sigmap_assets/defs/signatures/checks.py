"""Checks on screening and signatures, one result per benchmark: stored candidates are
distinct units with finite statistics, strongest first; signatures are finite and consistent
with their stored calibration. An empty signature ("no signature above chance") is a valid
result, not a failure."""

import dagster as dg
import numpy as np
import polars as pl

from sigmap_assets.check_results import check_partition_keys, partitioned_check_result
from sigmap_assets.defs.signatures.assets import screened_candidates, signatures
from sigmap_assets.partitions import benchmarks_partitions
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import read_json


def candidate_problems(frame: pl.DataFrame) -> str | None:
    """What is wrong with one benchmark's stored candidates (None when nothing is)."""
    units = frame["unit"].to_numpy()
    strength = frame["strength"].to_numpy()
    if units.size and (units.min() < 0 or np.unique(units).size != units.size):
        return "candidate units are negative or repeated"
    if not np.all(np.isfinite(strength)):
        return "non-finite candidate strengths"
    if np.any(np.diff(strength) > 1e-12):
        return "candidates are not ordered strongest first"
    return None


@dg.asset_check(
    asset=screened_candidates,
    partitions_def=benchmarks_partitions,
    description=(
        "Per benchmark: the stored candidates are distinct, non-negative units with finite "
        "strengths, strongest first."
    ),
)
def candidates_valid(
    context: dg.AssetCheckExecutionContext, storage: SigmapStorage
) -> dg.AssetCheckResult:
    results = {}
    for key in check_partition_keys(context):
        path = storage.layout.screening_candidates(key)
        if not path.exists():
            results[key] = (False, {"problem": "no stored candidates"})
            continue
        frame = pl.read_parquet(path)
        why = candidate_problems(frame)
        results[key] = (why is None, {"candidates": frame.height, "problem": why or ""})
    bad = {k: m["problem"] for k, (ok, m) in results.items() if not ok}
    return partitioned_check_result(
        context, screened_candidates.key, "candidates_valid", results,
        summary={"problems": dg.MetadataValue.json(bad)},
    )  # fmt: skip


def signature_problems(s: dict) -> str | None:
    """What is wrong with one stored signature summary (None when nothing is)."""
    from sigmap_lib.signatures import method_class

    method = method_class(s["method"])
    units = s["units"]
    coef = np.asarray([np.nan if c is None else c for c in s["coef"]], dtype=float)
    if len(coef) != len(units):
        return f"{len(coef)} coefficients for {len(units)} units"
    if method.fits_coefficients and units and not np.all(np.isfinite(coef)):
        return "non-finite coefficients"
    if "r2" in s and units and not (0.0 <= s["r2"] <= 1.0 + 1e-9):
        return f"R² {s['r2']} outside [0, 1]"
    cal = s.get("calibration")
    if method.calibrated:
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
        if "levels" in s:  # multi-resolution: claimed units and the units of claimed groups
            if not set(cal["units"]) <= set(units):
                return "claimed units missing from the signature"
            for lv in s["levels"]:
                st = np.abs(np.asarray(lv["statistics"], dtype=float))
                if not np.all(st > lv["threshold"]):
                    return f"a claimed {lv['level']} does not exceed its threshold"
        elif cal["units"] != units:
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
    partitions_def=benchmarks_partitions,
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
    results = {}
    for key in check_partition_keys(context):
        s = read_json(storage.layout.signature_summary(key))
        if "skipped" in s:  # not testable on this world: reported by the asset
            results[key] = (True, {"skipped": str(s["skipped"])})
            continue
        why = signature_problems(s)
        results[key] = (why is None, {"units": len(s["units"]), "problem": why or ""})
    problems = {k: m["problem"] for k, (ok, m) in results.items() if not ok}
    empty = [k for k, (_, m) in results.items() if m.get("units") == 0]
    return partitioned_check_result(
        context, signatures.key, "signature_valid", results,
        summary={
            "problems": dg.MetadataValue.json(problems),
            "empty_signatures": dg.MetadataValue.json(empty),
        },
    )  # fmt: skip

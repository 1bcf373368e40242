"""Checks on screening and signatures, one result per benchmark: stored candidates are
distinct units with finite statistics, strongest first; signatures are finite and consistent
with their stored calibration. An empty signature ("no signature above chance") is a valid
result, not a failure."""

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg
import numpy as np
import polars as pl

from sigmap_assets.check_results import PartitionResult, check_each_partition
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


def stored_candidates_result(storage: SigmapStorage, key: str) -> PartitionResult:
    """``candidates_valid``'s result for the benchmark ``key``."""
    path = storage.layout.screening_candidates(key)
    if not path.exists():
        return False, {"problem": "no stored candidates"}
    frame = pl.read_parquet(path)
    why = candidate_problems(frame)
    return why is None, {"candidates": frame.height, "problem": why or ""}


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


def stored_signature_result(storage: SigmapStorage, key: str) -> PartitionResult:
    """``signature_valid``'s result for the benchmark ``key``."""
    s = read_json(storage.layout.signature_summary(key))
    if "skipped" in s:  # not testable on this world: reported by the asset
        return True, {"skipped": str(s["skipped"])}
    why = signature_problems(s)
    return why is None, {"units": len(s["units"]), "problem": why or ""}


def _empty_signatures(results: Mapping[str, PartitionResult]) -> dict[str, Any]:
    empty = [k for k, (_, m) in results.items() if m.get("units") == 0]
    return {"empty_signatures": dg.MetadataValue.json(empty)}


def per_benchmark_check(
    asset: dg.AssetsDefinition,
    name: str,
    description: str,
    check_one: Callable[[SigmapStorage, str], PartitionResult],
    *,
    blocking: bool = False,
    summary: Callable[[Mapping[str, PartitionResult]], Mapping[str, Any]] | None = None,
) -> dg.AssetChecksDefinition:
    """An asset check of a benchmark-partitioned asset, one result per benchmark.

    Parameters
    ----------
    asset : dagster.AssetsDefinition
        The checked asset (partitioned by benchmark).
    name : str
        The check's name.
    description : str
    check_one : callable
        ``(storage, benchmark key) -> (passed, metadata)``; see
        :func:`~sigmap_assets.check_results.check_each_partition`.
    blocking : bool
        Whether a failed check stops the assets downstream.
    summary : callable, optional
        Metadata the overall result adds (see ``check_each_partition``).

    Returns
    -------
    dagster.AssetChecksDefinition
    """

    @dg.asset_check(
        asset=asset,
        name=name,
        partitions_def=benchmarks_partitions,
        blocking=blocking,
        description=description,
    )
    def _check(
        context: dg.AssetCheckExecutionContext, storage: SigmapStorage
    ) -> dg.AssetCheckResult:
        return check_each_partition(
            context, asset.key, name, lambda key: check_one(storage, key), summary=summary
        )

    return _check


candidates_valid = per_benchmark_check(
    screened_candidates,
    "candidates_valid",
    "Per benchmark: the stored candidates are distinct, non-negative units with finite "
    "strengths, strongest first.",
    stored_candidates_result,
)

signature_valid = per_benchmark_check(
    signatures,
    "signature_valid",
    "Each signature is finite and consistent with its stored calibration: for the "
    "calibrated methods a finite threshold and null sample of P values, every unit above "
    "the threshold with an adjusted p in (0, 1], and a reason when it is empty (an empty "
    "signature is a result, not a failure); finite coefficients and R² in [0, 1] for the "
    "fitted methods.",
    stored_signature_result,
    blocking=True,
    summary=_empty_signatures,
)

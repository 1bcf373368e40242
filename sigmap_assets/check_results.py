"""Per-partition asset-check results, also from runs over a range of partitions.

A check declared with the asset's ``partitions_def`` gets its result attached to the run's
partition when the run has one. Benchmark-partitioned assets run over a range of benchmarks
in one run (their backfill policy is a single run), where Dagster attaches the returned
result to no partition: :func:`partitioned_check_result` then logs one evaluation per
partition (what the UI's Partitions tab shows for each benchmark) and returns the overall
result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

#: One partition's check outcome: ``(passed, metadata)``.
PartitionResult = tuple[bool, Mapping[str, Any]]


def check_partition_keys(context: dg.AssetCheckExecutionContext) -> list[str]:
    """The partitions this check run covers (one, a range, or none when unpartitioned)."""
    ctx = context.op_execution_context
    if ctx.has_partition_key_range or ctx.has_partition_key:
        return list(ctx.partition_keys)
    return []


def partitioned_check_result(
    context: dg.AssetCheckExecutionContext,
    asset_key: dg.AssetKey,
    check_name: str,
    results: Mapping[str, PartitionResult],
    *,
    summary: Mapping[str, Any] | None = None,
) -> dg.AssetCheckResult:
    """One result per partition (``{key: (passed, metadata)}``), and the overall result.

    With a single-partition run the returned result carries that partition's metadata (Dagster
    attaches it to the partition); over a range each partition's evaluation is logged with its
    partition key and the returned result is the conjunction with ``summary`` as metadata.
    """
    ctx = context.op_execution_context
    if ctx.has_partition_key and not ctx.has_partition_key_range and len(results) == 1:
        [(passed, meta)] = results.values()
        return dg.AssetCheckResult(passed=passed, metadata=dict(meta))
    for key, (passed, meta) in results.items():
        ctx.log_event(
            dg.AssetCheckEvaluation(
                asset_key=asset_key,
                check_name=check_name,
                passed=passed,
                partition=key,
                metadata=dict(meta),
            )
        )
    return dg.AssetCheckResult(
        passed=all(p for p, _ in results.values()), metadata=dict(summary or {})
    )


def check_each_partition(
    context: dg.AssetCheckExecutionContext,
    asset_key: dg.AssetKey,
    check_name: str,
    check_one: Callable[[str], PartitionResult],
    *,
    summary: Callable[[Mapping[str, PartitionResult]], Mapping[str, Any]] | None = None,
) -> dg.AssetCheckResult:
    """Check every partition the run covers with ``check_one`` and report the results.

    Parameters
    ----------
    context : dagster.AssetCheckExecutionContext
    asset_key : dagster.AssetKey
        The checked asset.
    check_name : str
    check_one : callable
        ``partition key -> (passed, metadata)``; the metadata of a failed partition names
        its ``"problem"``.
    summary : callable, optional
        ``{key: (passed, metadata)} -> metadata`` added to the overall result's.

    Returns
    -------
    dagster.AssetCheckResult
        As :func:`partitioned_check_result`, with ``problems`` (partition -> problem of each
        failed one) and ``summary``'s entries as the overall metadata.
    """
    results = {key: check_one(key) for key in check_partition_keys(context)}
    problems = {k: m["problem"] for k, (ok, m) in results.items() if not ok}
    return partitioned_check_result(
        context,
        asset_key,
        check_name,
        results,
        summary={
            "problems": dg.MetadataValue.json(problems),
            **(summary(results) if summary else {}),
        },
    )

"""Re-requesting what an automation backfill dropped when Dagster's backfill daemon fails it.

When one automation tick requests a chain over differently partitioned assets (for example
``rank_coverage`` with every ``shard_screen`` partition), Dagster emits one backfill for it.
Dagster 1.13's backfill daemon fails such a backfill before launching anything when a
downstream asset's target is stored as a key range (``KeyRangesPartitionsSubset``, the
compressed form automation uses for dynamic partitions): the root search compares a set of
keys with a range of the same keys, finds them unequal and raises ``Unable to determine root
partitions for backfill … not targeted: []``. Automation never repeats a tick's request, so
the chain would wait for the next change.

:func:`retry_request` rebuilds such a backfill's target with every partition subset spelled
out as keys (the form the root search handles), so the ``automation_backfill_retry`` sensor
can submit it again as a new backfill; nothing else about the request changes.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
    from dagster._core.execution.backfill import PartitionBackfill

#: The message of Dagster's backfill daemon for the failure described above.
ROOTS_ERROR = "Unable to determine root partitions for backfill"
#: Tag set by Dagster on backfills that automation emitted.
FROM_AUTOMATION_TAG = "dagster/from_automation_condition"
#: Tag on a retry: the id of the failed backfill it repeats (retries are never retried).
RETRY_OF_TAG = "sigmap/retry_of"
#: Failed backfills older than this are left to the user (the UI shows them).
RETRY_WINDOW_S = 3600.0


def failed_automation_backfills(
    instance: dg.DagsterInstance, now: float, window_s: float = RETRY_WINDOW_S
) -> list[PartitionBackfill]:
    """Automation backfills created in the last ``window_s`` seconds that the backfill daemon
    failed with :data:`ROOTS_ERROR`, oldest first."""
    from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus

    filters = BulkActionsFilter(
        statuses=[BulkActionStatus.FAILED],
        tags={FROM_AUTOMATION_TAG: "true"},
        created_after=_dt.datetime.fromtimestamp(now - window_s, tz=_dt.UTC),
    )
    failed = [
        b
        for b in instance.get_backfills(filters=filters, limit=100)
        if b.is_asset_backfill
        and RETRY_OF_TAG not in b.tags
        and b.error is not None
        and ROOTS_ERROR in b.error.message
    ]
    return sorted(failed, key=lambda b: b.backfill_timestamp)


def spelled_out_target(
    backfill: PartitionBackfill, asset_graph, instance: dg.DagsterInstance
) -> AssetGraphSubset:
    """The backfill's target with each partitioned asset's subset as an explicit set of the
    keys that still exist (key ranges expanded; deleted partitions dropped; assets no longer
    defined dropped)."""
    from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
    from dagster._core.definitions.partitions.context import partition_loading_context

    target = backfill.get_asset_backfill_data(asset_graph).target_subset
    subsets = {}
    with partition_loading_context(dynamic_partitions_store=instance):
        for key, subset in target.partitions_subsets_by_asset_key.items():
            if not asset_graph.has(key) or asset_graph.get(key).partitions_def is None:
                continue
            partitions_def = asset_graph.get(key).partitions_def
            existing = set(partitions_def.get_partition_keys())
            keys = [k for k in subset.get_partition_keys() if k in existing]
            if keys:
                subsets[key] = partitions_def.empty_subset().with_partition_keys(keys)
    return AssetGraphSubset(
        non_partitioned_asset_keys={
            k for k in target.non_partitioned_asset_keys if asset_graph.has(k)
        },
        partitions_subsets_by_asset_key=subsets,
    )


def retry_request(
    backfill: PartitionBackfill, asset_graph, instance: dg.DagsterInstance
) -> dg.RunRequest | None:
    """A request that submits ``backfill``'s target again as a new backfill (tagged
    :data:`RETRY_OF_TAG`), or None when nothing of it is still defined."""
    target = spelled_out_target(backfill, asset_graph, instance)
    if not target.asset_keys:
        return None
    return dg.RunRequest.for_asset_graph_subset(
        asset_graph_subset=target, tags={RETRY_OF_TAG: backfill.backfill_id}
    )

"""Declarative automation conditions shared by the graph.

`AutomationCondition.eager()` never fires an aggregate while any upstream partition is
missing or failed (one model that never loads would freeze every overlap forever).
Aggregates here instead refresh whenever any upstream partition was updated since they
last handled it, wait only while an upstream run is in progress, and use whatever
upstream partitions are materialized.
"""

from __future__ import annotations

import dagster as dg


def aggregate_condition() -> dg.AutomationCondition:
    """Refresh on any upstream update; do not wait for missing or failed upstream partitions."""
    return (
        (dg.AutomationCondition.any_deps_updated() | dg.AutomationCondition.code_version_changed())
        .since_last_handled()
        .with_label("any upstream updated since last handled")
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("aggregate: refresh on upstream updates, never wait for missing partitions")


def partition_condition() -> dg.AutomationCondition:
    """Per-partition assets: the standard eager behaviour (fill new partitions, follow updates)."""
    return dg.AutomationCondition.eager()

"""Keeping the `models` / `benchmarks` partitions in step with the registry and catalog.

Shared by the sensors, the `sigmap` command line and the demo, so every path adds
partitions the same way. Removing an entry never deletes a partition or its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SyncPlan:
    new_keys: list[str]
    known_keys: list[str]
    raw_ids: dict[str, str]


def plan_model_sync(registry_path: Path, existing: set[str]) -> SyncPlan:
    """Which registry models have no `models` partition yet (in registry order)."""
    from sigmap_lib.inputs import read_registry

    specs = read_registry(registry_path)
    keys = [s.key for s in specs]
    return SyncPlan(
        new_keys=[k for k in keys if k not in existing],
        known_keys=keys,
        raw_ids={s.key: s.id for s in specs},
    )


def plan_benchmark_sync(catalog_path: Path, existing: set[str]) -> SyncPlan:
    """Which catalog benchmarks have no `benchmarks` partition yet (in catalog order)."""
    from sigmap_lib.inputs import benchmark_slug, read_catalog

    catalog = read_catalog(catalog_path)
    keys = [benchmark_slug(name) for name in catalog]
    return SyncPlan(
        new_keys=[k for k in keys if k not in existing],
        known_keys=keys,
        raw_ids={benchmark_slug(name): name for name in catalog},
    )

"""Stages that cannot run on this world are *skipped with their reason*, not failed.

A world may lack what a stage needs (question texts for the semantic level, item responses
of enough models for metabench, two signatures for the signature level). Such an asset
still materializes — so its lineage and data version move on and nothing retries it in a
loop — but stores no result: its stale outputs are removed, a marker under
``.sigmap/skipped/<asset>.json`` records the reason for the assets and reports downstream,
and its materialization carries the reason under the metadata key :data:`SKIPPED` (what
the UI shows and `sigmap demo/run` lists in its summary). Per-benchmark skips of a
partitioned asset are a JSON mapping ``{benchmark: reason}`` under the same key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg

from sigmap_assets.layout import StorageLayout
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import write_json

#: What the functions below take: the storage resource or its layout.
Storage = SigmapStorage | StorageLayout

#: Metadata key of a skip: text (the whole asset) or JSON ``{what: reason}`` (some partitions).
SKIPPED = "skipped"


def skip_asset(
    storage: Storage,
    asset: str,
    reason: str,
    *,
    outputs: Iterable[Any] = (),
    metadata: Mapping[str, Any] | None = None,
) -> dg.MaterializeResult:
    """Record that ``asset`` cannot run on this world and return its materialization.

    ``outputs`` (paths of its previous results) are removed so nothing downstream reads a
    result that no longer follows from the inputs."""
    import shutil

    for path in outputs:
        if not path.is_dir():
            path.unlink(missing_ok=True)
        elif hasattr(path, "fs"):  # an object store (upath)
            path.fs.rm(path.path, recursive=True)
        else:
            shutil.rmtree(path)
    write_json({"asset": asset, "reason": reason}, _layout(storage).stage_skipped(asset))
    return dg.MaterializeResult(metadata={SKIPPED: reason, **(metadata or {})})


def skip_level(storage: Storage, level: str, reason: str) -> dg.MaterializeResult:
    """The ``{level}_overlap`` level cannot be computed on this world: its stored matrix and
    heatmap are removed and the reason recorded."""
    outputs = _layout(storage).overlap_outputs(level)
    return skip_asset(storage, f"{level}_overlap", reason, outputs=outputs)


def asset_ran(storage: Storage, asset: str) -> None:
    """``asset`` computed its result: clear a skip recorded by an earlier run."""
    _layout(storage).stage_skipped(asset).unlink(missing_ok=True)


def asset_skip_reason(storage: Storage, asset: str) -> str | None:
    """Why ``asset`` was skipped in its last materialization (None: it ran)."""
    path = _layout(storage).stage_skipped(asset)
    return json.loads(path.read_text())["reason"] if path.exists() else None


def skipped_partitions(reasons: Mapping[str, str]) -> dict[str, Any]:
    """Metadata entry for the partitions (benchmarks) a run skipped, with reasons."""
    return {SKIPPED: dg.MetadataValue.json(dict(reasons))} if reasons else {}


def skips_of(metadata: Mapping[str, Any]) -> dict[str, str]:
    """``{what: reason}`` from a materialization's metadata (``"*"``: the whole asset)."""
    entry = metadata.get(SKIPPED)
    if entry is None:
        return {}
    value = getattr(entry, "value", entry)
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {"*": str(value)}


def _layout(storage: Storage) -> StorageLayout:
    return storage if isinstance(storage, StorageLayout) else storage.layout

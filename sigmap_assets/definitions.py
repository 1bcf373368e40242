"""The sigmap Dagster code location: one Definitions, loaded from the defs folder, each asset
with the code version of the library step that computes it (`sigmap_assets.versions`).

Runs execute in process: nearly every sigmap run materializes one asset (a cell, a shard, a
range of benchmarks), and the multiprocess executor would start a second Python process (a
second import of the code location) for that one step. The scale-out code location
(`sigmap_assets.deploy.scaleout`) runs each step as a Kubernetes Job instead."""

from __future__ import annotations

from pathlib import Path

import dagster as dg


def with_code_versions(loaded: dg.Definitions) -> dg.Definitions:
    """``loaded`` with every asset's ``code_version`` set from :mod:`sigmap_assets.versions`.

    The defs folder yields an asset object once per module that names it (a checks module
    imports its asset), so the objects are de-duplicated before their specs are mapped.
    """
    from sigmap_assets.versions import code_version

    unique = list({id(a): a for a in loaded.assets or []}.values())
    assets = [
        a.map_asset_specs(
            lambda s: s.replace_attributes(code_version=code_version(s.key.to_user_string()))
        )
        if isinstance(a, dg.AssetsDefinition)
        else a
        for a in unique
    ]
    return dg.Definitions(
        assets=assets,
        asset_checks=loaded.asset_checks,
        schedules=loaded.schedules,
        sensors=loaded.sensors,
        jobs=loaded.jobs,
        resources=loaded.resources,
        executor=loaded.executor or dg.in_process_executor,
        loggers=loaded.loggers,
        metadata=loaded.metadata,
        component_tree=loaded.component_tree,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return with_code_versions(dg.load_from_defs_folder(path_within_project=Path(__file__).parent))

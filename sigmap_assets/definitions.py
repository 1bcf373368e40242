"""The sigmap Dagster code location: one Definitions, loaded from the defs folder, each asset
with the code version of the library step that computes it (`sigmap_assets.versions`), its
owners and a link to its source code.

Runs execute in process: nearly every sigmap run materializes one asset (a cell, a shard, a
range of benchmarks), and the multiprocess executor would start a second Python process (a
second import of the code location) for that one step. The scale-out code location
(`sigmap_assets.deploy.scaleout`) runs each step as a Kubernetes Job instead."""

from __future__ import annotations

import warnings
from pathlib import Path

import dagster as dg


def described_for_ui(loaded: dg.Definitions) -> dg.Definitions:
    """``loaded`` with every asset described for the UI: the ``code_version`` of its step
    (:mod:`sigmap_assets.versions`), the settings it reads as dependencies
    (:data:`sigmap_assets.fingerprints.SETTINGS`), the owners
    (:data:`sigmap_assets.metadata.OWNERS`), and
    a reference to the source file and line that computes it (the UI's "Code" links; local
    paths, as the project needs no git remote).

    The defs folder yields an asset object once per module that names it (a checks module
    imports its asset), so the objects are de-duplicated before their specs are mapped.
    """
    from sigmap_assets.fingerprints import SETTINGS
    from sigmap_assets.metadata import OWNERS
    from sigmap_assets.versions import code_version

    reads: dict[str, list[str]] = {}
    for setting, (readers, _) in SETTINGS.items():
        for asset in readers:
            reads.setdefault(asset, []).append(setting)

    unique = list({id(a): a for a in loaded.assets or []}.values())
    described = [
        a.map_asset_specs(
            lambda s: s.replace_attributes(
                code_version=code_version(s.key.to_user_string()), owners=OWNERS
            ).merge_attributes(deps=reads.get(s.key.to_user_string(), []))
        )
        if isinstance(a, dg.AssetsDefinition)
        else a
        for a in unique
    ]
    with warnings.catch_warnings():  # code references are a beta feature of Dagster 1.13
        warnings.simplefilter("ignore", dg.BetaWarning)
        assets = dg.with_source_code_references(described)
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
    return described_for_ui(dg.load_from_defs_folder(path_within_project=Path(__file__).parent))

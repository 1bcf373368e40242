"""The input observer: an observation of each user input (its files and the settings that
change results) whose fingerprint changed."""

from __future__ import annotations

import dagster as dg

from sigmap_assets.automation import SensorOutcome, sigmap_sensor
from sigmap_assets.defs.inputs.assets import user_inputs
from sigmap_assets.fingerprints import (
    ABSENT,
    InputVersion,
    input_versions,
    setting_versions,
)
from sigmap_assets.metadata import DATA_VERSION_TAG
from sigmap_assets.resources import WorldResource


def last_observed(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    """The data version of ``key``'s latest observation (None when never observed)."""
    records = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=key), limit=1).records
    if not records or records[0].asset_observation is None:
        return None
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG)


def observation(key: dg.AssetKey, v: InputVersion) -> dg.AssetObservation:
    """The observation `user_inputs` would record for this fingerprint."""
    return dg.AssetObservation(
        asset_key=key,
        metadata=v.metadata(),
        tags={DATA_VERSION_TAG: v.version},
        description="observed by input_observer",
    )


def changed_inputs(instance: dg.DagsterInstance, world: WorldResource) -> list[dg.AssetObservation]:
    """An observation of every input whose fingerprint differs from its last observed one:
    the files and settings (:func:`sigmap_assets.fingerprints.input_versions`,
    :func:`~sigmap_assets.fingerprints.setting_versions`); an input is first observed once
    it exists.

    Raises ``OSError`` / ``ValueError`` while the world folder cannot be read."""
    versions = input_versions(world) | setting_versions(world)
    keys = sorted(user_inputs.keys, key=lambda k: k.to_user_string())
    events = [
        observation(key, v)
        for key in keys
        if (v := versions[key.to_user_string()]).version != (last := last_observed(instance, key))
        and not (last is None and v.version == ABSENT)
    ]
    return events


@sigmap_sensor(seconds=30)
def input_observer(context: dg.SensorEvaluationContext, world: WorldResource) -> SensorOutcome:
    """Fingerprints the user's inputs (registry, catalog, corpus files, score sources,
    lm-eval logs, the settings that change results) each tick and records an observation of
    every input whose fingerprint differs from the one last observed (an input is first
    observed once it exists). It launches no run: automation re-reads an observed change on
    its next tick."""
    try:
        events = changed_inputs(context.instance, world)
    except (OSError, ValueError) as exc:  # no world folder yet, an unreadable file
        return dg.SkipReason(f"inputs not readable yet: {exc}")
    if not events:
        return dg.SkipReason("inputs unchanged since their last observation")
    names = ", ".join(e.asset_key.to_user_string() for e in events)
    context.log.info(f"inputs changed: {names}")
    return dg.SensorResult(asset_events=events)

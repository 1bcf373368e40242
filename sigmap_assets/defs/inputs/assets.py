"""The user's inputs as observable source assets: the registry (`models.yaml`), the catalog
(`catalog.yaml`), the corpus folder, the score sources and the lm-eval logs folder.

Each is observed with a data version that is a fingerprint of what the readers read: the
sha256 of a file's bytes for the small files (registry, catalog, score files), the names,
sizes and modification times of the files of a folder (corpus, lm-eval logs: large, and
stamped without reading them, as the sensors that watch them do), and ``absent`` while the
input does not exist. The assets that read an input depend on it, so lineage in the UI starts
at the user's files and an input changed since an asset last ran shows that asset as stale.

Observations come from two places: "Observe sources" in the UI (or any run of `user_inputs`),
and the `input_observer` sensor, which records an observation whenever an input's
fingerprint differs from the one last observed (no run is launched). The assets that read the
inputs (`model_registry`, `benchmark_catalog`, `benchmark_scores`, `corpus_manifest`) are
automated on them: a new data version is re-read on the next automation tick.
"""

from collections.abc import Iterator

import dagster as dg

from sigmap_assets.fingerprints import (
    CATALOG_FILE,
    CORPUS_FILES,
    LM_EVAL_LOGS,
    REGISTRY_FILE,
    SCORE_SOURCES,
    SETTINGS,
    input_versions,
    setting_versions,
)
from sigmap_assets.resources import WorldResource


def _spec(name: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(name, group_name="inputs", description=description)


def input_specs() -> list[dg.AssetSpec]:
    """The source asset of each input (built by a function: the defs loader collects the
    module's asset specs, and these belong to `user_inputs` only)."""
    return [
        _spec(REGISTRY_FILE, "The model registry, `models.yaml` in the world folder."),
        _spec(CATALOG_FILE, "The benchmark catalog, `catalog.yaml` in the world folder."),
        _spec(CORPUS_FILES, "The corpus folder's files (`corpus/` in the world folder)."),
        _spec(
            SCORE_SOURCES,
            "The score sources: `scores.yaml` and the files it names, else `scores.csv`.",
        ),
        _spec(
            LM_EVAL_LOGS,
            "lm-evaluation-harness output folders to score (`lm_eval_logs` in sigmap.yaml, "
            "else `lm_eval_logs/` in the world folder).",
        ),
    ] + [
        dg.AssetSpec(
            name,
            group_name="settings",
            description=f"{what} Read by {', '.join(f'`{a}`' for a in readers)}.",
        )
        for name, (readers, what) in SETTINGS.items()
    ]


@dg.multi_observable_source_asset(
    specs=input_specs(),
    name="user_inputs",
    can_subset=True,
    description="Observes the user's input files: a data version per input from its content.",
)
def user_inputs(context: dg.AssetExecutionContext, world: WorldResource) -> Iterator:
    versions = input_versions(world) | setting_versions(world)
    for key in sorted(context.selected_asset_keys, key=lambda k: k.to_user_string()):
        v = versions[key.to_user_string()]
        yield dg.ObserveResult(
            asset_key=key, data_version=dg.DataVersion(v.version), metadata=v.metadata()
        )

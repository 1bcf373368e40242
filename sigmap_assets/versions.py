"""Code versions of the assets: the sigmap package version plus one counter per library step.

Dagster compares an asset's ``code_version`` with the one its last materialization recorded:
a different one shows the asset (and what is computed from it) as stale in the UI, and lets
the ``code_version_changed()`` clause of the automation conditions request it again. Bump a
step's counter in :data:`STEP_VERSIONS` when what that step computes changes (a new
estimator, a changed default, a different on-disk format); a sigmap release changes every
asset's version through ``sigmap_lib.__version__``.
"""

from __future__ import annotations

#: One counter per library step; bump it when the step's results change.
STEP_VERSIONS: dict[str, int] = {
    "worlds": 3,  # sigmap_lib.worlds: the model zoo / world folder
    "inputs": 1,  # sigmap_lib.inputs: corpus plan and shards, registry, catalog, scores, items
    "nll": 1,  # sigmap_lib.nll: per-unit NLL of one model on one shard
    "ranks": 1,  # sigmap_lib.nll: rank codes and the coverage over shards
    "signatures": 5,  # sigmap_lib.signatures: screening, calibration, selection
    "overlap": 2,  # sigmap_lib.overlap: the three overlap matrices
    "reporting": 3,  # sigmap_lib.reporting: the overlap report
    "metabench": 1,  # sigmap_lib.metabench: item pools, IRT fits, selection, scoring
}

#: The library step that computes each asset.
ASSET_STEPS: dict[str, str] = {
    "model_zoo": "worlds",
    "corpus_manifest": "inputs",
    "corpus_shard": "inputs",
    "model_registry": "inputs",
    "benchmark_catalog": "inputs",
    "benchmark_scores": "inputs",
    "benchmark_items": "inputs",
    "token_nll": "nll",
    "nll_ranks": "ranks",
    "rank_coverage": "ranks",
    "shard_screen": "signatures",
    "screened_candidates": "signatures",
    "signatures": "signatures",
    "performance_overlap": "overlap",
    "semantic_overlap": "overlap",
    "signature_overlap": "overlap",
    "overlap_report": "reporting",
    "irt_item_pool": "metabench",
    "irt_fits": "metabench",
    "metabench_selection": "metabench",
    "metabench": "metabench",
    "scored_models": "metabench",
    # the user's inputs (observable source assets): how their data versions are taken
    "registry_file": "inputs",
    "catalog_file": "inputs",
    "corpus_files": "inputs",
    "score_sources": "inputs",
    "lm_eval_logs": "inputs",
    # the settings that change results (observable source assets)
    "score_minimum": "inputs",
    "coverage_minimum": "inputs",
    "signature_minimum": "inputs",
    "signature_strata": "inputs",
    "signature_mode": "inputs",
    "semantic_settings": "inputs",
    "metabench_settings": "inputs",
}


def code_version(asset: str) -> str:
    """``"<sigmap version>+<step>.<counter>"`` for ``asset`` (an asset missing from
    :data:`ASSET_STEPS` gets the sigmap version alone; a test requires every asset there)."""
    from sigmap_lib import __version__

    step = ASSET_STEPS.get(asset)
    return f"{__version__}+{step}.{STEP_VERSIONS[step]}" if step else __version__

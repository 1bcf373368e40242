"""Checks on the score table: values within each benchmark's range; scored models vs NLL."""

import dagster as dg

from sigmap_assets.defs.benchmarks.assets import benchmark_scores
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.state import StoredState


@dg.asset_check(
    asset=benchmark_scores,
    blocking=True,
    description="Every score is finite and inside its benchmark's catalog range.",
)
def scores_within_range(world: WorldResource, storage: SigmapStorage) -> dg.AssetCheckResult:
    import numpy as np

    from sigmap_lib.inputs import read_catalog

    catalog = read_catalog(world.file("catalog.yaml"))
    table = StoredState.read(storage).scores
    bad = []
    for row in table.iter_rows(named=True):
        b = catalog.get(row["benchmark"])
        s = row["score"]
        if not np.isfinite(s) or (
            b and b.score_range and not (b.score_range[0] <= s <= b.score_range[1])
        ):
            bad.append({"model": row["model"], "benchmark": row["benchmark"], "score": s})
    return dg.AssetCheckResult(
        passed=not bad,
        metadata={"scores": table.height, "out_of_range": dg.MetadataValue.json(bad[:50])},
    )


@dg.asset_check(
    asset=benchmark_scores,
    description="Every scored registry model has complete NLL (and the reverse, reported).",
)
def scored_models_have_nll(world: WorldResource, storage: SigmapStorage) -> dg.AssetCheckResult:
    import polars as pl

    from sigmap_lib.inputs import read_registry

    state = StoredState.read(storage)
    shards = state.shard_keys
    specs = read_registry(world.file("models.yaml"))
    with_nll = {
        s.key
        for s in specs
        if shards and all(state.complete_cell(sh, s.key) is not None for sh in shards)
    }
    scored = set(state.scores.filter(pl.col("model_key").is_not_null())["model_key"].to_list())
    scored_without_nll = sorted(scored - with_nll)
    nll_without_scores = sorted(with_nll - scored)
    return dg.AssetCheckResult(
        passed=not scored_without_nll,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "scored_models_without_nll": dg.MetadataValue.json(scored_without_nll),
            "models_with_nll_but_no_scores": dg.MetadataValue.json(nll_without_scores),
        },
    )

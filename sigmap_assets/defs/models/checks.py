"""Checks on per-model NLL: complete, checksummed, finite, one value per corpus unit."""

import dagster as dg
import numpy as np

from sigmap_assets.defs.models.assets import nll_store_dir, token_nll
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.tables import open_corpus


@dg.asset_check(
    asset=token_nll,
    blocking=True,
    description="NLL array complete, checksums valid, finite, of the corpus' unit count.",
)
def token_nll_valid(
    context: dg.AssetCheckExecutionContext, storage: SigmapStorage
) -> dg.AssetCheckResult:
    from sigmap_lib.nll import NLLStore

    key = context.op_execution_context.partition_key
    corpus = open_corpus(storage)
    store = NLLStore.open(nll_store_dir(storage, corpus.fingerprint, key))
    bad_shards = store.verify()
    problems = []
    if store.n_units != corpus.n_units:
        problems.append(f"{store.n_units} values for {corpus.n_units} corpus units")
    if bad_shards:
        problems.append(f"shards failing their checksum: {bad_shards[:20]}")
    if not store.is_complete():
        problems.append(f"pending shards: {store.pending_shards()[:20]}")
    n_bad = 0
    step = 1 << 20
    for lo in range(0, store.n_units, step):
        block = store.read(lo, min(lo + step, store.n_units))
        n_bad += int((~np.isfinite(block)).sum())
    if n_bad:
        problems.append(f"{n_bad} non-finite values")
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "model": key,
            "units": store.n_units,
            "problems": dg.MetadataValue.json(problems),
        },
    )

"""Checks on per-cell NLL: complete, checksummed, finite, one value per shard unit."""

import dagster as dg
import numpy as np

from sigmap_assets.defs.models.assets import open_shard, token_nll
from sigmap_assets.partitions import cells_partitions
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.state import StoredState


@dg.asset_check(
    asset=token_nll,
    partitions_def=cells_partitions,
    blocking=True,
    description="NLL cell complete, checksums valid, finite, of the shard's unit count.",
)
def token_nll_valid(
    context: dg.AssetCheckExecutionContext, storage: SigmapStorage
) -> dg.AssetCheckResult:
    from sigmap_lib.nll import NLLStore

    cell = cells_partitions.get_partition_key_from_str(
        str(context.op_execution_context.partition_key)
    )
    key, shard_key = cell.keys_by_dimension["model"], cell.keys_by_dimension["shard"]
    state = StoredState.read(storage)
    shard = open_shard(state, shard_key)
    d = state.cell_dir(shard_key, key)
    if d is None:
        return dg.AssetCheckResult(
            passed=False, metadata={"model": key, "shard": shard_key, "problems": ["no cell"]}
        )
    store = NLLStore.open(d)
    bad_shards = store.verify()
    problems = []
    if store.n_units != shard.n_units:
        problems.append(f"{store.n_units} values for {shard.n_units} units of shard {shard_key}")
    if bad_shards:
        problems.append(f"blocks failing their checksum: {bad_shards[:20]}")
    if not store.is_complete():
        problems.append(f"pending blocks: {store.pending_shards()[:20]}")
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
            "shard": shard_key,
            "units": store.n_units,
            "problems": dg.MetadataValue.json(problems),
        },
    )

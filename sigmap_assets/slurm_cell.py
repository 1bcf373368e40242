"""The Slurm job of one ``token_nll`` cell: ``python -m sigmap_assets.slurm_cell``.

Started by :class:`sigmap_assets.slurm.PipesSlurmClient` with the Dagster Pipes bootstrap
variables in its environment; the cell (storage root, world, model, shard, the fingerprint the
Dagster step computed, the compute settings) comes in the Pipes extras. The job re-derives the
cell from the stored state, refuses a cell whose fingerprint changed since submission, and
scores it with :func:`sigmap_assets.defs.models.assets.score_cell`, the local route's code,
which commits the cell's NLL store block by block (a complete block is never rewritten, so a
rerun resumes). It writes nothing outside that store; the Dagster step records the cell.
"""

from __future__ import annotations

import os
from typing import Any


def run_cell(pipes: Any) -> dict[str, Any]:
    """Score the cell described by ``pipes.extras``; its statistics (scalars only).

    Raises
    ------
    RuntimeError
        The cell's fingerprint differs from the one the Dagster step submitted (the model,
        the corpus or the dtype changed meanwhile).
    """
    from sigmap_assets.defs.models.assets import open_shard, registry_row, score_cell
    from sigmap_assets.resources import ComputeResource, SigmapStorage, WorldResource
    from sigmap_assets.state import StoredState

    ex = pipes.extras
    storage = SigmapStorage(root=ex["storage"])
    world = WorldResource(storage=storage, kind=ex["world_kind"], path=ex["world_path"])
    compute = ComputeResource(**ex["compute"])
    spec = registry_row(world, ex["model"])
    state = StoredState.read(storage)
    cell = state.token_cell(spec, ex["shard"], compute.scoring_dtype(spec))
    if cell.fingerprint != ex["fingerprint"]:
        raise RuntimeError(
            f"cell {ex['model']}|{ex['shard']}: fingerprint {cell.fingerprint} differs from the "
            f"submitted {ex['fingerprint']} (model, corpus or dtype changed); rerun the cell"
        )
    shard = open_shard(state, ex["shard"])
    pipes.log.info(f"{spec.id} on shard {ex['shard']}: scoring into {cell.out}")
    stats = score_cell(pipes, spec, shard, cell.out, state.layout, compute, cell.fingerprint)
    return {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}


def main() -> None:
    """Open the Pipes session, score the cell, report its statistics as a custom message."""
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        stats = run_cell(pipes)
        pipes.report_custom_message(
            {"stats": stats, "slurm_job_id": os.environ.get("SLURM_JOB_ID", "")}
        )


if __name__ == "__main__":
    main()

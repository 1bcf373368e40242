"""The world the graph runs on: the embedded tiny-model zoo, the synthetic world, or a folder."""

import os
import sys
import time

import dagster as dg

from sigmap_assets.resources import WorldResource

#: World files watched on their own (the input observer: registry, catalog, scores, corpus;
#: the model sensor: model files and imported NLL under `models/` and `nll/`): left out of
#: the world's data version, so a changed score or corpus file refreshes what reads it, not
#: everything that waits for the world to exist.
OBSERVED_FILES = (
    "models.yaml",
    "catalog.yaml",
    "scores.csv",
    "scores.yaml",
    "corpus",
    "models",
    "nll",
)


@dg.asset(
    group_name="world",
    kinds={"python"},
    description=(
        "Provides the input world (docs/FORMATS.md). `zoo` (default): trains the tiny-model zoo "
        "locally and evaluates its loglikelihood benchmarks (cached: a rerun does not retrain); "
        "`synthetic`: writes the planted-truth world; `folder`: validates a user's world folder."
    ),
)
def model_zoo(context: dg.AssetExecutionContext, world: WorldResource) -> dg.MaterializeResult:
    from sigmap_lib.worlds import check_world

    kind = world.resolved_kind()
    root = world.root()
    t0 = time.perf_counter()
    extra: dict[str, dg.MetadataValue] = {}
    if kind == "zoo":
        from sigmap_lib.worlds.zoo import build_zoo_world

        def progress(stage: str, done: int, total: int, message: str) -> None:
            line = f"zoo · {stage} {done}/{total} {message}"
            context.log.info(line)
            if os.environ.get("SIGMAP_PROGRESS"):
                print(f"    {line}", file=sys.stderr, flush=True)

        built = build_zoo_world(
            root, seed=world.seed, quick=world.resolved_quick(), progress=progress
        )
        extra.update(_summary_metadata(built))
    elif kind == "synthetic":
        from sigmap_lib.worlds import make_synthetic_world

        built = make_synthetic_world(root, seed=world.seed)
        extra.update(_summary_metadata(built))
    layout = check_world(root, fingerprint_exclude=OBSERVED_FILES)
    return dg.MaterializeResult(
        metadata={
            "kind": kind,
            "path": dg.MetadataValue.path(str(root)),
            "fingerprint": layout.fingerprint[:16],
            "corpus_files": len(layout.corpus_files),
            "seconds": round(time.perf_counter() - t0, 2),
            **extra,
        },
        data_version=dg.DataVersion(layout.fingerprint[:16]),
    )


def _summary_metadata(built: object) -> dict[str, dg.MetadataValue]:
    summary = getattr(built, "summary", None)
    if callable(summary):
        summary = summary()
    if isinstance(summary, dict):
        return {"summary": dg.MetadataValue.json(summary)}
    return {}

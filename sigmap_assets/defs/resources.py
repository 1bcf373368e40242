import dagster as dg

from sigmap_assets.resources import ComputeResource, SigmapStorage, WorldResource


@dg.definitions
def resources() -> dg.Definitions:
    storage = SigmapStorage()
    return dg.Definitions(
        resources={
            "storage": storage,
            "world": WorldResource(storage=storage),
            "compute": ComputeResource(),
        }
    )

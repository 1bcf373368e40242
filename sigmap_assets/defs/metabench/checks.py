"""Check on metabench: every benchmark's test RMSE under a configured ceiling."""

import json
import os

import dagster as dg

from sigmap_assets.defs.metabench.assets import metabench
from sigmap_assets.resources import SigmapStorage
from sigmap_assets.skips import asset_skip_reason

RMSE_CEILING_ENV = "SIGMAP_METABENCH_RMSE_CEILING"


@dg.asset_check(
    asset=metabench,
    blocking=True,
    description=f"Test RMSE (score points) of every benchmark and of the grand score under ${RMSE_CEILING_ENV} (default 10).",
)
def metabench_rmse_under_ceiling(storage: SigmapStorage) -> dg.AssetCheckResult:
    ceiling = float(os.environ.get(RMSE_CEILING_ENV, "10"))
    path = storage.layout.metabench_summary()
    if not path.exists():  # skipped on this world (its reason is recorded), or never ran
        reason = asset_skip_reason(storage, "metabench") or "metabench has no summary yet"
        return dg.AssetCheckResult(passed=True, metadata={"skipped": reason, "ceiling": ceiling})
    summary = json.loads(path.read_text())
    rmse = dict(summary["test_rmse"])
    grand = summary.get("grand_test_rmse")
    if grand is not None and grand == grand:  # NaN when the joint fit was not possible
        rmse["grand"] = grand
    over = {k: v for k, v in rmse.items() if v is None or not v <= ceiling}
    return dg.AssetCheckResult(
        passed=not over,
        metadata={
            "ceiling": ceiling,
            "rmse": dg.MetadataValue.json(rmse),
            "over_ceiling": dg.MetadataValue.json(over),
        },
    )

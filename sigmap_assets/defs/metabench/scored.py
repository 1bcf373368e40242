"""Scored models: θ, reconstructed scores and intervals from lm-evaluation-harness logs.

`lm_eval_logs_sensor` watches the lm-eval output folder (`WorldResource.lm_eval_logs`): each
model folder (`lm_eval ... --output_path LOGS --log_samples` writes `LOGS/<model>/`) becomes
a `scored_models` partition, re-scored whenever its files change.
"""

import re
from pathlib import Path

import dagster as dg

from sigmap_assets.automation import SensorOutcome, sigmap_sensor
from sigmap_assets.metadata import image_md, md_table
from sigmap_assets.partitions import scored_models_partitions
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.tables import write_json

_KEY = re.compile(r"[^A-Za-z0-9_.\-]+")


def log_folders(root: Path) -> dict[str, Path]:
    """Partition key -> lm-eval output folder of one model (folders holding samples files)."""
    if not root.is_dir():
        return {}
    out = {}
    for f in sorted(root.rglob("samples_*.jsonl")):
        folder = f.parent
        key = _KEY.sub("_", str(folder.relative_to(root))).strip("_") or "root"
        out[key] = folder
    return out


def folder_fingerprint(folder: Path) -> str:
    """Names, sizes and mtimes of a folder's lm-eval files (a new run changes it)."""
    from sigmap_assets.fingerprints import folder_version

    return folder_version(folder, sorted(folder.glob("*.json*"))).version


@dg.asset(
    group_name="metabench",
    partitions_def=scored_models_partitions,
    deps=["metabench", "lm_eval_logs"],
    kinds={"json"},
)
def scored_models(
    context: dg.AssetExecutionContext, storage: SigmapStorage, world: WorldResource
) -> dg.MaterializeResult:
    """One model scored from its lm-eval `--log_samples` output with the metabench fit: per
    benchmark θ (the fit's method) with its SE, the reconstructed full score with a 90 %
    prediction interval, the items answered, and the grand score; its place on the
    reconstruction plot."""
    from sigmap_lib.metabench import MetabenchFit, MetabenchScorer, fit_rules, read_lm_eval_answers
    from sigmap_lib.reporting import plot_scored_models

    key = context.partition_key
    folder = log_folders(world.lm_eval_logs()).get(key)
    if folder is None:
        raise dg.Failure(f"no lm-eval output folder for {key!r} under {world.lm_eval_logs()}")
    fit = MetabenchFit.load(storage.layout.metabench_fit())
    scorer = MetabenchScorer.from_fit(fit, storage.layout.metabench_fit())
    logs = read_lm_eval_answers(folder, fit_rules(scorer.items, storage.layout.metabench_tasks()))
    results = scorer.score(logs.answers)
    write_json({"folder": str(folder), "models": results}, storage.layout.scored_model(key))
    png = plot_scored_models(fit, results, storage.layout.scored_plot(key))
    rows = [
        {
            "model": r["model"],
            "benchmark": bm,
            "items": f"{b['items']}/{b['items_total']}",
            "θ": b["theta"],
            "SE": b["theta_se"],
            "score": b["score"],
            "90% interval": f"[{b['score_interval'][0]:.2f}, {b['score_interval'][1]:.2f}]",
        }
        for r in results
        for bm, b in sorted(r["benchmarks"].items())
    ]
    grand = {r["model"]: r["grand"] for r in results}
    return dg.MaterializeResult(
        metadata={
            "models": dg.MetadataValue.json([r["model"] for r in results]),
            "scores": dg.MetadataValue.md(md_table(rows, max_rows=60)),
            "grand": dg.MetadataValue.json(grand),
            "plot": dg.MetadataValue.md(image_md(png, "scored models on the reconstruction")),
            "folder": dg.MetadataValue.path(str(folder)),
        },
        data_version=dg.DataVersion(folder_fingerprint(folder)),
    )


@sigmap_sensor(seconds=30, target=dg.AssetSelection.assets("scored_models"))
def lm_eval_logs_sensor(context: dg.SensorEvaluationContext, world: WorldResource) -> SensorOutcome:
    """Watches the lm-eval output folder (`lm_eval_logs` in sigmap.yaml, else
    <world>/lm_eval_logs): every model folder becomes a `scored_models` partition and is
    (re-)scored when its files change (run_key per folder fingerprint: idempotent)."""
    root = world.lm_eval_logs()
    folders = log_folders(root)
    if not folders:
        return dg.SkipReason(f"no lm-eval samples files under {root}")
    existing = set(context.instance.get_dynamic_partitions(scored_models_partitions.name))
    new = sorted(set(folders) - existing)
    return dg.SensorResult(
        dynamic_partitions_requests=[scored_models_partitions.build_add_request(new)]
        if new
        else [],
        run_requests=[
            dg.RunRequest(partition_key=k, run_key=f"scored_models:{k}:{folder_fingerprint(f)}")
            for k, f in folders.items()
        ],
    )

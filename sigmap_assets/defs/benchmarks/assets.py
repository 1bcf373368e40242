"""Benchmarks: the catalog (family, format, function), the score table, items per benchmark."""

import hashlib
from datetime import timedelta

import dagster as dg

from sigmap_assets.automation import automated, input_condition, partition_condition
from sigmap_assets.config import SigmapConfig
from sigmap_assets.metadata import md_table, table_metadata
from sigmap_assets.partitions import benchmarks_partitions
from sigmap_assets.resources import SigmapStorage, WorldResource
from sigmap_assets.skips import skipped_partitions
from sigmap_assets.tables import write_json, write_parquet

#: The catalog and the scores are re-read every night at 03:00 UTC (`nightly_score_refresh`):
#: they are fresh while each day's re-read happened between 03:00 and 05:00 UTC, and the UI
#: shows them failing their freshness policy when a night's refresh did not run.
NIGHTLY_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron="0 5 * * *", lower_bound_delta=timedelta(hours=2)
)


class ScoresConfig(SigmapConfig):
    min_models: int = 0
    """Benchmarks scored for fewer models (in the score files) are dropped (with a warning in metadata);
    0 = the world's minimum (``settings.yaml`` ``minimums: {score_models: N}``, default 5)."""
    strict: bool = False
    """Turn the min_models warning into an error."""


@dg.asset(
    group_name="benchmarks",
    deps=["model_zoo", "catalog_file"],
    kinds={"parquet"},
    freshness_policy=NIGHTLY_FRESHNESS,
    **automated(input_condition()),
)
def benchmark_catalog(
    context: dg.AssetExecutionContext, world: WorldResource, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Family, format and function of every benchmark (catalog.yaml); adds `benchmarks` partitions."""
    import polars as pl

    from sigmap_lib.inputs import read_catalog

    path = world.file("catalog.yaml")
    catalog = read_catalog(path)
    rows = [
        {
            "benchmark": b.name,
            "key": b.slug,
            "family": b.family,
            "format": b.format,
            "function": b.function,
            "score_low": b.score_range[0] if b.score_range else None,
            "score_high": b.score_range[1] if b.score_range else None,
            "direction": b.direction,
            "transform": b.transform,
            "items": str(b.items) if b.items else None,
            "responses": str(b.responses) if b.responses else None,
        }
        for b in catalog.values()
    ]
    table = pl.DataFrame(rows, infer_schema_length=None)
    write_parquet(table, storage.layout.catalog_table())
    existing = set(context.instance.get_dynamic_partitions(benchmarks_partitions.name))
    new = [r["key"] for r in rows if r["key"] not in existing]
    if new:
        context.instance.add_dynamic_partitions(benchmarks_partitions.name, new)
    fp = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
    return dg.MaterializeResult(
        metadata={
            **table_metadata(table),
            "catalog": dg.MetadataValue.path(str(path)),
            "benchmarks": len(rows),
            "new_partitions": dg.MetadataValue.json(new),
            "functions": dg.MetadataValue.json(sorted({r["function"] for r in rows})),
            "table": dg.MetadataValue.md(
                md_table(
                    rows,
                    ["benchmark", "family", "format", "function", "direction", "transform"],
                    max_rows=100,
                )
            ),
        },
        data_version=dg.DataVersion(fp),
    )


@dg.asset(
    group_name="benchmarks",
    deps=[
        "model_zoo",
        benchmark_catalog,
        "model_registry",
        "score_sources",
        "catalog_file",
        "registry_file",
    ],
    kinds={"parquet"},
    freshness_policy=NIGHTLY_FRESHNESS,
    **automated(input_condition()),
)
def benchmark_scores(
    config: ScoresConfig, world: WorldResource, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Models × benchmarks scores from the world's sources, validated and matched to the registry.

    Sources: `scores.yaml` in the world (a list of specs: leaderboard CSVs, long/wide
    tables, lm-evaluation-harness result folders) if present, else `scores.csv` (wide).
    """

    from sigmap_lib.inputs import read_catalog, read_registry
    from sigmap_lib.inputs.scores import keyed_scores, read_score_sources, score_summary

    catalog = read_catalog(world.file("catalog.yaml"))
    specs, base = world.score_sources()
    long, validation = read_score_sources(
        specs,
        catalog=catalog,
        min_models=config.min_models or world.minimums().score_models,
        strict=config.strict,
        base_dir=base,
    )
    registry = {s.id: s.key for s in read_registry(world.file("models.yaml"))}
    table, match = keyed_scores(long, registry)
    out = write_parquet(table, storage.layout.scores_table())
    write_json(
        {"validation": validation.to_metadata(), "match": match.to_metadata()},
        storage.layout.scores_report(),
    )
    summary = score_summary(table)
    fp = hashlib.sha256(table.sort("model", "benchmark").write_csv().encode()).hexdigest()[:16]
    scored = set(table["benchmark"].to_list())
    skipped = {  # catalog benchmarks the later stages will not see, with the reason
        name: validation.dropped_benchmarks.get(name, "in the catalog but no model has a score")
        for name in catalog
        if name not in scored
    }
    return dg.MaterializeResult(
        metadata={
            **skipped_partitions(skipped),
            **table_metadata(table),
            "table": dg.MetadataValue.path(str(out)),
            "scores": table.height,
            "models_matched": len(match.mapping),
            "unmatched_score_models": dg.MetadataValue.json(match.unmatched_scores[:200]),
            "registry_models_without_scores": dg.MetadataValue.json(match.unmatched_registry),
            "warnings": dg.MetadataValue.json(validation.warnings),
            "dropped_benchmarks": dg.MetadataValue.json(validation.dropped_benchmarks),
            "score_transforms": dg.MetadataValue.json(validation.transforms),
            "per_benchmark": dg.MetadataValue.md(md_table(summary.to_dicts(), max_rows=100)),
        },
        data_version=dg.DataVersion(fp),
    )


@dg.asset(
    group_name="benchmarks",
    partitions_def=benchmarks_partitions,
    deps=["model_zoo", benchmark_catalog],
    backfill_policy=dg.BackfillPolicy.single_run(),
    **automated(partition_condition()),
    kinds={"parquet"},
)
def benchmark_items(
    context: dg.AssetExecutionContext, world: WorldResource, storage: SigmapStorage
) -> dg.MaterializeResult:
    """Question texts and (where available) item-level 0/1 responses of each benchmark."""
    import polars as pl

    from sigmap_lib.inputs import read_catalog, read_questions, read_responses

    catalog = {b.slug: b for b in read_catalog(world.file("catalog.yaml")).values()}
    rows = []
    for key in context.partition_keys:
        if key not in catalog:
            raise dg.Failure(f"benchmark partition {key!r} is not in {world.file('catalog.yaml')}")
        b = catalog[key]
        row = {"benchmark": b.name, "questions": 0, "models": 0, "items_with_responses": 0}
        if b.items:
            q = read_questions(b.items)
            write_parquet(q, storage.layout.item_questions(key))
            context.add_asset_metadata(table_metadata(q), partition_key=key)
            row["questions"] = q.height
        else:  # stored copies follow the catalog: an entry removed there is removed here
            storage.layout.item_questions(key).unlink(missing_ok=True)
        if not b.responses:
            storage.layout.item_responses(key).unlink(missing_ok=True)
        if b.responses:
            r = read_responses(b.responses)
            frame = pl.DataFrame({"model": r.models}).hstack(
                pl.DataFrame(r.matrix, schema=list(r.item_ids), orient="row")
            )
            write_parquet(frame, storage.layout.item_responses(key))
            if not b.items:  # no question texts: the response matrix is the table
                context.add_asset_metadata(table_metadata(frame), partition_key=key)
            row["models"] = len(r.models)
            row["items_with_responses"] = len(r.item_ids)
            row["mean_correct"] = float(r.matrix.mean())
        write_json(row, storage.layout.item_summary(key))
        rows.append(row)
    return dg.MaterializeResult(
        metadata={
            "benchmarks": len(rows),
            "items": dg.MetadataValue.md(md_table(rows, max_rows=100)),
        }
    )

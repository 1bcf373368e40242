"""What the Dagster UI explains: every run-config and resource field has a description (the
Launchpad shows it), from the attribute docstrings of `SigmapConfig` / `SigmapResource`."""

from __future__ import annotations

import dagster as dg
import pydantic
import pytest

from sigmap_assets.config import SigmapConfig, SigmapResource
from tests.assets.harness import Project


@pytest.fixture(scope="module")
def definitions() -> dg.Definitions:
    from sigmap_assets.definitions import defs

    return defs()


def _config_fields(definitions: dg.Definitions) -> dict[str, object]:
    out = {}
    for a in definitions.assets or []:
        if isinstance(a, dg.AssetsDefinition) and a.op.config_schema is not None:
            shape = a.op.config_schema.as_field().config_type
            for name, f in getattr(shape, "fields", {}).items():  # no config: Any
                out[f"{a.op.name}.{name}"] = f
    for key, r in (definitions.resources or {}).items():
        if isinstance(r, dg.ConfigurableResource):
            for name, f in type(r).to_config_schema().as_field().config_type.fields.items():
                out[f"resource {key}.{name}"] = f
    return out


def test_every_config_and_resource_field_is_described(definitions: dg.Definitions) -> None:
    fields = _config_fields(definitions)
    assert len(fields) > 50
    missing = sorted(k for k, f in fields.items() if not f.description)
    assert not missing, f"fields without a description: {missing}"


def test_descriptions_come_from_the_attribute_docstrings() -> None:
    from sigmap_assets.defs.corpus.assets import CorpusConfig

    assert issubclass(CorpusConfig, SigmapConfig)
    schema = CorpusConfig.to_config_schema().as_field().config_type.fields
    assert schema["shard_units"].description.startswith("Target units per shard (documents are")
    # a string below an attribute becomes its description; an explicit one wins

    class Probe(SigmapConfig):
        a: int = 1
        """Below a."""
        b: int = pydantic.Field(default=2, description="explicit")
        """Not this one."""

    fields = Probe.to_config_schema().as_field().config_type.fields
    assert fields["a"].description == "Below a."
    assert fields["b"].description == "explicit"
    from sigmap_assets.resources import ComputeResource

    assert issubclass(ComputeResource, SigmapResource)


def _nodes(definitions: dg.Definitions) -> dict[str, object]:
    graph = definitions.resolve_asset_graph()
    return {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()}


def test_every_asset_has_the_owners_and_a_link_to_its_code(definitions: dg.Definitions) -> None:
    from pathlib import Path

    from sigmap_assets.metadata import OWNERS

    nodes = _nodes(definitions)
    assert len(nodes) >= 27  # the computed assets and the user's inputs
    package = Path(__file__).resolve().parents[2] / "sigmap_assets"
    for name, node in nodes.items():
        assert node.owners == OWNERS, name
        refs = node.metadata.get("dagster/code_references")
        assert refs is not None, f"{name}: no code reference"
        [ref] = refs.code_references
        path = Path(ref.file_path)
        assert path.is_relative_to(package) and path.exists(), (name, ref)
        # the reference points at the decorator of the function that computes the asset
        lines = path.read_text().splitlines()[ref.line_number - 1 : ref.line_number + 40]
        assert lines[0].lstrip().startswith("@dg."), (name, ref)
        op = node.assets_def.op.name
        assert any(x.startswith(f"def {op}(") for x in lines), (name, op, ref)


def test_the_nightly_refreshed_assets_have_a_freshness_policy_around_the_schedule(
    definitions: dg.Definitions,
) -> None:
    from datetime import timedelta

    schedule = definitions.get_schedule_def("nightly_score_refresh")
    refreshed = definitions.resolve_job_def(schedule.job_name).asset_layer.executable_asset_keys
    nodes = _nodes(definitions)
    with_policy = {n for n, node in nodes.items() if node.freshness_policy is not None}
    assert with_policy == {k.to_user_string() for k in refreshed}
    minute, hour, *daily = schedule.cron_schedule.split()
    assert daily == ["*", "*", "*"]
    tick = timedelta(hours=int(hour), minutes=int(minute))
    for name in with_policy:
        policy = nodes[name].freshness_policy
        assert isinstance(policy, dg.FreshnessPolicy) and policy.timezone == "UTC"
        d_minute, d_hour, *d_daily = policy.deadline_cron.split()
        assert d_daily == ["*", "*", "*"]
        deadline = timedelta(hours=int(d_hour), minutes=int(d_minute))
        # a night's refresh falls in the window the policy expects a materialization in
        assert deadline - policy.lower_bound_delta <= tick < deadline, name


#: Every asset that stores a table, and where (per partition for the partitioned ones).
TABLES = {
    "corpus_shard": lambda layout, k: layout.shard_units(k),
    "model_registry": lambda layout, k: layout.registry_table(),
    "benchmark_catalog": lambda layout, k: layout.catalog_table(),
    "benchmark_scores": lambda layout, k: layout.scores_table(),
    "corpus_manifest": lambda layout, k: layout.corpus_manifest(),
    "benchmark_items": lambda layout, k: (
        layout.item_questions(k) if layout.item_questions(k).exists() else layout.item_responses(k)
    ),
    "screened_candidates": lambda layout, k: layout.screening_candidates(k),
    "signatures": lambda layout, k: layout.signature_units(k),
    "performance_overlap": lambda layout, k: layout.overlap_table("performance"),
    "semantic_overlap": lambda layout, k: layout.overlap_table("semantic"),
    "signature_overlap": lambda layout, k: layout.overlap_table("signature"),
}


def latest_metadata(instance: dg.DagsterInstance, name: str, partition: str | None) -> dict:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(name), asset_partitions=[partition] if partition else None
        ),
        limit=1,
    ).records
    assert records, (name, partition)
    return dict(records[0].asset_materialization.metadata)


def assert_table_metadata(meta: dict, stored, where: str) -> None:
    """The row count and columns the UI shows are those of the stored table."""
    import polars as pl

    from sigmap_assets.metadata import COLUMN_SCHEMA, ROW_COUNT

    assert ROW_COUNT in meta and COLUMN_SCHEMA in meta, f"{where}: {sorted(meta)}"
    frame = pl.read_parquet(stored)
    assert meta[ROW_COUNT].value == frame.height, where
    columns = meta[COLUMN_SCHEMA].schema.columns
    assert [c.name for c in columns] == frame.columns, where
    assert all(c.type for c in columns), where
    assert meta["column_count"].value == len(frame.columns), where


def test_every_stored_table_carries_its_row_count_and_column_schema(project: Project) -> None:
    project.through("overlap")
    layout = project.storage.layout
    graph = project.defs.resolve_asset_graph()
    for name, stored in TABLES.items():
        pdef = graph.get(dg.AssetKey(name)).partitions_def
        keys = project.keys(pdef.name) if pdef is not None else [None]
        assert keys, name
        for key in keys:
            meta = latest_metadata(project.instance, name, key)
            assert_table_metadata(meta, stored(layout, key), f"{name}[{key}]")


def test_table_metadata_of_a_wide_table_lists_its_first_columns() -> None:
    import pandas as pd
    import polars as pl

    from sigmap_assets.metadata import COLUMN_SCHEMA, ROW_COUNT, table_metadata

    wide = pl.DataFrame({"model": ["a", "b"]}).hstack(
        pl.DataFrame({f"item{i}": [0, 1] for i in range(300)})
    )
    meta = table_metadata(wide, max_columns=200)
    assert meta[ROW_COUNT].value == 2 and meta["column_count"].value == 301
    cols = meta[COLUMN_SCHEMA].schema.columns
    assert len(cols) == 200 and cols[0].name == "model" and cols[0].type == "String"
    meta = table_metadata(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    assert meta[ROW_COUNT].value == 3
    assert [(c.name, c.type) for c in meta[COLUMN_SCHEMA].schema.columns] == [("x", "float64")]


def test_stored_table_metadata_reads_the_parquet_footer(tmp_path) -> None:
    import polars as pl

    from sigmap_assets.metadata import COLUMN_SCHEMA, ROW_COUNT, stored_table_metadata

    path = tmp_path / "t.parquet"
    pl.DataFrame(
        {"doc_index": [0, 0, 1], "start": [0, 5, 0]}, schema_overrides={"start": pl.Int32}
    ).write_parquet(path)
    meta = stored_table_metadata(path)
    assert meta[ROW_COUNT].value == 3 and meta["column_count"].value == 2
    assert [(c.name, c.type) for c in meta[COLUMN_SCHEMA].schema.columns] == [
        ("doc_index", "int64"),
        ("start", "int32"),
    ]

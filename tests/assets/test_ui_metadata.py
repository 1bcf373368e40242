"""What the Dagster UI explains: every run-config and resource field has a description (the
Launchpad shows it), from the attribute docstrings of `SigmapConfig` / `SigmapResource`."""

from __future__ import annotations

import dagster as dg
import pytest

from sigmap_assets.config import SigmapConfig, SigmapResource, attribute_docstrings


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
    assert schema["shard_units"].description == attribute_docstrings(CorpusConfig)["shard_units"]
    from sigmap_assets.resources import ComputeResource

    assert issubclass(ComputeResource, SigmapResource)

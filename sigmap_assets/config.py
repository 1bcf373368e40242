"""Base classes for run config and resources whose fields explain themselves in the UI.

A field is documented the way the rest of the code documents attributes — a string right
below it — and the Launchpad shows that string as the field's description: pydantic's
``use_attribute_docstrings`` copies each attribute docstring into the field's
``description`` (an explicit ``Field(description=...)`` wins), which is what Dagster's config
schema reads.
"""

from __future__ import annotations

import dagster as dg
from pydantic import ConfigDict


class SigmapConfig(dg.Config):
    """Run config of a sigmap asset: every field's docstring is its Launchpad description."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class SigmapResource(dg.ConfigurableResource):
    """A sigmap resource: every field's docstring is its description in the UI."""

    model_config = ConfigDict(use_attribute_docstrings=True)

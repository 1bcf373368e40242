"""Base classes for run config and resources whose fields explain themselves in the UI.

A field is documented the way the rest of the code documents attributes — a string right
below it — and the Launchpad shows that string as the field's description: subclasses of
:class:`SigmapConfig` and :class:`SigmapResource` copy each attribute docstring into the
pydantic field's ``description`` (an explicit ``Field(description=...)`` wins), which is what
Dagster's config schema reads.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from typing import Any

import dagster as dg


def attribute_docstrings(cls: type) -> dict[str, str]:
    """``{field: docstring}`` for the annotated attributes of ``cls`` followed by a string.

    Classes without source (defined in a REPL or by ``exec``) give ``{}``.

    Examples
    --------
    >>> from sigmap_assets.defs.corpus.assets import CorpusConfig
    >>> attribute_docstrings(CorpusConfig)["shard_units"].split(" (")[0]
    'Target units per shard'
    """
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # defined where there is no source (a REPL, exec)
        return {}
    body = ast.parse(source).body[0].body
    out = {}
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            out[node.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def _describe_fields(cls: Any) -> None:
    changed = False
    for name, doc in attribute_docstrings(cls).items():
        field = cls.model_fields.get(name)
        if field is not None and not field.description:
            field.description = doc
            changed = True
    if changed:
        cls.model_rebuild(force=True)


class SigmapConfig(dg.Config):
    """Run config of a sigmap asset: every field's docstring is its Launchpad description."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _describe_fields(cls)


class SigmapResource(dg.ConfigurableResource):
    """A sigmap resource: every field's docstring is its description in the UI."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _describe_fields(cls)

"""The minimum counts a world must meet for each stage, in one place, with their reasons.

Every minimum is a setting: the ``minimums`` group of a world's ``settings.yaml`` (or
``sigmap demo --minimum KEY=N``, stored in ``<storage>/sigmap.yaml``). A stage whose minimum
is not met is skipped with its reason; nothing else stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from sigmap_lib.errors import SigmapInputError

#: Why each minimum exists (shown by ``sigmap check``, the docs and skip messages).
REASONS: dict[str, str] = {
    "score_models": (
        "a benchmark scored by fewer models (in the score files) is dropped from the score "
        "table: its rank correlations with per-unit perplexity would rest on too few orderings"
    ),
    "coverage_models": (
        "rank statistics across models need at least this many models with complete NLL on a "
        "shard (with 2 models every unit's ranks are 1 and 2: no correlation is measurable)"
    ),
    "signature_models": (
        "the calibrated signature residualizes on [1, general quality]: fewer scored models "
        "leave no degrees of freedom (its smallest permutation p-value is 1/m!)"
    ),
    "metabench_respondents": (
        "metabench's IRT fits, item selection and held-out test need this many models with "
        "responses on every benchmark"
    ),
    "semantic_benchmarks": "semantic overlap compares question texts of at least two benchmarks",
}


@dataclass(frozen=True)
class WorldMinimums:
    """Minimum counts per stage (see :data:`REASONS`).

    Examples
    --------
    >>> from sigmap_lib.worlds import WorldMinimums, read_minimums
    >>> WorldMinimums().score_models
    5
    >>> read_minimums({"minimums": {"score_models": 3}}).score_models
    3
    >>> read_minimums({"minimums": {"score_model": 3}})
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: settings 'minimums': unknown key 'score_model' (known: coverage_models, metabench_respondents, score_models, semantic_benchmarks, signature_models)
    """

    score_models: int = 5
    coverage_models: int = 3
    signature_models: int = 4
    metabench_respondents: int = 20
    semantic_benchmarks: int = 2

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def read_minimums(
    settings: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None
) -> WorldMinimums:
    """The minimums of a world's settings (group ``minimums``), then ``overrides`` on top.

    Parameters
    ----------
    settings : mapping, optional
        A world's ``settings.yaml`` content (groups of options).
    overrides : mapping, optional
        ``{key: n}`` from the command line.

    Returns
    -------
    WorldMinimums

    Raises
    ------
    SigmapInputError
        For an unknown key or a value that is not an integer >= 1.

    Examples
    --------
    >>> from sigmap_lib.worlds import read_minimums
    >>> read_minimums({}, {"coverage_models": 4}).coverage_models
    4
    """
    known = sorted(f.name for f in fields(WorldMinimums))
    out = WorldMinimums()
    for source in ((settings or {}).get("minimums") or {}, overrides or {}):
        if not isinstance(source, Mapping):
            raise SigmapInputError("settings 'minimums': expected a mapping of key: count")
        for key, value in source.items():
            if key not in known:
                raise SigmapInputError(
                    f"settings 'minimums': unknown key {key!r} (known: {', '.join(known)})"
                )
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SigmapInputError(
                    f"settings 'minimums': {key} must be an integer >= 1, got {value!r}"
                )
            out = replace(out, **{key: int(value)})
    return out

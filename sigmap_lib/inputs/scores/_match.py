"""Matching model ids in score sources to registry ids."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

# ---------------------------------------------------------------------------------------
# matching score model ids to registry ids

_HF_URL = re.compile(r"^(?:https?://)?(?:www\.)?huggingface\.co/", re.IGNORECASE)


def normalize_model_id(model_id: str) -> str:
    """Normalized form of a model id for fuzzy matching.

    Strips whitespace and a ``https://huggingface.co/`` prefix, drops a revision suffix
    (``@main``, ``@<sha>``), turns the slug separator ``__`` into ``/``, removes leading /
    trailing slashes and case-folds: ``" EleutherAI__Pythia-160m@main "`` ->
    ``"eleutherai/pythia-160m"``.

    Examples
    --------
    >>> from sigmap_lib.inputs import normalize_model_id
    >>> normalize_model_id(" EleutherAI__Pythia-160m@main ")
    'eleutherai/pythia-160m'
    >>> normalize_model_id("https://huggingface.co/EleutherAI/pythia-160m/")
    'eleutherai/pythia-160m'
    """
    s = _HF_URL.sub("", str(model_id).strip())
    s = s.split("@", 1)[0]
    s = s.replace("__", "/").strip("/ ")
    return s.casefold()


@dataclass
class MatchResult:
    """Outcome of :func:`match_models`.

    Attributes
    ----------
    mapping : dict[str, str]
        Score model id -> registry id, for every matched score id.
    method : dict[str, str]
        Score model id -> ``"exact"`` or ``"normalized"``.
    unmatched_scores : list[str]
        Score ids without a registry model (includes ambiguous ones).
    unmatched_registry : list[str]
        Registry ids with no scores.
    ambiguous : dict[str, list[str]]
        Score id -> the registry ids it could mean (or, when several score ids compete
        for one registry id, that registry id), left unmatched.
    """

    mapping: dict[str, str] = field(default_factory=dict)
    method: dict[str, str] = field(default_factory=dict)
    unmatched_scores: list[str] = field(default_factory=list)
    unmatched_registry: list[str] = field(default_factory=list)
    ambiguous: dict[str, list[str]] = field(default_factory=dict)

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON-able summary (for asset metadata)."""
        return {
            "n_matched": len(self.mapping),
            "n_matched_normalized": sum(1 for v in self.method.values() if v == "normalized"),
            "unmatched_scores": list(self.unmatched_scores),
            "unmatched_registry": list(self.unmatched_registry),
            "ambiguous": {k: list(v) for k, v in self.ambiguous.items()},
        }


def match_models(score_models: Iterable[str], registry_ids: Iterable[str]) -> MatchResult:
    """Match model ids from score sources to registry ids.

    Exact id equality first; the remaining ids are matched through
    :func:`normalize_model_id` when the match is one-to-one. A score id whose normalized
    form fits several remaining registry ids, or a registry id claimed by several score
    ids, is reported in ``ambiguous`` and left unmatched.

    Parameters
    ----------
    score_models : iterable of str
        Model ids found in the score tables (repeats ignored).
    registry_ids : iterable of str
        Raw ids of ``models.yaml``.

    Returns
    -------
    MatchResult
        Lists keep the input order.

    Examples
    --------
    >>> from sigmap_lib.inputs import match_models
    >>> res = match_models(
    ...     ["EleutherAI/pythia-160m", "eleutherai__pythia-410m", "gpt-x"],  # in the scores
    ...     ["EleutherAI/pythia-160m", "EleutherAI/pythia-410m", "tiny-gpt2"],  # models.yaml
    ... )
    >>> res.mapping
    {'EleutherAI/pythia-160m': 'EleutherAI/pythia-160m',
     'eleutherai__pythia-410m': 'EleutherAI/pythia-410m'}
    >>> res.method["eleutherai__pythia-410m"], res.unmatched_scores, res.unmatched_registry
    ('normalized', ['gpt-x'], ['tiny-gpt2'])
    """
    scores = list(dict.fromkeys(score_models))
    registry = list(dict.fromkeys(registry_ids))
    reg_set = set(registry)
    res = MatchResult()
    for s in scores:
        if s in reg_set:
            res.mapping[s] = s
            res.method[s] = "exact"
    taken = set(res.mapping.values())
    by_norm: dict[str, list[str]] = {}
    for r in registry:
        if r not in taken:
            by_norm.setdefault(normalize_model_id(r), []).append(r)
    wants: dict[str, list[str]] = {}  # registry id -> score ids wanting it
    cands: dict[str, list[str]] = {}
    for s in scores:
        if s in res.mapping:
            continue
        c = by_norm.get(normalize_model_id(s), [])
        if len(c) == 1:
            wants.setdefault(c[0], []).append(s)
        elif len(c) > 1:
            res.ambiguous[s] = list(c)
        cands[s] = c
    for r, ss in wants.items():
        if len(ss) == 1:
            res.mapping[ss[0]] = r
            res.method[ss[0]] = "normalized"
        else:
            for s in ss:
                res.ambiguous[s] = [r]
    res.mapping = {s: res.mapping[s] for s in scores if s in res.mapping}
    res.method = {s: res.method[s] for s in res.mapping}
    res.unmatched_scores = [s for s in scores if s not in res.mapping]
    matched_reg = set(res.mapping.values())
    res.unmatched_registry = [r for r in registry if r not in matched_reg]
    return res


def apply_model_match(
    long: pl.DataFrame, match: MatchResult, *, drop_unmatched: bool = True
) -> pl.DataFrame:
    """Replace score model ids by registry ids.

    Parameters
    ----------
    long : pl.DataFrame
        Long score table.
    match : MatchResult
        From :func:`match_models` on this table's models.
    drop_unmatched : bool
        Drop rows of unmatched models (default) or keep them under their own id.

    Returns
    -------
    pl.DataFrame
        Same columns, ``model`` holding registry ids.

    Examples
    --------
    >>> import polars as pl
    >>> from sigmap_lib.inputs import apply_model_match, match_models
    >>> long = pl.DataFrame(
    ...     {"model": ["eleutherai__pythia-410m", "gpt-x"], "benchmark": ["arc", "arc"],
    ...      "score": [35.0, 50.0]}
    ... )
    >>> match = match_models(long["model"], ["EleutherAI/pythia-410m"])
    >>> apply_model_match(long, match).rows()
    [('EleutherAI/pythia-410m', 'arc', 35.0)]
    >>> apply_model_match(long, match, drop_unmatched=False).rows()
    [('EleutherAI/pythia-410m', 'arc', 35.0), ('gpt-x', 'arc', 50.0)]
    """
    if drop_unmatched:
        long = long.filter(pl.col("model").is_in(list(match.mapping)))
    return long.with_columns(pl.col("model").replace(match.mapping))


def keyed_scores(long: pl.DataFrame, registry: dict[str, str]) -> tuple[pl.DataFrame, MatchResult]:
    """The long score table with registry ids and partition keys: score model ids matched
    to the registry (unmatched models kept under their own id, without a key) and each
    benchmark's slug.

    Parameters
    ----------
    long : pl.DataFrame
        Long scores (``model``, ``benchmark``, ``score``).
    registry : dict
        Registry model id -> its partition key, in registry order.

    Returns
    -------
    table : pl.DataFrame
        Columns ``model, model_key, benchmark, benchmark_key, score``.
    match : MatchResult
        How the score model ids were matched.

    Examples
    --------
    >>> import polars as pl
    >>> from sigmap_lib.inputs.scores import keyed_scores
    >>> long = pl.DataFrame(
    ...     {"model": ["eleutherai__pythia-410m", "gpt-x"], "benchmark": ["ARC Easy", "ARC Easy"],
    ...      "score": [35.0, 50.0]}
    ... )
    >>> table, match = keyed_scores(long, {"EleutherAI/pythia-410m": "pythia_410m"})
    >>> table.rows()
    [('EleutherAI/pythia-410m', 'pythia_410m', 'ARC Easy', 'ARC_Easy', 35.0), ('gpt-x', None, 'ARC Easy', 'ARC_Easy', 50.0)]
    """
    from sigmap_lib.inputs._catalog import benchmark_slug

    match = match_models(long["model"].unique().to_list(), list(registry))
    matched = apply_model_match(long, match, drop_unmatched=False)
    table = matched.with_columns(
        pl.col("model").replace_strict(registry, default=None).alias("model_key"),
        pl.col("benchmark")
        .map_elements(benchmark_slug, return_dtype=pl.String)
        .alias("benchmark_key"),
    ).select("model", "model_key", "benchmark", "benchmark_key", "score")
    return table, match

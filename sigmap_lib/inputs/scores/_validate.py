"""Validation of a canonical score table against the catalog and the registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs.scores._common import FMT_ROW, SCORE_SCHEMA

# ---------------------------------------------------------------------------------------
# validation


@dataclass
class ScoreValidation:
    """What :func:`validate_scores` found.

    Attributes
    ----------
    warnings : list[str]
        Human-readable warnings (each names the benchmark / file).
    dropped_benchmarks : dict[str, str]
        Benchmark -> reason it was removed from the table.
    models_per_benchmark : dict[str, int]
        Number of scored models per kept benchmark.
    n_models, n_benchmarks, n_scores : int
        Size of the validated table.
    sources : list[str]
        Files the table was read from (when known).
    transforms : dict[str, str]
        Benchmark -> the catalog's transform that made its scores higher-is-better
        (``"x"``: none; :data:`sigmap_lib.inputs.SCORE_TRANSFORMS`).
    """

    warnings: list[str] = field(default_factory=list)
    dropped_benchmarks: dict[str, str] = field(default_factory=dict)
    models_per_benchmark: dict[str, int] = field(default_factory=dict)
    n_models: int = 0
    n_benchmarks: int = 0
    n_scores: int = 0
    sources: list[str] = field(default_factory=list)
    transforms: dict[str, str] = field(default_factory=dict)

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON-able dict (for asset metadata)."""
        return {
            "n_models": self.n_models,
            "n_benchmarks": self.n_benchmarks,
            "n_scores": self.n_scores,
            "models_per_benchmark": dict(self.models_per_benchmark),
            "dropped_benchmarks": dict(self.dropped_benchmarks),
            "warnings": list(self.warnings),
            "sources": list(self.sources),
            "transforms": dict(self.transforms),
        }


def validate_scores(
    table: pl.DataFrame,
    *,
    catalog: Mapping[str, Any] | None = None,
    min_models: int = 3,
    strict: bool = False,
    source: str | None = None,
) -> tuple[pl.DataFrame, ScoreValidation]:
    """Check a long score table and drop benchmarks with too few models.

    Parameters
    ----------
    table : pl.DataFrame
        Columns ``model``, ``benchmark``, ``score``; an optional ``source`` column (file
        of each row) is used in messages and kept.
    catalog : mapping or None
        Benchmark name -> object with a ``score_range`` attribute (``(low, high)`` or
        None), e.g. :func:`sigmap_lib.inputs.read_catalog`'s result. Scores outside the
        inclusive range are errors; benchmarks absent from the catalog (or catalog
        entries without scores) are warnings.
    min_models : int
        Benchmarks scored for fewer distinct models are dropped with a warning, or raise
        when ``strict``.
    strict : bool
        Turn the ``min_models`` warning into an error.
    source : str or None
        Name of the table in messages when it has no ``source`` column.

    Returns
    -------
    table : pl.DataFrame
        The table without dropped benchmarks.
    report : ScoreValidation

    Raises
    ------
    SigmapInputError
        Missing columns, null / empty ids, non-finite scores, duplicate
        ``(model, benchmark)`` rows, scores outside the catalog range, an empty table, or
        (``strict``) too few models.

    Examples
    --------
    >>> import polars as pl
    >>> from sigmap_lib.inputs import catalog_from_dict, validate_scores
    >>> table = pl.DataFrame(
    ...     {"model": ["m1", "m2", "m3", "m1"], "benchmark": ["arc", "arc", "arc", "gsm8k"],
    ...      "score": [30.0, 35.0, 50.0, 12.5]}
    ... )
    >>> entry = {"family": "ai2", "format": "multiple_choice", "function": "reasoning"}
    >>> catalog = catalog_from_dict({"benchmarks": {"arc": {**entry, "score_range": [0, 100]}}})
    >>> kept, report = validate_scores(table, catalog=catalog, min_models=3)
    >>> kept.rows()
    [('m1', 'arc', 30.0), ('m2', 'arc', 35.0), ('m3', 'arc', 50.0)]
    >>> report.dropped_benchmarks, report.models_per_benchmark
    ({'gsm8k': 'only 1 model(s) scored, min_models=3'}, {'arc': 3})
    >>> report.warnings[0]
    "score table: benchmark(s) ['gsm8k'] are not in the catalog (no family / format /
    function, no range check)"
    """
    where = source or "score table"
    if not isinstance(table, pl.DataFrame):
        raise SigmapInputError(f"{where}: expected a polars DataFrame, got {type(table).__name__}")
    absent = [c for c in SCORE_SCHEMA if c not in table.columns]
    if absent:
        raise SigmapInputError(f"{where}: missing column(s) {absent}; columns are {table.columns}")
    if isinstance(min_models, bool) or not isinstance(min_models, int) or min_models < 1:
        raise SigmapInputError(f"min_models must be a positive integer, got {min_models!r}")
    if table.height == 0:
        raise SigmapInputError(f"{where}: no scores")
    has_src = "source" in table.columns

    def _who(row: Mapping[str, Any]) -> str:
        return f" in {row['source']}" if has_src else (f" in {source}" if source else "")

    def _examples(rows: pl.DataFrame, score: Any = "{:g}".format, benchmark: bool = True) -> str:
        """The first rows as ``model 'm' benchmark 'b' in <source>: <score>``."""
        return "; ".join(
            f"model {r['model']!r}"
            + (f" benchmark {r['benchmark']!r}" if benchmark else "")
            + f"{_who(r)}: {score(r['score'])}"
            for r in rows.head(FMT_ROW).iter_rows(named=True)
        )

    for col in ("model", "benchmark"):
        bad = table.filter(
            pl.col(col).is_null() | (pl.col(col).cast(pl.String).str.strip_chars() == "")
        )
        if bad.height:
            raise SigmapInputError(f"{where}: {bad.height} row(s) have an empty {col}")
    try:
        table = table.with_columns(pl.col("score").cast(pl.Float64))
    except Exception as exc:
        raise SigmapInputError(
            f"{where}: column 'score' is not numeric ({table['score'].dtype})"
        ) from exc
    bad = table.filter(~pl.col("score").is_finite().fill_null(False))
    if bad.height:
        ex = _examples(bad, score=repr)
        raise SigmapInputError(f"{where}: {bad.height} missing or non-finite score(s), e.g. {ex}")
    dups = table.filter(pl.struct("model", "benchmark").is_duplicated())
    if dups.height:
        raise SigmapInputError(
            f"{where}: {dups.height} duplicated (model, benchmark) rows, e.g. {_examples(dups)}"
        )

    report = ScoreValidation()
    names = table["benchmark"].unique(maintain_order=True).to_list()
    if catalog is not None:
        unknown = [b for b in names if b not in catalog]
        if unknown:
            report.warnings.append(
                f"{where}: benchmark(s) {unknown} are not in the catalog (no family / format / "
                f"function, no range check)"
            )
        unscored = [b for b in catalog if b not in set(names)]
        if unscored:
            report.warnings.append(f"{where}: catalog benchmark(s) {unscored} have no scores")
        for b in names:
            entry = catalog.get(b)
            rng = getattr(entry, "score_range", None) if entry is not None else None
            if rng is None:
                continue
            lo, hi = float(rng[0]), float(rng[1])
            out = table.filter(
                (pl.col("benchmark") == b) & ((pl.col("score") < lo) | (pl.col("score") > hi))
            )
            if out.height:
                ex = _examples(out, benchmark=False)
                raise SigmapInputError(
                    f"{where}: {out.height} score(s) of benchmark {b!r} are outside its "
                    f"catalog score_range [{lo:g}, {hi:g}], e.g. {ex}"
                )
    if catalog is not None:
        table = _higher_is_better(table, catalog, names, where, report)
    counts = dict(
        table.group_by("benchmark", maintain_order=True).agg(pl.col("model").n_unique()).iter_rows()
    )
    few = {b: n for b, n in counts.items() if n < min_models}
    if few:
        msg = ", ".join(f"{b!r} ({n})" for b, n in few.items())
        if strict:
            raise SigmapInputError(
                f"{where}: benchmark(s) with fewer than min_models={min_models} scored models: {msg}"
            )
        report.warnings.append(
            f"{where}: dropped benchmark(s) with fewer than min_models={min_models} scored "
            f"models: {msg}"
        )
        for b, n in few.items():
            report.dropped_benchmarks[b] = f"only {n} model(s) scored, min_models={min_models}"
        table = table.filter(~pl.col("benchmark").is_in(list(few)))
        if table.height == 0:
            raise SigmapInputError(
                f"{where}: no benchmark has at least min_models={min_models} scored models"
            )
    report.models_per_benchmark = {b: n for b, n in counts.items() if b not in few}
    report.n_models = table["model"].n_unique()
    report.n_benchmarks = table["benchmark"].n_unique()
    report.n_scores = table.height
    if has_src:
        report.sources = [str(s) for s in table["source"].unique(maintain_order=True)]
    elif source:
        report.sources = [source]
    return table, report


def _higher_is_better(
    table: pl.DataFrame,
    catalog: Mapping[str, Any],
    names: list[str],
    where: str,
    report: ScoreValidation,
) -> pl.DataFrame:
    """Apply each benchmark's catalog transform (after the range check, which is on the
    stored values); record the transform of every benchmark in ``report.transforms``."""
    import numpy as np

    from sigmap_lib.inputs._direction import apply_score_transform

    bench = table["benchmark"].to_numpy()
    score = table["score"].to_numpy().astype(np.float64, copy=True)
    changed = False
    for b in names:
        t = getattr(catalog.get(b), "transform", "x")
        report.transforms[b] = t
        if t != "x":
            rows = bench == b
            score[rows] = apply_score_transform(score[rows], t, f"{where}: benchmark {b!r}")
            changed = True
    return table.with_columns(pl.Series("score", score)) if changed else table

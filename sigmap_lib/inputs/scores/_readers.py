"""Benchmark scores: one canonical table, readers for the usual sources, validation.

The canonical score table is a polars DataFrame in **long** form::

    model: str      raw model id (as in the source / models.yaml)
    benchmark: str  benchmark name (as in catalog.yaml)
    score: f64      finite; higher = better

with at most one row per ``(model, benchmark)``; a missing score is an absent row (never
null or NaN). :func:`to_wide` turns it into ``(models, benchmarks, values)`` with
``values`` of shape ``(n_models, n_benchmarks)`` and NaN where missing.

Readers (all return the long table and raise :class:`SigmapInputError` naming the file,
the column / row / model / benchmark and the problem):

- :func:`read_wide` -- one row per model, one column per benchmark (Open LLM
  Leaderboard v1/v2 and ObsScaling CSVs, ``scores.csv`` of a world folder), CSV / TSV /
  parquet; metadata columns (average, size, rank, flags, ...) are skipped automatically.
- :func:`read_long` -- ``(model, benchmark, score)`` rows, column names configurable.
- :func:`read_lm_eval_results` -- lm-evaluation-harness output folders
  (``results*.json``), metric chosen per task.
- :func:`read_scores` dispatches on a source spec ``{"kind": ..., "path": ...}``;
  :func:`read_score_sources` concatenates several sources and validates the result
  (:func:`validate_scores`, returning a :class:`ScoreValidation` report).

Model ids in scores are matched to registry ids by :func:`match_models`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sigmap_lib._util._tables import read_table
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs.scores._common import (
    MISSING_TOKENS,
    Duplicates,
    check_rename,
    find_model_column,
    finish_scores,
    is_metadata_column,
    model_ids,
    names_in,
    parse_numeric,
    resolve_duplicates,
)
from sigmap_lib.inputs.scores._lm_eval import read_lm_eval_results
from sigmap_lib.inputs.scores._validate import ScoreValidation, validate_scores

# ---------------------------------------------------------------------------------------
# readers


def read_wide(
    path: str | Path,
    *,
    model_column: str | None = None,
    benchmarks: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
    duplicates: Duplicates = "error",
) -> pl.DataFrame:
    """Read a wide score table (one row per model, one column per benchmark).

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.tsv`` or ``.parquet``. Open LLM Leaderboard v1 (``name`` + arc,
        hellaswag, ...), v2 (``model`` + ifeval, bbh, ...) and ObsScaling (``Model`` +
        columns) files read without options.
    model_column : str or None
        Column with the model ids; default: the first of ``model``, ``model_name``,
        ``model_id``, ``name``, ``fullname``, ``llm`` present (any case / separators).
    benchmarks : sequence of str or None
        Score columns to read (source names). Default: every column that holds numbers
        (for CSV: whose non-missing cells mostly parse as numbers) and is not metadata --
        a name containing a token such as avg, average, size, params, rank, flops, sha,
        precision, family, flagged, merged, moe, complete, duplicated, id
        (:data:`METADATA_TOKENS`), or a true/false column.
    rename : mapping or None
        Source column -> benchmark name in the output.
    duplicates : {"error", "first", "last", "mean"}
        A model on several rows: ``"error"`` (default) raises when the rows disagree
        (identical repeats are collapsed); ``"first"`` / ``"last"`` keep one row's values;
        ``"mean"`` averages each benchmark over the rows where it is present.

    Returns
    -------
    pl.DataFrame
        Long table ``model, benchmark, score`` (missing cells dropped), in file order.

    Raises
    ------
    SigmapInputError
        Empty file, no model column, empty model ids, a requested benchmark column that
        is absent, non-numeric or infinite values (column and example rows named),
        conflicting duplicated models, or no scores at all.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_wide
    >>> _ = Path("leaderboard.csv").write_text(
    ...     "model,Average,arc,gsm8k\\n"
    ...     "m1,21.2,30.0,12.5\\n"
    ...     "m2,40,35.0,n/a\\n"
    ...     "m3,45,50.0,40.0\\n"
    ... )
    >>> read_wide("leaderboard.csv").rows()  # "Average" is metadata; "n/a" is missing
    [('m1', 'arc', 30.0), ('m1', 'gsm8k', 12.5), ('m2', 'arc', 35.0), ('m3', 'arc', 50.0),
     ('m3', 'gsm8k', 40.0)]
    >>> read_wide("leaderboard.csv", benchmarks=["gsm8k"], rename={"gsm8k": "gsm8k/main"}).rows()
    [('m1', 'gsm8k/main', 12.5), ('m3', 'gsm8k/main', 40.0)]
    """
    p = Path(path)
    df, kind = read_table(p, "scores file")
    mcol = find_model_column(df, model_column, p, "scores file")
    models = model_ids(df, mcol, p, kind, "scores file")
    if benchmarks is not None:
        benchmarks = list(benchmarks)
        if not benchmarks:
            raise SigmapInputError(f"scores file {p}: benchmarks=[] selects no score column")
        absent = [b for b in benchmarks if b not in df.columns]
        if absent:
            raise SigmapInputError(
                f"scores file {p}: benchmark column(s) {absent} not found; columns are {df.columns}"
            )
        cols = benchmarks
        series = [parse_numeric(df, c, path=p, kind=kind, model_column=mcol) for c in cols]
    else:
        cols, series = [], []
        for c in df.columns:
            if c == mcol or is_metadata_column(c):
                continue
            s = df.get_column(c)
            if s.dtype == pl.Boolean:
                continue
            if s.dtype.is_numeric():
                series.append(parse_numeric(df, c, path=p, kind=kind, model_column=mcol))
                cols.append(c)
                continue
            if s.dtype not in (pl.String, pl.Categorical):
                continue
            text = s.cast(pl.String).str.strip_chars()
            present = text.is_not_null() & ~text.str.to_lowercase().is_in(list(MISSING_TOKENS))
            n_present = int(present.sum())
            if n_present == 0:
                continue
            n_num = int((present & text.cast(pl.Float64, strict=False).is_not_null()).sum())
            if n_num * 2 < n_present:  # mostly text: a metadata column
                continue
            series.append(parse_numeric(df, c, path=p, kind=kind, model_column=mcol))
            cols.append(c)
        if not cols:
            raise SigmapInputError(
                f"scores file {p}: no numeric score columns found besides metadata; "
                f"columns are {df.columns}; pass benchmarks=[...]"
            )
    rename = check_rename(rename, cols, p)
    wide = pl.DataFrame([models, *series]).with_row_index("_row")
    long = wide.unpivot(
        index=["_row", "model"], on=cols, variable_name="benchmark", value_name="score"
    )
    order = {c: i for i, c in enumerate(cols)}
    long = long.with_columns(
        pl.col("benchmark").replace_strict(order, return_dtype=pl.Int64).alias("_bidx"),
        pl.col("benchmark").replace_strict({c: rename.get(c, c) for c in cols}),
    )
    long = resolve_duplicates(long, duplicates, p, kind, "(on several rows)")
    return finish_scores(long, p)


def read_long(
    path: str | Path,
    *,
    model_column: str = "model",
    benchmark_column: str = "benchmark",
    score_column: str = "score",
    benchmarks: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
    duplicates: Duplicates = "error",
) -> pl.DataFrame:
    """Read a long score table: one row per ``(model, benchmark)`` with a score.

    ``benchmarks``, ``rename`` and ``duplicates`` are :func:`read_wide`'s options, applied
    to the names in the benchmark column instead of to score columns.

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.tsv`` or ``.parquet``; other columns are ignored.
    model_column, benchmark_column, score_column : str
        Column names in the file.
    benchmarks : sequence of str or None
        Keep only these benchmarks (source names); each must occur in the file.
    rename : mapping or None
        Source benchmark name -> output name.
    duplicates : {"error", "first", "last", "mean"}
        A repeated ``(model, benchmark)`` pair; as in :func:`read_wide`.

    Returns
    -------
    pl.DataFrame
        Long table ``model, benchmark, score`` (rows with a missing score dropped).

    Raises
    ------
    SigmapInputError
        Missing columns, empty model or benchmark names, non-numeric or infinite
        scores, conflicting duplicate pairs, or no scores.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_long
    >>> _ = Path("long.csv").write_text("llm,task,acc\\nm1,arc,0.30\\nm2,arc,0.35\\nm2,arc,0.37\\n")
    >>> read_long(
    ...     "long.csv", model_column="llm", benchmark_column="task", score_column="acc",
    ...     duplicates="last",  # m2 / arc appears twice
    ... ).rows()
    [('m1', 'arc', 0.3), ('m2', 'arc', 0.37)]
    """
    p = Path(path)
    df, kind = read_table(p, "scores file")
    need = [model_column, benchmark_column, score_column]
    absent = [c for c in need if c not in df.columns]
    if absent:
        raise SigmapInputError(
            f"scores file {p}: column(s) {absent} not found; columns are {df.columns} "
            f"(set model_column / benchmark_column / score_column)"
        )
    models = model_ids(df, model_column, p, kind, "scores file")
    bench = names_in(df, benchmark_column, p, kind, "scores file", "benchmark")
    score = parse_numeric(df, score_column, path=p, kind=kind, model_column=model_column)
    long = pl.DataFrame([models, bench.alias("benchmark"), score.alias("score")]).with_row_index(
        "_row"
    )
    if benchmarks is not None:
        present = set(long["benchmark"].unique().to_list())
        absent = [b for b in benchmarks if b not in present]
        if absent:
            raise SigmapInputError(
                f"scores file {p}: benchmark(s) {absent} not found in column {benchmark_column!r}"
            )
        long = long.filter(pl.col("benchmark").is_in(list(benchmarks)))
    names = long["benchmark"].unique(maintain_order=True).to_list()
    rename = check_rename(rename, names, p)
    long = long.with_columns(
        pl.col("benchmark").replace_strict({n: rename.get(n, n) for n in names}),
        pl.lit(0, dtype=pl.Int64).alias("_bidx"),
    )
    long = resolve_duplicates(long, duplicates, p, kind, "for the same benchmark")
    return finish_scores(long, p)


# --- dispatch ---------------------------------------------------------------------------

_READERS: dict[str, Callable[..., pl.DataFrame]] = {
    "wide": read_wide,
    "leaderboard": read_wide,
    "long": read_long,
    "lm_eval": read_lm_eval_results,
}


def score_source_path(spec: Mapping[str, Any], *, base_dir: str | Path | None = None) -> Path:
    """The file or folder a score source spec names: its ``path``, ``~`` expanded, a relative
    path resolved against ``base_dir``.

    Parameters
    ----------
    spec : mapping
        A source spec (see :func:`read_scores`).
    base_dir : str, Path or None
        Folder a relative ``path`` is resolved against.

    Returns
    -------
    Path
        The path, whether or not it exists.

    Raises
    ------
    SigmapInputError
        ``spec`` is not a mapping or has no ``path``.

    Examples
    --------
    >>> from sigmap_lib.inputs.scores import score_source_path
    >>> score_source_path({"kind": "wide", "path": "board.csv"}, base_dir="/data").as_posix()
    '/data/board.csv'
    >>> score_source_path({"kind": "wide"})
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: score source {'kind': 'wide'}: missing 'path'
    """
    if not isinstance(spec, Mapping):
        raise SigmapInputError(f"score source spec must be a mapping, got {spec!r}")
    if "path" not in spec or not str(spec["path"]).strip():
        raise SigmapInputError(f"score source {spec!r}: missing 'path'")
    p = Path(str(spec["path"])).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p


def read_scores(spec: Mapping[str, Any], *, base_dir: str | Path | None = None) -> pl.DataFrame:
    """Read one score source described by a spec dict.

    Parameters
    ----------
    spec : mapping
        ``{"kind": "wide" | "leaderboard" | "long" | "lm_eval", "path": ..., **options}``.
        ``leaderboard`` is :func:`read_wide` (leaderboard CSVs need no options). Options
        are the keyword arguments of the reader (:func:`read_wide`, :func:`read_long`,
        :func:`read_lm_eval_results`), plus ``scale`` (a positive factor every score is
        multiplied by, e.g. 100 to put lm-eval fractions on a percent scale).
    base_dir : str, Path or None
        Folder a relative ``path`` is resolved against (e.g. the config file's folder).

    Returns
    -------
    pl.DataFrame
        Long table ``model, benchmark, score``.

    Raises
    ------
    SigmapInputError
        Unknown kind, missing path, unknown options (named), a bad scale, or whatever
        the reader raises.

    Examples
    --------
    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_scores
    >>> _ = Path("long.csv").write_text("model,benchmark,score\\nm1,arc,0.30\\nm2,arc,0.35\\n")
    >>> read_scores({"kind": "long", "path": "long.csv", "scale": 100}).rows()  # to percent
    [('m1', 'arc', 30.0), ('m2', 'arc', 35.0)]
    >>> read_scores({"kind": "wide", "path": "long.csv", "colums": ["arc"]})
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: score source long.csv (kind 'wide'): unknown option(s)
    ['colums']; allowed: ['model_column', 'benchmarks', 'rename', 'duplicates', 'scale']
    """
    if not isinstance(spec, Mapping):
        raise SigmapInputError(f"score source spec must be a mapping, got {spec!r}")
    opts = dict(spec)
    kind = opts.pop("kind", None)
    if kind not in _READERS:
        raise SigmapInputError(
            f"score source {spec!r}: kind must be one of {sorted(_READERS)}, got {kind!r}"
        )
    p = score_source_path(spec, base_dir=base_dir)
    opts.pop("path")
    scale = opts.pop("scale", 1.0)
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not (math.isfinite(scale) and scale > 0)
    ):
        raise SigmapInputError(f"score source {p}: scale must be a positive number, got {scale!r}")
    reader = _READERS[kind]
    allowed = [n for n in inspect.signature(reader).parameters if n != "path"]
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise SigmapInputError(
            f"score source {p} (kind {kind!r}): unknown option(s) {unknown}; allowed: "
            f"{[*allowed, 'scale']}"
        )
    out = reader(p, **opts)
    if scale != 1.0:
        out = out.with_columns(pl.col("score") * float(scale))
    return out


def read_score_sources(
    specs: Sequence[Mapping[str, Any]],
    *,
    catalog: Mapping[str, Any] | None = None,
    min_models: int = 3,
    strict: bool = False,
    base_dir: str | Path | None = None,
) -> tuple[pl.DataFrame, ScoreValidation]:
    """Read, concatenate and validate several score sources.

    A ``(model, benchmark)`` given by two sources must have the same value (to 1e-9
    relative); it is then kept once (with a warning). Different values raise an error
    naming both files.

    Parameters
    ----------
    specs : sequence of mapping
        Source specs for :func:`read_scores`.
    catalog : mapping or None
        Benchmark name -> :class:`sigmap_lib.inputs.Benchmark` (for ``score_range``).
    min_models : int
        Passed to :func:`validate_scores`.
    strict : bool
        Passed to :func:`validate_scores`.
    base_dir : str, Path or None
        Folder relative paths in the specs are resolved against.

    Returns
    -------
    table : pl.DataFrame
        Long table ``model, benchmark, score`` after validation.
    report : ScoreValidation
        Warnings, dropped benchmarks and counts.

    Examples
    --------
    Two wide files that share one (equal) score; gsm8k has only two models:

    >>> from pathlib import Path
    >>> from sigmap_lib.inputs import read_score_sources
    >>> _ = Path("leaderboard.csv").write_text(
    ...     "model,arc,gsm8k\\nm1,30.0,12.5\\nm2,35.0,\\nm3,50.0,40.0\\n"
    ... )
    >>> _ = Path("more.csv").write_text("model,arc,mmlu\\nm1,30.0,41.0\\nm2,,44.5\\nm3,,52.0\\n")
    >>> specs = [{"kind": "wide", "path": "leaderboard.csv"}, {"kind": "wide", "path": "more.csv"}]
    >>> table, report = read_score_sources(specs, min_models=3)
    >>> table.rows()
    [('m1', 'arc', 30.0), ('m2', 'arc', 35.0), ('m3', 'arc', 50.0), ('m1', 'mmlu', 41.0),
     ('m2', 'mmlu', 44.5), ('m3', 'mmlu', 52.0)]
    >>> report.warnings[0], report.dropped_benchmarks, report.sources
    ('1 (model, benchmark) score(s) appear in several sources with equal values; kept once',
     {'gsm8k': 'only 2 model(s) scored, min_models=3'}, ['leaderboard.csv', 'more.csv'])
    """
    if not specs:
        raise SigmapInputError("no score sources given")
    parts = []
    for spec in specs:
        t = read_scores(spec, base_dir=base_dir)
        src = str(score_source_path(spec, base_dir=base_dir))
        parts.append(t.with_columns(pl.lit(src).alias("source")))
    allrows = pl.concat(parts, how="vertical").with_row_index("_row")
    dup = allrows.filter(pl.struct("model", "benchmark").is_duplicated())
    warnings: list[str] = []
    if dup.height:
        for (m, b), g in dup.group_by(["model", "benchmark"], maintain_order=True):
            v = g["score"].to_numpy()
            if not np.allclose(v, v[0], rtol=1e-9, atol=1e-12):
                srcs = "; ".join(f"{s}: {x:g}" for s, x in zip(g["source"], g["score"]))
                raise SigmapInputError(
                    f"score sources disagree for model {m!r} benchmark {b!r}: {srcs}"
                )
        n_pairs = dup.select(pl.struct("model", "benchmark").n_unique()).item()
        warnings.append(
            f"{n_pairs} (model, benchmark) score(s) appear in several sources with equal "
            f"values; kept once"
        )
        allrows = allrows.unique(subset=["model", "benchmark"], keep="first", maintain_order=True)
    table, report = validate_scores(
        allrows.drop("_row"), catalog=catalog, min_models=min_models, strict=strict
    )
    report.warnings[:0] = warnings
    report.sources = [str(s) for s in dict.fromkeys(p["source"][0] for p in parts)]
    return table.drop("source"), report

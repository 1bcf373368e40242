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

import csv
import inspect
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from sigmap_lib.errors import SigmapInputError

__all__ = [
    "DEFAULT_LM_EVAL_METRICS",
    "MISSING_TOKENS",
    "SCORE_SCHEMA",
    "MatchResult",
    "ScoreValidation",
    "apply_model_match",
    "empty_scores",
    "from_wide",
    "match_models",
    "normalize_model_id",
    "read_lm_eval_results",
    "read_long",
    "read_score_sources",
    "read_scores",
    "read_wide",
    "to_wide",
    "validate_scores",
]

Duplicates = Literal["error", "first", "last", "mean"]

SCORE_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "benchmark": pl.String(),
    "score": pl.Float64(),
}

#: Cell values read as "missing" (case-insensitive, after stripping whitespace).
MISSING_TOKENS: frozenset[str] = frozenset({"", "na", "n/a", "nan", "null", "none", "-", "--"})

#: Tokens of a column name (lower-cased, split on non-alphanumerics) that mark a column
#: of a wide table as metadata rather than a benchmark score.
METADATA_TOKENS: frozenset[str] = frozenset(
    {
        "avg", "average", "mean", "size", "params", "param", "nparams", "parameters",
        "rank", "flops", "sha", "revision", "precision", "arch", "architecture", "link",
        "url", "license", "likes", "hearts", "co2", "date", "family", "flagged",
        "flag", "merged", "moe", "available", "complete", "duplicated", "id",
    }
)  # fmt: skip

#: Model-column names tried, in order, when ``model_column`` is not given
#: (compared case-insensitively, ignoring spaces / dashes / underscores).
MODEL_COLUMN_CANDIDATES: tuple[str, ...] = (
    "model", "modelname", "modelid", "name", "fullname", "llm",
)  # fmt: skip

#: lm-evaluation-harness metrics tried, in order, for a task not named in ``metrics``.
DEFAULT_LM_EVAL_METRICS: tuple[str, ...] = (
    "acc_norm,none",
    "acc,none",
    "exact_match,strict-match",
    "exact_match,flexible-extract",
    "exact_match,none",
    "prompt_level_strict_acc,none",
    "inst_level_strict_acc,none",
    "mc2",
    "acc_norm",
    "acc",
    "exact_match",
)

_FMT_ROW = 5  # examples shown in error messages


def empty_scores() -> pl.DataFrame:
    """An empty canonical score table (columns model, benchmark, score)."""
    return pl.DataFrame(schema=SCORE_SCHEMA)


# ---------------------------------------------------------------------------------------
# file reading helpers


def _suffix(path: Path, what: str = "scores file") -> str:
    s = path.suffix.lower()
    if s in {".csv", ".tsv", ".txt"}:
        return "tsv" if s == ".tsv" else "csv"
    if s in {".parquet", ".pq"}:
        return "parquet"
    raise SigmapInputError(
        f"{what} {path}: unsupported file type {path.suffix!r} (use .csv, .tsv or .parquet)"
    )


def _read_table(path: str | Path, what: str) -> tuple[pl.DataFrame, str]:
    """Read a CSV/TSV (all columns as strings) or parquet file; reject empty files.

    Returns the frame and the file kind (``csv``, ``tsv`` or ``parquet``).
    """
    p = Path(path)
    if not p.is_file():
        raise SigmapInputError(f"{what} {p}: file not found")
    kind = _suffix(p, what)
    if p.stat().st_size == 0:
        raise SigmapInputError(f"{what} {p}: file is empty")
    try:
        if kind == "parquet":
            df = pl.read_parquet(p)
        else:
            sep = "\t" if kind == "tsv" else ","
            with p.open(newline="", encoding="utf-8") as fh:
                header = next(csv.reader(fh, delimiter=sep), [])
            header = [h.strip() for h in header]
            seen: set[str] = set()
            dups = sorted({h for h in header if h in seen or seen.add(h)})  # type: ignore[func-returns-value]
            if dups:
                raise SigmapInputError(f"{what} {p}: duplicate column name(s) {dups} in the header")
            df = pl.read_csv(p, separator=sep, infer_schema=False, truncate_ragged_lines=False)
            df = df.rename({c: c.strip() for c in df.columns})
    except SigmapInputError:
        raise
    except Exception as exc:  # polars / pyarrow parse errors
        raise SigmapInputError(f"{what} {p}: cannot be read as {kind}: {exc}") from exc
    if df.width == 0:
        raise SigmapInputError(f"{what} {p}: file has no columns")
    if df.height == 0:
        raise SigmapInputError(f"{what} {p}: file has a header but no data rows")
    return df, kind


def _row_label(kind: str, idx: int) -> str:
    """Human row reference: CSV line number (header = line 1) or parquet row index."""
    return f"line {idx + 2}" if kind in {"csv", "tsv"} else f"row {idx}"


def _parse_numeric(
    df: pl.DataFrame,
    column: str,
    *,
    path: Path,
    kind: str,
    model_column: str | None,
    what: str = "scores file",
) -> pl.Series:
    """Column as Float64 with nulls for missing cells; raise on non-numeric / infinite.

    Strings are stripped; :data:`MISSING_TOKENS` and NaN become null.
    """
    s = df.get_column(column)
    if s.dtype == pl.Boolean:
        raise SigmapInputError(
            f"{what} {path}: column {column!r} holds true/false flags, not numeric scores"
        )
    if s.dtype.is_numeric():
        out = s.cast(pl.Float64)
    elif s.dtype in (pl.String, pl.Categorical, pl.Enum):
        text = s.cast(pl.String).str.strip_chars()
        missing = text.is_null() | text.str.to_lowercase().is_in(list(MISSING_TOKENS))
        out = text.cast(pl.Float64, strict=False)
        bad = (~missing) & out.is_null()
        if bad.any():
            idx = bad.arg_true().to_list()
            raise SigmapInputError(
                f"{what} {path}: column {column!r} has {len(idx)} non-numeric value(s), e.g. "
                + _examples(df, idx, column, kind, model_column)
            )
        out = pl.select(pl.when(missing).then(None).otherwise(out)).to_series()
    else:
        raise SigmapInputError(f"{what} {path}: column {column!r} has type {s.dtype}, not numbers")
    out = out.fill_nan(None)
    inf = out.is_infinite().fill_null(False)
    if inf.any():
        idx = inf.arg_true().to_list()
        raise SigmapInputError(
            f"{what} {path}: column {column!r} has {len(idx)} infinite value(s), e.g. "
            + _examples(df, idx, column, kind, model_column)
        )
    return out.alias(column)


def _examples(
    df: pl.DataFrame, idx: Sequence[int], column: str, kind: str, model_column: str | None
) -> str:
    parts = []
    for i in idx[:_FMT_ROW]:
        who = ""
        if model_column is not None and model_column in df.columns:
            who = f" (model {df[model_column][i]!r})"
        parts.append(f"{_row_label(kind, i)}{who}: {df[column][i]!r}")
    return "; ".join(parts)


def _norm_col(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _is_metadata_column(name: str) -> bool:
    tokens = {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}
    return bool(tokens & METADATA_TOKENS)


def _find_model_column(df: pl.DataFrame, model_column: str | None, path: Path, what: str) -> str:
    if model_column is not None:
        if model_column not in df.columns:
            raise SigmapInputError(
                f"{what} {path}: model column {model_column!r} not found; columns are {df.columns}"
            )
        return model_column
    by_norm = {_norm_col(c): c for c in reversed(df.columns)}
    for cand in MODEL_COLUMN_CANDIDATES:
        if cand in by_norm:
            return by_norm[cand]
    raise SigmapInputError(
        f"{what} {path}: no model column found (looked for model / name / model_name / llm, "
        f"any case); columns are {df.columns}; pass model_column=..."
    )


def _model_ids(df: pl.DataFrame, column: str, path: Path, kind: str, what: str) -> pl.Series:
    s = df.get_column(column).cast(pl.String).str.strip_chars()
    bad = s.is_null() | (s == "")
    if bad.any():
        idx = bad.arg_true().to_list()
        rows = ", ".join(_row_label(kind, i) for i in idx[:_FMT_ROW])
        raise SigmapInputError(
            f"{what} {path}: {len(idx)} row(s) have an empty model id in column {column!r} ({rows})"
        )
    return s.alias("model")


def _resolve_duplicates(
    long: pl.DataFrame, duplicates: Duplicates, path: Path, kind: str, key_desc: str
) -> pl.DataFrame:
    """Collapse repeated ``(model, benchmark)`` rows of a long frame with ``_row``.

    ``long`` may hold null scores (missing cells); identical repeats always collapse.
    """
    if duplicates not in ("error", "first", "last", "mean"):
        raise SigmapInputError(
            f"scores file {path}: duplicates must be 'error', 'first', 'last' or 'mean', "
            f"got {duplicates!r}"
        )
    keys = ["model", "benchmark"]
    counts = long.group_by(keys).agg(pl.len().alias("_n"))
    if counts["_n"].max() in (None, 1):
        return long.sort("_row", "_bidx").drop("_row", "_bidx")
    if duplicates == "error":
        conflicts = (
            long.group_by(keys, maintain_order=True)
            .agg(
                pl.len().alias("_n"),
                pl.col("_row").alias("_rows"),
                pl.col("score").alias("_vals"),
                (
                    (pl.col("score").max() - pl.col("score").min()).abs()
                    > 1e-9 * (1 + pl.col("score").abs().max())
                ).alias("_diff"),
                (pl.col("score").null_count().is_between(1, pl.len() - 1)).alias("_mixnull"),
            )
            .filter((pl.col("_n") > 1) & (pl.col("_diff").fill_null(False) | pl.col("_mixnull")))
        )
        if conflicts.height:
            n_models = conflicts["model"].n_unique()
            ex = []
            for r in conflicts.head(_FMT_ROW).iter_rows(named=True):
                rows = ", ".join(_row_label(kind, i) for i in r["_rows"])
                ex.append(f"model {r['model']!r} / {r['benchmark']!r} at {rows}: {r['_vals']}")
            raise SigmapInputError(
                f"scores file {path}: {n_models} model(s) appear more than once {key_desc} with "
                f"different scores ({conflicts.height} conflicting (model, benchmark) pairs), e.g. "
                + "; ".join(ex)
                + ". Remove the duplicates or pass duplicates='first' | 'last' | 'mean'"
            )
        agg = pl.col("score").first()
    elif duplicates == "first":
        agg = pl.col("score").first()
    elif duplicates == "last":
        agg = pl.col("score").last()
    else:
        agg = pl.col("score").mean()
    return (
        long.sort("_row")
        .group_by(keys, maintain_order=True)
        .agg(agg.alias("score"), pl.col("_row").first(), pl.col("_bidx").first())
        .sort("_row", "_bidx")
        .drop("_row", "_bidx")
    )


def _finish(long: pl.DataFrame, path: Path, what: str = "scores file") -> pl.DataFrame:
    out = long.filter(pl.col("score").is_not_null()).select(
        pl.col("model").cast(pl.String),
        pl.col("benchmark").cast(pl.String),
        pl.col("score").cast(pl.Float64),
    )
    if out.height == 0:
        raise SigmapInputError(f"{what} {path}: no (non-missing) scores in the file")
    return out


def _check_rename(rename: Mapping[str, str] | None, columns: Sequence[str], path: Path) -> dict:
    rename = dict(rename or {})
    for k, v in rename.items():
        if not isinstance(v, str) or not v.strip():
            raise SigmapInputError(f"scores file {path}: rename[{k!r}] must be a non-empty name")
    targets = [rename.get(c, c) for c in columns]
    seen: dict[str, str] = {}
    for c, t in zip(columns, targets):
        if t in seen:
            raise SigmapInputError(
                f"scores file {path}: columns {seen[t]!r} and {c!r} both become benchmark {t!r}"
            )
        seen[t] = c
    return rename


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
    """
    p = Path(path)
    df, kind = _read_table(p, "scores file")
    mcol = _find_model_column(df, model_column, p, "scores file")
    models = _model_ids(df, mcol, p, kind, "scores file")
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
        series = [_parse_numeric(df, c, path=p, kind=kind, model_column=mcol) for c in cols]
    else:
        cols, series = [], []
        for c in df.columns:
            if c == mcol or _is_metadata_column(c):
                continue
            s = df.get_column(c)
            if s.dtype == pl.Boolean:
                continue
            if s.dtype.is_numeric():
                series.append(_parse_numeric(df, c, path=p, kind=kind, model_column=mcol))
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
            series.append(_parse_numeric(df, c, path=p, kind=kind, model_column=mcol))
            cols.append(c)
        if not cols:
            raise SigmapInputError(
                f"scores file {p}: no numeric score columns found besides metadata; "
                f"columns are {df.columns}; pass benchmarks=[...]"
            )
    rename = _check_rename(rename, cols, p)
    wide = pl.DataFrame([models, *series]).with_row_index("_row")
    long = wide.unpivot(
        index=["_row", "model"], on=cols, variable_name="benchmark", value_name="score"
    )
    order = {c: i for i, c in enumerate(cols)}
    long = long.with_columns(
        pl.col("benchmark").replace_strict(order, return_dtype=pl.Int64).alias("_bidx"),
        pl.col("benchmark").replace_strict({c: rename.get(c, c) for c in cols}),
    )
    long = _resolve_duplicates(long, duplicates, p, kind, "(on several rows)")
    return _finish(long, p)


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
    """
    p = Path(path)
    df, kind = _read_table(p, "scores file")
    need = [model_column, benchmark_column, score_column]
    absent = [c for c in need if c not in df.columns]
    if absent:
        raise SigmapInputError(
            f"scores file {p}: column(s) {absent} not found; columns are {df.columns} "
            f"(set model_column / benchmark_column / score_column)"
        )
    models = _model_ids(df, model_column, p, kind, "scores file")
    bench = df.get_column(benchmark_column).cast(pl.String).str.strip_chars()
    bad = bench.is_null() | (bench == "")
    if bad.any():
        idx = bad.arg_true().to_list()
        rows = ", ".join(_row_label(kind, i) for i in idx[:_FMT_ROW])
        raise SigmapInputError(
            f"scores file {p}: {len(idx)} row(s) have an empty benchmark in column "
            f"{benchmark_column!r} ({rows})"
        )
    score = _parse_numeric(df, score_column, path=p, kind=kind, model_column=model_column)
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
    rename = _check_rename(rename, names, p)
    long = long.with_columns(
        pl.col("benchmark").replace_strict({n: rename.get(n, n) for n in names}),
        pl.lit(0, dtype=pl.Int64).alias("_bidx"),
    )
    long = _resolve_duplicates(long, duplicates, p, kind, "for the same benchmark")
    return _finish(long, p)


# --- lm-evaluation-harness --------------------------------------------------------------

_TS = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)")


def _timestamp_from_name(name: str) -> float | None:
    m = _TS.search(name)
    if not m:
        return None
    text = m.group(1)
    date, _, clock = text.partition("T")
    clock = clock.replace("-", ":", 2)
    try:
        return datetime.fromisoformat(f"{date}T{clock}").timestamp()
    except ValueError:
        return None


def _file_time(path: Path, data: Mapping[str, Any] | None = None) -> float:
    """When an lm-eval file was written: ``date`` field, else name timestamp, else mtime."""
    if data is not None:
        d = data.get("date")
        if isinstance(d, int | float) and not isinstance(d, bool) and math.isfinite(d):
            return float(d)
    t = _timestamp_from_name(path.name)
    return t if t is not None else path.stat().st_mtime


def _parse_model_args(model_args: Any) -> dict[str, str]:
    if isinstance(model_args, Mapping):
        return {str(k): str(v) for k, v in model_args.items()}
    if not isinstance(model_args, str):
        return {}
    out: dict[str, str] = {}
    for part in model_args.split(","):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def lm_eval_model_id(data: Mapping[str, Any], path: Path) -> str:
    """Model id of an lm-evaluation-harness results document.

    ``model_name`` (lm-eval >= 0.4.3) if present and non-empty, else the ``pretrained``
    (or ``model`` / ``path`` / ``engine``) entry of ``config.model_args``.

    Raises
    ------
    SigmapInputError
        If neither is present (the message names ``path``).
    """
    name = data.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    config = data.get("config")
    args = _parse_model_args(config.get("model_args") if isinstance(config, Mapping) else None)
    for key in ("pretrained", "model", "path", "engine", "model_name"):
        if args.get(key):
            return args[key]
    raise SigmapInputError(
        f"lm-eval results {path}: cannot tell the model: no 'model_name' and no "
        f"pretrained=... in config.model_args; pass model=..."
    )


def _load_json(path: Path, what: str) -> Any:
    if path.stat().st_size == 0:
        raise SigmapInputError(f"{what} {path}: file is empty")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SigmapInputError(f"{what} {path}: not valid JSON: {exc}") from exc


def _pick_metric(
    entry: Mapping[str, Any],
    task: str,
    wanted: str | None,
    defaults: Sequence[str],
    path: Path,
) -> str | None:
    """Key of the metric to use for ``task``; None for a task without numeric metrics."""
    numeric = [
        k
        for k, v in entry.items()
        if k != "alias"
        and "_stderr" not in k
        and isinstance(v, int | float)
        and not isinstance(v, bool)
    ]
    if wanted is not None:
        for cand in (wanted, f"{wanted},none"):
            if cand in entry:
                return cand
        raise SigmapInputError(
            f"lm-eval results {path}: task {task!r} has no metric {wanted!r}; available: {numeric}"
        )
    if not numeric:
        return None
    for cand in defaults:
        if cand in entry:
            return cand
    raise SigmapInputError(
        f"lm-eval results {path}: task {task!r} has none of the default metrics "
        f"{list(defaults)}; available: {numeric}; pass metrics={{{task!r}: ...}} or leave "
        f"the task out with tasks=[...]"
    )


def read_lm_eval_results(
    path: str | Path,
    *,
    metrics: Mapping[str, str] | None = None,
    default_metrics: Sequence[str] = DEFAULT_LM_EVAL_METRICS,
    tasks: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
    model: str | None = None,
    on_conflict: Literal["latest", "error"] = "latest",
) -> pl.DataFrame:
    """Read lm-evaluation-harness output: every ``results*.json`` under ``path``.

    Each file is ``{"results": {task: {"acc,none": 0.5, "acc_stderr,none": ...,
    "alias": ...}}, "config": {"model_args": "pretrained=ORG/NAME,..."},
    "model_name": ..., "date": ...}``.

    Parameters
    ----------
    path : str or Path
        A results JSON file, or a folder searched recursively (lm-eval writes
        ``<out>/<org__name>/results_<timestamp>.json``).
    metrics : mapping or None
        Task -> metric key (``"acc_norm,none"``; a bare ``"acc_norm"`` also matches
        ``"acc_norm,none"``). A task named here must have that metric.
    default_metrics : sequence of str
        Metric keys tried in order for the other tasks. A task with numeric metrics but
        none of these is an error (lower-is-better metrics such as perplexity are not
        scores); entries without any numeric metric (group headers) are skipped.
    tasks : sequence of str or None
        Read only these tasks (each must occur in some file).
    rename : mapping or None
        Task -> benchmark name in the output (default: the task name).
    model : str or None
        Model id for every file (default: from each file, see :func:`lm_eval_model_id`).
    on_conflict : {"latest", "error"}
        Several files with the same (model, task): ``"latest"`` (default) keeps the value
        of the most recent file (``date`` field, else the timestamp in the file name,
        else the modification time); ``"error"`` raises if their values differ.

    Returns
    -------
    pl.DataFrame
        Long table ``model, benchmark, score`` (scores as lm-eval reports them,
        usually in [0, 1]), ordered by model then task.

    Raises
    ------
    SigmapInputError
        No results files, unreadable JSON, no ``results`` mapping, unknown model, a
        missing or non-numeric metric, a lower-is-better metric (per the file's
        ``higher_is_better``), or conflicting values with ``on_conflict="error"``.
    """
    root = Path(path)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(root.rglob("results*.json"))
    else:
        raise SigmapInputError(f"lm-eval results {root}: no such file or folder")
    if not files:
        raise SigmapInputError(f"lm-eval results {root}: no results*.json files found")
    if on_conflict not in ("latest", "error"):
        raise SigmapInputError(f"on_conflict must be 'latest' or 'error', got {on_conflict!r}")
    metrics = dict(metrics or {})
    wanted_tasks = None if tasks is None else set(tasks)
    # (model, task) -> list of (time, value, file, metric)
    found: dict[tuple[str, str], list[tuple[float, float, Path, str]]] = {}
    for f in files:
        data = _load_json(f, "lm-eval results")
        if not isinstance(data, Mapping) or not isinstance(data.get("results"), Mapping):
            raise SigmapInputError(f"lm-eval results {f}: no 'results' mapping (task -> metrics)")
        mid = model if model is not None else lm_eval_model_id(data, f)
        when = _file_time(f, data)
        hib = (
            data.get("higher_is_better")
            if isinstance(data.get("higher_is_better"), Mapping)
            else {}
        )
        for task, entry in data["results"].items():
            if wanted_tasks is not None and task not in wanted_tasks:
                continue
            if not isinstance(entry, Mapping):
                raise SigmapInputError(f"lm-eval results {f}: task {task!r} is not a mapping")
            key = _pick_metric(entry, task, metrics.get(task), default_metrics, f)
            if key is None:
                continue
            value = entry[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise SigmapInputError(
                    f"lm-eval results {f}: task {task!r} metric {key!r} is {value!r}, not a finite number"
                )
            base = key.split(",")[0]
            task_hib = hib.get(task) if isinstance(hib, Mapping) else None
            if isinstance(task_hib, Mapping) and task_hib.get(base) is False:
                raise SigmapInputError(
                    f"lm-eval results {f}: task {task!r} metric {key!r} is lower-is-better; "
                    f"scores must be higher = better, choose another metric with metrics=..."
                )
            found.setdefault((mid, task), []).append((when, float(value), f, key))
    if wanted_tasks is not None:
        absent = sorted(wanted_tasks - {t for _, t in found})
        if absent:
            raise SigmapInputError(
                f"lm-eval results {root}: task(s) {absent} not found in any file"
            )
    if not found:
        raise SigmapInputError(f"lm-eval results {root}: no task with a numeric metric")
    rename = _check_rename(rename, sorted({t for _, t in found}), root)
    rows = []
    for (mid, task), vals in sorted(found.items()):
        vals.sort(key=lambda t: (t[0], str(t[2])))
        if on_conflict == "error":
            distinct = {v for _, v, _, _ in vals}
            if len(distinct) > 1:
                where = "; ".join(f"{fp} ({k}): {v:g}" for _, v, fp, k in vals)
                raise SigmapInputError(
                    f"lm-eval results: model {mid!r} task {task!r} has different values in "
                    f"several files: {where}"
                )
        rows.append((mid, rename.get(task, task), vals[-1][1]))
    return pl.DataFrame(rows, schema=SCORE_SCHEMA, orient="row")


# --- dispatch ---------------------------------------------------------------------------

_READERS: dict[str, Callable[..., pl.DataFrame]] = {
    "wide": read_wide,
    "leaderboard": read_wide,
    "long": read_long,
    "lm_eval": read_lm_eval_results,
}


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
    """
    if not isinstance(spec, Mapping):
        raise SigmapInputError(f"score source spec must be a mapping, got {spec!r}")
    opts = dict(spec)
    kind = opts.pop("kind", None)
    if kind not in _READERS:
        raise SigmapInputError(
            f"score source {spec!r}: kind must be one of {sorted(_READERS)}, got {kind!r}"
        )
    if "path" not in opts or not str(opts["path"]).strip():
        raise SigmapInputError(f"score source {spec!r}: missing 'path'")
    p = Path(str(opts.pop("path"))).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
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
        Benchmark name -> :class:`sigmap_lib.catalog.Benchmark` (for ``score_range``).
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
    """
    if not specs:
        raise SigmapInputError("no score sources given")
    parts = []
    for spec in specs:
        t = read_scores(spec, base_dir=base_dir)
        src = str(Path(str(spec["path"])).expanduser())
        if base_dir is not None and not Path(src).is_absolute():
            src = str(Path(base_dir) / src)
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
    """

    warnings: list[str] = field(default_factory=list)
    dropped_benchmarks: dict[str, str] = field(default_factory=dict)
    models_per_benchmark: dict[str, int] = field(default_factory=dict)
    n_models: int = 0
    n_benchmarks: int = 0
    n_scores: int = 0
    sources: list[str] = field(default_factory=list)

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
        None), e.g. :func:`sigmap_lib.catalog.read_catalog`'s result. Scores outside the
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
        ex = "; ".join(
            f"model {r['model']!r} benchmark {r['benchmark']!r}{_who(r)}: {r['score']!r}"
            for r in bad.head(_FMT_ROW).iter_rows(named=True)
        )
        raise SigmapInputError(f"{where}: {bad.height} missing or non-finite score(s), e.g. {ex}")
    dups = table.filter(pl.struct("model", "benchmark").is_duplicated())
    if dups.height:
        ex = "; ".join(
            f"model {r['model']!r} benchmark {r['benchmark']!r}{_who(r)}: {r['score']:g}"
            for r in dups.head(_FMT_ROW).iter_rows(named=True)
        )
        raise SigmapInputError(
            f"{where}: {dups.height} duplicated (model, benchmark) rows, e.g. {ex}"
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
                ex = "; ".join(
                    f"model {r['model']!r}{_who(r)}: {r['score']:g}"
                    for r in out.head(_FMT_ROW).iter_rows(named=True)
                )
                raise SigmapInputError(
                    f"{where}: {out.height} score(s) of benchmark {b!r} are outside its "
                    f"catalog score_range [{lo:g}, {hi:g}], e.g. {ex}"
                )
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


# ---------------------------------------------------------------------------------------
# wide <-> long


def to_wide(
    long: pl.DataFrame,
    *,
    models: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
) -> tuple[list[str], list[str], np.ndarray]:
    """Long score table -> ``(models, benchmarks, values)``.

    Parameters
    ----------
    long : pl.DataFrame
        Columns ``model``, ``benchmark``, ``score``; one row per pair.
    models, benchmarks : sequence of str or None
        Row / column order (and selection); ids absent from ``long`` give all-NaN rows /
        columns. Default: order of first appearance.

    Returns
    -------
    models : list[str]
    benchmarks : list[str]
    values : np.ndarray
        Float64, shape ``(n_models, n_benchmarks)``, NaN where missing.
    """
    for c in SCORE_SCHEMA:
        if c not in long.columns:
            raise SigmapInputError(f"score table: missing column {c!r}; columns are {long.columns}")
    if long.select(pl.struct("model", "benchmark").is_duplicated().any()).item():
        raise SigmapInputError(
            "score table: duplicated (model, benchmark) rows; cannot make it wide"
        )
    ms = list(models) if models is not None else long["model"].unique(maintain_order=True).to_list()
    bs = (
        list(benchmarks)
        if benchmarks is not None
        else long["benchmark"].unique(maintain_order=True).to_list()
    )
    for what, ids in (("model", ms), ("benchmark", bs)):
        if len(set(ids)) != len(ids):
            raise SigmapInputError(f"to_wide: the requested {what} order has repeated ids")
    mi = {m: i for i, m in enumerate(ms)}
    bi = {b: j for j, b in enumerate(bs)}
    values = np.full((len(ms), len(bs)), np.nan, dtype=np.float64)
    sub = long.filter(pl.col("model").is_in(ms) & pl.col("benchmark").is_in(bs))
    if sub.height:
        r = np.fromiter((mi[m] for m in sub["model"]), dtype=np.int64, count=sub.height)
        c = np.fromiter((bi[b] for b in sub["benchmark"]), dtype=np.int64, count=sub.height)
        values[r, c] = sub["score"].to_numpy()
    return ms, bs, values


def from_wide(models: Sequence[str], benchmarks: Sequence[str], values: np.ndarray) -> pl.DataFrame:
    """``(models, benchmarks, values)`` -> long score table (NaN cells dropped).

    Parameters
    ----------
    models : sequence of str
    benchmarks : sequence of str
    values : np.ndarray
        Shape ``(n_models, n_benchmarks)``.

    Returns
    -------
    pl.DataFrame
        ``model, benchmark, score`` in row-major order.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (len(models), len(benchmarks)):
        raise SigmapInputError(
            f"from_wide: values have shape {v.shape}, expected ({len(models)}, {len(benchmarks)})"
        )
    r, c = np.nonzero(~np.isnan(v))
    return pl.DataFrame(
        {
            "model": [models[i] for i in r],
            "benchmark": [benchmarks[j] for j in c],
            "score": v[r, c],
        },
        schema=SCORE_SCHEMA,
    )


# ---------------------------------------------------------------------------------------
# matching score model ids to registry ids

_HF_URL = re.compile(r"^(?:https?://)?(?:www\.)?huggingface\.co/", re.IGNORECASE)


def normalize_model_id(model_id: str) -> str:
    """Normalized form of a model id for fuzzy matching.

    Strips whitespace and a ``https://huggingface.co/`` prefix, drops a revision suffix
    (``@main``, ``@<sha>``), turns the slug separator ``__`` into ``/``, removes leading /
    trailing slashes and case-folds: ``" EleutherAI__Pythia-160m@main "`` ->
    ``"eleutherai/pythia-160m"``.
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
    """
    if drop_unmatched:
        long = long.filter(pl.col("model").is_in(list(match.mapping)))
    return long.with_columns(pl.col("model").replace(match.mapping))

"""The canonical long score table and the helpers every score reader shares."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import polars as pl

from sigmap_lib._util._tables import row_label
from sigmap_lib.errors import SigmapInputError

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

FMT_ROW = 5  # examples shown in error messages


def empty_scores() -> pl.DataFrame:
    """An empty canonical score table (columns model, benchmark, score).

    Examples
    --------
    >>> from sigmap_lib.inputs import empty_scores
    >>> df = empty_scores()
    >>> df.shape, dict(df.schema)
    ((0, 3), {'model': String, 'benchmark': String, 'score': Float64})
    """
    return pl.DataFrame(schema=SCORE_SCHEMA)


# ---------------------------------------------------------------------------------------
# file reading helpers


def parse_numeric(
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
                + example_rows(df, idx, column, kind, model_column)
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
            + example_rows(df, idx, column, kind, model_column)
        )
    return out.alias(column)


def example_rows(
    df: pl.DataFrame, idx: Sequence[int], column: str, kind: str, model_column: str | None
) -> str:
    parts = []
    for i in idx[:FMT_ROW]:
        who = ""
        if model_column is not None and model_column in df.columns:
            who = f" (model {df[model_column][i]!r})"
        parts.append(f"{row_label(kind, i)}{who}: {df[column][i]!r}")
    return "; ".join(parts)


def _norm_col(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def is_metadata_column(name: str) -> bool:
    tokens = {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}
    return bool(tokens & METADATA_TOKENS)


def find_model_column(df: pl.DataFrame, model_column: str | None, path: Path, what: str) -> str:
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


def names_in(
    df: pl.DataFrame, column: str, path: Path, kind: str, what: str, noun: str
) -> pl.Series:
    """``column`` as stripped strings; a null or empty cell is an error naming the rows
    (``{noun}`` is what the column holds, e.g. ``model id``)."""
    s = df.get_column(column).cast(pl.String).str.strip_chars()
    bad = s.is_null() | (s == "")
    if bad.any():
        idx = bad.arg_true().to_list()
        rows = ", ".join(row_label(kind, i) for i in idx[:FMT_ROW])
        raise SigmapInputError(
            f"{what} {path}: {len(idx)} row(s) have an empty {noun} in column {column!r} ({rows})"
        )
    return s


def model_ids(df: pl.DataFrame, column: str, path: Path, kind: str, what: str) -> pl.Series:
    return names_in(df, column, path, kind, what, "model id").alias("model")


def resolve_duplicates(
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
            for r in conflicts.head(FMT_ROW).iter_rows(named=True):
                rows = ", ".join(row_label(kind, i) for i in r["_rows"])
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


def finish_scores(long: pl.DataFrame, path: Path, what: str = "scores file") -> pl.DataFrame:
    out = long.filter(pl.col("score").is_not_null()).select(
        pl.col("model").cast(pl.String),
        pl.col("benchmark").cast(pl.String),
        pl.col("score").cast(pl.Float64),
    )
    if out.height == 0:
        raise SigmapInputError(f"{what} {path}: no (non-missing) scores in the file")
    return out


def check_rename(rename: Mapping[str, str] | None, columns: Sequence[str], path: Path) -> dict:
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

"""Long score tables to ``(models, benchmarks, values)`` arrays and back."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs.scores._common import SCORE_SCHEMA

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

    Examples
    --------
    >>> import polars as pl
    >>> from sigmap_lib.inputs import to_wide
    >>> long = pl.DataFrame(
    ...     {"model": ["m1", "m2", "m2"], "benchmark": ["arc", "arc", "gsm8k"],
    ...      "score": [30.0, 35.0, 12.5]}
    ... )
    >>> models, benchmarks, values = to_wide(long)
    >>> models, benchmarks, values.tolist()  # (n_models, n_benchmarks)
    (['m1', 'm2'], ['arc', 'gsm8k'], [[30.0, nan], [35.0, 12.5]])
    >>> to_wide(long, models=["m2", "m1", "m3"], benchmarks=["gsm8k"])[2].tolist()
    [[12.5], [nan], [nan]]
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

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.inputs import from_wide
    >>> values = np.array([[30.0, np.nan], [35.0, 12.5]])  # (n_models, n_benchmarks)
    >>> from_wide(["m1", "m2"], ["arc", "gsm8k"], values).rows()
    [('m1', 'arc', 30.0), ('m2', 'arc', 35.0), ('m2', 'gsm8k', 12.5)]
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


def score_summary(table: pl.DataFrame) -> pl.DataFrame:
    """Per benchmark: models scored, mean, sd, min and max of the scores.

    Parameters
    ----------
    table : pl.DataFrame
        Long scores (``benchmark``, ``score``).

    Returns
    -------
    pl.DataFrame
        One row per benchmark, sorted by name.

    Examples
    --------
    >>> import polars as pl
    >>> from sigmap_lib.inputs.scores import score_summary
    >>> table = pl.DataFrame({"benchmark": ["b", "a", "a"], "score": [1.0, 2.0, 4.0]})
    >>> score_summary(table).rows()
    [('a', 2, 3.0, 1.4142135623730951, 2.0, 4.0), ('b', 1, 1.0, None, 1.0, 1.0)]
    """
    return (
        table.group_by("benchmark")
        .agg(
            pl.len().alias("models"),
            pl.col("score").mean().alias("mean"),
            pl.col("score").std().alias("sd"),
            pl.col("score").min().alias("min"),
            pl.col("score").max().alias("max"),
        )
        .sort("benchmark")
    )

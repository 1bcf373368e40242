"""Performance-level overlap: Spearman correlation of benchmark scores over models (METHODS §4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap._matrix import OverlapMatrix, spearman_overlap


# ---------------------------------------------------------------------------------------
# Performance overlap
# ---------------------------------------------------------------------------------------
def _scores_to_array(
    scores: Any, model_column: str | None
) -> tuple[list[str], list[str], np.ndarray]:
    """Accept polars/pandas wide frames or ``(names, array)`` → (models, benchmarks, X)."""
    import pandas as pd
    import polars as pl

    if isinstance(scores, tuple) and len(scores) == 2:
        names, arr = scores
        arr = np.asarray(arr, dtype=np.float64)
        names = [str(x) for x in names]
        if arr.ndim != 2 or arr.shape[1] != len(names):
            raise SigmapInputError(
                f"scores: (names, array) needs a (n_models, {len(names)}) array, got shape {arr.shape}"
            )
        return [str(i) for i in range(arr.shape[0])], names, arr
    if isinstance(scores, pd.DataFrame):
        scores = pl.from_pandas(
            scores.reset_index(drop=model_column is None or model_column not in scores.columns)
        )
    if not isinstance(scores, pl.DataFrame):
        raise SigmapInputError(
            f"scores must be a polars/pandas DataFrame or (benchmark names, array), got {type(scores).__name__}"
        )
    cols = list(scores.columns)
    if model_column is None:
        model_column = "model" if "model" in cols else None
    if model_column is not None and model_column not in cols:
        raise SigmapInputError(f"scores: model column {model_column!r} not in columns {cols}")
    models = (
        [str(x) for x in scores[model_column].to_list()]
        if model_column is not None
        else [str(i) for i in range(scores.height)]
    )
    bench = [c for c in cols if c != model_column]
    non_numeric = [c for c in bench if not scores[c].dtype.is_numeric()]
    if non_numeric:
        raise SigmapInputError(
            f"scores: benchmark columns must be numeric; non-numeric columns {non_numeric} "
            f"(name the model column with model_column=...)"
        )
    arr = scores.select([pl.col(c).cast(pl.Float64) for c in bench]).to_numpy()
    return models, bench, np.asarray(arr, dtype=np.float64)


def performance_overlap(
    scores: Any, *, min_common: int = 10, model_column: str | None = None
) -> OverlapMatrix:
    """Performance-level overlap: Spearman ρ of benchmark scores over common models.

    Parameters
    ----------
    scores : polars.DataFrame, pandas.DataFrame or (names, array)
        Wide models × benchmarks table (higher = better; null/NaN = not scored). A column
        named ``model`` (or ``model_column``) holds model ids and is excluded; every other
        column must be numeric. Or a tuple ``(benchmark_names, array (n_models, B))``.
    min_common : int
        Minimum number of models scored on both benchmarks; pairs below get NaN
        (the count is still reported in ``n_common``).
    model_column : str, optional
        Name of the model-id column (default ``"model"`` when present).

    Returns
    -------
    OverlapMatrix
        ``level="performance"``; ``n_common[a, b]`` = models scored on both;
        ``extra["n_models"]`` = total rows.

    Examples
    --------
    >>> import numpy as np
    >>> import polars as pl
    >>> from sigmap_lib.overlap import performance_overlap
    >>> scores = pl.DataFrame({
    ...     "model": ["m1", "m2", "m3", "m4", "m5"],
    ...     "arc": [0.2, 0.4, 0.5, 0.7, 0.9],
    ...     "mmlu": [0.3, 0.35, 0.6, 0.5, 0.8],
    ...     "gsm8k": [0.9, None, 0.1, 0.3, 0.2],  # m2 not scored
    ... })
    >>> m = performance_overlap(scores, min_common=3)
    >>> m.labels
    ('arc', 'mmlu', 'gsm8k')
    >>> np.round(m.values, 3).tolist()
    [[1.0, 0.9, -0.4], [0.9, 1.0, -0.8], [-0.4, -0.8, 1.0]]
    >>> m.n_common.tolist()
    [[5, 5, 4], [5, 5, 4], [4, 4, 4]]
    """
    if min_common < 2:
        raise SigmapInputError(f"performance_overlap: min_common must be >= 2, got {min_common}")
    _, bench, arr = _scores_to_array(scores, model_column)
    if len(bench) < 1:
        raise SigmapInputError("performance_overlap: no benchmark columns in scores")
    if np.isinf(arr).any():
        raise SigmapInputError("performance_overlap: scores contain ±inf")
    extra = {"n_models": int(arr.shape[0])}
    return spearman_overlap(arr, bench, "performance", min_common=min_common, extra=extra)

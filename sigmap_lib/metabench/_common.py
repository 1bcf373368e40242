"""Small shared pieces of the metabench pipeline: splits, folds, quantiles, item statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError

# ---------------------------------------------------------------------------
# small statistics helpers


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Root mean squared difference of two equal-length vectors.

    Examples
    --------
    >>> from sigmap_lib.metabench import rmse
    >>> round(rmse([50.0, 60.0, 70.0], [52.0, 60.0, 67.0]), 3)
    2.082
    """
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def type4_quantiles(x: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """R's ``quantile(x, probs, type = 4)``: linear interpolation of the empirical CDF.

    Follows R's arithmetic exactly (``j = floor(n p + fuzz)``, ``h = n p - j`` snapped to 0
    when ``|h| < fuzz``, ``fuzz = 4 eps``), so that bin edges coincide with grid points
    where R's do; ``numpy.quantile(method="interpolated_inverted_cdf")`` differs in the
    last bits, which moves grid points across bin edges.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.metabench import type4_quantiles
    >>> x = np.array([7.0, 1.0, 11.0, 2.0, 4.0])
    >>> p = np.array([0, 0.1, 0.25, 0.5, 0.9, 1.0])
    >>> type4_quantiles(x, p).tolist()  # R: quantile(x, p, type = 4)
    [1.0, 1.0, 1.25, 3.0, 9.0, 11.0]
    """
    xs = np.sort(np.asarray(x, float).reshape(-1))
    n = len(xs)
    p = np.asarray(probs, float)
    fuzz = 4 * np.finfo(float).eps
    nppm = n * p
    j = np.floor(nppm + fuzz).astype(int)
    h = nppm - j
    h = np.where(np.abs(h) < fuzz, 0.0, h)
    padded = np.concatenate([[xs[0]], xs, [xs[-1]]])  # R: x[c(1, 1:n, n)]
    lo = padded[np.clip(j, 0, n + 1)]
    hi = padded[np.clip(j + 1, 0, n + 1)]
    out = (1 - h) * lo + h * hi
    # R interpolates only where 0 < h < 1 and the two order statistics differ; elsewhere
    # the order statistic itself is returned (this matters for tied grids, e.g. EAPsum θ)
    return np.where((h > 0) & (h < 1) & (lo != hi), out, lo)


def stratified_sample(
    y: np.ndarray, frac: float, rng: np.random.Generator, n_groups: int = 5
) -> np.ndarray:
    """Boolean mask drawing ``frac`` of each quantile group of ``y`` (caret::createDataPartition)."""
    y = np.asarray(y, float)
    cuts = np.unique(np.quantile(y, np.linspace(0, 1, n_groups + 1)))
    groups = np.clip(np.searchsorted(cuts, y, side="right") - 1, 0, max(len(cuts) - 2, 0))
    mask = np.zeros(len(y), bool)
    for gr in np.unique(groups):
        idx = np.where(groups == gr)[0]
        k = int(np.ceil(frac * len(idx)))
        mask[rng.choice(idx, size=min(k, len(idx)), replace=False)] = True
    return mask


def stratified_folds(y: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold label per observation, balanced within quantile groups of ``y`` (caret::createFolds)."""
    y = np.asarray(y, float)
    order = np.argsort(y + rng.random(len(y)) * 1e-9, kind="stable")
    folds = np.empty(len(y), int)
    for start in range(0, len(y), n_folds):
        block = order[start : start + n_folds]
        folds[block] = rng.permutation(n_folds)[: len(block)]
    return folds


def item_statistics(x: np.ndarray, guess_factor: float = 0.75) -> pd.DataFrame:
    """Classical item statistics: ``sd``, guess-adjusted easiness ``diff``, point-biserial ``disc``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.metabench import item_statistics
    >>> x = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 1]])  # 6 x 3
    >>> item_statistics(x).round(3)  # diff = share correct x 0.75; disc = item-total correlation
          sd   diff   disc
    0  0.408  0.625  0.791
    1  0.548  0.375  0.707
    2  0.516  0.250  0.625
    """
    x = np.asarray(x, float)
    total = x.sum(axis=1)
    sd = x.std(axis=0, ddof=1)
    diff = x.mean(axis=0) * guess_factor
    xc = x - x.mean(axis=0)
    tc = total - total.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        disc = (xc * tc[:, None]).sum(0) / np.sqrt((xc**2).sum(0) * (tc**2).sum())
    return pd.DataFrame({"sd": sd, "diff": diff, "disc": np.nan_to_num(disc)})


# ---------------------------------------------------------------------------
# data validation


def check_inputs(responses: dict[str, pd.DataFrame], full_scores: pd.DataFrame) -> None:
    """Check the inputs of :func:`fit_metabench` (raises :class:`SigmapInputError`).

    ``responses``: benchmark -> complete 0/1 DataFrame (models x items), at least 50
    models, no duplicate ids; ``full_scores``: models x benchmarks, a full score for every
    model with responses.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sigmap_lib.metabench import check_inputs
    >>> models = [f"m{i}" for i in range(60)]
    >>> resp = pd.DataFrame(np.eye(60, 3, dtype=int), index=models, columns=["i0", "i1", "i2"])
    >>> check_inputs({"arc": resp}, pd.DataFrame({"arc": np.linspace(0, 1, 60)}, index=models))
    >>> check_inputs({"arc": resp.iloc[:10]}, pd.DataFrame({"arc": np.zeros(60)}, index=models))
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: arc: need at least 50 models, got 10
    """
    if not isinstance(responses, dict) or not responses:
        raise SigmapInputError(
            "metabench: responses must be a non-empty dict benchmark -> DataFrame"
        )
    if not isinstance(full_scores, pd.DataFrame):
        raise SigmapInputError("metabench: full_scores must be a DataFrame (models x benchmarks)")
    for bm, df in responses.items():
        if bm not in full_scores.columns:
            raise SigmapInputError(
                f"metabench: benchmark {bm!r} has responses but no column in full_scores"
            )
        if not isinstance(df, pd.DataFrame):
            raise SigmapInputError(
                f"metabench: responses[{bm!r}] must be a DataFrame (models x items)"
            )
        if df.index.has_duplicates:
            raise SigmapInputError(
                f"{bm}: duplicate model ids, e.g. {df.index[df.index.duplicated()][:3].tolist()}"
            )
        if df.columns.has_duplicates:
            raise SigmapInputError(
                f"{bm}: duplicate item ids, e.g. {df.columns[df.columns.duplicated()][:3].tolist()}"
            )
        vals = df.to_numpy(dtype=float, na_value=np.nan)
        if np.isnan(vals).any():
            raise SigmapInputError(
                f"{bm}: responses contain missing values; metabench needs complete 0/1 matrices"
            )
        if not np.all((vals == 0) | (vals == 1)):
            raise SigmapInputError(f"{bm}: responses must be 0/1")
        s = full_scores[bm].reindex(df.index)
        if s.isna().any():
            miss = s.index[s.isna()][:3].tolist()
            raise SigmapInputError(
                f"{bm}: {int(s.isna().sum())} models have responses but no full score, e.g. {miss}"
            )
        if len(df) < 50:
            raise SigmapInputError(f"{bm}: need at least 50 models, got {len(df)}")
    if full_scores.index.has_duplicates:
        raise SigmapInputError("metabench: full_scores has duplicate model ids")


# ---------------------------------------------------------------------------
# stage 1: common test split


def split_models(
    full_scores: pd.DataFrame, *, test_frac: float = 0.1, seed: int = 0, min_models: int = 20
) -> pd.Series:
    """Common train/test split of models (index) -> "train" / "test".

    Only models with a score in every benchmark column are eligible for the test set;
    the draw is stratified on their grand (row-mean) score (caret::createDataPartition).
    Fewer than ``min_models`` such models (the world's ``minimums: metabench_respondents``)
    raise :class:`~sigmap_lib.errors.SigmapInputError`.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sigmap_lib.metabench import split_models
    >>> rng = np.random.default_rng(0)
    >>> scores = pd.DataFrame(
    ...     rng.uniform(0, 100, (100, 2)), columns=["arc", "gsm8k"],
    ...     index=[f"model_{i}" for i in range(100)],
    ... )
    >>> scores.iloc[:10, 1] = np.nan  # not scored on gsm8k: never in the test set
    >>> split = split_models(scores, test_frac=0.1, seed=0)
    >>> split.value_counts().to_dict()
    {'train': 90, 'test': 10}
    >>> bool((split.iloc[:10] == "train").all())
    True
    """
    complete = full_scores.dropna()
    if len(complete) < min_models:
        raise SigmapInputError(
            f"only {len(complete)} models have responses on every benchmark with responses "
            f"(need >= {min_models}, minimum metabench_respondents)"
        )
    rng = np.random.default_rng(seed)
    test = stratified_sample(complete.mean(axis=1).to_numpy(), test_frac, rng)
    out = pd.Series("train", index=full_scores.index, name="split")
    out.loc[complete.index[test]] = "test"
    return out


def stable_hash(text: str) -> int:
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (2**31)


def full_scores(responses: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The normalised full-benchmark score of every model: 100 × share of items correct.

    metabench's ``score_full`` (ALGORITHM §0): the percent of a benchmark's items a model
    answered correctly, over all items of the benchmark (missing answers, NaN, are left
    out of the mean).

    Parameters
    ----------
    responses : dict
        Benchmark -> 0/1 frame (models × items), indexed by model id.

    Returns
    -------
    pd.DataFrame
        Models × benchmarks (union of the models; NaN where a model has no answers).

    Examples
    --------
    >>> import pandas as pd
    >>> from sigmap_lib.metabench import full_scores
    >>> r = {"arc": pd.DataFrame({"i1": [1, 0], "i2": [1, 1]}, index=["m1", "m2"]),
    ...      "gsm8k": pd.DataFrame({"i1": [0]}, index=["m1"])}
    >>> full_scores(r)
            arc  gsm8k
    m1  100.0    0.0
    m2   50.0    NaN
    """
    return pd.DataFrame({k: 100.0 * v.mean(axis=1) for k, v in responses.items()})

"""Three levels of overlap between benchmarks (METHODS §4).

Every function returns an :class:`OverlapMatrix`: a labelled, symmetric ``(B, B)``
matrix with unit diagonal, optionally the count behind each value (``n_common``) and
level-specific extras (bootstrap sd, sample sizes, per-model signature scores, ...).

- :func:`semantic_overlap` — size-matched bootstrap cosine of mean question embeddings.
- :func:`performance_overlap` — pairwise-complete Spearman ρ of benchmark scores.
- :func:`signature_overlap` — Spearman ρ across models of mean per-model z-scored
  bits-per-byte over each benchmark's signature units; with
  :func:`signature_overlap_null` (permutation p-values, signatures re-extracted) and
  :func:`bootstrap_ci` (percentile intervals over models).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from sigmap_lib.errors import SigmapInputError

__all__ = [
    "OverlapMatrix",
    "bootstrap_ci",
    "performance_overlap",
    "semantic_overlap",
    "signature_model_scores",
    "signature_overlap",
    "signature_overlap_null",
    "spearman_matrix",
]


# ---------------------------------------------------------------------------------------
# The result type
# ---------------------------------------------------------------------------------------
@dataclass
class OverlapMatrix:
    """A labelled square overlap matrix.

    Attributes
    ----------
    labels : tuple of str
        Benchmark names, in row/column order.
    values : np.ndarray
        ``(B, B)`` float64, symmetric, diagonal 1; NaN where undefined.
    n_common : np.ndarray or None
        ``(B, B)`` int64: the number of observations behind each value (common models
        for performance/signature overlap, questions per bootstrap draw for semantic).
    level : str
        ``"semantic"``, ``"performance"``, ``"signature"`` or free text.
    extra : dict
        Level-specific extras (documented by the producing function).
    """

    labels: tuple[str, ...]
    values: np.ndarray
    n_common: np.ndarray | None = None
    level: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = tuple(str(x) for x in self.labels)
        self.values = np.asarray(self.values, dtype=np.float64)
        b = len(self.labels)
        if self.values.shape != (b, b):
            raise SigmapInputError(
                f"OverlapMatrix: values have shape {self.values.shape}, expected ({b}, {b}) for {b} labels"
            )
        if len(set(self.labels)) != b:
            raise SigmapInputError(f"OverlapMatrix: duplicate labels in {list(self.labels)}")
        if self.n_common is not None:
            self.n_common = np.asarray(self.n_common, dtype=np.int64)
            if self.n_common.shape != (b, b):
                raise SigmapInputError(
                    f"OverlapMatrix: n_common has shape {self.n_common.shape}, expected ({b}, {b})"
                )

    def __len__(self) -> int:
        return len(self.labels)

    def index(self, label: str) -> int:
        """Position of ``label`` (raises :class:`SigmapInputError` when unknown)."""
        try:
            return self.labels.index(label)
        except ValueError:
            raise SigmapInputError(
                f"benchmark {label!r} is not in the overlap matrix (have {list(self.labels)})"
            ) from None

    def get(self, a: str, b: str) -> float:
        """The overlap value of benchmarks ``a`` and ``b``."""
        return float(self.values[self.index(a), self.index(b)])

    def off_diagonal(self) -> np.ndarray:
        """Upper-triangle values (``i < j``) in row-major order, NaNs included."""
        iu = np.triu_indices(len(self.labels), k=1)
        return self.values[iu]

    def pairs(self) -> list[tuple[str, str]]:
        """Label pairs ``(a, b)`` matching :meth:`off_diagonal`."""
        iu = np.triu_indices(len(self.labels), k=1)
        return [(self.labels[i], self.labels[j]) for i, j in zip(*iu)]

    def subset(self, labels: Sequence[str]) -> OverlapMatrix:
        """The sub-matrix of ``labels`` (in that order); ``extra`` keeps only square
        ``(B, B)`` arrays (re-indexed) and per-benchmark ``(B,)`` arrays."""
        idx = np.array([self.index(x) for x in labels], dtype=np.int64)
        b = len(self.labels)
        extra: dict[str, Any] = {}
        for k, v in self.extra.items():
            if isinstance(v, np.ndarray) and v.shape == (b, b):
                extra[k] = v[np.ix_(idx, idx)]
            elif isinstance(v, np.ndarray) and v.shape == (b,):
                extra[k] = v[idx]
        return OverlapMatrix(
            labels=tuple(labels),
            values=self.values[np.ix_(idx, idx)],
            n_common=None if self.n_common is None else self.n_common[np.ix_(idx, idx)],
            level=self.level,
            extra=extra,
        )

    def to_frame(self):
        """Wide polars DataFrame: column ``benchmark`` then one float column per label."""
        import polars as pl

        data: dict[str, Any] = {"benchmark": list(self.labels)}
        for j, lab in enumerate(self.labels):
            data[lab] = self.values[:, j]
        return pl.DataFrame(data)

    def to_long(self, include_diagonal: bool = False):
        """Long polars DataFrame of the pairs ``a < b`` (row order): columns ``a``, ``b``,
        ``value``, ``n_common`` (if any) and every square ``(B, B)`` array of ``extra``."""
        import polars as pl

        b = len(self.labels)
        iu = np.triu_indices(b, k=0 if include_diagonal else 1)
        data: dict[str, Any] = {
            "a": [self.labels[i] for i in iu[0]],
            "b": [self.labels[j] for j in iu[1]],
            "value": self.values[iu],
        }
        if self.n_common is not None:
            data["n_common"] = self.n_common[iu]
        for k, v in self.extra.items():
            if (
                isinstance(v, np.ndarray)
                and v.shape == (b, b)
                and np.issubdtype(v.dtype, np.number)
            ):
                data[k] = v[iu]
        return pl.DataFrame(data)

    @classmethod
    def from_frame(cls, frame, level: str = "") -> OverlapMatrix:
        """Inverse of :meth:`to_frame` (polars or pandas wide frame with ``benchmark``)."""
        import polars as pl

        if not isinstance(frame, pl.DataFrame):
            frame = pl.from_pandas(frame)
        if "benchmark" not in frame.columns:
            raise SigmapInputError("overlap frame has no 'benchmark' column")
        labels = [str(x) for x in frame["benchmark"].to_list()]
        missing = [x for x in labels if x not in frame.columns]
        if missing:
            raise SigmapInputError(f"overlap frame lacks columns for benchmarks {missing}")
        values = frame.select(labels).to_numpy().astype(np.float64)
        return cls(labels=tuple(labels), values=values, level=level)


# ---------------------------------------------------------------------------------------
# Helpers: ranks and Spearman
# ---------------------------------------------------------------------------------------
def _rank_columns(x: np.ndarray) -> np.ndarray:
    """Average ranks of each column (no NaN allowed)."""
    from scipy.stats import rankdata

    return rankdata(x, axis=0, method="average")


def _pearson_columns(r: np.ndarray) -> np.ndarray:
    """Pearson correlation matrix of the columns of ``r``; NaN for constant columns."""
    c = r - r.mean(axis=0, keepdims=True)
    norm = np.sqrt((c * c).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        u = c / norm
        out = u.T @ u
    bad = ~(norm > 1e-12 * max(1.0, float(np.abs(r).max(initial=0.0))))
    out[bad, :] = np.nan
    out[:, bad] = np.nan
    return np.clip(out, -1.0, 1.0)


def spearman_matrix(x: np.ndarray, *, min_common: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise-complete Spearman correlations between the columns of ``x``.

    Parameters
    ----------
    x : np.ndarray
        ``(n_obs, k)`` float; NaN marks a missing value.
    min_common : int
        Pairs with fewer common (both-finite) rows get NaN.

    Returns
    -------
    rho : np.ndarray
        ``(k, k)`` Spearman ρ (ties get average ranks, as in ``scipy.stats.spearmanr``),
        diagonal 1 for non-constant columns; NaN where undefined (constant columns, too
        few common rows).
    n_common : np.ndarray
        ``(k, k)`` int64, rows where both columns are finite.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise SigmapInputError(
            f"spearman_matrix expects a 2-D (n_obs, k) array, got shape {x.shape}"
        )
    finite = np.isfinite(x)
    fin = finite.astype(np.int64)
    n_common = fin.T @ fin
    k = x.shape[1]
    if finite.all():
        rho = _pearson_columns(_rank_columns(x)) if x.shape[0] >= 2 else np.full((k, k), np.nan)
    else:
        rho = np.full((k, k), np.nan)
        for i in range(k):
            for j in range(i, k):
                mask = finite[:, i] & finite[:, j]
                if mask.sum() < 2:
                    continue
                sub = _rank_columns(x[mask][:, [i, j]])
                r = _pearson_columns(sub)[0, 1] if i != j else _pearson_columns(sub[:, :1])[0, 0]
                rho[i, j] = rho[j, i] = r
    low = n_common < min_common
    rho[low] = np.nan
    return rho, n_common


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
    """
    if min_common < 2:
        raise SigmapInputError(f"performance_overlap: min_common must be >= 2, got {min_common}")
    _, bench, arr = _scores_to_array(scores, model_column)
    if len(bench) < 1:
        raise SigmapInputError("performance_overlap: no benchmark columns in scores")
    if np.isinf(arr).any():
        raise SigmapInputError("performance_overlap: scores contain ±inf")
    rho, n = spearman_matrix(arr, min_common=min_common)
    np.fill_diagonal(rho, 1.0)
    return OverlapMatrix(
        labels=tuple(bench),
        values=rho,
        n_common=n,
        level="performance",
        extra={"n_models": int(arr.shape[0])},
    )


# ---------------------------------------------------------------------------------------
# Semantic overlap
# ---------------------------------------------------------------------------------------
def _label_rng(seed: int, label: str, salt: int = 0) -> np.random.Generator:
    """A generator that depends only on (seed, label, salt): results for a pair do not
    depend on which other benchmarks are in the call or their order."""
    h = int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence([int(seed), h, int(salt)]))


def _draw_keys(rng: np.random.Generator, t: int, n_b: int) -> np.ndarray:
    """``(t, n_b)`` float64 uniform keys: draw ``t`` visits items in increasing key order,
    so its size-``n`` sample is the ``n`` items with the smallest keys (nested in ``n``)."""
    return rng.random((t, n_b))


def _key_window(keys: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Boolean ``(t, n_b)`` mask of the items ranked ``lo <= rank < hi`` in each row of
    ``keys`` (rank 0 = smallest key); exactly ``hi - lo`` per row."""
    t, n_b = keys.shape
    if hi >= n_b and lo == 0:
        return np.ones_like(keys, dtype=bool)
    kth = [k for k in (lo - 1, hi - 1) if 0 <= k < n_b]
    part = np.partition(keys, kth, axis=1)
    upper = part[:, hi - 1 : hi] if hi < n_b else np.full((t, 1), np.inf)
    mask = keys <= upper
    if lo > 0:
        mask &= keys > part[:, lo - 1 : lo]
    if not (mask.sum(axis=1) == hi - lo).all():  # tied keys (probability ~ n_b^2 / 2^53)
        ranks = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
        mask = (ranks >= lo) & (ranks < hi)
    return mask


def _sum_masked(emb: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``out[t] = Σ_{j: mask[t, j]} emb[j]`` (float64), gather or GEMM by cost; every row
    of ``mask`` has the same number of True entries."""
    t, n_b = mask.shape
    k = int(mask[0].sum()) if t else 0
    if k == 0:
        return np.zeros((t, emb.shape[1]), dtype=np.float64)
    if 8 * k < n_b:
        idx = np.nonzero(mask)[1].reshape(t, k)
        return _sum_rows(emb, idx)
    return (mask.astype(emb.dtype) @ emb).astype(np.float64)


def _sum_rows(emb: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``out[t] = Σ_i emb[idx[t, i]]`` (float64 accumulation), choosing gather or a
    count-matrix GEMM by cost."""
    t, k = idx.shape
    n_b, dim = emb.shape
    if k == 0:
        return np.zeros((t, dim), dtype=np.float64)
    if 8 * k < n_b:  # gather is cheaper
        out = np.empty((t, dim), dtype=np.float64)
        step = max(1, (1 << 24) // max(1, k * dim))
        for s in range(0, t, step):
            out[s : s + step] = emb[idx[s : s + step]].sum(axis=1, dtype=np.float64)
        return out
    flat = (np.arange(t, dtype=np.int64)[:, None] * n_b + idx).ravel()
    counts = np.bincount(flat, minlength=t * n_b).reshape(t, n_b).astype(emb.dtype)
    return (counts @ emb).astype(np.float64)


def _single_thread_blas():
    """Context limiting BLAS to one thread (threadpoolctl when installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _normalize_rows(x: np.ndarray, what: str) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    if not (norm > 0).all():
        raise SigmapInputError(f"{what}: zero-norm vector (all-zero embedding or sample sum)")
    return x / norm


def semantic_overlap(
    embeddings: Mapping[str, np.ndarray],
    *,
    T: int = 1000,
    n_max: int | None = None,
    seed: int = 0,
    replace: bool = False,
    self_similarity: bool = True,
) -> OverlapMatrix:
    """Semantic overlap: size-matched bootstrap cosine of mean question embeddings.

    For each pair ``(a, b)``: ``n = min(|a|, |b|, n_max)``; ``T`` draws of ``n`` questions
    from each benchmark; ``f(sample)`` = mean of the unit-normalized embeddings;
    ``A_sem(a, b) = mean_t cos(f(sample_t(a)), f(sample_t(b)))`` (METHODS §4).

    Conventions
    -----------
    - **Draws are without replacement** by default (``replace=False``): a size-``n``
      subsample of a benchmark that was itself drawn from some question pool is
      distributed like ``n`` questions from that pool, which is what makes pairs of
      benchmarks of different sizes comparable. (With replacement, the smaller
      benchmark's resample is noisier than the larger one's, which biases pairs with a
      small benchmark downwards.) When ``n`` equals a benchmark's size its draw is the
      whole benchmark and contributes no bootstrap variance.
    - Draws are **nested and per benchmark**: benchmark ``b``'s ``t``-th draw of size ``n``
      is the first ``n`` entries of one random order that depends only on
      ``(seed, b, t)``. So a pair's value does not depend on which other benchmarks are
      present or in which order, and pairs share draws (common random numbers).
    - The cosine between two sample *means* equals the cosine between sample *sums*, so
      only per-draw sums are formed (a count-matrix GEMM per benchmark and size); the
      ``T`` paired cosines of all pairs at one size are one batched GEMM.
    - **Diagonal = 1** (a benchmark's mean embedding against itself). The
      informative within-benchmark value, the mean cosine between two *disjoint*
      random halves (each ``min(|b| // 2, n_max)`` questions), is in
      ``extra["self_similarity"]`` when ``self_similarity=True``; it is the ceiling a
      pair of benchmarks drawn from one pool would reach at that size.

    Parameters
    ----------
    embeddings : mapping benchmark -> np.ndarray
        ``(n_b, dim)`` question embeddings (any scale; rows are unit-normalized here).
    T : int
        Bootstrap draws (>= 2).
    n_max : int, optional
        Cap on the questions per draw.
    seed : int
        Random seed.
    replace : bool
        Draw with replacement (classical bootstrap) instead of subsampling.
    self_similarity : bool
        Also compute the split-half within-benchmark similarity.

    Returns
    -------
    OverlapMatrix
        ``level="semantic"``; ``n_common[a, b]`` = ``n`` (questions per draw);
        ``extra["sd"]`` = ``(B, B)`` bootstrap sd of the cosine (0 on the diagonal);
        ``extra["se"]`` = ``sd / sqrt(T)``; ``extra["n_questions"]`` = ``(B,)`` sizes;
        ``extra["self_similarity"]``, ``extra["self_similarity_sd"]`` = ``(B,)`` (NaN for
        single-question benchmarks); ``extra["T"]``, ``extra["seed"]``, ``extra["replace"]``.
    """
    if not isinstance(embeddings, Mapping) or len(embeddings) == 0:
        raise SigmapInputError(
            "semantic_overlap: embeddings must be a non-empty mapping benchmark -> array"
        )
    if int(T) < 2:
        raise SigmapInputError(f"semantic_overlap: T must be >= 2, got {T}")
    if n_max is not None and int(n_max) < 1:
        raise SigmapInputError(f"semantic_overlap: n_max must be >= 1, got {n_max}")
    T = int(T)
    labels = [str(k) for k in embeddings]
    emb: list[np.ndarray] = []
    dim = None
    for lab in labels:
        e = np.asarray(embeddings[lab])
        if e.ndim != 2 or e.shape[0] < 1:
            raise SigmapInputError(
                f"semantic_overlap: embeddings of benchmark {lab!r} must be a non-empty (n, dim) array, got shape {e.shape}"
            )
        if dim is None:
            dim = e.shape[1]
        elif e.shape[1] != dim:
            raise SigmapInputError(
                f"semantic_overlap: benchmark {lab!r} has embedding dim {e.shape[1]}, others {dim}"
            )
        e = e.astype(np.float32, copy=False)
        if not np.isfinite(e).all():
            raise SigmapInputError(
                f"semantic_overlap: embeddings of benchmark {lab!r} contain NaN/inf"
            )
        emb.append(np.ascontiguousarray(_normalize_rows(e, f"semantic_overlap: benchmark {lab!r}")))
    assert dim is not None
    nb = len(labels)
    sizes = np.array([e.shape[0] for e in emb], dtype=np.int64)
    caps = sizes if n_max is None else np.minimum(sizes, int(n_max))

    mean = np.eye(nb)
    sd = np.zeros((nb, nb))
    nsamp = np.diag(caps).astype(np.int64)

    # state per benchmark: current prefix length and running sums of the nested draws.
    # Without replacement the draws are defined by per-benchmark random keys
    # (regenerated from the benchmark's own generator whenever needed, so nothing of size
    # T x n_b is kept); with replacement by a (T, cap) index matrix, kept while needed.
    prefix = np.zeros(nb, dtype=np.int64)
    sums: dict[int, np.ndarray] = {i: np.zeros((T, dim), dtype=np.float64) for i in range(nb)}
    orders: dict[int, np.ndarray | None] = dict.fromkeys(range(nb))

    for n in np.unique(caps):
        active = [i for i in range(nb) if caps[i] >= n]
        group = [i for i in active if caps[i] == n]
        if len(active) < 2:
            continue
        units = np.empty((T, len(active), dim), dtype=np.float32)
        for pos, i in enumerate(active):
            if prefix[i] < n:
                if not replace and n == sizes[i]:
                    # the only size-|b| subsample without replacement is the whole benchmark
                    sums[i][:] = emb[i].sum(axis=0, dtype=np.float64)[None, :]
                elif not replace:
                    keys = _draw_keys(_label_rng(seed, labels[i]), T, int(sizes[i]))
                    sums[i] += _sum_masked(emb[i], _key_window(keys, int(prefix[i]), int(n)))
                    del keys
                else:
                    if orders[i] is None:
                        orders[i] = _label_rng(seed, labels[i]).integers(
                            0, int(sizes[i]), size=(T, int(caps[i])), dtype=np.int64
                        )
                    order = orders[i]
                    assert order is not None
                    sums[i] += _sum_rows(emb[i], order[:, prefix[i] : n])
                prefix[i] = n
            units[:, pos, :] = _normalize_rows(
                sums[i], f"semantic_overlap: benchmark {labels[i]!r}"
            )
            if n == caps[i]:
                orders[i] = None  # last size this benchmark is needed at
        gpos = [active.index(i) for i in group]
        unitsT = np.ascontiguousarray(units.transpose(0, 2, 1))  # (T, dim, |active|)
        with _single_thread_blas():  # many small GEMMs: BLAS threading only adds overhead
            cos = np.matmul(
                np.ascontiguousarray(units[:, gpos, :]), unitsT
            )  # (T, |group|, |active|)
        np.clip(cos, -1.0, 1.0, out=cos)
        m = cos.mean(axis=0, dtype=np.float64)
        s = cos.std(axis=0, ddof=1, dtype=np.float64)
        for gi, i in enumerate(group):
            for aj, j in enumerate(active):
                if j == i:
                    continue
                if caps[j] == n and j < i:
                    continue  # already set from j's row (same n): keep one value per pair
                mean[i, j] = mean[j, i] = m[gi, aj]
                sd[i, j] = sd[j, i] = s[gi, aj]
                nsamp[i, j] = nsamp[j, i] = n
        del units, unitsT, cos
        for i in group:
            sums.pop(i, None)  # no longer needed at larger sizes

    extra: dict[str, Any] = {
        "sd": sd,
        "se": sd / math.sqrt(T),
        "n_questions": sizes.copy(),
        "T": T,
        "seed": int(seed),
        "replace": bool(replace),
    }
    if self_similarity:
        ss = np.full(nb, np.nan)
        ss_sd = np.full(nb, np.nan)
        for i in range(nb):
            half = int(sizes[i] // 2) if n_max is None else min(int(sizes[i] // 2), int(n_max))
            if half < 1:
                continue
            keys = _draw_keys(_label_rng(seed, labels[i], salt=1), T, int(sizes[i]))
            first = _key_window(keys, 0, half)
            s1 = _sum_masked(emb[i], first)
            if 2 * half >= sizes[i] - 1 and half > 1:
                # second half = everything else, minus the (at most one) item left over
                rest = ~first
                if 2 * half < sizes[i]:
                    rest &= ~_key_window(keys, 2 * half, int(sizes[i]))
                    left = np.nonzero(~first & ~rest)[1]
                    s2 = (
                        emb[i].sum(axis=0, dtype=np.float64)[None, :]
                        - s1
                        - emb[i][left].astype(np.float64)
                    )
                else:
                    s2 = emb[i].sum(axis=0, dtype=np.float64)[None, :] - s1
            else:
                s2 = _sum_masked(emb[i], _key_window(keys, half, 2 * half))
            u1 = _normalize_rows(s1, labels[i])
            u2 = _normalize_rows(s2, labels[i])
            c = (u1 * u2).sum(axis=1)
            ss[i] = c.mean()
            ss_sd[i] = c.std(ddof=1)
        extra["self_similarity"] = ss
        extra["self_similarity_sd"] = ss_sd
    return OverlapMatrix(
        labels=tuple(labels), values=mean, n_common=nsamp, level="semantic", extra=extra
    )


# ---------------------------------------------------------------------------------------
# Signature overlap
# ---------------------------------------------------------------------------------------
NLLSource = np.ndarray | Callable[[np.ndarray], np.ndarray]


def _read_nll(
    nll: NLLSource, units: np.ndarray | None, wanted: np.ndarray, n_models: int
) -> np.ndarray:
    """NLL ``(len(wanted), n_models)`` at the unit ids ``wanted``."""
    if callable(nll):
        out = np.asarray(nll(wanted), dtype=np.float64)
    else:
        arr = np.asarray(nll, dtype=np.float64)
        if arr.ndim != 2:
            raise SigmapInputError(
                f"signature overlap: nll must be (n_units, n_models), got shape {arr.shape}"
            )
        if units is None:
            units = np.arange(arr.shape[0])
        units = np.asarray(units, dtype=np.int64)
        if units.shape != (arr.shape[0],):
            raise SigmapInputError(
                f"signature overlap: units has shape {units.shape}, expected ({arr.shape[0]},) (one id per nll row)"
            )
        sorter = np.argsort(units, kind="stable")
        pos = np.searchsorted(units, wanted, sorter=sorter)
        pos = np.clip(pos, 0, len(units) - 1)
        rows = sorter[pos]
        bad = units[rows] != wanted
        if bad.any():
            raise SigmapInputError(
                f"signature overlap: signature units {wanted[bad][:10].tolist()} are not among the rows of nll"
            )
        out = arr[rows]
    if out.shape != (len(wanted), n_models):
        raise SigmapInputError(
            f"signature overlap: NLL at {len(wanted)} units must have shape ({len(wanted)}, {n_models}), got {out.shape}"
        )
    if not np.isfinite(out).all():
        raise SigmapInputError("signature overlap: NLL at signature units contains NaN/inf")
    return out


def signature_model_scores(
    signatures: Mapping[str, Sequence[int] | np.ndarray],
    *,
    nll: NLLSource,
    unit_nbytes: np.ndarray | Callable[[np.ndarray], np.ndarray],
    bpb_mean: np.ndarray,
    bpb_sd: np.ndarray,
    units: np.ndarray | None = None,
) -> tuple[list[str], np.ndarray]:
    """Per-model signature scores ``s_b[k] = mean_{j ∈ S_b} z_{k,j}``.

    ``z_{k,j} = (bpb_{k,j} − bpb_mean_k) / bpb_sd_k`` with ``bpb = NLL / (n_bytes · ln 2)``
    and the per-model mean/sd of bits-per-byte over the whole corpus (computed elsewhere,
    streaming; e.g. ``RankStore``).

    Parameters
    ----------
    signatures : mapping benchmark -> unit ids
        Global corpus unit indices of each benchmark's signature (non-empty).
    nll : np.ndarray or callable
        Either ``(k, n_models)`` NLL in nats at the unit ids ``units`` (unit-major), or a
        callable ``read(unit_ids (k,)) -> (k, n_models)`` (e.g. reading the NLL stores).
    unit_nbytes : np.ndarray or callable
        Byte length of each unit: aligned with ``units`` (array form of ``nll``), or a
        full ``(n_units,)`` array indexed by unit id, or a callable ``read(unit_ids)``.
    bpb_mean, bpb_sd : np.ndarray
        ``(n_models,)`` whole-corpus bits-per-byte mean and sd per model.
    units : np.ndarray, optional
        ``(k,)`` unit ids of the rows of an array ``nll`` (default ``0..k-1``).

    Returns
    -------
    labels : list of str
    scores : np.ndarray
        ``(n_models, B)`` float64.
    """
    bpb_mean = np.asarray(bpb_mean, dtype=np.float64)
    bpb_sd = np.asarray(bpb_sd, dtype=np.float64)
    if bpb_mean.ndim != 1 or bpb_sd.shape != bpb_mean.shape:
        raise SigmapInputError(
            f"signature overlap: bpb_mean/bpb_sd must be (n_models,), got {bpb_mean.shape} and {bpb_sd.shape}"
        )
    if not (np.isfinite(bpb_sd).all() and (bpb_sd > 0).all()):
        raise SigmapInputError("signature overlap: bpb_sd must be finite and > 0 for every model")
    if not isinstance(signatures, Mapping) or not signatures:
        raise SigmapInputError(
            "signature overlap: signatures must be a non-empty mapping benchmark -> unit ids"
        )
    labels = [str(k) for k in signatures]
    sig = {}
    for lab, u in zip(labels, signatures.values()):
        arr = np.asarray(u, dtype=np.int64).ravel()
        if arr.size == 0:
            raise SigmapInputError(f"signature overlap: signature of benchmark {lab!r} is empty")
        if (arr < 0).any():
            raise SigmapInputError(
                f"signature overlap: signature of benchmark {lab!r} has negative unit ids"
            )
        sig[lab] = arr
    wanted = np.unique(np.concatenate(list(sig.values())))
    m = bpb_mean.shape[0]
    x = _read_nll(nll, units, wanted, m)
    # bytes per unit at `wanted`
    if callable(unit_nbytes):
        nbytes = np.asarray(unit_nbytes(wanted), dtype=np.float64)
    else:
        nb_arr = np.asarray(unit_nbytes, dtype=np.float64)
        if not callable(nll) and units is not None and nb_arr.shape == np.asarray(units).shape:
            u = np.asarray(units, dtype=np.int64)
            sorter = np.argsort(u, kind="stable")
            nbytes = nb_arr[sorter[np.searchsorted(u, wanted, sorter=sorter)]]
        else:
            if nb_arr.ndim != 1 or wanted.max() >= nb_arr.shape[0]:
                raise SigmapInputError(
                    f"signature overlap: unit_nbytes (shape {nb_arr.shape}) must be aligned with units or cover unit id {int(wanted.max())}"
                )
            nbytes = nb_arr[wanted]
    if nbytes.shape != wanted.shape or not (nbytes > 0).all():
        raise SigmapInputError("signature overlap: unit_nbytes must be > 0 at every signature unit")
    bpb = x / (nbytes[:, None] * math.log(2.0))
    z = (bpb - bpb_mean[None, :]) / bpb_sd[None, :]
    out = np.empty((m, len(labels)))
    for b, lab in enumerate(labels):
        rows = np.searchsorted(wanted, sig[lab])
        out[:, b] = z[rows].mean(axis=0)
    return labels, out


def _overlap_from_model_scores(labels: Sequence[str], s: np.ndarray) -> OverlapMatrix:
    rho, n = spearman_matrix(s, min_common=3)
    np.fill_diagonal(rho, 1.0)
    return OverlapMatrix(
        labels=tuple(labels), values=rho, n_common=n, level="signature", extra={"model_scores": s}
    )


def signature_overlap(
    signatures: Mapping[str, Sequence[int] | np.ndarray],
    *,
    nll: NLLSource,
    unit_nbytes: np.ndarray | Callable[[np.ndarray], np.ndarray],
    bpb_mean: np.ndarray,
    bpb_sd: np.ndarray,
    units: np.ndarray | None = None,
) -> OverlapMatrix:
    """Signature-level overlap: Spearman ρ across models of the signature scores.

    See :func:`signature_model_scores` for the inputs. ``overlap(a, b) =
    Spearman(s_a, s_b)`` over the models (METHODS §4).

    Returns
    -------
    OverlapMatrix
        ``level="signature"``; ``n_common`` = number of models; ``extra["model_scores"]``
        = the ``(n_models, B)`` signature scores (input of :func:`bootstrap_ci`).
    """
    labels, s = signature_model_scores(
        signatures, nll=nll, unit_nbytes=unit_nbytes, bpb_mean=bpb_mean, bpb_sd=bpb_sd, units=units
    )
    return _overlap_from_model_scores(labels, s)


def signature_overlap_null(
    extract: Callable[[np.ndarray], Mapping[str, Sequence[int] | np.ndarray]],
    scores: np.ndarray,
    *,
    nll: NLLSource,
    unit_nbytes: np.ndarray | Callable[[np.ndarray], np.ndarray],
    bpb_mean: np.ndarray,
    bpb_sd: np.ndarray,
    units: np.ndarray | None = None,
    n_perm: int = 99,
    seed: int = 0,
    mode: Literal["joint", "independent"] = "joint",
    alternative: Literal["greater", "two-sided"] = "greater",
    observed: OverlapMatrix | None = None,
) -> OverlapMatrix:
    """Permutation null of the signature overlap, with a p-value per pair.

    Scores are shuffled across models, signatures re-extracted with ``extract`` and the
    overlap recomputed, ``n_perm`` times. ``mode="joint"`` applies one permutation of the
    models to all benchmarks (keeps the benchmarks' score correlations, breaks the link
    between scores and perplexities: the null is "the signatures of a and b overlap only
    as much as selection on unrelated-to-perplexity scores with the same between-benchmark
    correlation gives"); ``mode="independent"`` permutes each benchmark's column on its
    own (also breaks the score correlation; a weaker null).

    p-value (exact permutation test, valid at any ``n_perm``):
    ``(1 + #{null ≥ observed}) / (1 + n_perm)`` for ``alternative="greater"``, or with
    ``|·|`` on both sides for ``"two-sided"``.

    Parameters
    ----------
    extract : callable
        ``extract(scores (n_models, B)) -> {benchmark: unit ids}`` — the whole signature
        pipeline (screening + selection); must return the same benchmark names each time.
    scores : np.ndarray
        ``(n_models, B)`` benchmark scores, models in the order of ``nll``'s columns.
    nll, unit_nbytes, bpb_mean, bpb_sd, units
        As in :func:`signature_overlap`; ``nll`` must cover every unit ``extract`` can
        return (pass a callable reading the stores in general).
    n_perm : int
        Number of permutations (>= 1).
    seed : int
    mode : {"joint", "independent"}
    alternative : {"greater", "two-sided"}
    observed : OverlapMatrix, optional
        The observed overlap; computed from ``extract(scores)`` when omitted.

    Returns
    -------
    OverlapMatrix
        The observed overlap with ``extra["p_value"]`` ``(B, B)`` (NaN diagonal),
        ``extra["null_mean"]``, ``extra["null_sd"]`` ``(B, B)``, ``extra["null"]``
        ``(n_perm, B, B)``, ``extra["n_perm"]``, ``extra["mode"]``.
    """
    if n_perm < 1:
        raise SigmapInputError(f"signature_overlap_null: n_perm must be >= 1, got {n_perm}")
    if mode not in ("joint", "independent"):
        raise SigmapInputError(
            f"signature_overlap_null: mode must be 'joint' or 'independent', got {mode!r}"
        )
    if alternative not in ("greater", "two-sided"):
        raise SigmapInputError(
            f"signature_overlap_null: alternative must be 'greater' or 'two-sided', got {alternative!r}"
        )
    y = np.asarray(scores, dtype=np.float64)
    m = np.asarray(bpb_mean).shape[0]
    if y.ndim != 2 or y.shape[0] != m:
        raise SigmapInputError(
            f"signature_overlap_null: scores must be (n_models={m}, B), got shape {y.shape}"
        )
    kw = dict(nll=nll, unit_nbytes=unit_nbytes, bpb_mean=bpb_mean, bpb_sd=bpb_sd, units=units)
    if observed is None:
        observed = signature_overlap(extract(y), **kw)
    labels = observed.labels
    rng = np.random.default_rng(seed)
    nb = len(labels)
    null = np.empty((n_perm, nb, nb))
    for p in range(n_perm):
        if mode == "joint":
            yp = y[rng.permutation(m)]
        else:
            yp = np.column_stack([y[rng.permutation(m), j] for j in range(y.shape[1])])
        sigs = extract(yp)
        got = [str(k) for k in sigs]
        if set(got) != set(labels):
            raise SigmapInputError(
                f"signature_overlap_null: extract returned benchmarks {sorted(got)}, expected {sorted(labels)}"
            )
        null[p] = signature_overlap({k: sigs[k] for k in labels}, **kw).values
    obs = observed.values
    if alternative == "greater":
        exceed = (null >= obs[None] - 1e-12).sum(axis=0)
    else:
        exceed = (np.abs(null) >= np.abs(obs)[None] - 1e-12).sum(axis=0)
    with np.errstate(invalid="ignore"):
        pval = (1.0 + exceed) / (1.0 + n_perm)
    pval[~np.isfinite(obs)] = np.nan
    np.fill_diagonal(pval, np.nan)
    extra = dict(observed.extra)
    extra.update(
        p_value=pval,
        null_mean=np.nanmean(null, axis=0),
        null_sd=np.nanstd(null, axis=0, ddof=1) if n_perm > 1 else np.full((nb, nb), np.nan),
        null=null,
        n_perm=int(n_perm),
        mode=mode,
        alternative=alternative,
    )
    return OverlapMatrix(
        labels=labels, values=obs, n_common=observed.n_common, level=observed.level, extra=extra
    )


def bootstrap_ci(
    model_scores: np.ndarray | OverlapMatrix,
    *,
    labels: Sequence[str] | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> OverlapMatrix:
    """Percentile bootstrap intervals over models for a Spearman overlap matrix.

    Models (rows) are resampled with replacement; the Spearman matrix of the resampled
    columns is recomputed (ties from duplicated models get average ranks). The columns
    (e.g. signature scores) are held fixed, so the interval reflects which models were
    evaluated, not the uncertainty of signature selection (see
    :func:`signature_overlap_null` for that). Resamples where a column is constant are
    dropped for that pair.

    Parameters
    ----------
    model_scores : np.ndarray or OverlapMatrix
        ``(n_models, B)`` without NaN, or an :class:`OverlapMatrix` from
        :func:`signature_overlap` (its ``extra["model_scores"]``).
    labels : sequence of str, optional
        Column names (taken from the matrix when one is given).
    n_boot : int
        Bootstrap resamples; resample ``r`` uses row indices
        ``default_rng(seed).integers(0, n_models, (n_boot, n_models))[r]``.
    level : float
        Two-sided coverage, in (0, 1).
    seed : int

    Returns
    -------
    OverlapMatrix
        Values = the Spearman matrix of the full sample; ``extra["ci_low"]``,
        ``extra["ci_high"]``, ``extra["boot_sd"]`` ``(B, B)``, ``extra["n_boot"]``, ``extra["level"]``.
    """
    if isinstance(model_scores, OverlapMatrix):
        if "model_scores" not in model_scores.extra:
            raise SigmapInputError(
                "bootstrap_ci: the overlap matrix carries no extra['model_scores']"
            )
        labels = model_scores.labels
        x = np.asarray(model_scores.extra["model_scores"], dtype=np.float64)
    else:
        x = np.asarray(model_scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3:
        raise SigmapInputError(
            f"bootstrap_ci: model_scores must be (n_models >= 3, B), got shape {x.shape}"
        )
    if not np.isfinite(x).all():
        raise SigmapInputError("bootstrap_ci: model_scores contain NaN/inf")
    if not 0 < level < 1:
        raise SigmapInputError(f"bootstrap_ci: level must be in (0, 1), got {level}")
    if n_boot < 2:
        raise SigmapInputError(f"bootstrap_ci: n_boot must be >= 2, got {n_boot}")
    m, nb = x.shape
    labels = [f"b{j}" for j in range(nb)] if labels is None else [str(v) for v in labels]
    if len(labels) != nb:
        raise SigmapInputError(f"bootstrap_ci: {len(labels)} labels for {nb} columns")
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, m, size=(n_boot, m))
    xb = x[idx]  # (n_boot, m, B)
    r = rankdata(xb, axis=1, method="average")
    r -= r.mean(axis=1, keepdims=True)
    norm = np.sqrt((r * r).sum(axis=1))  # (n_boot, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = r / norm[:, None, :]
        boots = np.einsum("rmi,rmj->rij", u, u)
    bad = norm <= 1e-12
    boots[bad[:, :, None] | bad[:, None, :]] = np.nan
    boots = np.clip(boots, -1.0, 1.0)
    alpha = (1.0 - level) / 2.0
    lo = np.nanquantile(boots, alpha, axis=0)
    hi = np.nanquantile(boots, 1.0 - alpha, axis=0)
    rho, n = spearman_matrix(x, min_common=3)
    np.fill_diagonal(rho, 1.0)
    return OverlapMatrix(
        labels=tuple(labels),
        values=rho,
        n_common=n,
        level="signature",
        extra={
            "ci_low": lo,
            "ci_high": hi,
            "boot_sd": np.nanstd(boots, axis=0, ddof=1),
            "n_boot": int(n_boot),
            "level": float(level),
            "model_scores": x,
        },
    )

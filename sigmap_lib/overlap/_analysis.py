"""Analyses of overlap matrices (METHODS §5), one level at a time.

- :func:`group_test` — same-group vs cross-group pairs (family / format): Mann–Whitney U.
- :func:`function_matrix` — within- vs cross-function means, function × function matrix.
- :func:`spread` — discriminability of a level: IQR, sd, range, quantiles.
- :func:`cluster` — average-linkage hierarchical clustering on ``1 − overlap``.
- :func:`agreement` — Spearman of two matrices' off-diagonal values (robustness variants).
- :func:`signature_content_alignment` — cosine between a signature's units (in left
  context) and its benchmark's questions, per benchmark and per function.

Everything takes an :class:`~sigmap_lib.overlap.OverlapMatrix`; pairs are the unordered
off-diagonal pairs ``a < b`` with a finite value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap._embed import DEFAULT_BATCH_SIZE
from sigmap_lib.overlap._matrix import OverlapMatrix


def _pairs(matrix: OverlapMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upper-triangle (i, j, value) with finite values."""
    iu, ju = np.triu_indices(len(matrix.labels), k=1)
    v = matrix.values[iu, ju]
    ok = np.isfinite(v)
    return iu[ok], ju[ok], v[ok]


def _meta_of(meta: Mapping[str, Any], label: str, key: str) -> str:
    if label not in meta:
        raise SigmapInputError(
            f"benchmark {label!r} has no metadata (need {key!r}); known: {sorted(meta)[:20]}"
        )
    entry = meta[label]
    if isinstance(entry, Mapping):
        if key not in entry or entry[key] is None:
            raise SigmapInputError(
                f"benchmark {label!r}: metadata has no {key!r} (have {sorted(entry)})"
            )
        return str(entry[key])
    return str(entry)


def group_test(
    matrix: OverlapMatrix, meta: Mapping[str, Any], by: str = "family"
) -> dict[str, Any]:
    """Mann–Whitney U test of same-group vs cross-group pairwise overlaps.

    Parameters
    ----------
    matrix : OverlapMatrix
    meta : mapping benchmark -> {"family": ..., "format": ..., "function": ...}
        Or benchmark -> group name directly.
    by : str
        Metadata key defining the groups (``"family"``, ``"format"``, ``"function"``).

    Returns
    -------
    dict
        ``U`` (for the same-group sample: number of (same, cross) pairs of pairs where the
        same-group overlap is larger, ties ½), ``p`` (two-sided, scipy's
        ``mannwhitneyu`` with its default method), ``rank_biserial`` = ``2U/(n1·n2) − 1``
        ∈ [−1, 1] (positive = same-group pairs overlap more), ``median_same``,
        ``median_cross``, ``mean_same``, ``mean_cross``, ``n_same``, ``n_cross``, ``by``.
        Statistics are NaN when either group is empty.

    Examples
    --------
    Two reasoning and two math benchmarks (:func:`toy_overlap`):

    >>> from sigmap_lib.overlap import group_test, toy_overlap
    >>> m, meta = toy_overlap()
    >>> r = group_test(m, meta, by="function")
    >>> r["n_same"], r["n_cross"], r["median_same"], r["median_cross"], r["rank_biserial"]
    (2, 4, 0.75, 0.2, 1.0)
    >>> round(r["p"], 3)
    0.1
    """
    from scipy.stats import mannwhitneyu

    iu, ju, v = _pairs(matrix)
    groups = [_meta_of(meta, lab, by) for lab in matrix.labels]
    same = np.array([groups[i] == groups[j] for i, j in zip(iu, ju)], dtype=bool)
    x, y = v[same], v[~same]
    out: dict[str, Any] = {
        "by": by,
        "level": matrix.level,
        "n_same": int(x.size),
        "n_cross": int(y.size),
        "median_same": float(np.median(x)) if x.size else float("nan"),
        "median_cross": float(np.median(y)) if y.size else float("nan"),
        "mean_same": float(x.mean()) if x.size else float("nan"),
        "mean_cross": float(y.mean()) if y.size else float("nan"),
    }
    if x.size == 0 or y.size == 0:
        out.update(U=float("nan"), p=float("nan"), rank_biserial=float("nan"))
        return out
    res = mannwhitneyu(x, y, alternative="two-sided")
    u = float(res.statistic)
    out.update(U=u, p=float(res.pvalue), rank_biserial=2.0 * u / (x.size * y.size) - 1.0)
    return out


def function_matrix(
    matrix: OverlapMatrix,
    functions: Mapping[str, Any],
    *,
    n_perm: int = 9999,
    seed: int = 0,
) -> dict[str, Any]:
    """Within-function vs cross-function mean overlap and the function × function means.

    Whether benchmarks of one function overlap more than benchmarks of different functions
    is tested by permuting the function labels among the benchmarks that have at least one
    finite pair (the pairs' values stay where they are): ``within_p`` is the one-sided
    permutation p-value ``(1 + #{d*_p ≥ d}) / (1 + n_perm)`` of ``d = within_mean −
    cross_mean``. Pairs of one level are not independent (each benchmark enters several),
    which is why the labels, not the pairs, are permuted.

    Parameters
    ----------
    matrix : OverlapMatrix
    functions : mapping benchmark -> function name, or benchmark -> {"function": ...}
    n_perm : int
        Label permutations (0: no test, ``within_p`` NaN).
    seed : int
        Seed of the permutations.

    Returns
    -------
    dict
        ``within_mean`` (mean over pairs of distinct benchmarks with the same function),
        ``cross_mean``, ``n_within``, ``n_cross``, ``within_p`` (NaN when either group is
        empty or ``n_perm = 0``), ``functions`` (sorted names),
        ``matrix`` ``(F, F)`` mean overlap of pairs with those functions (diagonal: pairs
        of distinct benchmarks within the function; NaN when there are none),
        ``counts`` ``(F, F)`` pairs behind each entry, and ``frame`` (polars, column
        ``function`` + one per function).

    Examples
    --------
    >>> from sigmap_lib.overlap import function_matrix, toy_overlap
    >>> m, _ = toy_overlap()
    >>> fm = function_matrix(
    ...     m, {"arc": "reasoning", "arc_easy": "reasoning", "gsm8k": "math", "math": "math"}
    ... )
    >>> fm["functions"], fm["matrix"].tolist(), fm["counts"].tolist()
    (['math', 'reasoning'], [[0.7, 0.2], [0.2, 0.8]], [[1, 4], [4, 1]])
    >>> fm["within_mean"], fm["cross_mean"], fm["n_within"], fm["n_cross"]
    (0.75, 0.2, 2, 4)
    >>> round(fm["within_p"], 2)  # 4 benchmarks: 3 distinct splits into two pairs, 1 as large
    0.33
    """
    import polars as pl

    iu, ju, v = _pairs(matrix)
    fn = [_meta_of(functions, lab, "function") for lab in matrix.labels]
    names = sorted(set(fn))
    pos = {f: k for k, f in enumerate(names)}
    fi = np.array([pos[fn[i]] for i in iu], dtype=np.int64)
    fj = np.array([pos[fn[j]] for j in ju], dtype=np.int64)
    nf = len(names)
    sums = np.zeros((nf, nf))
    counts = np.zeros((nf, nf), dtype=np.int64)
    np.add.at(sums, (fi, fj), v)
    np.add.at(counts, (fi, fj), 1)
    off = ~np.eye(nf, dtype=bool)
    sums = sums + np.where(off, sums.T, 0.0)
    counts = counts + np.where(off, counts.T, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mat = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    within = fi == fj
    frame = pl.DataFrame({"function": names, **{f: mat[:, k] for k, f in enumerate(names)}})
    code = np.array([pos[f] for f in fn], dtype=np.int64)
    return {
        "within_p": _within_p(iu, ju, v, code, n_perm, seed),
        "functions": names,
        "matrix": mat,
        "counts": counts,
        "frame": frame,
        "within_mean": float(v[within].mean()) if within.any() else float("nan"),
        "cross_mean": float(v[~within].mean()) if (~within).any() else float("nan"),
        "n_within": int(within.sum()),
        "n_cross": int((~within).sum()),
    }


def _within_p(
    iu: np.ndarray, ju: np.ndarray, v: np.ndarray, code: np.ndarray, n_perm: int, seed: int
) -> float:
    """One-sided label-permutation p-value of ``mean(within) − mean(cross)``."""
    within = code[iu] == code[ju]
    if n_perm <= 0 or within.all() or not within.any():
        return float("nan")
    used = np.unique(np.concatenate([iu, ju]))
    observed = v[within].mean() - v[~within].mean()
    rng = np.random.default_rng(seed)
    perm = np.tile(code, (n_perm, 1))
    perm[:, used] = rng.permuted(np.tile(code[used], (n_perm, 1)), axis=1)
    same = perm[:, iu] == perm[:, ju]  # (n_perm, pairs)
    n_same = same.sum(axis=1)
    ok = (n_same > 0) & (n_same < v.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (same @ v) / n_same - ((~same) @ v) / (v.size - n_same)
    exceed = int((d[ok] >= observed - 1e-12).sum()) + int((~ok).sum())
    return (1.0 + exceed) / (1.0 + n_perm)


def spread(matrix: OverlapMatrix, band: tuple[float, float] = (0.1, 0.4)) -> dict[str, float]:
    """Spread (discriminability) of the off-diagonal values of a level.

    Returns
    -------
    dict
        ``n``, ``mean``, ``sd`` (ddof=1), ``min``, ``q05``, ``q25``, ``median``, ``q75``,
        ``q95``, ``max``, ``iqr``, ``frac_in_band`` (fraction of values in the closed
        interval ``band``, default the paper's semantic band 0.1–0.4), ``frac_above_05``.

    Examples
    --------
    >>> from sigmap_lib.overlap import spread, toy_overlap
    >>> s = spread(toy_overlap()[0])  # over the 6 off-diagonal pairs
    >>> s["n"], round(s["median"], 3), round(s["iqr"], 3)
    (6, 0.25, 0.4)
    >>> round(s["frac_in_band"], 3), round(s["frac_above_05"], 3)
    (0.667, 0.333)
    """
    _, _, v = _pairs(matrix)
    if v.size == 0:
        keys = [
            "mean",
            "sd",
            "min",
            "q05",
            "q25",
            "median",
            "q75",
            "q95",
            "max",
            "iqr",
            "frac_in_band",
            "frac_above_05",
        ]
        return {"n": 0, **dict.fromkeys(keys, float("nan"))}
    q = np.quantile(v, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "sd": float(v.std(ddof=1)) if v.size > 1 else float("nan"),
        "min": float(v.min()),
        "q05": float(q[0]),
        "q25": float(q[1]),
        "median": float(q[2]),
        "q75": float(q[3]),
        "q95": float(q[4]),
        "max": float(v.max()),
        "iqr": float(q[3] - q[1]),
        "frac_in_band": float(((v >= band[0]) & (v <= band[1])).mean()),
        "frac_above_05": float((v > 0.5).mean()),
    }


@dataclass
class ClusterResult:
    """Hierarchical clustering of benchmarks.

    Attributes
    ----------
    labels : tuple of str
        Input order.
    order : list of str
        Leaf order of the dendrogram (use it to order heatmaps).
    linkage : np.ndarray
        ``(B − 1, 4)`` scipy linkage matrix (average linkage on ``1 − overlap``).
    """

    labels: tuple[str, ...]
    order: list[str]
    linkage: np.ndarray

    def clusters(self, k: int) -> dict[str, int]:
        """Flat assignment into at most ``k`` clusters (``fcluster`` maxclust)."""
        from scipy.cluster.hierarchy import fcluster

        ids = fcluster(self.linkage, t=k, criterion="maxclust")
        return {lab: int(c) for lab, c in zip(self.labels, ids)}


def cluster(matrix: OverlapMatrix, *, fill_nan: float | None = None) -> ClusterResult:
    """Average-linkage hierarchical clustering on the distance ``1 − overlap``.

    Parameters
    ----------
    matrix : OverlapMatrix
        Symmetric; negative overlaps give distances up to 2.
    fill_nan : float, optional
        Overlap to assume for NaN entries (e.g. 0.0); by default NaN raises.

    Returns
    -------
    ClusterResult
        Leaf ``order``, scipy ``linkage`` and flat :meth:`ClusterResult.clusters`.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import OverlapMatrix, cluster
    >>> m = OverlapMatrix(
    ...     ("arc", "gsm8k", "arc_easy", "math"),
    ...     np.array([[1, .2, .8, .1], [.2, 1, .3, .7], [.8, .3, 1, .2], [.1, .7, .2, 1]]),
    ... )
    >>> c = cluster(m)
    >>> c.order  # similar benchmarks end up next to each other
    ['arc', 'arc_easy', 'gsm8k', 'math']
    >>> c.clusters(2)
    {'arc': 1, 'gsm8k': 2, 'arc_easy': 1, 'math': 2}
    >>> c.linkage.shape
    (3, 4)
    """
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    vals = matrix.values.copy()
    b = len(matrix.labels)
    if b < 2:
        return ClusterResult(matrix.labels, list(matrix.labels), np.zeros((0, 4)))
    nan = ~np.isfinite(vals)
    np.fill_diagonal(nan, False)
    if nan.any():
        if fill_nan is None:
            bad = [
                (matrix.labels[i], matrix.labels[j]) for i, j in zip(*np.nonzero(np.triu(nan, 1)))
            ][:5]
            raise SigmapInputError(
                f"cluster: overlap matrix has NaN for pairs {bad} (pass fill_nan=...)"
            )
        vals[nan] = fill_nan
    if not np.allclose(vals, vals.T, equal_nan=True):
        raise SigmapInputError("cluster: overlap matrix is not symmetric")
    dist = np.clip(1.0 - vals, 0.0, None)
    np.fill_diagonal(dist, 0.0)
    cond = squareform(dist, checks=False)
    z = linkage(cond, method="average")
    if b > 2:
        z = optimal_leaf_ordering(z, cond)
    order = [matrix.labels[i] for i in leaves_list(z)]
    return ClusterResult(matrix.labels, order, z)


def agreement(matrix_a: OverlapMatrix, matrix_b: OverlapMatrix) -> dict[str, Any]:
    """Spearman correlation of two overlap matrices' off-diagonal values.

    Compares the benchmarks present in both (in ``matrix_a``'s order); pairs NaN in
    either are dropped.

    Returns
    -------
    dict
        ``rho``, ``p`` (scipy ``spearmanr``), ``n_pairs``, ``n_benchmarks``,
        ``mean_abs_diff``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import OverlapMatrix, agreement, toy_overlap
    >>> main, _ = toy_overlap()
    >>> variant = OverlapMatrix(
    ...     main.labels,
    ...     np.array([[1, .6, .1, .2], [.6, 1, .2, .1], [.1, .2, 1, .5], [.2, .1, .5, 1]]),
    ... )
    >>> a = agreement(main, variant)
    >>> round(a["rho"], 3), a["n_pairs"], a["n_benchmarks"], round(a["mean_abs_diff"], 3)
    (0.746, 6, 4, 0.133)
    """
    from scipy.stats import spearmanr

    common = [x for x in matrix_a.labels if x in set(matrix_b.labels)]
    if len(common) < 3:
        raise SigmapInputError(
            f"agreement: the matrices share {len(common)} benchmarks; need >= 3 for a correlation of pairs"
        )
    a = matrix_a.subset(common).off_diagonal()
    b = matrix_b.subset(common).off_diagonal()
    ok = np.isfinite(a) & np.isfinite(b)
    out: dict[str, Any] = {"n_pairs": int(ok.sum()), "n_benchmarks": len(common)}
    if ok.sum() < 3:
        out.update(rho=float("nan"), p=float("nan"), mean_abs_diff=float("nan"))
        return out
    res = spearmanr(a[ok], b[ok])
    out.update(
        rho=float(res.statistic),
        p=float(res.pvalue),
        mean_abs_diff=float(np.abs(a[ok] - b[ok]).mean()),
    )
    return out


def unit_contexts(
    corpus: Any, signatures: Mapping[str, Any], n_left: int = 20
) -> dict[str, list[str]]:
    """Each non-empty signature's units as text in their left context, one string per
    unit (the input of :func:`signature_content_alignment`).

    Parameters
    ----------
    corpus : CorpusStore or ShardedCorpus
        Anything with ``context(unit, n_left) -> (left, text)``.
    signatures : mapping benchmark -> array of int
        Signature unit indices (global unit numbers of ``corpus``).
    n_left : int
        Units of left context.

    Returns
    -------
    dict
        Benchmark -> ``left + text`` per unit; benchmarks with an empty signature are
        left out.

    Examples
    --------
    >>> from sigmap_lib.inputs import Document, build_corpus_store
    >>> from sigmap_lib.overlap import unit_contexts
    >>> corpus = build_corpus_store([Document("d", "d", "the cat sat on the mat")], "corpus")
    >>> unit_contexts(corpus, {"a": [2], "b": []}, n_left=2)
    {'a': ['the cat sat']}
    """
    return {
        k: ["".join(corpus.context(int(u), n_left=n_left)) for u in units]
        for k, units in signatures.items()
        if len(units)
    }


def signature_content_alignment(
    unit_contexts: Mapping[str, Sequence[str]],
    questions: Mapping[str, Sequence[str]],
    encoder: Any = None,
    *,
    functions: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> dict[str, Any]:
    """Cosine between a signature's units in context and its benchmark's questions.

    For each benchmark: ``cos(f(units), f(questions))`` where ``f`` = unit-normalized mean
    of the unit-normalized embeddings (as in semantic overlap) of, respectively, the
    signature units shown in their left context (one string per unit, e.g. the unit with
    the preceding ~200 bytes) and the benchmark's questions.

    Parameters
    ----------
    unit_contexts : mapping benchmark -> list of str
    questions : mapping benchmark -> list of str
    encoder : object, optional
        Sentence encoder (default: all-MiniLM-L6-v2, offline).
    functions : mapping benchmark -> function (or {"function": ...}), optional
        When given, the per-function mean/min/max of the cosines is added.
    cache_dir : str, optional
        Embedding cache (see :func:`sigmap_lib.overlap.embed_texts`).
    batch_size : int
        Texts per encoder forward pass (see :func:`sigmap_lib.overlap.embed_texts`).

    Returns
    -------
    dict
        ``per_benchmark`` (polars: ``benchmark``, ``cosine``, ``n_units``,
        ``n_questions``, ``function`` when known) and ``per_function`` (polars:
        ``function``, ``mean_cosine``, ``min_cosine``, ``max_cosine``, ``n_benchmarks``;
        None without ``functions``).

    Examples
    --------
    With the default encoder (all-MiniLM-L6-v2, loaded offline):

    >>> import polars as pl
    >>> from sigmap_lib.overlap import signature_content_alignment
    >>> units = {
    ...     "gsm8k": [" apples, so 3 + 4 = 7", "she has 12 - 5 = 7 left"],
    ...     "hamlet": ["Act I, Scene 2. Enter Hamlet"],
    ... }
    >>> questions = {
    ...     "gsm8k": ["Tom has 3 apples and buys 4. How many?", "What is 12 minus 5?"],
    ...     "hamlet": ["Who wrote Hamlet?"],
    ... }
    >>> r = signature_content_alignment(
    ...     units, questions, functions={"gsm8k": "math", "hamlet": "literature"}
    ... )
    >>> r["per_benchmark"].select("benchmark", pl.col("cosine").round(2), "n_units").rows()
    [('gsm8k', 0.72, 2), ('hamlet', 0.64, 1)]
    >>> r["per_function"]["function"].to_list()
    ['literature', 'math']
    """
    import polars as pl

    from sigmap_lib.overlap._embed import embed_texts, load_encoder, mean_embedding

    common = [b for b in unit_contexts if b in questions]
    if not common:
        raise SigmapInputError(
            "signature_content_alignment: no benchmark has both unit contexts and questions"
        )
    for b in common:
        if len(unit_contexts[b]) == 0 or len(questions[b]) == 0:
            raise SigmapInputError(
                f"signature_content_alignment: benchmark {b!r} has no units or no questions"
            )
    if encoder is None:
        encoder = load_encoder()
    texts: list[str] = []
    spans: dict[str, tuple[int, int, int]] = {}
    for b in common:
        s = len(texts)
        texts.extend(str(t) for t in unit_contexts[b])
        mid = len(texts)
        texts.extend(str(t) for t in questions[b])
        spans[b] = (s, mid, len(texts))
    vec = embed_texts(texts, encoder=encoder, cache_dir=cache_dir, batch_size=batch_size)
    rows = []
    for b in common:
        s, mid, e = spans[b]
        cos = float(mean_embedding(vec[s:mid]) @ mean_embedding(vec[mid:e]))
        row = {"benchmark": b, "cosine": cos, "n_units": mid - s, "n_questions": e - mid}
        if functions is not None:
            row["function"] = _meta_of(functions, b, "function")
        rows.append(row)
    per_b = pl.DataFrame(rows)
    per_f = None
    if functions is not None:
        per_f = (
            per_b.group_by("function")
            .agg(
                pl.col("cosine").mean().alias("mean_cosine"),
                pl.col("cosine").min().alias("min_cosine"),
                pl.col("cosine").max().alias("max_cosine"),
                pl.len().alias("n_benchmarks"),
            )
            .sort("function")
        )
    return {"per_benchmark": per_b, "per_function": per_f}

"""Semantic-level overlap: size-matched bootstrap of question-embedding cosines (METHODS §4)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from sigmap_lib._util._threads import single_blas_thread
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap._matrix import OverlapMatrix


# ---------------------------------------------------------------------------------------
# Semantic overlap
# ---------------------------------------------------------------------------------------
def sample_questions(
    questions: Mapping[str, list[str]], max_questions: int, *, seed: int = 0
) -> dict[str, list[str]]:
    """At most ``max_questions`` of each benchmark's questions: a seeded sample without
    replacement, in the benchmark's order (all of them when it has no more).

    Embedding dominates the semantic level's cost (all-MiniLM-L6-v2 encodes ~40 short
    questions a second per CPU core); the level compares mean embeddings, which a sample
    of a few dozen questions estimates well. Each benchmark's sample depends only on
    ``(seed, benchmark)``, not on the other benchmarks.

    Parameters
    ----------
    questions : mapping of str to list of str
        Benchmark -> its question texts.
    max_questions : int
        The cap (>= 1).
    seed : int
        Seeds the draws.

    Returns
    -------
    dict[str, list[str]]
        Benchmark -> ``min(len, max_questions)`` of its questions.

    Examples
    --------
    >>> from sigmap_lib.overlap import sample_questions
    >>> qs = {"arc": [f"q{i}" for i in range(10)], "gsm8k": ["a", "b"]}
    >>> sample_questions(qs, 3, seed=0)
    {'arc': ['q0', 'q1', 'q5'], 'gsm8k': ['a', 'b']}
    """
    if max_questions < 1:
        raise SigmapInputError(f"sample_questions: max_questions must be >= 1, got {max_questions}")
    out: dict[str, list[str]] = {}
    for label, texts in questions.items():
        texts = list(texts)
        if len(texts) <= max_questions:
            out[label] = texts
            continue
        pick = _label_rng(seed, label, 1).choice(len(texts), size=max_questions, replace=False)
        out[label] = [texts[i] for i in np.sort(pick)]
    return out


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

    Examples
    --------
    Two benchmarks of questions about one topic and one about another (precomputed
    embeddings; :func:`sigmap_lib.overlap.embed_texts` makes real ones):

    >>> import numpy as np
    >>> from sigmap_lib.overlap import semantic_overlap
    >>> rng = np.random.default_rng(0)
    >>> topic = 2 * rng.normal(size=(2, 16))
    >>> emb = {
    ...     "algebra": topic[0] + rng.normal(size=(20, 16)),
    ...     "geometry": topic[0] + rng.normal(size=(12, 16)),
    ...     "law": topic[1] + rng.normal(size=(15, 16)),
    ... }
    >>> m = semantic_overlap(emb, T=200)
    >>> np.round(m.values, 2).tolist()
    [[1.0, 0.98, 0.2], [0.98, 1.0, 0.24], [0.2, 0.24, 1.0]]
    >>> m.n_common.tolist()  # questions per draw: the smaller benchmark's size
    [[20, 12, 15], [12, 12, 12], [15, 12, 15]]
    >>> np.round(m.extra["self_similarity"], 2).tolist()
    [0.97, 0.95, 0.93]
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
        with single_blas_thread():  # many small GEMMs: BLAS threading only adds overhead
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

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
from sigmap_lib.overlap import OverlapMatrix

__all__ = [
    "ClusterResult",
    "agreement",
    "cluster",
    "function_matrix",
    "group_test",
    "signature_content_alignment",
    "spread",
]


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


def function_matrix(matrix: OverlapMatrix, functions: Mapping[str, Any]) -> dict[str, Any]:
    """Within-function vs cross-function mean overlap and the function × function means.

    Parameters
    ----------
    matrix : OverlapMatrix
    functions : mapping benchmark -> function name, or benchmark -> {"function": ...}

    Returns
    -------
    dict
        ``within_mean`` (mean over pairs of distinct benchmarks with the same function),
        ``cross_mean``, ``n_within``, ``n_cross``, ``functions`` (sorted names),
        ``matrix`` ``(F, F)`` mean overlap of pairs with those functions (diagonal: pairs
        of distinct benchmarks within the function; NaN when there are none),
        ``counts`` ``(F, F)`` pairs behind each entry, and ``frame`` (polars, column
        ``function`` + one per function).
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
    return {
        "functions": names,
        "matrix": mat,
        "counts": counts,
        "frame": frame,
        "within_mean": float(v[within].mean()) if within.any() else float("nan"),
        "cross_mean": float(v[~within].mean()) if (~within).any() else float("nan"),
        "n_within": int(within.sum()),
        "n_cross": int((~within).sum()),
    }


def spread(matrix: OverlapMatrix, band: tuple[float, float] = (0.1, 0.4)) -> dict[str, float]:
    """Spread (discriminability) of the off-diagonal values of a level.

    Returns
    -------
    dict
        ``n``, ``mean``, ``sd`` (ddof=1), ``min``, ``q05``, ``q25``, ``median``, ``q75``,
        ``q95``, ``max``, ``iqr``, ``frac_in_band`` (fraction of values in the closed
        interval ``band``, default the paper's semantic band 0.1–0.4), ``frac_above_05``.
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


def signature_content_alignment(
    unit_contexts: Mapping[str, Sequence[str]],
    questions: Mapping[str, Sequence[str]],
    encoder: Any = None,
    *,
    functions: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    batch_size: int = 64,
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
        Embedding cache (see :func:`sigmap_lib.embed.embed_texts`).

    Returns
    -------
    dict
        ``per_benchmark`` (polars: ``benchmark``, ``cosine``, ``n_units``,
        ``n_questions``, ``function`` when known) and ``per_function`` (polars:
        ``function``, ``mean_cosine``, ``min_cosine``, ``max_cosine``, ``n_benchmarks``;
        None without ``functions``).
    """
    import polars as pl

    from sigmap_lib.embed import embed_texts, load_encoder, mean_embedding

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


# ---------------------------------------------------------------------------------------
# Real public data (../shared/data): the paper's two descriptive claims
# ---------------------------------------------------------------------------------------
_METABENCH = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")


def metabench_question_texts(items_dir: str | Any) -> dict[str, list[str]]:
    """Question texts of the 12 metabench item sets (main ``<bm>`` and ``<bm>-secondary``).

    ARC: ``question`` + the choice texts; GSM8K: ``question``; HellaSwag: ``ctx``; MMLU:
    ``question`` (+ choices when present); TruthfulQA: ``question``; WinoGrande:
    ``sentence``. Choices are joined with " | " after the question.
    """
    from pathlib import Path

    import polars as pl

    items_dir = Path(items_dir)
    out: dict[str, list[str]] = {}
    for bm in _METABENCH:
        for suffix in ("", "-secondary"):
            f = items_dir / f"{bm}{suffix}.parquet"
            if not f.exists():
                raise SigmapInputError(f"metabench items file {f} is missing")
            d = pl.read_parquet(f)
            field = {"hellaswag": "ctx", "winogrande": "sentence"}.get(bm, "question")
            if field not in d.columns:
                raise SigmapInputError(f"{f}: no column {field!r} (have {d.columns[:10]}...)")
            q = [str(x) for x in d[field].to_list()]
            if bm == "arc":
                ch = d["choices"].to_list()
                q = [f"{t} | " + " | ".join(c["text"]) for t, c in zip(q, ch)]
            elif bm == "mmlu" and "choices" in d.columns:
                q = [f"{t} | " + " | ".join(c) for t, c in zip(q, d["choices"].to_list())]
            out[f"{bm}{suffix or '-main'}"] = q
    return out


def real_data_overlap_summary(
    shared_data_dir: str | Any,
    *,
    encoder: Any = None,
    cache_dir: str | None = None,
    T: int = 1000,
    seed: int = 0,
    min_common: int = 10,
) -> dict[str, Any]:
    """Semantic and performance overlap on the real public data, and the paper's claims.

    - Performance overlap (:func:`sigmap_lib.overlap.performance_overlap`) over the Open
      LLM Leaderboard v1 (6 benchmarks, ~7k models), v2 (6 benchmarks, ~4.6k models) and
      ObsScaling base models (22 metrics, 148 models; pairwise-complete,
      ``min_common`` models).
    - Semantic overlap (:func:`sigmap_lib.overlap.semantic_overlap`, all-MiniLM-L6-v2)
      over the 12 metabench question sets (6 benchmarks × main/secondary).

    Claims checked on the off-diagonal values: "semantic overlaps stay in 0.1–0.4"
    (pairs of *different* benchmarks; main vs secondary of one benchmark reported
    apart) and "performance overlaps are uniformly high".

    Returns
    -------
    dict (JSON-serializable)
        ``semantic`` (labels, matrix, spread of cross-benchmark pairs, same-benchmark
        main/secondary values, self-similarity), ``performance`` (per source: labels,
        matrix, n_common, spread), ``claims`` (numbers and booleans).
    """
    from pathlib import Path

    import polars as pl

    from sigmap_lib.embed import embed_texts
    from sigmap_lib.overlap import OverlapMatrix, performance_overlap, semantic_overlap

    root = Path(shared_data_dir)
    lb = root / "leaderboard"

    def _mat(m: OverlapMatrix) -> list[list[float | None]]:
        return [
            [None if not np.isfinite(x) else round(float(x), 4) for x in row] for row in m.values
        ]

    perf: dict[str, Any] = {}
    sources = {
        "open_llm_leaderboard_v1": (
            lb / "open_llm_leaderboard_v1.csv",
            "name",
            ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"],
        ),
        "open_llm_leaderboard_v2": (
            lb / "open_llm_leaderboard_v2.csv",
            "model",
            ["ifeval", "bbh", "math_lvl5", "gpqa", "musr", "mmlu_pro"],
        ),
        "obscaling_base": (lb / "obscaling_base_llm_merged.csv", "Model", None),
    }
    for name, (path, model_col, cols) in sources.items():
        if not path.exists():
            raise SigmapInputError(f"real data file {path} is missing")
        d = pl.read_csv(path, infer_schema_length=100_000, null_values=["", "NA", "nan"])
        if cols is None:
            meta_cols = {
                "Model",
                "Model Family",
                "Model Size (B)",
                "Pretraining Data Size (T)",
                "FLOPs (1E21)",
            }
            cols = [c for c in d.columns if c not in meta_cols]
        m = performance_overlap(
            d.select([model_col, *cols]), model_column=model_col, min_common=min_common
        )
        perf[name] = {
            "labels": list(m.labels),
            "n_models": int(d.height),
            "matrix": _mat(m),
            "n_common_min": int(m.n_common[np.triu_indices(len(m), 1)].min()),
            "spread": spread(m),
        }

    texts = metabench_question_texts(root / "metabench_items")
    flat = [t for v in texts.values() for t in v]
    vec = embed_texts(flat, encoder=encoder, cache_dir=cache_dir)
    emb, s = {}, 0
    for k, v in texts.items():
        emb[k] = vec[s : s + len(v)]
        s += len(v)
    sem = semantic_overlap(emb, T=T, seed=seed)
    base = [lab.rsplit("-", 1)[0] for lab in sem.labels]
    iu, ju = np.triu_indices(len(sem), 1)
    same_bm = np.array([base[i] == base[j] for i, j in zip(iu, ju)])
    off = sem.values[iu, ju]
    cross = off[~same_bm]
    cross_m = OverlapMatrix(
        labels=sem.labels,
        values=np.where(
            np.equal.outer(np.array(base), np.array(base)) & ~np.eye(len(sem), dtype=bool),
            np.nan,
            sem.values,
        ),
    )
    semantic = {
        "labels": list(sem.labels),
        "n_questions": {k: len(v) for k, v in texts.items()},
        "matrix": _mat(sem),
        "sd": [[round(float(x), 4) for x in row] for row in sem.extra["sd"]],
        "self_similarity": {
            k: round(float(v), 4) for k, v in zip(sem.labels, sem.extra["self_similarity"])
        },
        "same_benchmark_main_vs_secondary": {
            base[i]: round(float(sem.values[i, j]), 4) for i, j, sb in zip(iu, ju, same_bm) if sb
        },
        "spread_cross_benchmark": spread(cross_m),
        "T": T,
        "seed": seed,
    }
    all_perf = np.concatenate(
        [
            np.array(
                [
                    x
                    for row_i, row in enumerate(p["matrix"])
                    for col_i, x in enumerate(row)
                    if col_i > row_i and x is not None
                ],
                dtype=float,
            )
            for p in perf.values()
        ]
    )
    claims = {
        "semantic_in_0.1_0.4": {
            "holds": bool(((cross >= 0.1) & (cross <= 0.4)).all()),
            "frac_cross_pairs_in_band": float(((cross >= 0.1) & (cross <= 0.4)).mean()),
            "min": float(cross.min()),
            "median": float(np.median(cross)),
            "max": float(cross.max()),
            "n_pairs": int(cross.size),
        },
        "performance_uniformly_high": {
            source: {
                "min": p["spread"]["min"],
                "median": p["spread"]["median"],
                "max": p["spread"]["max"],
                "iqr": p["spread"]["iqr"],
                "frac_above_0.5": p["spread"]["frac_above_05"],
                "holds_all_above_0.5": bool(p["spread"]["min"] > 0.5),
            }
            for source, p in perf.items()
        },
        "performance_all_sources": {
            "min": float(all_perf.min()),
            "median": float(np.median(all_perf)),
            "frac_above_0.5": float((all_perf > 0.5).mean()),
            "n_pairs": int(all_perf.size),
        },
        "semantic_median_below_performance_median": bool(np.median(cross) < np.median(all_perf)),
    }
    return {"semantic": semantic, "performance": perf, "claims": claims}

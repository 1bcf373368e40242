"""Real-data overlap analyses of ``../shared/data`` (metabench questions, leaderboards)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap import OverlapMatrix, spread

# ---------------------------------------------------------------------------------------
# Real public data (../shared/data): the paper's two descriptive claims
# ---------------------------------------------------------------------------------------
_METABENCH = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")


def _metabench_texts(items_dir: Path) -> dict[str, list[str]]:
    """Question texts of the 12 metabench item sets (``<bm>-main`` and ``<bm>-secondary``),
    as :func:`sigmap_lib.inputs.metabench_questions` renders them (question plus ``A. …``
    option lines, the prompt format lm-eval uses)."""
    from sigmap_lib.inputs import metabench_questions

    out: dict[str, list[str]] = {}
    for bm in _METABENCH:
        for suffix in ("", "-secondary"):
            f = items_dir / f"{bm}{suffix}.parquet"
            if not f.exists():
                raise SigmapInputError(f"metabench items file {f} is missing")
            out[f"{bm}{suffix or '-main'}"] = metabench_questions(f, benchmark=bm)["text"].to_list()
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
        n_models, matrix, n_common_min, spread), ``claims`` (numbers and booleans).

    Examples
    --------
    >>> import numpy as np
    >>> import polars as pl
    >>> from pathlib import Path
    >>> from sigmap_lib.studies import real_data_overlap_summary
    >>> # the smallest shared/data layout: 12 metabench question files and 3 leaderboards
    >>> items, boards = Path("data/metabench_items"), Path("data/leaderboard")
    >>> items.mkdir(parents=True)
    >>> boards.mkdir()
    >>> for bm in ["arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande"]:
    ...     for name in (bm, f"{bm}-secondary"):
    ...         q = [f"A {bm} question, number {i}?" for i in range(4)]
    ...         pl.DataFrame({  # every file gets the question columns of all six
    ...             "metabench_idx": range(4), "mb_sub_idx": range(4), "question": q, "ctx": q,
    ...             "sentence": q, "choices": [["yes", "no"]] * 4, "endings": [["yes", "no"]] * 4,
    ...         }).write_parquet(items / f"{name}.parquet")
    >>> rng = np.random.default_rng(0)
    >>> models, g = [f"m{i}" for i in range(12)], rng.normal(size=12)  # one general ability
    >>> v1 = ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"]
    >>> v2 = ["ifeval", "bbh", "math_lvl5", "gpqa", "musr", "mmlu_pro"]
    >>> for file, id_col, cols in [("open_llm_leaderboard_v1", "name", v1),
    ...                            ("open_llm_leaderboard_v2", "model", v2),
    ...                            ("obscaling_base_llm_merged", "Model", ["mmlu", "bbh"])]:
    ...     scores = {c: g + 0.5 * rng.normal(size=12) for c in cols}
    ...     pl.DataFrame({id_col: models, **scores}).write_csv(boards / f"{file}.csv")
    >>> out = real_data_overlap_summary("data", T=20)  # default encoder: all-MiniLM-L6-v2
    >>> list(out["performance"])
    ['open_llm_leaderboard_v1', 'open_llm_leaderboard_v2', 'obscaling_base']
    >>> len(out["semantic"]["labels"]), out["semantic"]["labels"][:2]
    (12, ['arc-main', 'arc-secondary'])
    >>> perf = out["claims"]["performance_all_sources"]
    >>> perf["n_pairs"], round(perf["frac_above_0.5"], 3)  # 15 + 15 + 1 pairs of benchmarks
    (31, 0.903)
    >>> out["claims"]["semantic_in_0.1_0.4"]["n_pairs"]  # pairs of different benchmarks
    60
    """

    import polars as pl

    from sigmap_lib.overlap import OverlapMatrix, embed_texts, performance_overlap, semantic_overlap

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

    texts = _metabench_texts(Path(root) / "metabench_items")
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

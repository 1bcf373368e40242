"""Validation of scoring new models with metabench's published fits (real data).

Real LLMs' answers to the published items (``shared/data/item_responses``) are scored as if
they came from lm-eval logs of new models: LLMs held out of the reconstruction's training
set get θ from their answers with R's refit parameters, a reconstructed full score and a
90 % interval, which are compared with R's stored θ and with their true full scores.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError


def published_scoring_validation(
    shared_data: str | Path,
    version: str = "B",
    *,
    holdout: float = 0.2,
    level: float = 0.9,
    seed: int = 0,
) -> dict[str, Any]:
    """Score held-out real LLMs with the published fits of ``version``; measure θ, RMSE,
    interval width and coverage.

    Parameters
    ----------
    shared_data : path
        A folder in the layout of ``shared/data`` (``metabench_irt``, ``item_responses``).
    version : {"A", "B"}
    holdout : float
        Share of the LLMs present in every fit's training answers held out of the GAMs.
    level : float
        Interval coverage asked for.
    seed : int

    Returns
    -------
    dict
        ``fits``: per benchmark ``n_heldout``, ``theta_spearman`` (ours vs R's stored θ),
        ``theta_max_abs_diff``, ``rmse`` (reconstruction vs true full score), ``coverage``
        and ``mean_width`` of the intervals; ``grand`` (the same for the mean over the
        benchmarks); ``seconds_per_model``.

    Examples
    --------
    >>> from sigmap_lib.studies import published_scoring_validation, write_example_data
    >>> _ = write_example_data("data")
    >>> out = published_scoring_validation("data", "B")
    >>> f = out["fits"]["arc"]
    >>> f["n_heldout"], round(f["theta_spearman"], 3), 0.7 < f["coverage"] <= 1.0
    (60, 1.0, True)
    """
    import pandas as pd
    from scipy.stats import spearmanr

    from sigmap_lib.metabench import VERSIONS, MetabenchScorer

    root = Path(shared_data)
    irt = root / "metabench_irt"
    word = VERSIONS.get(version)
    if word is None:
        raise SigmapInputError(f"metabench version must be 'A' or 'B', got {version!r}")
    probe = MetabenchScorer.from_published(irt, version)
    answers_by_bm, thetas_by_bm = {}, {}
    for bm, stem in zip(probe.benchmarks, probe.source["fits"]):
        x = pd.read_parquet(root / "item_responses" / f"metabench_{bm}_{word}_train.parquet")
        answers_by_bm[bm] = x.set_index("model")
        th = pd.read_parquet(irt / f"{stem}_thetas.parquet")
        thetas_by_bm[bm] = th[th["split"] == "train"].set_index("llm")
    common = set.intersection(
        *(
            set(answers_by_bm[bm].index) & set(thetas_by_bm[bm]["score_full"].dropna().index)
            for bm in probe.benchmarks
        )
    )
    rng = np.random.default_rng(seed)
    pool = np.array(sorted(common))
    held = sorted(rng.choice(pool, size=max(1, round(holdout * pool.size)), replace=False))
    scorer = MetabenchScorer.from_published(irt, version, exclude=held)
    answers = {
        m: {
            bm: answers_by_bm[bm].loc[m, scorer.items[bm]].astype(int).to_dict()
            for bm in scorer.benchmarks
        }
        for m in held
    }
    t0 = time.perf_counter()
    results = scorer.score(answers, level=level)
    seconds = time.perf_counter() - t0
    fits: dict[str, Any] = {}
    for bm in scorer.benchmarks:
        got = pd.DataFrame(
            {
                r["model"]: {
                    "theta": r["benchmarks"][bm]["theta"],
                    "score": r["benchmarks"][bm]["score"],
                    "lo": r["benchmarks"][bm]["score_interval"][0],
                    "hi": r["benchmarks"][bm]["score_interval"][1],
                }
                for r in results
            }
        ).T
        ref = thetas_by_bm[bm].loc[got.index]
        truth = ref["score_full"].to_numpy(float)
        fits[bm] = {
            "fit": scorer.source["fits"][list(scorer.benchmarks).index(bm)],
            "theta_method": scorer.benchmarks[bm].theta_method,
            "n_heldout": len(got),
            "theta_spearman": float(spearmanr(got["theta"], ref["theta"]).statistic),
            "theta_max_abs_diff": float(
                np.max(np.abs(got["theta"].to_numpy(float) - ref["theta"].to_numpy(float)))
            ),
            "rmse": float(np.sqrt(np.mean((got["score"].to_numpy(float) - truth) ** 2))),
            "coverage": float(
                np.mean((got["lo"].to_numpy(float) <= truth) & (truth <= got["hi"].to_numpy(float)))
            ),
            "mean_width": float(np.mean(got["hi"].to_numpy(float) - got["lo"].to_numpy(float))),
        }
    g = np.array([r["grand"]["score"] for r in results], dtype=float)
    glo = np.array([r["grand"]["score_interval"][0] for r in results], dtype=float)
    ghi = np.array([r["grand"]["score_interval"][1] for r in results], dtype=float)
    gtrue = np.array(
        [
            np.mean([thetas_by_bm[bm].loc[r["model"], "score_full"] for bm in scorer.benchmarks])
            for r in results
        ]
    )
    return {
        "version": version,
        "level": level,
        "benchmarks": list(scorer.benchmarks),
        "missing": scorer.source["missing"],
        "fits": fits,
        "grand": {
            "rmse": float(np.sqrt(np.mean((g - gtrue) ** 2))),
            "coverage": float(np.mean((glo <= gtrue) & (gtrue <= ghi))),
            "mean_width": float(np.mean(ghi - glo)),
        },
        "n_models": len(results),
        "seconds_per_model": seconds / max(1, len(results)),
    }

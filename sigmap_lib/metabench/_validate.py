"""How well the published fits' intervals cover real LLMs that answered only part of the
items: the measurement behind :data:`~sigmap_lib.metabench.MIN_ANSWERED_SHARE` and the
partial-answer table of docs/METABENCH_VALIDATION.md §5 (``sigmap metabench validate``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError


def partial_answer_coverage(
    shared_data: str | Path,
    version: str = "B",
    *,
    shares: Sequence[float] = (0.25, 0.5, 1.0),
    holdout: float = 0.2,
    level: float = 0.9,
    seed: int = 0,
    bounded: bool = True,
) -> dict[str, Any]:
    """Score held-out real LLMs from a random share of each benchmark's items; measure the
    coverage of the prediction intervals.

    The LLMs present in every fit's training answers (``item_responses``) with a full
    score are split as :func:`sigmap_lib.studies.published_scoring_validation` splits
    them (``holdout`` of them, ``numpy.random.default_rng(seed)``) and left out of the
    reconstruction. For each share, every held-out LLM answers its own random
    ``ceil(share × items)`` items of each benchmark (seed ``seed + 1``); the rest are
    unanswered, exactly as a partial lm-eval run scores.

    Parameters
    ----------
    shared_data : path
        A folder in the layout of ``shared/data`` (``metabench_irt``, ``item_responses``).
    version : {"A", "B"}
    shares : sequence of float
        Shares of each benchmark's items answered, in (0, 1].
    holdout, level, seed
        Share of LLMs held out, interval coverage asked for, random seed.
    bounded : bool
        False: score without the score-range bounds (to count the intervals that leave
        the range).

    Returns
    -------
    dict
        ``shares``: per share (key ``"0.25"`` etc.) ``fits``: per benchmark ``coverage``,
        ``coverage_weakest_fifth`` (the fifth of held-out LLMs with the lowest true score),
        ``mean_width``, ``below_range`` / ``above_range`` (intervals reaching outside 0–100)
        and ``items_answered``; ``grand``: the same for the grand score. Also
        ``n_models`` and ``seconds``.

    Examples
    --------
    >>> from sigmap_lib.metabench import partial_answer_coverage
    >>> from sigmap_lib.studies import write_example_data
    >>> out = partial_answer_coverage(write_example_data("data"), "B", shares=(0.5, 1.0))
    >>> f = out["shares"]["0.5"]["fits"]["arc"]
    >>> f["items_answered"], 0.5 < f["coverage"] <= 1.0, out["n_models"]
    (4, True, 60)
    """
    import time

    import pandas as pd

    from sigmap_lib.metabench._scorer import MetabenchScorer
    from sigmap_lib.metabench._tasks import VERSIONS

    if version not in VERSIONS:
        raise SigmapInputError(f"metabench version must be 'A' or 'B', got {version!r}")
    bad = [s for s in shares if not 0 < float(s) <= 1]
    if bad:
        raise SigmapInputError(f"answered shares must be in (0, 1], got {bad}")
    t0 = time.perf_counter()
    root = Path(shared_data)
    irt, word = root / "metabench_irt", VERSIONS[version]
    probe = MetabenchScorer.from_published(irt, version)
    answers_by_bm, truth_by_bm = {}, {}
    for bm, stem in zip(probe.benchmarks, probe.source["fits"]):
        path = root / "item_responses" / f"metabench_{bm}_{word}_train.parquet"
        if not path.exists():
            raise SigmapInputError(f"{path} is missing: not a shared/data folder")
        answers_by_bm[bm] = pd.read_parquet(path).set_index("model")
        th = pd.read_parquet(irt / f"{stem}_thetas.parquet")
        truth_by_bm[bm] = th[th["split"] == "train"].set_index("llm")["score_full"].dropna()
    common = set.intersection(
        *(set(answers_by_bm[bm].index) & set(truth_by_bm[bm].index) for bm in probe.benchmarks)
    )
    pool = np.array(sorted(common))
    held = sorted(
        np.random.default_rng(seed).choice(
            pool, size=max(1, round(holdout * pool.size)), replace=False
        )
    )
    scorer = MetabenchScorer.from_published(irt, version, exclude=held)
    if not bounded:
        for s in scorer.benchmarks.values():
            s.score_range = None
    full = {
        m: {
            bm: answers_by_bm[bm].loc[m, scorer.items[bm]].astype(int).to_dict()
            for bm in scorer.benchmarks
        }
        for m in held
    }
    truth = pd.DataFrame({bm: truth_by_bm[bm].loc[held] for bm in scorer.benchmarks})
    weak = {bm: truth[bm] <= truth[bm].quantile(0.2) for bm in truth}
    gtruth = truth.mean(axis=1)
    gweak = gtruth <= gtruth.quantile(0.2)
    out: dict[str, Any] = {}
    for share in shares:
        rng = np.random.default_rng(seed + 1)
        answers = {}
        for m in held:
            answers[m] = {}
            for bm, a in full[m].items():
                items = list(a)
                k = max(1, math.ceil(float(share) * len(items)))
                keep = rng.choice(len(items), size=k, replace=False)
                answers[m][bm] = {items[i]: a[items[i]] for i in sorted(keep)}
        results = {r["model"]: r for r in scorer.score(answers, level=level)}

        def summary(lo: Any, hi: Any, true: Any, weakest: Any) -> dict[str, float]:
            lo, hi, true = (np.asarray(v, dtype=float) for v in (lo, hi, true))
            inside = (lo <= true) & (true <= hi)
            return {
                "coverage": float(np.mean(inside)),
                "coverage_weakest_fifth": float(np.mean(inside[np.asarray(weakest)])),
                "mean_width": float(np.mean(hi - lo)),
                "below_range": int(np.sum(lo < 0)),
                "above_range": int(np.sum(hi > 100)),
            }

        fits = {}
        for bm in scorer.benchmarks:
            iv = np.array([results[m]["benchmarks"][bm]["score_interval"] for m in held])
            fits[bm] = summary(iv[:, 0], iv[:, 1], truth[bm], weak[bm]) | {
                "items_answered": results[held[0]]["benchmarks"][bm]["items"],
                "items_total": results[held[0]]["benchmarks"][bm]["items_total"],
            }
        giv = np.array([results[m]["grand"]["score_interval"] for m in held])
        out[f"{float(share):g}"] = {
            "fits": fits,
            "grand": summary(giv[:, 0], giv[:, 1], gtruth, gweak),
        }
    return {
        "version": version,
        "level": level,
        "bounded": bounded,
        "benchmarks": list(scorer.benchmarks),
        "n_models": len(held),
        "shares": out,
        "seconds": round(time.perf_counter() - t0, 1),
    }

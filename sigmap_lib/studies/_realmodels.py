"""Signatures of 89 real LLMs (``shared/data/realmodels``, perplexity-correlations' documents
and benchmarks): what each method claims, with and without the real families as strata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.inputs import read_perplexity_correlations
from sigmap_lib.signatures import extract_signatures


def real_model_signatures(
    data: str | Path, *, n_permutations: int = 999, seed: int = 0
) -> dict[str, Any]:
    """Per benchmark, the documents each signature method claims on the 89 real models.

    Scores are made higher-is-better (``1 − error``, ``−log perplexity``); the methods are
    the calibrated default, the default with the real families as ``strata``, the paper's
    AIC and the authors' Lasso.

    Parameters
    ----------
    data : path
        ``shared/data`` (its ``realmodels`` folder is read).
    n_permutations : int
        ``P`` of the calibrated tests.
    seed : int

    Returns
    -------
    dict
        ``models``, ``documents``, ``families``, ``first_factor_share`` (share of the
        variance of the documents standardized across models held by the first factor) and
        ``benchmarks``: name → per method the number of documents and their ids (the
        calibrated ones with threshold and distinct permutations).
    """
    mm = read_perplexity_correlations(Path(data) / "realmodels")
    y = mm.scores()
    x = mm.values - mm.values.mean(axis=1, keepdims=True)
    x /= x.std(axis=1, keepdims=True)
    sv = np.linalg.svd(x, compute_uv=False) ** 2
    out: dict[str, Any] = {
        "models": len(mm.models),
        "documents": len(mm.unit_ids),
        "families": int(np.unique(mm.families).size),
        "first_factor_share": float(sv[0] / sv.sum()),
        "score_transform": {
            b: ("1 - error" if b in ("arc_easy", "piqa", "sciq") else "-log(perplexity)")
            for b in mm.benchmarks
        },
        "benchmarks": {},
    }
    runs = {
        "calibrated": {"n_permutations": n_permutations, "seed": seed},
        "calibrated_families": {
            "n_permutations": n_permutations,
            "seed": seed,
            "strata": mm.families,
        },
        "aic": {"method": "aic"},
        "lasso": {"method": "lasso"},
    }
    per = {k: extract_signatures(mm.values, y, **kw) for k, kw in runs.items()}
    for b, name in enumerate(mm.benchmarks):
        row: dict[str, Any] = {}
        for k, sigs in per.items():
            s = sigs[b]
            entry: dict[str, Any] = {
                "n_documents": int(s.units.size),
                "documents": [mm.unit_ids[int(u)] for u in s.units],
            }
            if s.calibration is not None and k.startswith("calibrated"):
                entry["threshold"] = s.calibration.threshold
                entry["n_distinct_permutations"] = float(s.calibration.n_distinct_permutations)
            row[k] = entry
        out["benchmarks"][name] = row
    return out

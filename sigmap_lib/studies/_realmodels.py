"""Signatures of 89 real LLMs (``shared/data/realmodels``, perplexity-correlations' documents
and benchmarks): what each method claims, with and without the real families as strata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.inputs import read_perplexity_correlations
from sigmap_lib.signatures import extract_signatures, method_class


def real_model_signatures(
    data: str | Path, *, n_permutations: int = 999, seed: int = 0
) -> dict[str, Any]:
    r"""Per benchmark, the documents each signature method claims on the 89 real models.

    Scores are made higher-is-better (``1 − error``, ``−log perplexity``); the methods are
    the calibrated default, the default with the real families as ``strata``, the default's
    false-discovery mode at ``q = 0.1``, the paper's AIC, BIC and the authors' Lasso.

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

    Examples
    --------
    The smallest layout: 24 models of 3 families, 200 documents, two benchmarks; document
    0 tracks ARC-Easy beyond general quality:

    >>> import numpy as np
    >>> from pathlib import Path
    >>> from sigmap_lib.studies import real_model_signatures
    >>> rng = np.random.default_rng(0)
    >>> g, z = rng.standard_normal(24), rng.standard_normal(24)
    >>> bpb = 1.0 - 0.1 * g + 0.02 * rng.standard_normal((200, 24))
    >>> bpb[0] = 1.0 - 0.1 * g - 0.02 * z
    >>> cols = [f"\"('f{k % 3}', 'org/m{k}')\"" for k in range(24)]
    >>> rows = lambda names, x: [f"{n}," + ",".join(map(str, r)) for n, r in zip(names, x)]
    >>> Path("data/realmodels").mkdir(parents=True)
    >>> _ = Path("data/realmodels/perplexity_correlations_synthetic_bpb_id.csv").write_text(
    ...     "\n".join(["id," + ",".join(cols), *rows([f"d{j}" for j in range(200)], bpb)]))
    >>> err = [0.5 - 0.1 * g - 0.05 * z, np.exp(3.0 - 0.5 * g)]
    >>> _ = Path("data/realmodels/perplexity_correlations_error.csv").write_text(
    ...     "\n".join(["benchmark," + ",".join(cols), *rows(["arc_easy", "lambada"], err)]))
    >>> out = real_model_signatures("data", n_permutations=99)
    >>> out["models"], out["families"], out["score_transform"]["lambada"]
    (24, 3, '-log(x)')
    >>> out["benchmarks"]["arc_easy"]["calibrated"]["documents"]
    ['d0']
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
        "score_transform": mm.score_transforms(),
        "benchmarks": {},
    }
    runs = {
        "calibrated": {"n_permutations": n_permutations, "seed": seed},
        "calibrated_families": {
            "n_permutations": n_permutations,
            "seed": seed,
            "strata": mm.families,
        },
        "calibrated_fdr": {"n_permutations": n_permutations, "seed": seed, "fdr": 0.1},
        "aic": {"method": "aic"},
        "bic": {"method": "bic"},
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
            if (
                s.calibration is not None
                and method_class(runs[k].get("method", "calibrated")).calibrated
            ):
                entry["threshold"] = s.calibration.threshold
                entry["n_distinct_permutations"] = float(s.calibration.n_distinct_permutations)
            row[k] = entry
        out["benchmarks"][name] = row
    return out

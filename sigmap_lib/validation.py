"""Validation of sigmap's IRT against the original metabench R-mirt fits (real data).

:func:`real_data_validation` refits each stored fit's IRT model on the same 0/1 matrix
(``shared/data/item_responses``), estimates θ with the same method, and compares item
parameters and θ with R's (``shared/data/metabench_irt``). It backs
``sigmap realdata metabench``; the measured numbers are in docs/METABENCH_VALIDATION.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sigmap_lib.errors import SigmapInputError

DEFAULT_STEMS = (
    "arc_secondary_2PL",
    "gsm8k_secondary_2PL",
    "gsm8k_main_2PL",
    "truthfulqa_secondary_2PL",
    "mmlu_secondary_3PL",
)


def compare_fit(shared_data: str | Path, stem: str, *, max_iter: int = 1000) -> dict[str, Any]:
    """Refit one stored metabench fit and compare it with R mirt.

    Parameters
    ----------
    shared_data : folder ``shared/data``.
    stem : e.g. ``arc_secondary_2PL`` (``<bm>_<version>_<model>`` of ``metabench_irt``).

    Returns
    -------
    dict
        ``stem``, ``n_models``, ``n_items``, Pearson ``r_a1``, ``r_d``, ``r_b`` of the item
        parameters, ``theta_spearman`` (ours vs R, by the fit's θ method) and
        ``theta_spearman_r_params`` (R's parameters scored by our θ estimator), ``seconds``.
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import pearsonr, spearmanr

    from sigmap_lib.irt import estimate_theta, fit_irt

    root = Path(shared_data)
    bm, ver, model = stem.split("_")
    irt_dir = root / "metabench_irt"
    items_path = irt_dir / f"{stem}_items.parquet"
    if not items_path.exists():
        raise SigmapInputError(f"{items_path} does not exist (unknown fit {stem!r})")
    items = pd.read_parquet(items_path)
    thetas = pd.read_parquet(irt_dir / f"{stem}_thetas.parquet")
    summary = pd.read_csv(irt_dir / "fits_summary.csv")
    row = summary[
        (summary["benchmark"] == bm) & (summary["version"] == ver) & (summary["irt_model"] == model)
    ]
    method = str(row["theta_method"].iloc[0]) if len(row) else "MAP"
    x = pd.read_parquet(root / "item_responses" / f"metabench_{bm}_{ver}_train.parquet").set_index(
        "model"
    )
    x = x[items["item_key"]]
    t0 = time.perf_counter()
    fit = fit_irt(x, model, max_iter=max_iter)
    ours = fit.params.loc[items["item_key"]]
    theirs = items.set_index("item_key")
    train = thetas[thetas["split"] == "train"].set_index("llm").reindex(x.index)
    ok = train["theta"].notna().to_numpy()
    th = estimate_theta(fit.params, x, method)["theta"].to_numpy()
    th_r = estimate_theta(theirs[["a1", "d", "g", "u"]], x, method)["theta"].to_numpy()
    ref = train["theta"].to_numpy()
    finite_b = np.isfinite(ours["b"]) & np.isfinite(theirs["b"])
    return {
        "stem": stem,
        "theta_method": method,
        "n_models": int(x.shape[0]),
        "n_items": int(x.shape[1]),
        "r_a1": float(pearsonr(ours["a1"], theirs["a1"]).statistic),
        "r_d": float(pearsonr(ours["d"], theirs["d"]).statistic),
        "r_b": float(pearsonr(ours["b"][finite_b], theirs["b"][finite_b]).statistic),
        "theta_spearman": float(spearmanr(th[ok], ref[ok]).statistic),
        "theta_spearman_r_params": float(spearmanr(th_r[ok], ref[ok]).statistic),
        "converged": bool(fit.converged),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def real_data_validation(
    shared_data: str | Path, stems: tuple[str, ...] = DEFAULT_STEMS
) -> dict[str, Any]:
    """:func:`compare_fit` for several stored fits (default: the 2PL/3PL ones; 4PL EM is slow)."""
    results = [compare_fit(shared_data, s) for s in stems]
    return {
        "fits": results,
        "min_theta_spearman": min(r["theta_spearman"] for r in results),
        "target_theta_spearman": 0.99,
    }

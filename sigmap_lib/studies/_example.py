"""A tiny synthetic stand-in for ``../shared/data``, for examples and tests of the studies."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_example_data(root: str | Path, *, n_models: int = 300, n_items: int = 8) -> Path:
    """Write the smallest valid ``shared/data`` layout for one stored metabench fit.

    The fit is ``arc_secondary_2PL`` (a 2PL, θ by MAP): ``n_items`` items whose
    parameters stand for R mirt's refit (the ``*_fit350`` columns), ``n_models`` LLMs'
    simulated 0/1 answers, their θ under those parameters, a full score that depends on
    the ability, and a stored in-sample GAM prediction of it — everything
    :func:`compare_fit`, :func:`heldout_reconstruction` and :func:`real_data_validation`
    read. Deterministic (seed 0).

    Parameters
    ----------
    root : path
        Folder to create (``root/metabench_irt``, ``root/item_responses``).
    n_models, n_items : int

    Returns
    -------
    Path
        ``root``.

    Examples
    --------
    >>> from sigmap_lib.studies import write_example_data
    >>> root = write_example_data("data")
    >>> sorted(p.name for p in (root / "metabench_irt").iterdir())
    ['arc_secondary_2PL_items.parquet', 'arc_secondary_2PL_thetas.parquet', 'fits_summary.csv']
    """
    import pandas as pd

    from sigmap_lib.irt import estimate_theta, fit_gam, simulate_responses

    rng = np.random.default_rng(0)
    r_params = pd.DataFrame(
        {"a1": rng.uniform(0.5, 2.0, n_items), "d": rng.normal(size=n_items), "g": 0.0, "u": 1.0},
        index=pd.Index([f"q{j}" for j in range(n_items)], name="item_key"),
    )
    ability = rng.normal(size=n_models)
    x = pd.DataFrame(
        simulate_responses(r_params, ability, rng=1),
        columns=r_params.index,
        index=[f"llm{i}" for i in range(n_models)],
    )
    thetas = estimate_theta(r_params, x).rename_axis("llm").reset_index().assign(split="train")
    thetas["score_full"] = 100 / (1 + np.exp(-ability)) + rng.normal(0, 2, size=n_models)
    thetas["score_pred_gam"] = fit_gam(thetas["theta"], thetas["score_full"]).predict(
        thetas["theta"]
    )
    root = Path(root)
    irt, resp = root / "metabench_irt", root / "item_responses"
    irt.mkdir(parents=True, exist_ok=True)
    resp.mkdir(parents=True, exist_ok=True)
    r_params.add_suffix("_fit350").reset_index().to_parquet(irt / "arc_secondary_2PL_items.parquet")
    thetas.to_parquet(irt / "arc_secondary_2PL_thetas.parquet")
    # no summary row: the fit's θ method defaults to MAP
    pd.DataFrame(columns=["benchmark", "version", "irt_model"]).to_csv(
        irt / "fits_summary.csv", index=False
    )
    x.rename_axis("model").reset_index().to_parquet(resp / "metabench_arc_secondary_train.parquet")
    return root

"""Simulated benchmarks with planted IRT structure."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError

# ---------------------------------------------------------------------------
# simulation


def simulate_benchmarks(
    n_models: int,
    sizes: dict[str, int],
    *,
    seed: int = 0,
    item_params: pd.DataFrame | None = None,
    abilities: np.ndarray | None = None,
    general: float = 0.8,
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, dict[str, Any]]:
    """A simulated world: 0/1 responses per benchmark and normalised full scores.

    Parameters
    ----------
    n_models : number of models.
    sizes : benchmark -> number of items.
    item_params : optional table (``a1, d, g, u``) whose rows are resampled for every
        benchmark (the empirical distribution of real items); default: 3PL items with
        a1 ~ logN(0.3, 0.4), d ~ N(0, 1.5), g ~ Beta(2, 18).
    abilities : optional ``(n_pool, n_benchmarks)`` real θ rows to resample (keeps their
        correlation); default: θ_b = general·G + sqrt(1 - general²)·E_b, standard normal.

    Returns
    -------
    responses, full_scores, truth (``{"theta": DataFrame, "params": {bm: DataFrame}}``).

    Examples
    --------
    >>> from sigmap_lib.metabench import simulate_benchmarks
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> responses["arc"].shape, responses["gsm8k"].shape, scores.shape
    ((200, 30), (200, 40), (200, 2))
    >>> responses["arc"].iloc[:2, :4]
    item         arc.0  arc.1  arc.2  arc.3
    model
    model_00000      0      0      1      0
    model_00001      0      0      1      1
    >>> bool(scores.loc["model_00000", "arc"] == 100 * responses["arc"].loc["model_00000"].mean())
    True
    >>> list(truth["params"]["arc"].columns), truth["theta"].shape  # planted items and abilities
    (['a1', 'd', 'g', 'u'], (200, 2))
    """
    from sigmap_lib.irt import simulate_responses

    rng = np.random.default_rng(seed)
    bms = list(sizes)
    if abilities is not None:
        ab = np.asarray(abilities, float)
        if ab.ndim != 2 or ab.shape[1] < len(bms):
            raise SigmapInputError(
                f"simulate_benchmarks: abilities need >= {len(bms)} columns, got shape {ab.shape}"
            )
        theta = ab[rng.integers(0, len(ab), n_models)][:, : len(bms)]
        theta = (theta - theta.mean(0)) / theta.std(0)
    else:
        gfac = rng.normal(size=(n_models, 1))
        theta = general * gfac + np.sqrt(1 - general**2) * rng.normal(size=(n_models, len(bms)))
    models = pd.Index([f"model_{i:05d}" for i in range(n_models)], name="model")
    responses, scores, truth_params = {}, {}, {}
    for b, bm in enumerate(bms):
        m = int(sizes[bm])
        if item_params is not None:
            src = item_params[["a1", "d", "g", "u"]].to_numpy(float)
            par = src[rng.integers(0, len(src), m)]
            par[:, 0] *= np.exp(rng.normal(0, 0.1, m))
            par[:, 1] += rng.normal(0, 0.2, m)
            p = pd.DataFrame(par, columns=["a1", "d", "g", "u"])
        else:
            p = pd.DataFrame(
                {
                    "a1": rng.lognormal(0.3, 0.4, m),
                    "d": rng.normal(0, 1.5, m),
                    "g": rng.beta(2, 18, m),
                    "u": np.ones(m),
                }
            )
        p.index = pd.Index([f"{bm}.{j}" for j in range(m)], name="item")
        x = simulate_responses(p, theta[:, b], rng)
        responses[bm] = pd.DataFrame(x, index=models, columns=p.index)
        scores[bm] = 100.0 * x.mean(axis=1)
        truth_params[bm] = p
    truth = {"theta": pd.DataFrame(theta, index=models, columns=bms), "params": truth_params}
    return responses, pd.DataFrame(scores, index=models), truth

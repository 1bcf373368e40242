"""Scoring new models from their answers to the selected items."""

from __future__ import annotations

import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt._irt import estimate_theta
from sigmap_lib.metabench._fit import MetabenchFit

# ---------------------------------------------------------------------------
# using a fit


def score_new_models(
    fit: MetabenchFit, responses: dict[str, pd.DataFrame]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """θ and reconstructed scores for models that answered the selected items.

    Parameters
    ----------
    fit : MetabenchFit
    responses : dict benchmark -> DataFrame (models x items) containing at least the
        benchmark's selected items (extra columns are ignored).

    Returns
    -------
    thetas : DataFrame (models x benchmarks)
    scores : DataFrame (models x benchmarks [+ "grand"]): per benchmark the fit's
        reconstruction (``BenchmarkFit.predict_scores``: the GAM on θ and, when chosen, the
        percent correct and linear predictor of the selected items); "grand" (only when
        every benchmark is given) from the joint GAM on all θ.
    """
    if not responses:
        raise SigmapInputError("score_new_models: no responses given")
    th, sc = {}, {}
    for bm, df in responses.items():
        if bm not in fit.benchmarks:
            raise SigmapInputError(
                f"score_new_models: benchmark {bm!r} is not in the fit (have {sorted(fit.benchmarks)})"
            )
        f = fit.benchmarks[bm]
        d = df.copy()
        d.columns = [str(c) for c in d.columns]
        missing = [c for c in f.selected if c not in d.columns]
        if missing:
            raise SigmapInputError(
                f"score_new_models: {bm}: responses lack {len(missing)} selected item(s), "
                f"e.g. {missing[:3]}"
            )
        est = estimate_theta(f.params, d, f.theta_method, benchmark=bm)
        th[bm] = est["theta"]
        x_sel = d.loc[est.index, f.selected].to_numpy(float)
        sc[bm] = pd.Series(f.predict_scores(est["theta"].to_numpy(), x_sel), index=est.index)
    thetas = pd.DataFrame(th)
    scores = pd.DataFrame(sc)
    j = fit.joint
    if j is not None and set(j.benchmarks) <= set(thetas.columns):
        complete = thetas[j.benchmarks].dropna()
        scores["grand"] = pd.Series(j.grand_gam.predict(complete.to_numpy()), index=complete.index)
    return thetas, scores

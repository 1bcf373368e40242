"""Scoring new models from their answers to the selected items."""

from __future__ import annotations

import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import estimate_theta
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
        every benchmark is given) from the joint model on all θ: the additive GAM, or where
        the fit's guard found it ill-posed, ridge on the θs. ``scores.attrs["joint_model"]``
        is the fit's record of which and why (``JointFit.joint_models["grand"]``; absent
        when no grand score is computed).

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sigmap_lib.irt import simulate_responses
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, fit_metabench, score_new_models, simulate_benchmarks,
    ... )
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> fit = fit_metabench(responses, scores, **TINY_SETTINGS)  # tiny settings: fast
    >>> def answers(bm):  # three new models that answer only the selected items
    ...     p = truth["params"][bm]
    ...     x = simulate_responses(p, np.array([-1.0, 0.0, 1.5]), rng=1)
    ...     x = pd.DataFrame(x, columns=p.index, index=["weak", "mid", "strong"])
    ...     return x[fit.selected[bm]]
    >>> thetas, recon = score_new_models(fit, {bm: answers(bm) for bm in ["arc", "gsm8k"]})
    >>> thetas.round(1)
            arc  gsm8k
    weak   -0.9   -1.0
    mid    -0.5    0.4
    strong  1.5    1.2
    >>> recon.round(1)  # reconstructed full scores; "grand" (their mean) from the joint GAM
             arc  gsm8k  grand
    weak    37.2   32.0   34.7
    mid     46.7   65.8   56.2
    strong  86.6   82.2   86.2
    >>> recon.attrs["joint_model"]["model"]  # 180 training models: the GAM is well-posed
    'gam'
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
        default = {"model": getattr(j.grand_gam, "kind", "gam"), "reason": "not recorded"}
        scores.attrs["joint_model"] = dict(j.joint_models.get("grand", default))
    return thetas, scores

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
from sigmap_lib.irt import DEFAULT_COVARIATE_SETS, fit_score_model
from sigmap_lib.metabench import r_refit_params

DEFAULT_STEMS = (
    "arc_secondary_2PL",
    "gsm8k_secondary_2PL",
    "gsm8k_main_2PL",
    "truthfulqa_secondary_2PL",
    "mmlu_secondary_3PL",
)


#: Columns holding the other stored parameter set (the 350-item pool fit's).
R_POOL_COLUMNS = ["a1", "d", "g", "u"]


def compare_fit(
    shared_data: str | Path,
    stem: str,
    *,
    max_iter: int = 1000,
    params_out: str | Path | None = None,
) -> dict[str, Any]:
    """Refit one stored metabench fit and compare it with R mirt's refit of the same matrix.

    Parameters
    ----------
    shared_data : folder ``shared/data``.
    stem : e.g. ``arc_secondary_2PL`` (``<bm>_<version>_<model>`` of ``metabench_irt``).
    params_out : optional parquet path for our fitted parameters.

    Returns
    -------
    dict
        ``stem``, ``theta_method``, ``n_models``, ``n_items``; Pearson ``r_a1``, ``r_d``,
        ``r_b`` of our item parameters vs R's refit (:func:`r_refit_params`);
        ``theta_spearman`` (our θ vs R's stored θ, by the fit's θ method);
        ``theta_spearman_r_params`` (R's refit parameters scored by our estimator vs the
        stored θ: ≈ 1, the scorer is R's); ``loglik_ours``, ``loglik_r`` (marginal
        log-likelihood of the matrix at our and R's parameters, 61-point quadrature on
        [−6, 6]) and ``loglik_r_reported`` (R's ``mirt_logLik``); EM diagnostics
        ``converged``, ``stages``; ``seconds``.

    Examples
    --------
    >>> from sigmap_lib.studies import compare_fit, write_example_data
    >>> _ = write_example_data("data")  # a tiny stand-in for ../shared/data
    >>> res = compare_fit("data", "arc_secondary_2PL")
    >>> res["n_models"], res["n_items"], res["theta_method"]
    (300, 8, 'MAP')
    >>> round(res["r_a1"], 2), round(res["r_d"], 2), round(res["theta_spearman"], 3)
    (0.97, 0.99, 0.998)
    >>> res["theta_spearman_r_params"], res["loglik_ours"] > res["loglik_r"]
    (1.0, True)
    """
    import numpy as np
    import pandas as pd
    from scipy.stats import pearsonr, spearmanr

    from sigmap_lib.irt import estimate_theta, fit_irt, marginal_loglik

    root = Path(shared_data)
    bm, ver, model = stem.split("_")
    irt_dir = root / "metabench_irt"
    items_path = irt_dir / f"{stem}_items.parquet"
    if not items_path.exists():
        raise SigmapInputError(f"{items_path} does not exist (unknown fit {stem!r})")
    items = pd.read_parquet(items_path).set_index("item_key")
    thetas = pd.read_parquet(irt_dir / f"{stem}_thetas.parquet")
    summary = pd.read_csv(irt_dir / "fits_summary.csv")
    row = summary[
        (summary["benchmark"] == bm) & (summary["version"] == ver) & (summary["irt_model"] == model)
    ]
    method = str(row["theta_method"].iloc[0]) if len(row) else "MAP"
    x = pd.read_parquet(root / "item_responses" / f"metabench_{bm}_{ver}_train.parquet").set_index(
        "model"
    )
    x = x[items.index]
    t0 = time.perf_counter()
    fit = fit_irt(x, model, max_iter=max_iter)
    seconds = time.perf_counter() - t0
    if params_out is not None:
        fit.params.to_parquet(params_out)
    ours = fit.params.loc[items.index]
    theirs = r_refit_params(items)
    theirs_b = -theirs["d"] / theirs["a1"]
    train = thetas[thetas["split"] == "train"].set_index("llm").reindex(x.index)
    ok = train["theta"].notna().to_numpy()
    th = estimate_theta(fit.params, x, method)["theta"].to_numpy()
    th_r = estimate_theta(theirs, x, method)["theta"].to_numpy()
    ref = train["theta"].to_numpy()
    finite_b = np.isfinite(ours["b"]) & np.isfinite(theirs_b)
    return {
        "stem": stem,
        "theta_method": method,
        "n_models": int(x.shape[0]),
        "n_items": int(x.shape[1]),
        "r_a1": float(pearsonr(ours["a1"], theirs["a1"]).statistic),
        "r_d": float(pearsonr(ours["d"], theirs["d"]).statistic),
        "r_b": float(pearsonr(ours["b"][finite_b], theirs_b[finite_b]).statistic),
        "theta_spearman": float(spearmanr(th[ok], ref[ok]).statistic),
        "theta_spearman_r_params": float(spearmanr(th_r[ok], ref[ok]).statistic),
        "loglik_ours": marginal_loglik(fit.params, x),
        "loglik_r": marginal_loglik(theirs, x),
        "loglik_r_reported": float(row["mirt_logLik"].iloc[0]) if len(row) else float("nan"),
        "r_em_cycles": int(row["mirt_iterations"].iloc[0]) if len(row) else -1,
        "converged": bool(fit.converged),
        "stages": fit.extra["stages"],
        "seconds": round(seconds, 1),
    }


def heldout_reconstruction(
    shared_data: str | Path,
    stem: str,
    *,
    holdout: float = 0.2,
    seed: int = 0,
    irt_models: tuple[str, ...] = ("2PL", "3PL"),
    theta_methods: tuple[str, ...] = ("MAP", "EAP", "EAPsum"),
    covariate_sets: tuple[str, ...] = DEFAULT_COVARIATE_SETS,
    n_boot: int = 2000,
) -> dict[str, Any]:
    """Full-score reconstruction for held-out LLMs vs metabench's stored GAM predictions.

    Only the training LLMs' answers are stored, so a random ``holdout`` fraction of them
    (``numpy.random.default_rng(seed).permutation``) is held out. On the rest, for every IRT
    model in ``irt_models``, θ method and covariate set (:func:`fit_score_model`: GAM on θ
    [+ percent correct [+ ridge linear predictor]] of the same items, ``df=20``), the
    5-fold CV RMSE is computed; the pipeline's choice is the candidate of lowest CV RMSE,
    overall and among the θ-only candidates (metabench's own ``score ~ s(θ)``). Metabench's
    ``score_pred_gam`` for the held-out LLMs is in-sample (their GAM and IRT saw them).
    Also: R's refit θ (the stored θ) with our θ-only GAM and with our chosen covariates,
    which separates the reconstruction from the IRT part of any difference.

    Returns
    -------
    dict with ``theirs_in_sample``, per candidate ``cands["model/method/covariates"]``
    (``cv``, ``heldout``, ``diff_ci95``: paired-bootstrap 95 % interval of RMSE(ours) −
    RMSE(theirs) over the held-out LLMs), ``cv_choice``/``ours_heldout``/``diff_ci95`` (all
    candidates), ``theta_only_cv_choice``/``theta_only_heldout``/``theta_only_diff_ci95``,
    ``r_theta_our_gam_heldout``, ``r_theta_our_gam_in_sample``,
    ``r_theta_our_score_model_heldout``, ``seconds``.

    Examples
    --------
    >>> from sigmap_lib.studies import heldout_reconstruction, write_example_data
    >>> _ = write_example_data("data")  # a tiny stand-in for ../shared/data
    >>> res = heldout_reconstruction(
    ...     "data", "arc_secondary_2PL", irt_models=("2PL",), theta_methods=("MAP", "EAPsum"),
    ...     covariate_sets=("theta",), n_boot=200,
    ... )
    >>> res["n_fit"], res["n_heldout"], sorted(res["cands"])
    (240, 60, ['2PL/EAPsum/theta', '2PL/MAP/theta'])
    >>> res["cv_choice"], round(res["ours_heldout"], 2), round(res["theirs_in_sample"], 2)
    ('2PL/MAP/theta', 11.27, 11.12)
    """
    import numpy as np
    import pandas as pd

    from sigmap_lib.irt import estimate_theta, fit_gam, fit_irt
    from sigmap_lib.metabench import rmse

    t0 = time.perf_counter()
    root = Path(shared_data)
    bm, ver, _model = stem.split("_")
    items = pd.read_parquet(root / "metabench_irt" / f"{stem}_items.parquet").set_index("item_key")
    th = pd.read_parquet(root / "metabench_irt" / f"{stem}_thetas.parquet")
    x = pd.read_parquet(root / "item_responses" / f"metabench_{bm}_{ver}_train.parquet").set_index(
        "model"
    )[items.index]
    train = th[th["split"] == "train"].set_index("llm").loc[x.index]
    hold = np.zeros(len(x), bool)
    hold[np.random.default_rng(seed).permutation(len(x))[: round(holdout * len(x))]] = True
    y = train["score_full"].to_numpy(float)
    xa = x.to_numpy(float)
    theirs = train["score_pred_gam"].to_numpy(float)[hold]
    e_theirs = (theirs - y[hold]) ** 2
    boot = np.random.default_rng(seed + 2).integers(0, hold.sum(), (n_boot, hold.sum()))

    def ci(pred: np.ndarray) -> list[float]:
        e = (pred - y[hold]) ** 2
        diff = np.sqrt(e[boot].mean(1)) - np.sqrt(e_theirs[boot].mean(1))
        return [round(float(v), 4) for v in np.quantile(diff, [0.025, 0.975])]

    def score(t: np.ndarray, covs: str, cv: bool = True) -> tuple[float, np.ndarray]:
        m = fit_score_model(
            t[~hold], xa[~hold], y[~hold], covariate_sets=(covs,), cv=cv, seed=seed + 1
        )
        return m.cv_rmse.get(covs, float("nan")), m.predict(t[hold], xa[hold])

    out: dict[str, Any] = {
        "stem": stem,
        "n_fit": int((~hold).sum()),
        "n_heldout": int(hold.sum()),
        "theirs_in_sample": round(rmse(theirs, y[hold]), 4),
        "cands": {},
    }
    for model in irt_models:
        params = fit_irt(x[~hold], model, max_iter=1000).params
        for method in theta_methods:
            t = estimate_theta(params, x, method)["theta"].to_numpy()
            for covs in covariate_sets:
                cv, pred = score(t, covs)
                out["cands"][f"{model}/{method}/{covs}"] = {
                    "cv": round(cv, 4),
                    "heldout": round(rmse(pred, y[hold]), 4),
                    "diff_ci95": ci(pred),
                }
    cands = out["cands"]
    best = min(cands, key=lambda k: cands[k]["cv"])
    theta_only = [k for k in cands if k.endswith("/theta")]
    best_t = min(theta_only, key=lambda k: cands[k]["cv"]) if theta_only else best
    out.update(
        cv_choice=best,
        ours_heldout=cands[best]["heldout"],
        diff_ci95=cands[best]["diff_ci95"],
        theta_only_cv_choice=best_t,
        theta_only_heldout=cands[best_t]["heldout"],
        theta_only_diff_ci95=cands[best_t]["diff_ci95"],
    )
    r_theta = train["theta"].to_numpy(float)
    out["r_theta_our_gam_heldout"] = round(
        rmse(fit_gam(r_theta[~hold], y[~hold], df=20).predict(r_theta[hold]), y[hold]), 4
    )
    out["r_theta_our_gam_in_sample"] = round(
        rmse(fit_gam(r_theta, y, df=20).predict(r_theta[hold]), y[hold]), 4
    )
    out["r_theta_our_score_model_heldout"] = round(
        rmse(score(r_theta, best.split("/", 2)[2], cv=False)[1], y[hold]), 4
    )
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def real_data_validation(
    shared_data: str | Path, stems: tuple[str, ...] = DEFAULT_STEMS
) -> dict[str, Any]:
    """:func:`compare_fit` for several stored fits (default: the 2PL/3PL ones; 4PL EM is slow).

    Examples
    --------
    >>> from sigmap_lib.studies import real_data_validation, write_example_data
    >>> _ = write_example_data("data")  # a tiny stand-in for ../shared/data
    >>> out = real_data_validation("data", stems=("arc_secondary_2PL",))
    >>> [f["stem"] for f in out["fits"]], round(out["min_theta_spearman"], 3)
    (['arc_secondary_2PL'], 0.998)
    >>> out["target_theta_spearman"]
    0.99
    """
    results = [compare_fit(shared_data, s) for s in stems]
    return {
        "fits": results,
        "min_theta_spearman": min(r["theta_spearman"] for r in results),
        "target_theta_spearman": 0.99,
    }

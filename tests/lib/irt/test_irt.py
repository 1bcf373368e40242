"""Tests for sigmap_lib.irt: parameter recovery, scoring vs mirt, information vs finite differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sigmap_lib import irt
from sigmap_lib.errors import SigmapInputError


def _params(rng: np.random.Generator, m: int, guess: bool = False) -> pd.DataFrame:
    p = pd.DataFrame(
        {"a1": rng.lognormal(0, 0.35, m), "d": rng.normal(0, 1.2, m)},
        index=[f"i{j}" for j in range(m)],
    )
    if guess:
        p["g"] = rng.uniform(0.05, 0.3, m)
        p["u"] = rng.uniform(0.85, 1.0, m)
    return p


@pytest.fixture(scope="module")
def world_2pl():
    rng = np.random.default_rng(11)
    true = _params(rng, 100)
    theta = rng.normal(size=2000)
    x = pd.DataFrame(irt.simulate_responses(true, theta, rng), columns=true.index)
    return true, theta, x, irt.fit_irt(x, "2PL")


def test_2pl_parameter_recovery(world_2pl):
    true, _, _, fit = world_2pl
    est = fit.params.loc[true.index]
    b_true = -true["d"] / true["a1"]
    assert fit.converged
    assert np.corrcoef(est["a1"], true["a1"])[0, 1] >= 0.95
    assert np.corrcoef(est["b"], b_true)[0, 1] >= 0.95
    assert np.allclose(est["b"], -est["d"] / est["a1"])
    assert (est["g"] == 0).all() and (est["u"] == 1).all()


def test_theta_recovery_and_match_mirt(world_2pl):
    import mirt

    _true, theta, x, fit = world_2pl
    res = mirt.fit_mirt(x.to_numpy(), model="2PL", compute_standard_errors=False, max_iter=5)
    res.model.set_parameters(
        discrimination=fit.params["a1"].to_numpy(), difficulty=fit.params["b"].to_numpy()
    )
    for method, atol in [("MAP", 1e-4), ("EAP", 5e-3), ("EAPsum", 5e-3)]:
        ours = irt.estimate_theta(fit.params, x, method)["theta"].to_numpy()
        ref = mirt.fscores(res.model, x.to_numpy(), method=method, n_quadpts=161).theta.ravel()
        assert np.max(np.abs(ours - ref)) < atol, method
        assert np.corrcoef(ours, theta)[0, 1] > 0.95


def test_negative_slope_item_recovered():
    rng = np.random.default_rng(3)
    true = _params(rng, 25)
    true.iloc[0, 0] = -2.0  # negatively discriminating item
    true.iloc[1, 0] = 9.0  # very steep item (beyond mirt's default box of 5)
    theta = rng.normal(size=3000)
    x = pd.DataFrame(irt.simulate_responses(true, theta, rng), columns=true.index)
    est = irt.fit_irt(x, "2PL").params
    assert est["a1"].iloc[0] < -1.0
    assert est["a1"].iloc[1] > 5.5


def test_information_closed_form_vs_finite_difference_and_mirt():
    import mirt

    rng = np.random.default_rng(5)
    p = _params(rng, 12, guess=True)
    grid = np.linspace(-3, 3, 41)
    info = irt.item_information(p, grid)
    # Fisher information of a Bernoulli item: P'(θ)^2 / (P (1 - P)), P' by central differences
    h = 1e-5
    dp = (irt.item_probabilities(p, grid + h) - irt.item_probabilities(p, grid - h)) / (2 * h)
    prob = irt.item_probabilities(p, grid)
    assert np.allclose(info, dp**2 / (prob * (1 - prob)), rtol=1e-5, atol=1e-9)
    # mirt's iteminfo on a 4PL model with the same parameters (difficulty form b = -d / a)
    res = mirt.fit_mirt(
        (rng.random((200, 12)) < 0.5).astype(int),
        model="4PL",
        compute_standard_errors=False,
        max_iter=2,
    )
    b = -p["d"] / p["a1"]
    res.model.set_parameters(
        discrimination=p["a1"].to_numpy(),
        difficulty=b.to_numpy(),
        guessing=p["g"].to_numpy(),
        upper=p["u"].to_numpy(),
    )
    assert np.allclose(info, mirt.iteminfo(res.model, grid), rtol=1e-6, atol=1e-10)


def test_eapsum_is_function_of_sum_score(world_2pl):
    _, _, x, fit = world_2pl
    est = irt.estimate_theta(fit.params, x, "EAPsum")
    s = x.sum(axis=1)
    assert (est.groupby(s)["theta"].nunique() == 1).all()
    assert np.all(np.diff(est.groupby(s)["theta"].first().to_numpy()) > 0)


def test_map_handles_missing_and_aligns_columns(world_2pl):
    _, _, x, fit = world_2pl
    sub = x.iloc[:50]
    shuffled = sub[sub.columns[::-1]]
    a = irt.estimate_theta(fit.params, sub, "MAP")["theta"]
    b = irt.estimate_theta(fit.params, shuffled, "MAP")["theta"]
    assert np.allclose(a, b)
    holes = sub.astype(float).copy()
    holes.iloc[:, :50] = np.nan  # only half of the items answered
    half = irt.estimate_theta(fit.params.iloc[50:], sub.iloc[:, 50:], "MAP")["theta"]
    assert np.allclose(irt.estimate_theta(fit.params, holes, "MAP")["theta"], half, atol=1e-6)


def test_validation_errors():
    with pytest.raises(SigmapInputError, match="0/1"):
        irt.fit_irt(np.full((30, 3), 2), "2PL", benchmark="arc")
    with pytest.raises(SigmapInputError, match="unknown IRT model"):
        irt.fit_irt(np.zeros((30, 3)), "5PL", benchmark="arc")
    with pytest.raises(SigmapInputError, match="no variance"):
        irt.fit_irt(np.zeros((30, 3)), "2PL", benchmark="arc")
    p = pd.DataFrame({"a1": [1.0], "d": [0.0]}, index=["q1"])
    with pytest.raises(SigmapInputError, match="lack"):
        irt.estimate_theta(p, pd.DataFrame({"other": [1, 0]}), "MAP", benchmark="arc")


def test_marginal_loglik_matches_numerical_integration_and_mirt(world_2pl):
    from scipy.integrate import quad
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    params = _params(rng, 12, guess=True)
    x = irt.simulate_responses(params, rng.normal(size=6), rng).astype(float)
    x[0, 3] = np.nan  # a skipped item
    ours = irt.marginal_loglik(params, x, n_quadpts=401)
    ref = 0.0
    for row in x:
        obs = np.isfinite(row)

        def lik(t, row=row, obs=obs):
            p = irt.item_probabilities(params, np.array([t]))[0]
            return np.prod(np.where(row[obs] == 1, p[obs], 1 - p[obs])) * norm.pdf(t)

        ref += np.log(quad(lik, -8, 8, limit=200)[0])
    assert ours == pytest.approx(ref, rel=1e-6)
    # at the fitted 2PL parameters: the log-likelihood mirt's EM reports (61 nodes)
    _true, _theta, xw, fit = world_2pl
    assert irt.marginal_loglik(fit.params, xw) == pytest.approx(fit.log_likelihood, rel=1e-3)


def test_map_start_eap_climbs_to_the_mode_of_the_eap_basin():
    """A bimodal 3PL posterior: "global" returns the higher mode, "eap" the mode whose
    basin holds the EAP estimate (brute force: a fine grid and a step-by-step climb)."""
    from scipy.stats import norm

    params = pd.DataFrame(
        {
            "a1": [9.46, 12.36, 5.37, 12.23, 5.45, 0.82, 0.74, 0.34, 0.96, 0.94],
            "d": [4.14, 27.78, 4.48, 6.89, 8.44, 0.68, -1.37, -0.2, -0.29, 1.06],
            "g": [0.29, 0.13, 0.15, 0.23, 0.21, 0.0, 0.0, 0.0, 0.0, 0.0],
        }
    )
    x = np.array([[1, 1, 0, 1, 1, 0, 0, 0, 1, 0]], float)
    grid = np.linspace(-6, 6, 120001)
    p = irt.item_probabilities(params, grid)
    logpost = np.log(np.where(x[0] == 1, p, 1 - p)).sum(1) + norm.logpdf(grid)
    inner = (logpost[1:-1] > logpost[:-2]) & (logpost[1:-1] >= logpost[2:])
    assert inner.sum() == 2
    w = np.exp(logpost - logpost.max())
    i = int(np.searchsorted(grid, float(grid @ w / w.sum())))
    while True:  # climb from the EAP estimate, one grid step at a time
        j = i + 1 if logpost[i + 1] > logpost[i] else i - 1 if logpost[i - 1] > logpost[i] else i
        if j == i:
            break
        i = j
    basin = grid[i]
    best = grid[int(np.argmax(logpost))]
    assert abs(basin - best) > 0.3  # the two conventions really differ here
    g = irt.estimate_theta(params, x, "MAP", map_start="global")["theta"].iloc[0]
    e = irt.estimate_theta(params, x, "MAP")["theta"].iloc[0]
    assert g == pytest.approx(best, abs=1e-3)
    assert e == pytest.approx(basin, abs=1e-3)
    with pytest.raises(SigmapInputError, match="map_start"):
        irt.estimate_theta(params, x, "MAP", map_start="nearest")


def test_polish_moves_an_item_stuck_on_the_wrong_slope_sign():
    """EM cannot flip a slope's sign; the polish step finds the item's better M-step
    optimum (planted: a negatively discriminating item started at a positive slope)."""
    from scipy.stats import pearsonr

    from sigmap_lib.irt import WIDE_BOUNDS
    from sigmap_lib.irt._irt import _polish_items

    rng = np.random.default_rng(8)
    true = _params(rng, 30, guess=True)
    true["u"] = 1.0
    true.iloc[0, :3] = [-2.5, -1.0, 0.15]  # a1, d, g: the better the model, the more it fails
    true["b"] = -true["d"] / true["a1"]
    x = irt.simulate_responses(true, rng.normal(size=4000), rng).astype(float)
    stuck = true.copy()
    stuck.iloc[0, :3] = [4.0, -12.0, 0.1]  # a positive-slope local solution
    stuck["b"] = -stuck["d"] / stuck["a1"]
    moved = _polish_items(x, stuck, "3PL", 61, WIDE_BOUNDS)
    assert moved is not None and moved.attrs["n_moved"] >= 1
    assert moved.iloc[0]["a1"] < -1.0
    assert moved.iloc[0]["b"] == pytest.approx(true.iloc[0]["b"], abs=0.5)
    # the correctly placed items are left alone (up to the gain threshold)
    assert pearsonr(moved["a1"].iloc[1:], true["a1"].iloc[1:]).statistic > 0.999
    again = _polish_items(x, true, "3PL", 61, WIDE_BOUNDS)  # near the truth: no sign flips
    assert again is None or (np.sign(again["a1"]) == np.sign(true["a1"])).all()


def test_fit_irt_polish_escapes_a_wrong_sign_optimum():
    """Steep negatively discriminating items with guessing (only the weakest models
    answer them right, as in real MMLU fits): EM from the default start leaves one on a
    positive slope; the polish stage flips it and raises the marginal likelihood."""
    rng = np.random.default_rng(9)
    true = _params(rng, 40, guess=True)
    true["u"] = 1.0
    true.iloc[:3, :3] = [[-12.0, -24.0, 0.1], [-10.0, -22.0, 0.15], [-14.0, -30.0, 0.1]]
    x = pd.DataFrame(irt.simulate_responses(true, rng.normal(size=3000), rng), columns=true.index)
    plain = irt.fit_irt(x, "3PL", polish=False)
    polished = irt.fit_irt(x, "3PL")
    assert plain.params["a1"].iloc[1] > 0  # the stuck item
    assert (polished.params["a1"].iloc[:3] < 0).all()
    stage = polished.extra["stages"][-1]
    assert stage["polished_items"] >= 1 and stage["loglik_gain"] > 10
    gain = irt.marginal_loglik(polished.params, x) - irt.marginal_loglik(plain.params, x)
    assert gain == pytest.approx(stage["loglik_gain"], rel=1e-9)

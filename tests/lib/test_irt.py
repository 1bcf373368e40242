"""Tests for sigmap_lib.irt: parameter recovery, scoring vs mirt, information vs finite differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import (
    estimate_theta,
    fit_irt,
    item_information,
    item_probabilities,
    simulate_responses,
)


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
    x = pd.DataFrame(simulate_responses(true, theta, rng), columns=true.index)
    return true, theta, x, fit_irt(x, "2PL")


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
        ours = estimate_theta(fit.params, x, method)["theta"].to_numpy()
        ref = mirt.fscores(res.model, x.to_numpy(), method=method, n_quadpts=161).theta.ravel()
        assert np.max(np.abs(ours - ref)) < atol, method
        assert np.corrcoef(ours, theta)[0, 1] > 0.95


def test_negative_slope_item_recovered():
    rng = np.random.default_rng(3)
    true = _params(rng, 25)
    true.iloc[0, 0] = -2.0  # negatively discriminating item
    true.iloc[1, 0] = 9.0  # very steep item (beyond mirt's default box of 5)
    theta = rng.normal(size=3000)
    x = pd.DataFrame(simulate_responses(true, theta, rng), columns=true.index)
    est = fit_irt(x, "2PL").params
    assert est["a1"].iloc[0] < -1.0
    assert est["a1"].iloc[1] > 5.5


def test_information_closed_form_vs_finite_difference_and_mirt():
    import mirt

    rng = np.random.default_rng(5)
    p = _params(rng, 12, guess=True)
    grid = np.linspace(-3, 3, 41)
    info = item_information(p, grid)
    # Fisher information of a Bernoulli item: P'(θ)^2 / (P (1 - P)), P' by central differences
    h = 1e-5
    dp = (item_probabilities(p, grid + h) - item_probabilities(p, grid - h)) / (2 * h)
    prob = item_probabilities(p, grid)
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
    est = estimate_theta(fit.params, x, "EAPsum")
    s = x.sum(axis=1)
    assert (est.groupby(s)["theta"].nunique() == 1).all()
    assert np.all(np.diff(est.groupby(s)["theta"].first().to_numpy()) > 0)


def test_map_handles_missing_and_aligns_columns(world_2pl):
    _, _, x, fit = world_2pl
    sub = x.iloc[:50]
    shuffled = sub[sub.columns[::-1]]
    a = estimate_theta(fit.params, sub, "MAP")["theta"]
    b = estimate_theta(fit.params, shuffled, "MAP")["theta"]
    assert np.allclose(a, b)
    holes = sub.astype(float).copy()
    holes.iloc[:, :50] = np.nan  # only half of the items answered
    half = estimate_theta(fit.params.iloc[50:], sub.iloc[:, 50:], "MAP")["theta"]
    assert np.allclose(estimate_theta(fit.params, holes, "MAP")["theta"], half, atol=1e-6)


def test_validation_errors():
    with pytest.raises(SigmapInputError, match="0/1"):
        fit_irt(np.full((30, 3), 2), "2PL", benchmark="arc")
    with pytest.raises(SigmapInputError, match="unknown IRT model"):
        fit_irt(np.zeros((30, 3)), "5PL", benchmark="arc")
    with pytest.raises(SigmapInputError, match="no variance"):
        fit_irt(np.zeros((30, 3)), "2PL", benchmark="arc")
    p = pd.DataFrame({"a1": [1.0], "d": [0.0]}, index=["q1"])
    with pytest.raises(SigmapInputError, match="lack"):
        estimate_theta(p, pd.DataFrame({"other": [1, 0]}), "MAP", benchmark="arc")

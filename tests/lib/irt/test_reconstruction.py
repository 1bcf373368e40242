"""Tests for sigmap_lib.irt: covariate choice by CV on planted truths."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import fit_ridge, fit_score_model, parse_covariates, percent_correct


def _world(n: int, seed: int, item_effect: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """θ, 0/1 answers to 40 2PL items, and a full score = smooth f(θ) + item-specific part."""
    items = np.random.default_rng(123)  # the same 40 items in every draw
    a = items.uniform(0.8, 2.0, 40)
    d = items.normal(0, 1, 40)
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    p = 1 / (1 + np.exp(-(theta[:, None] * a + d)))
    x = (rng.random(p.shape) < p).astype(float)
    # the full benchmark holds topics the first 6 items stand for beyond θ
    specific = (x[:, :6] - p[:, :6]).sum(axis=1)
    y = 100 / (1 + np.exp(-1.3 * theta)) + item_effect * specific + rng.normal(0, 1.0, n)
    return theta, x, y


def test_parse_covariates() -> None:
    assert parse_covariates("linear+theta") == ("theta", "linear")
    assert parse_covariates(" theta + percent ") == ("theta", "percent")
    for bad in ("", "theta+theta", "theta+sum", "+"):
        with pytest.raises(SigmapInputError, match="covariates"):
            parse_covariates(bad)


def test_percent_correct_skips_missing_answers() -> None:
    x = np.array([[1, 0, np.nan, 1], [0, 0, 0, 1.0]])
    np.testing.assert_allclose(percent_correct(x), [200 / 3, 25.0])
    with pytest.raises(SigmapInputError, match="answered none"):
        percent_correct(np.array([[np.nan, np.nan]]))


def test_cv_picks_the_linear_predictor_when_items_carry_more_than_theta() -> None:
    theta, x, y = _world(1500, 0, item_effect=4.0)
    m = fit_score_model(theta, x, y, df=10)
    assert set(m.cv_rmse) == {"theta", "theta+percent", "theta+percent+linear"}
    assert m.covariates == "theta+percent+linear"
    assert m.cv_rmse["theta+percent+linear"] < 0.8 * m.cv_rmse["theta"]
    # and it is better on fresh models from the same world
    t2, x2, y2 = _world(1000, 1, item_effect=4.0)
    only_theta = fit_score_model(theta, x, y, covariate_sets=("theta",), df=10)
    err = np.sqrt(np.mean((m.predict(t2, x2) - y2) ** 2))
    err_theta = np.sqrt(np.mean((only_theta.predict(t2, x2) - y2) ** 2))
    assert err < 0.8 * err_theta
    # the GAM was trained on the ridge's exact leave-one-out predictions (computed apart)
    loo = fit_ridge(x, y).loo_pred
    np.testing.assert_allclose(m.gam.x_train[:, 2], loo, rtol=1e-9)
    np.testing.assert_allclose(m.gam.x_train[:, 1], 100 * x.mean(axis=1))


def test_extra_covariates_cost_little_when_theta_is_sufficient() -> None:
    theta, x, y = _world(1500, 2, item_effect=0.0)
    m = fit_score_model(theta, x, y, df=10)
    assert m.cv_rmse["theta+percent+linear"] < 1.05 * m.cv_rmse["theta"]
    assert m.cv_rmse["theta"] < 1.2  # noise SD 1: the θ smooth alone is near the floor


def test_cv_error_is_out_of_fold() -> None:
    """CV RMSE equals a hand-rolled K-fold loop over the same folds."""
    theta, x, y = _world(400, 3, item_effect=3.0)
    m = fit_score_model(theta, x, y, covariate_sets=("theta+linear",), cv=True, df=8, seed=7)
    folds = np.random.default_rng(7).permutation(len(y)) % 5
    sse = 0.0
    for f in range(5):
        te = folds == f
        sub = fit_score_model(
            theta[~te], x[~te], y[~te], covariate_sets=("theta+linear",), df=8, seed=7
        )
        assert not sub.cv_rmse  # one candidate: no CV unless asked
        sse += float(np.sum((sub.predict(theta[te], x[te]) - y[te]) ** 2))
    assert m.cv_rmse["theta+linear"] == pytest.approx(np.sqrt(sse / len(y)), rel=1e-10)


def test_missing_answers_use_item_means_and_errors_are_clear() -> None:
    theta, x, y = _world(300, 4, item_effect=3.0)
    m = fit_score_model(theta, x, y, covariate_sets=("theta+linear",), df=8)
    lin = m.linear
    assert lin is not None
    np.testing.assert_allclose(lin.item_means, x.mean(axis=0))
    x_new = x[:5].copy()
    x_new[0, 3] = np.nan
    filled = x_new.copy()
    filled[0, 3] = x[:, 3].mean()
    np.testing.assert_allclose(lin.predict(x_new), lin.predict(filled))
    with pytest.raises(SigmapInputError, match="θ is required"):
        m.predict(None, x[:5])
    with pytest.raises(SigmapInputError, match="no θ"):
        fit_score_model(None, x, y)
    with pytest.raises(SigmapInputError, match="same number of rows"):
        fit_score_model(theta[:10], x, y)

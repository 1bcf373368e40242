"""Forward selection vs a naive greedy loop that refits statsmodels OLS for every candidate."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures import forward_select


def naive_forward(X: np.ndarray, y: np.ndarray, criterion: str, gamma: float = 0.5, cap=None):
    """Refit statsmodels OLS for every candidate at every step; criteria from statsmodels."""
    m, p = X.shape
    ys = (y - y.mean()) / y.std()
    xs = (X - X.mean(0)) / X.std(0)
    const = m * (1 + math.log(2 * math.pi))  # statsmodels' -2 llf = m ln(RSS/m) + const

    def crit(res, k):
        if criterion == "aic":
            return res.aic - const
        c = res.bic - const
        return c + (2 * gamma * k * math.log(p) if criterion == "ebic" else 0.0)

    sel: list[int] = []
    res0 = sm.OLS(ys, np.ones((m, 1))).fit()
    path = [crit(res0, 0)]
    cap = m - 3 if cap is None else cap
    while len(sel) < cap:
        best = None
        for j in range(p):
            if j in sel:
                continue
            res = sm.OLS(ys, sm.add_constant(xs[:, [*sel, j]], has_constant="add")).fit()
            if best is None or res.ssr < best[1].ssr - 1e-12:
                best = (j, res)
        c = crit(best[1], len(sel) + 1)
        if not c < path[-1]:
            break
        sel.append(best[0])
        path.append(c)
    final = sm.OLS(ys, sm.add_constant(xs[:, sel], has_constant="add")).fit() if sel else res0
    return sel, np.array(path), final


def _problem(seed: int, m: int, p: int, n_true: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, p)) * rng.uniform(0.5, 3, p) + rng.uniform(-2, 2, p)
    X[:, 3] = rng.integers(0, 3, m)  # tied values are fine
    beta = np.zeros(p)
    beta[rng.choice(p, n_true, replace=False)] = rng.uniform(0.5, 1.5, n_true)
    y = X @ beta + rng.standard_normal(m) * 0.8
    return X, y


@pytest.mark.parametrize("criterion", ["aic", "bic", "ebic"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_naive_statsmodels_greedy(criterion: str, seed: int) -> None:
    X, y = _problem(seed, 20, 25, 4)
    got = forward_select(X, y, criterion, block=7)
    sel, path, final = naive_forward(X, y, criterion)
    assert got.selected.tolist() == sel
    np.testing.assert_allclose(got.criterion_path, path, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got.rss_path[-1], final.ssr, rtol=1e-10)
    np.testing.assert_allclose(got.r2, final.rsquared, atol=1e-10)
    if sel:
        np.testing.assert_allclose(got.adj_r2, final.rsquared_adj, atol=1e-10)
        np.testing.assert_allclose(got.coef, final.params[1:], atol=1e-8)
        # raw-scale refit reproduces the same fitted values
        raw = sm.OLS(y, sm.add_constant(X[:, sel], has_constant="add")).fit()
        np.testing.assert_allclose(got.coef_raw, raw.params[1:], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(got.intercept_raw, raw.params[0], rtol=1e-7, atol=1e-9)


def test_overfitting_regime_hits_cap_like_naive() -> None:
    # many pure-noise candidates and AIC: runs to the k <= m - 3 cap
    rng = np.random.default_rng(5)
    X = rng.standard_normal((12, 60))
    y = rng.standard_normal(12)
    got = forward_select(X, y, "aic")
    sel, path, _ = naive_forward(X, y, "aic")
    assert got.selected.tolist() == sel
    np.testing.assert_allclose(got.criterion_path, path, atol=1e-8)
    assert got.k <= 12 - 3
    capped = forward_select(X, y, "aic", max_features=2)
    assert capped.selected.tolist() == sel[:2] and capped.stop_reason in (
        "max_features",
        "criterion",
    )


def test_collinear_and_constant_candidates_are_skipped() -> None:
    rng = np.random.default_rng(8)
    m = 30
    a = rng.standard_normal(m)
    b = rng.standard_normal(m)
    X = np.column_stack([a, 2 * a + 1, np.full(m, 3.0), b, a + b])
    y = a + 0.5 * b + 0.05 * rng.standard_normal(m)
    got = forward_select(X, y, "bic")
    assert got.n_excluded == 1  # the constant column
    assert 2 not in got.selected
    # once a and b are in, neither 2a+1 nor a+b may enter (exactly collinear)
    assert len(set(got.selected.tolist())) == got.k
    assert got.k == 2 and got.r2 > 0.98
    # the two picks span {a, b}; every remaining column is collinear with them
    assert got.stop_reason == "no_candidates"
    span = np.column_stack([np.ones(m), X[:, got.selected]])
    for j in (0, 1, 3, 4):
        resid = X[:, j] - span @ np.linalg.lstsq(span, X[:, j], rcond=None)[0]
        assert np.abs(resid).max() < 1e-8


def test_planted_support_recovered_with_bic() -> None:
    rng = np.random.default_rng(1)
    m, p = 40, 500
    X = rng.standard_normal((m, p))
    y = 2 * X[:, 10] - 1.5 * X[:, 200] + 0.3 * rng.standard_normal(m)
    res = forward_select(X, y, "ebic")
    assert sorted(res.selected.tolist()) == [10, 200]


def test_validation() -> None:
    X = np.ones((10, 3))
    with pytest.raises(SigmapInputError, match="criterion"):
        forward_select(X, np.arange(10.0), "cp")
    with pytest.raises(SigmapInputError, match="constant"):
        forward_select(np.random.default_rng(0).random((10, 3)), np.ones(10))
    with pytest.raises(SigmapInputError, match="match X"):
        forward_select(X, np.arange(9.0))
    with pytest.raises(SigmapInputError, match="NaN"):
        forward_select(np.full((10, 3), np.nan), np.arange(10.0))
    with pytest.raises(SigmapInputError, match="at least 4"):
        forward_select(np.ones((3, 2)), np.arange(3.0))

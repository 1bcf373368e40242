"""Tests for sigmap_lib.irt: closed-form leave-one-out against brute-force refits."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import fit_ridge


def _ridge_direct(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[float, np.ndarray]:
    """Penalised normal equations with an unpenalised intercept column (no SVD, no centring)."""
    a = np.column_stack([np.ones(len(x)), x])
    pen = alpha * np.eye(a.shape[1])
    pen[0, 0] = 0.0
    beta = np.linalg.solve(a.T @ a + pen, a.T @ y)
    return float(beta[0]), beta[1:]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_coefficients_and_loo_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, p = rng.integers(25, 60), rng.integers(3, 40)  # p > n/2 in some draws
    x = (rng.random((n, p)) < rng.uniform(0.2, 0.8, p)).astype(float)
    y = 50 + x @ rng.normal(0, 3, p) + rng.normal(0, 2, n)
    alphas = tuple(float(a) for a in np.logspace(-2, 2, 7))
    fit = fit_ridge(x, y, alphas=alphas)
    b0, b = _ridge_direct(x, y, fit.alpha)
    assert fit.intercept == pytest.approx(b0, rel=1e-8, abs=1e-8)
    np.testing.assert_allclose(fit.coef, b, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(fit.predict(x), b0 + x @ b, rtol=1e-9)
    # leave-one-out by n refits, for every alpha; the chosen alpha minimises it
    brute = {}
    for a in alphas:
        pred = np.empty(n)
        for i in range(n):
            keep = np.arange(n) != i
            c0, c = _ridge_direct(x[keep], y[keep], a)
            pred[i] = c0 + x[i] @ c
        brute[a] = float(np.sqrt(np.mean((pred - y) ** 2)))
        if a == fit.alpha:
            np.testing.assert_allclose(fit.loo_pred, pred, rtol=1e-7, atol=1e-7)
    for a in alphas:
        assert fit.loo_rmse[a] == pytest.approx(brute[a], rel=1e-7)
    assert fit.alpha == min(brute, key=brute.get)


def test_constant_columns_and_default_grid() -> None:
    rng = np.random.default_rng(5)
    x = (rng.random((80, 10)) < 0.5).astype(float)
    x[:, 3] = 1.0  # no variance: contributes nothing
    y = 3 * x[:, 0] - 2 * x[:, 1] + rng.normal(0, 0.1, 80)
    fit = fit_ridge(x, y)
    assert fit.coef[3] == pytest.approx(0.0, abs=1e-12)
    assert len(fit.loo_rmse) == 25
    assert fit.coef[0] > 2 and fit.coef[1] < -1.5  # planted signs and sizes recovered


def test_input_errors_name_the_problem() -> None:
    x = np.zeros((10, 2))
    with pytest.raises(SigmapInputError, match="rows"):
        fit_ridge(x, np.zeros(9))
    with pytest.raises(SigmapInputError, match="NaN"):
        fit_ridge(np.full((10, 2), np.nan), np.zeros(10))
    with pytest.raises(SigmapInputError, match="positive"):
        fit_ridge(np.eye(10), np.arange(10.0), alphas=(0.0,))
    with pytest.raises(SigmapInputError, match="shape"):
        fit_ridge(np.eye(10), np.arange(10.0)).predict(np.zeros((2, 3)))

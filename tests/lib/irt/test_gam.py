"""Tests for sigmap_lib.irt: CV smoothing, nonlinear truth, agreement with statsmodels."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import GamModel, TrainingScale, fit_gam, fit_pspline


def _rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def test_gam_beats_linear_on_nonlinear_truth():
    rng = np.random.default_rng(0)
    x = rng.normal(size=2500)
    y = 50 + 30 * np.tanh(1.5 * x) + rng.normal(0, 2, 2500)
    tr, te = slice(0, 1500), slice(1500, None)
    gam = fit_gam(x[tr], y[tr])
    lin = np.polyfit(x[tr], y[tr], 1)
    gam_rmse = _rmse(gam.predict(x[te]), y[te])
    lin_rmse = _rmse(np.polyval(lin, x[te]), y[te])
    assert gam_rmse < 0.5 * lin_rmse
    assert gam_rmse < 2.3  # noise sd is 2
    # CV picked an interior alpha that is the argmin of the recorded CV curve
    assert gam.alpha == min(gam.cv_rmse, key=gam.cv_rmse.get)


def test_cv_shortcut_solves_the_glmgam_system():
    """The CV shortcut's solve (X'X + 2 P(alpha)) beta = X'y equals GLMGam's own fit."""
    import statsmodels.api as sm
    from statsmodels.gam.api import BSplines, GLMGam

    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (300, 1))
    y = np.sin(2 * x[:, 0]) + rng.normal(0, 0.2, 300)
    bs = BSplines(x, df=[8], degree=[3], include_intercept=False)
    for a in (0.01, 1.0, 30.0):
        m = GLMGam(y, exog=np.ones((300, 1)), smoother=bs, alpha=[a], family=sm.families.Gaussian())
        ref = m.fit().params
        design = np.asarray(m.exog)
        pen = 2.0 * np.asarray(m.penal.penalty_matrix(alpha=[a]))
        ours = np.linalg.lstsq(design.T @ design + pen, design.T @ y, rcond=None)[0]
        assert np.allclose(ours, ref, rtol=1e-6, atol=1e-8)


def test_additive_multi_covariate_and_roundtrip():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1500, 3))
    y = x[:, 0] ** 2 + np.sin(2 * x[:, 1]) + 0.5 * x[:, 2] + rng.normal(0, 0.3, 1500)
    g = fit_gam(x[:1000], y[:1000])
    assert _rmse(g.predict(x[1000:]), y[1000:]) < 0.4
    again = GamModel.from_arrays(g.x_train, g.y_train, g.to_dict())
    assert np.allclose(again.predict(x[1000:]), g.predict(x[1000:]))
    # out-of-range covariates are clipped (constant extrapolation), not exploded
    far = np.full((1, 3), 50.0)
    edge = g.x_train.max(axis=0)[None, :]
    assert np.allclose(g.predict(far), g.predict(edge))


def test_pspline_fits_smooth_curve():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 800)
    y = 100 * x**2 + rng.normal(0, 1, 800)
    sp = fit_pspline(x, y)
    grid = np.linspace(0.05, 0.95, 50)
    assert np.max(np.abs(sp.predict(grid) - 100 * grid**2)) < 1.5


def test_gam_validation():
    with pytest.raises(SigmapInputError, match="rows"):
        fit_gam(np.zeros(50), np.zeros(40))
    with pytest.raises(SigmapInputError, match="NaN"):
        fit_gam(np.full(50, np.nan), np.zeros(50))
    g = fit_gam(np.linspace(0, 1, 100), np.sin(np.linspace(0, 6, 100)))
    with pytest.raises(SigmapInputError, match="covariates"):
        g.predict(np.zeros((3, 2)))


def test_rank_deficient_spline_design_fits_without_warning_spam():
    """Tied covariates leave B-spline columns empty; the penalised fit is still well
    defined (it passes through the group means) and no warning is emitted."""
    import warnings

    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=400), 0)  # 7 distinct values
    y = x + rng.normal(size=400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = fit_gam(x, y, df=20)
    assert not [w for w in caught if "rank-deficient" in str(w.message)]
    grid = np.array([v for v in np.unique(x) if (x == v).sum() >= 20])
    means = np.array([y[x == v].mean() for v in grid])
    assert len(grid) >= 4
    assert np.max(np.abs(g.predict(grid) - means)) < 0.3  # through the well-filled group means


@pytest.mark.parametrize("seed", range(5))
def test_training_scale_is_scikit_learns_standard_scaler_after_clipping(seed: int) -> None:
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    x = rng.normal(3.0, 2.0, size=(40, 4))
    x[:, 2] = 1.5  # a constant covariate: sd 0 counts as 1, as in scikit-learn
    new = rng.normal(3.0, 6.0, size=(25, 4))  # far outside the training range too
    want = StandardScaler().fit(x).transform(np.clip(new, x.min(axis=0), x.max(axis=0)))
    scaling = TrainingScale.fit(x)
    np.testing.assert_allclose(scaling.transform(new), want, rtol=1e-12, atol=1e-12)
    # the training rows are only standardised, and a model predicts with the same scaling
    np.testing.assert_allclose(scaling.transform(x), StandardScaler().fit_transform(x), atol=1e-12)
    gam = GamModel(x_train=x, y_train=x[:, 0] + rng.normal(0, 0.1, 40), alpha=1.0, df=6, degree=3)
    edge = np.clip(new, x.min(axis=0), x.max(axis=0))
    np.testing.assert_array_equal(gam.predict(new), gam.predict(edge))


@pytest.mark.parametrize("seed", [0, 1])
def test_models_kept_as_arrays_save_the_same_keys_and_check_covariates(seed: int) -> None:
    """The GAM and the joint ridge save the keys the stored runs hold, refit to the same
    predictions from them, and refuse covariates of the wrong width or with NaN."""
    from sigmap_lib.metabench import RidgeJoint

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(80, 2))
    y = np.tanh(x[:, 0]) + 0.5 * x[:, 1] + rng.normal(0, 0.1, 80)
    fitted = (fit_gam(x, y, df=6), RidgeJoint.fit(x, y))
    keys = (["alpha", "df", "degree", "cv_rmse"], ["kind", "alpha", "loo_rmse"])
    for model, want in zip(fitted, keys):
        saved = model.to_dict()
        assert list(saved) == want
        assert all(isinstance(k, str) for k in saved[want[-1]]) and len(saved[want[-1]]) > 1
        again = type(model).from_arrays(model.x_train, model.y_train, saved)
        np.testing.assert_array_equal(again.predict(x), model.predict(x))
        assert again.to_dict() == saved
        with pytest.raises(
            SigmapInputError, match=f"{model.what} predict: expected 2 covariates, got 3"
        ):
            model.predict(np.zeros((4, 3)))
        with pytest.raises(SigmapInputError, match="covariates contain NaN"):
            model.predict(np.full((1, 2), np.nan))
    assert fitted[1].to_dict()["kind"] == "ridge" and fitted[1].kind == "ridge"

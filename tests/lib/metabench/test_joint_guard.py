"""The joint model's guard (``fit_joint_model``): with few training models and many
benchmarks the additive GAM on all θs is ill-posed (1 + k (df - 1) coefficients for n rows)
and is replaced by ridge on the θs; with many models nothing changes.

The simulated "zoo-like" world reproduces what the zoo demo shows: ~70 training models,
16 benchmarks, and θs estimated from short selected tests (a monotone function of the
sum score, as EAPsum is), so they are heavily tied, with a ceiling on easy benchmarks.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pandas as pd
import pytest

from sigmap_lib import metabench as mb
from sigmap_lib.irt import fit_gam

N_BENCH = 16
N_TEST = 500


def _rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def zoo_like(seed: int, n_train: int = 70, *, n_short: int = 8, easy: float = 1.5):
    """θ-hat (sum score on each benchmark's first ``n_short`` items), grand score (mean
    of the 60-item full scores) for ``n_train + N_TEST`` simulated models."""
    rng = np.random.default_rng(seed)
    items = pd.DataFrame(
        {
            "a1": rng.lognormal(0.3, 0.4, 500),
            "d": rng.normal(easy, 1.0, 500),
            "g": np.zeros(500),
            "u": np.ones(500),
        }
    )
    resp, scores, _ = mb.simulate_benchmarks(
        n_train + N_TEST, {f"b{i:02d}": 60 for i in range(N_BENCH)}, seed=seed, item_params=items
    )
    x = np.column_stack([r.iloc[:, :n_short].sum(axis=1) for r in resp.values()]).astype(float)
    return x, scores.mean(axis=1).to_numpy(), n_train


def continuous(seed: int, n_train: int = 70, n_bench: int = N_BENCH):
    """θ-hat = planted θ + N(0, 0.35) noise (no ties), grand score of 60-item benchmarks."""
    _resp, scores, truth = mb.simulate_benchmarks(
        n_train + N_TEST, {f"b{i:02d}": 60 for i in range(n_bench)}, seed=seed
    )
    th = truth["theta"].to_numpy()
    x = th + np.random.default_rng(seed + 100).normal(0, 0.35, th.shape)
    return x, scores.mean(axis=1).to_numpy(), n_train


def held_out(x, y, n_train, **kw):
    """Held-out RMSE of the guarded model and of the unguarded GAM (df 6, as the zoo)."""
    tr, te = slice(0, n_train), slice(n_train, None)
    with warnings.catch_warnings():  # statsmodels warns on the ill-posed GAMs
        warnings.simplefilter("ignore")
        model, info = mb.fit_joint_model(x[tr], y[tr], df=6, **kw)
        gam = fit_gam(x[tr], y[tr], df=6)
    return _rmse(model.predict(x[te]), y[te]), _rmse(gam.predict(x[te]), y[te]), info


def test_the_rule() -> None:
    assert mb.gam_n_params(16, 6) == 81 and mb.gam_n_params(1, 6) == 6
    x, y, n = zoo_like(0)
    model, info = mb.fit_joint_model(x[:n], y[:n], df=6)
    assert info["model"] == "ridge" and isinstance(model, mb.RidgeJoint)
    assert info["n_params"] == 81 and info["n_train"] == 70 and info["gam_cv_rmse"] is None
    assert "81 coefficients for 70 training rows" in info["reason"]
    assert np.isfinite(info["ridge_loo_rmse"])
    # the rule is the setting: with 0.5 rows per coefficient the GAM would be tried
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _model, info = mb.fit_joint_model(x[:n], y[:n], df=6, rows_per_param=0.5)
    assert info["gam_cv_rmse"] is not None


@pytest.mark.parametrize("seed", range(8))
def test_zoo_like_guard_beats_the_gam(seed: int) -> None:
    """Every seed: the guard triggers and ridge beats the GAM on 500 held-out models."""
    x, y, n = zoo_like(seed)
    guarded, unguarded, info = held_out(x, y, n)
    assert info["model"] == "ridge"
    assert guarded < 0.97 * unguarded, (guarded, unguarded)
    assert guarded < 4.0  # grand-score sd is ~15 points


def test_zoo_like_margin_over_seeds() -> None:
    """Over 8 seeds the GAM collapses on some (statsmodels' B-spline penalty degenerates on
    tied θs: it predicts ~0 for everyone, as in the zoo demo's 37.3 points); ridge never."""
    res = np.array([held_out(*zoo_like(seed))[:2] for seed in range(8)])
    guarded, unguarded = res[:, 0], res[:, 1]
    assert guarded.max() < 4.0
    assert (unguarded > 30).sum() >= 1  # at least one collapse among these seeds
    assert unguarded.mean() > 3 * guarded.mean()
    assert np.median(unguarded / guarded) > 1.05


def test_continuous_theta_guard_does_no_harm() -> None:
    """Untied θs: the ill-posed GAM does not collapse and ridge is only a little better
    (2.57-2.75 vs 2.58-2.86 points on seeds 0-7); at least it must do no harm."""
    for seed in range(3):
        guarded, unguarded, info = held_out(*continuous(seed))
        assert info["model"] == "ridge"
        assert guarded < 1.15 * unguarded, (seed, guarded, unguarded)


def test_degenerate_gam_falls_back() -> None:
    """The second check: a GAM allowed by the size rule but no better than the constant
    (here the size rule is relaxed to 0.5 rows per coefficient) is replaced too."""
    for seed in range(8):
        x, y, n = zoo_like(seed)
        guarded, unguarded, info = held_out(x, y, n, rows_per_param=0.5)
        if unguarded > 30:  # a collapsed GAM
            assert info["model"] == "ridge" and info["reason"].startswith("degenerate GAM")
            assert guarded < 4.0
            return
    pytest.fail("no collapsed GAM among the seeds")


def test_large_n_is_unchanged() -> None:
    """1,000 training models, 3 benchmarks: the guard does not trigger and the model is
    exactly the plain GAM."""
    x, y, n = continuous(1, n_train=1000, n_bench=3)
    model, info = mb.fit_joint_model(x[:n], y[:n], df=20)
    assert info["model"] == "gam" and info["reason"].startswith("well-posed")
    plain = fit_gam(x[:n], y[:n], df=20)
    assert model.alpha == plain.alpha
    np.testing.assert_array_equal(model.predict(x[n:]), plain.predict(x[n:]))


def _fake_fits(x: np.ndarray, index: pd.Index) -> dict:
    """Per benchmark only what ``fit_joint`` reads: ``thetas`` (theta, role, score_pred)."""
    out = {}
    for b in range(x.shape[1]):
        th = pd.DataFrame({"theta": x[:, b], "role": "train", "score_pred": 0.0}, index=index)
        out[f"b{b:02d}"] = types.SimpleNamespace(thetas=th)
    return out


def test_fit_joint_records_the_model_large_n() -> None:
    x, y, n = continuous(2, n_train=900, n_bench=3)
    idx = pd.Index([f"m{i}" for i in range(len(y))])
    scores = pd.DataFrame({f"b{b:02d}": y for b in range(3)}, index=idx)  # mean = y
    split = pd.Series(np.where(np.arange(len(y)) < n, "train", "test"), index=idx)
    joint = mb.fit_joint(_fake_fits(x, idx), scores, split, config=mb.MetabenchConfig(gam_df=10))
    assert joint.grand_model == "gam"
    assert {v["model"] for v in joint.joint_models.values()} == {"gam"}
    plain = fit_gam(x[:n], y[:n], df=10, what="grand-score GAM")
    np.testing.assert_array_equal(joint.grand_gam.predict(x[n:]), plain.predict(x[n:]))


@pytest.fixture(scope="module")
def guarded_fit():
    """A whole (tiny) metabench run with 16 benchmarks and 90 models: the guard triggers."""
    resp, scores, _ = mb.simulate_benchmarks(90, {f"b{i:02d}": 30 for i in range(N_BENCH)}, seed=5)
    fit = mb.fit_metabench(resp, scores, seed=0, **{**mb.TINY_SETTINGS, "gam_df": 6})
    return resp, fit


def test_guarded_fit_persists_and_scores(guarded_fit, tmp_path) -> None:
    resp, fit = guarded_fit
    j = fit.joint
    assert j.grand_model == "ridge" and isinstance(j.grand_gam, mb.RidgeJoint)
    assert all(v["model"] == "ridge" for v in j.joint_models.values())
    assert set(j.joint_models) == {"grand", *fit.benchmarks}
    assert np.isfinite(fit.grand_test_rmse) and fit.grand_test_rmse < 5
    back = mb.MetabenchFit.load(fit.save(tmp_path / "mb"))
    assert back.joint.joint_models == j.joint_models
    assert isinstance(back.joint.grand_gam, mb.RidgeJoint)
    assert back.joint.grand_gam.alpha == j.grand_gam.alpha
    _, sc1 = mb.score_new_models(fit, resp)
    _, sc2 = mb.score_new_models(back, resp)
    np.testing.assert_array_equal(sc1["grand"].to_numpy(), sc2["grand"].to_numpy())
    assert sc2.attrs["joint_model"]["model"] == "ridge"
    assert "coefficients" in sc2.attrs["joint_model"]["reason"]
    for bm in fit.benchmarks:
        x = j.thetas.drop(columns="role").to_numpy()
        np.testing.assert_array_equal(
            back.joint.bench_gams[bm].predict(x), j.bench_gams[bm].predict(x)
        )

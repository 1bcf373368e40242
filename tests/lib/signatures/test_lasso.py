"""The authors' Lasso mode vs their published procedure, transcribed with pandas and
fitted with a plain scikit-learn Lasso on the same candidates (METHODS §2b)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import Lasso
from sklearn.preprocessing import StandardScaler

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import build_rank_store
from sigmap_lib.signatures import extract_signature, extract_signatures, thrush_correlation


def authors_signature(
    nll: np.ndarray, y: np.ndarray, pct: float, rank_method: str, alpha: float = 0.01
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """regression_run.py's run_thrush_lasso on a (features × models) frame of
    log-probabilities (= −NLL); models named so that sorted names keep the column order."""
    names = [f"m{i:03d}" for i in range(nll.shape[1])]
    feats = pd.DataFrame(-nll, columns=names)  # the authors' features are log-probs
    resp = {n: v for n, v in zip(names, y) if not np.isnan(v)}
    shared = sorted(set(feats.columns) & set(resp))
    # compute_thrush_rank_correlations
    ys = pd.Series(resp, dtype=float)[shared]
    v = 2.0 * ys.rank(method=rank_method).to_numpy() - (len(shared) + 1.0)
    r = feats[shared].T.rank(axis=0, method=rank_method).to_numpy()
    scores = pd.Series(2.0 * (r.T @ v), index=feats.index)
    # select_candidates_by_thrush
    min_c = max(2 * len(shared), 50)
    k = max(1, int(np.floor(float(np.clip(pct, 0, 0.5)) * len(scores))))
    top, bot = scores.nlargest(k).index.tolist(), scores.nsmallest(k).index.tolist()
    cand = list(dict.fromkeys(bot + top))
    if len(cand) < min_c:
        rest = scores[~scores.index.isin(cand)]
        need = min_c - len(cand)
        cand = list(
            dict.fromkeys(
                bot
                + rest.nsmallest(need // 2).index.tolist()
                + top
                + rest.nlargest((need + 1) // 2).index.tolist()
            )
        )
    # build_design_matrix
    rows = np.array(sorted(set(cand)))
    vals = feats.iloc[rows][shared].to_numpy(np.float64)
    vals = np.where(np.isfinite(vals), vals, np.nan)
    fin = ~np.isnan(vals).any(axis=1)
    vals, rows = vals[fin], rows[fin]
    var = np.nanvar(vals, axis=1) > 0
    vals, rows = vals[var], rows[var]
    x = StandardScaler(with_mean=True, with_std=True).fit_transform(vals.T)
    yy = ys.to_numpy()
    fit = Lasso(alpha=alpha, fit_intercept=False, max_iter=10000, random_state=42)
    fit.fit(x, yy - yy.mean())
    nz = fit.coef_ != 0
    out = pd.DataFrame({"row": rows[nz], "coef": fit.coef_[nz]})
    out = out.sort_values("coef", key=np.abs, ascending=False)
    return out["row"].to_numpy(), out["coef"].to_numpy(), np.sort(np.asarray(cand))


def _problem(seed: int, d: int, m: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    nll = rng.gamma(3.0, 1.0, (d, m))
    nll[: d // 4] = np.round(nll[: d // 4])  # ties in the values
    a = rng.standard_normal(m)
    planted = rng.choice(d, 4, replace=False)
    nll[planted] = 5 - a + 0.3 * rng.standard_normal((4, m))
    y = scale * (0.5 + 0.1 * a + 0.02 * rng.standard_normal(m))  # accuracies in [0, 1]
    return nll, y, planted


@pytest.mark.parametrize(
    "case",
    [
        # (d, m, tail_fraction, ranking): padding to max(2m, 50); no padding; every unit a
        # candidate (d < 50) with constant units; the authors' "first" ties
        (3000, 16, 1e-6, "average"),
        (3000, 16, 0.02, "average"),
        (40, 12, 1e-6, "average"),
        (3000, 30, 1e-3, "first"),
        (45, 10, 0.01, "first"),
    ],
)
def test_lasso_equals_the_authors_procedure(case) -> None:
    d, m, pct, ranking = case
    nll, y, _ = _problem(d + m, d, m)
    nll[3] = 2.0  # a zero-variance unit
    nll[d - 2] = nll[d - 3]  # duplicate units: tied scores across units
    y[1] = y[2]  # tied scores
    [sig] = extract_signatures(nll, y, method="lasso", tail_fraction=pct, ranking=ranking)
    units, coef, cand = authors_signature(nll, y, pct, ranking)
    np.testing.assert_array_equal(sig.candidates, cand)
    np.testing.assert_array_equal(sig.units, units)
    # NLL features standardize to minus the log-probability features: negated coefficients
    np.testing.assert_allclose(sig.coef, -coef, rtol=1e-12, atol=1e-15)
    assert sig.method == "lasso" and sig.units.size > 0
    info = sig.extra["lasso"]
    assert info["n_candidates"] == cand.size and info["ranking"] == ranking
    if d < 50:
        assert info["n_usable"] < cand.size  # the constant unit was dropped
        assert 3 not in sig.units
    json.dumps(sig.summary(), allow_nan=False)


def test_missing_scores_rank_store_and_alpha() -> None:
    nll, y, planted = _problem(1, 2000, 20)
    y[[0, 5]] = np.nan
    [sig] = extract_signatures(nll, y, method="lasso")
    units, coef, _ = authors_signature(nll, y, 1e-6, "average")
    np.testing.assert_array_equal(sig.units, units)
    np.testing.assert_allclose(sig.coef, -coef, rtol=1e-12, atol=1e-15)
    assert sig.models_used.sum() == 18
    assert set(planted.tolist()) & set(sig.units.tolist())
    # the penalty acts on the scores in the units given
    [big] = extract_signatures(nll, 100 * y, method="lasso")
    units100, _, _ = authors_signature(nll, 100 * y, 1e-6, "average")
    np.testing.assert_array_equal(big.units, units100)
    strong = extract_signature(nll, y, method="lasso", lasso_alpha=0.05)
    assert strong.units.size < sig.units.size


def test_lasso_from_a_rank_store_with_nll_arrays(tmp_path) -> None:
    nll, y, _ = _problem(2, 1500, 14)
    nll = nll.astype(np.float32)
    m = nll.shape[1]
    cols = [nll[:, j] for j in range(m)]
    store = build_rank_store(cols, [f"m{j}" for j in range(m)], np.ones(len(nll)), tmp_path / "r")
    for ranking in ("average", "first"):
        a = extract_signature(nll, y, method="lasso", ranking=ranking)
        b = extract_signature(store, y, method="lasso", ranking=ranking, nll_arrays=cols)
        np.testing.assert_array_equal(a.units, b.units)
        np.testing.assert_array_equal(a.coef, b.coef)
    with pytest.raises(SigmapInputError, match="nll_arrays"):
        extract_signature(store, y, method="lasso")


def test_lasso_units_get_a_max_t_calibration_when_asked() -> None:
    nll, y, planted = _problem(3, 2000, 24)
    sig = extract_signature(nll, y, method="lasso", n_permutations=49, seed=2)
    cal = sig.calibration
    assert cal.method == "calibrated-marginal" and cal.n_permutations == 49
    np.testing.assert_array_equal(cal.units, sig.units)
    np.testing.assert_allclose(cal.values, thrush_correlation(nll[sig.units], y), rtol=1e-12)
    st = np.abs(cal.values)
    want = (1 + (cal.null_max[None, :] >= st[:, None]).sum(axis=1)) / 50
    np.testing.assert_allclose(cal.adjusted_p, want)
    # the planted units stand above chance, the Lasso's fillers mostly do not
    strong = set(sig.units[cal.adjusted_p <= 0.05].tolist())
    assert strong and strong <= set(planted.tolist())
    assert extract_signature(nll, y, method="lasso").calibration is None


def test_lasso_validation() -> None:
    nll, y, _ = _problem(4, 200, 10)
    with pytest.raises(SigmapInputError, match="ranking"):
        extract_signatures(nll, y, method="lasso", ranking="dense")
    with pytest.raises(SigmapInputError, match="n_bootstrap"):
        extract_signatures(nll, y, method="lasso", n_bootstrap=5)
    with pytest.raises(SigmapInputError, match="lasso_alpha"):
        extract_signatures(nll, y, method="lasso", lasso_alpha=0.0)

"""Two-stage signatures vs the same steps composed by hand from the public functions."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import build_rank_store
from sigmap_lib.signatures import (
    extract_signature,
    extract_signatures,
    forward_select,
    gather_units,
    thrush_correlation,
)


def _planted(seed: int, d: int = 1500, m: int = 16):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(m)
    v = rng.standard_normal((d, m)).astype(np.float32)
    v[:, 3] = np.round(v[:, 3])  # ties
    planted = np.array([7, d // 3, d - 5])
    v[planted] = (-a[None, :] + 0.3 * rng.standard_normal((3, m))).astype(np.float32)
    y = a + 0.2 * rng.standard_normal(m)
    return v, y, planted


def _top_by_full_sort(v: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    t = np.abs(thrush_correlation(v, y))
    return np.lexsort((np.arange(len(t)), -t))[:k]


def test_gather_units_reads_exactly_the_requested_units(tmp_path) -> None:
    rng = np.random.default_rng(0)
    v = rng.standard_normal((500, 4)).astype(np.float32)
    arrays = []
    for j in range(4):
        z = zarr.create_array(
            store=str(tmp_path / f"{j}.zarr"), shape=(500,), chunks=(64,), dtype="float32"
        )
        z[:] = v[:, j]
        arrays.append(z if j % 2 else str(tmp_path / f"{j}.zarr"))
    idx = np.array([499, 3, 3, 250, 0])
    want = v[idx].T.astype(np.float64)
    np.testing.assert_array_equal(gather_units(arrays, idx), want)
    np.testing.assert_array_equal(gather_units([v[:, j] for j in range(4)], idx), want)
    np.testing.assert_array_equal(gather_units(v, idx), want)
    assert gather_units(v, []).shape == (4, 0)
    with pytest.raises(SigmapInputError, match="unit indices"):
        gather_units(v, [500])


@pytest.mark.parametrize("criterion", ["aic", "ebic"])
def test_extract_signature_equals_hand_composed_pipeline(tmp_path, criterion: str) -> None:
    v, y, planted = _planted(1)
    sig = extract_signature(v, y, k=40, method=criterion)
    cand = _top_by_full_sort(v, y, 40)
    np.testing.assert_array_equal(sig.candidates, cand)
    ref = forward_select(v[cand].T, y, criterion)
    np.testing.assert_array_equal(sig.units, cand[ref.selected])
    np.testing.assert_allclose(sig.selection.criterion_path, ref.criterion_path)
    if criterion == "ebic":
        assert set(sig.units.tolist()) & set(planted.tolist())
    # the same from a rank store plus per-model zarr arrays
    m = v.shape[1]
    store = build_rank_store(
        [v[:, j] for j in range(m)],
        [f"m{j}" for j in range(m)],
        np.ones(len(v)),
        tmp_path / "r",
        chunk_units=400,
    )
    sig2 = extract_signature(
        store, y, nll_arrays=[v[:, j] for j in range(m)], k=40, method=criterion
    )
    np.testing.assert_array_equal(sig2.units, sig.units)
    with pytest.raises(SigmapInputError, match="nll_arrays"):
        extract_signature(store, y, k=40, method="aic")


def test_loo_r2_matches_manual_refit_of_the_whole_procedure() -> None:
    v, y, _ = _planted(2, d=600, m=12)
    y[4] = np.nan  # an unscored model is left out everywhere
    sig = extract_signature(v, y, k=15, method="bic", loo=True)
    avail = np.flatnonzero(~np.isnan(y))
    pred = np.full(len(y), np.nan)
    for i in avail:
        train = np.setdiff1d(avail, [i])
        cand = _top_by_full_sort(v[:, train], y[train], 15)
        fit = forward_select(v[np.ix_(cand, train)].T, y[train], "bic")
        units = cand[fit.selected]
        pred[i] = fit.intercept_raw + v[units, i].astype(np.float64) @ fit.coef_raw
    np.testing.assert_allclose(sig.loo_predictions, pred, rtol=1e-9, atol=1e-9)
    yy = y[avail]
    want = 1 - ((yy - pred[avail]) ** 2).sum() / ((yy - yy.mean()) ** 2).sum()
    assert sig.loo_r2 == pytest.approx(want, rel=1e-12)
    assert not sig.models_used[4]


def test_bootstrap_and_null_calibration() -> None:
    v, y, _ = _planted(3)
    sig = extract_signature(v, y, k=30, method="ebic", n_bootstrap=20, n_permutations=19, seed=1)
    assert sig.bootstrap_frequency is not None
    assert sig.bootstrap_frequency.shape == sig.units.shape
    assert np.all((sig.bootstrap_frequency >= 0) & (sig.bootstrap_frequency <= 1))
    # the strongest planted unit is selected in most resamples
    assert sig.bootstrap_frequency.max() >= 0.5
    null = sig.null
    assert null is not None and null.best_strength.shape == (19,)
    assert null.real_best > np.quantile(null.best_strength, 0.95)
    assert null.p_best == pytest.approx(1 / 20)
    # null best strengths equal an independent screen of the permuted scores
    rng = np.random.default_rng(1)
    avail = np.arange(len(y))
    yp = y[rng.permutation(avail)]
    t = np.abs(thrush_correlation(v, yp))
    assert null.best_strength[0] == pytest.approx(t.max())
    s = sig.summary()
    assert s["null"]["n_permutations"] == 19 and s["units"] == sig.units.tolist()
    again = extract_signature(v, y, k=30, method="ebic", n_bootstrap=20, n_permutations=19, seed=1)
    np.testing.assert_array_equal(again.bootstrap_frequency, sig.bootstrap_frequency)


def test_multi_benchmark_single_pass_equals_separate_runs() -> None:
    v, y, _ = _planted(4, d=800)
    rng = np.random.default_rng(9)
    y2 = np.column_stack([y, rng.standard_normal(len(y))])
    y2[0, 1] = np.nan
    both = extract_signatures(v, y2, benchmark_names=["a", "b"], k=20, method="bic")
    assert [s.benchmark for s in both] == ["a", "b"]
    for b in range(2):
        one = extract_signature(v, y2[:, b], k=20, method="bic")
        np.testing.assert_array_equal(both[b].units, one.units)

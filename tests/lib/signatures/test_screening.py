"""Stage-1 screening: Thrush / pre-select vs brute force, sign_cdf, streaming top-K."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from scipy.stats import rankdata

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import build_rank_store, encode_ranks
from sigmap_lib.signatures import (
    preselect_correlation,
    preselect_from_codes,
    screen,
    strength_of,
    thrush_correlation,
    thrush_from_codes,
    thrush_max,
)


def _sign(x: float) -> int:
    return int(x > 0) - int(x < 0)


def brute_thrush(p: np.ndarray, y: np.ndarray) -> float:
    """METHODS §2 literally, normalized by the max over ALL permutations of ranks."""
    m = len(y)
    r = rankdata(p, method="average")
    g = sum(_sign(y[k] - y[l]) * (r[l] - r[k]) for k in range(m) for l in range(k + 1, m))  # noqa: E741
    return g / brute_thrush_max(y)


def brute_thrush_max(y: np.ndarray) -> float:
    return _brute_thrush_max(tuple(float(v) for v in y))


@functools.lru_cache(maxsize=64)
def _brute_thrush_max(y: tuple[float, ...]) -> float:
    m = len(y)
    if m <= 7:
        best = -np.inf
        for perm in itertools.permutations(range(1, m + 1)):
            g = sum(
                _sign(y[k] - y[l]) * (perm[l] - perm[k])
                for k in range(m)
                for l in range(k + 1, m)  # noqa: E741
            )
            best = max(best, g)
        return float(best)
    # perfectly ordered ranks (best model least perplexed) attain the max
    r = rankdata(-np.asarray(y), method="ordinal")
    return float(sum(_sign(y[k] - y[l]) * (r[l] - r[k]) for k in range(m) for l in range(k + 1, m)))  # noqa: E741


def brute_preselect(p: np.ndarray, y: np.ndarray) -> float:
    m = len(y)
    wrong, z = 0.0, 0
    for k in range(m):
        for l in range(k + 1, m):  # noqa: E741
            if y[k] == y[l]:
                continue
            z += 1
            prod = (y[k] - y[l]) * (p[k] - p[l])
            wrong += 1.0 if prod > 0 else (0.5 if p[k] == p[l] else 0.0)
    return wrong / z


def _random_problem(rng: np.random.Generator, d: int, m: int, b: int):
    v = rng.standard_normal((d, m))
    v[: d // 2] = rng.integers(0, 3, size=(d // 2, m))  # heavy ties in p
    y = rng.integers(0, 5, size=(m, b)).astype(float)  # ties in y
    y[:, 0] = rng.standard_normal(m)
    return v, y


@pytest.mark.parametrize("m", [3, 5, 7, 12])
def test_thrush_and_preselect_match_brute_force(m: int) -> None:
    rng = np.random.default_rng(100 + m)
    v, y = _random_problem(rng, 60, m, 3)
    th = thrush_correlation(v, y)
    ps = preselect_correlation(v, y)
    assert th.shape == ps.shape == (60, 3)
    for b in range(3):
        np.testing.assert_allclose(thrush_max(y[:, b]), brute_thrush_max(y[:, b]))
        for j in range(60):
            assert th[j, b] == pytest.approx(brute_thrush(v[j], y[:, b]), abs=1e-12)
            assert ps[j, b] == pytest.approx(brute_preselect(v[j], y[:, b]), abs=1e-12)
    assert np.all(np.abs(th) <= 1 + 1e-12) and np.all((ps >= 0) & (ps <= 1))
    # 1-D scores give 1-D output
    np.testing.assert_array_equal(thrush_correlation(v, y[:, 1]), th[:, 1])
    np.testing.assert_array_equal(preselect_correlation(v, y[:, 2]), ps[:, 2])


def test_conventions_perfect_predictor() -> None:
    y = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    good = -y[None, :] * 0.1  # better models less perplexed
    assert thrush_correlation(good, y)[0] == pytest.approx(1.0)
    assert preselect_correlation(good, y)[0] == pytest.approx(0.0)
    assert thrush_correlation(-good, y)[0] == pytest.approx(-1.0)
    assert preselect_correlation(-good, y)[0] == pytest.approx(1.0)
    flat = np.zeros((1, 5))
    assert thrush_correlation(flat, y)[0] == 0.0
    assert preselect_correlation(flat, y)[0] == 0.5


def test_from_codes_equals_from_values() -> None:
    rng = np.random.default_rng(3)
    v, y = _random_problem(rng, 500, 32, 4)
    codes = encode_ranks(v)
    np.testing.assert_array_equal(thrush_from_codes(codes, y), thrush_correlation(v, y))
    np.testing.assert_array_equal(preselect_from_codes(codes, y), preselect_correlation(v, y))
    # large m takes the uint16 path
    v2, y2 = _random_problem(rng, 20, 140, 1)
    for j in range(0, 20, 7):
        assert thrush_correlation(v2, y2)[j, 0] == pytest.approx(brute_thrush(v2[j], y2[:, 0]))
        assert preselect_correlation(v2, y2)[j, 0] == pytest.approx(
            brute_preselect(v2[j], y2[:, 0])
        )


def test_thrush_is_positive_multiple_of_sign_cdf() -> None:
    from perplexity_correlations.estimation import sign_cdf

    rng = np.random.default_rng(7)
    m, d = 32, 2000
    x = rng.random((m, d))  # continuous: ordinal ranks (sign_cdf) == average ranks
    scores = rng.integers(0, 10, m) / 10.0  # ties in y are fine
    ref = sign_cdf(x, 1.0 - scores)  # the package takes benchmark ERRORS
    ours = thrush_correlation(x.T, scores)
    scale = ours / ref
    assert np.all(np.isfinite(scale[np.abs(ref) > 1e-9]))
    s = scale[np.abs(ref) > 1e-9]
    assert s.min() > 0
    np.testing.assert_allclose(s, s[0], rtol=1e-9)
    # the scale is exactly m(m-1)/2 * m / max  (U-statistic mean of CDF differences)
    np.testing.assert_allclose(s[0], m * (m - 1) / 2 * m / thrush_max(scores)[0], rtol=1e-12)


def test_missing_scores_screen_each_benchmark_on_its_models() -> None:
    rng = np.random.default_rng(9)
    v, y = _random_problem(rng, 200, 10, 3)
    y[[1, 4], 1] = np.nan
    y[7, 2] = np.nan
    th = thrush_correlation(v, y)
    ps = preselect_correlation(v, y)
    for b in range(3):
        keep = ~np.isnan(y[:, b])
        np.testing.assert_allclose(th[:, b], thrush_correlation(v[:, keep], y[keep, b]))
        np.testing.assert_allclose(ps[:, b], preselect_correlation(v[:, keep], y[keep, b]))
        j = 17
        assert th[j, b] == pytest.approx(brute_thrush(v[j, keep], y[keep, b]))


def test_score_validation() -> None:
    v = np.random.default_rng(0).random((5, 4))
    with pytest.raises(SigmapInputError, match="model rows"):
        thrush_correlation(v, np.arange(3.0))
    with pytest.raises(SigmapInputError, match="all scores are equal"):
        thrush_correlation(v, np.ones(4))
    with pytest.raises(SigmapInputError, match="need >= 3"):
        preselect_correlation(v, np.array([1.0, 2.0, np.nan, np.nan]))
    with pytest.raises(SigmapInputError, match="inf"):
        thrush_correlation(v, np.array([1.0, 2.0, np.inf, 0.0]))


def _full_sort_topk(stat: np.ndarray, strength: np.ndarray, k: int) -> np.ndarray:
    order = np.lexsort((np.arange(len(strength)), -strength))
    return order[:k]


@pytest.mark.parametrize("statistic", ["thrush", "preselect"])
@pytest.mark.parametrize("two_sided", [True, False])
def test_streaming_topk_equals_full_sort(statistic: str, two_sided: bool) -> None:
    rng = np.random.default_rng(21)
    d, m = 3000, 9
    v, y = _random_problem(rng, d, m, 3)  # discrete statistics: many ties in strength
    y[2, 2] = np.nan
    th = thrush_correlation(v, y)
    ps = preselect_correlation(v, y)
    stat = th if statistic == "thrush" else ps
    for k in (1, 37, 400):
        res = screen(v, y, k=k, statistic=statistic, two_sided=two_sided, chunk_units=251)
        assert len(res) == 3
        for b, r in enumerate(res):
            strength = strength_of(stat[:, b], statistic, two_sided)
            want = _full_sort_topk(stat[:, b], strength, k)
            np.testing.assert_array_equal(r.indices, want)
            np.testing.assert_array_equal(r.thrush, th[want, b])
            np.testing.assert_allclose(r.preselect, ps[want, b], rtol=0, atol=1e-12)
            lo, hi = (-1, 1) if statistic == "thrush" else (0, 1)
            counts, _ = np.histogram(np.clip(stat[:, b], lo, hi), bins=r.hist_edges)
            # np.histogram closes the last bin like ours; bin assignment may differ only
            # at values sitting exactly on an inner edge
            assert r.hist_counts.sum() == d
            assert (
                np.abs(r.hist_counts - counts).sum()
                <= 2 * np.isclose(stat[:, b][:, None], r.hist_edges[None, 1:-1]).sum()
            )
            assert r.n_units == d and r.k == k
            assert r.models_used.sum() == (m - 1 if b == 2 else m)


def test_screen_sources_agree(tmp_path) -> None:
    rng = np.random.default_rng(4)
    d, m = 2500, 8
    v, y = _random_problem(rng, d, m, 2)
    v = v.astype(np.float32)
    store = build_rank_store(
        [v[:, j] for j in range(m)],
        [f"m{j}" for j in range(m)],
        np.ones(d),
        tmp_path / "r",
        chunk_units=700,
    )
    a = screen(v, y, q=0.02, chunk_units=333)
    b = screen(store, y, q=0.02, chunk_units=1000)
    c = screen([v[:, j].copy() for j in range(m)], y, q=0.02, chunk_units=512)
    for ra, rb, rc in zip(a, b, c):
        assert ra.k == 50
        np.testing.assert_array_equal(ra.indices, rb.indices)
        np.testing.assert_array_equal(ra.indices, rc.indices)
        np.testing.assert_array_equal(ra.hist_counts, rb.hist_counts)
        np.testing.assert_array_equal(ra.preselect, rc.preselect)


def test_screen_validation() -> None:
    v = np.random.default_rng(0).random((10, 4))
    y = np.arange(4.0)
    with pytest.raises(SigmapInputError, match="statistic"):
        screen(v, y, statistic="pearson")
    with pytest.raises(SigmapInputError, match="q must"):
        screen(v, y, q=0.0)
    with pytest.raises(SigmapInputError, match="benchmark arc"):
        screen(v, np.ones((4, 1)), benchmark_names=["arc"])
    with pytest.raises(SigmapInputError, match="RankStore"):
        screen("nope", y)


@pytest.mark.parametrize("m", [32, 129])
def test_fused_kernels_match_brute_force_with_ties_nan_scores_and_layouts(m: int) -> None:
    """SIMD-blocked kernels (units across lanes, 128 per block) vs the O(m²) loops.

    Covers: a unit count that is not a multiple of the block, heavy ties in the values,
    ties in the scores, NaN-score models (benchmarks screened on a model subset),
    a model-major (transposed) input layout, integer inputs, and the stored-codes paths.
    """
    rng = np.random.default_rng(1000 + m)
    d = 300
    v, y = _random_problem(rng, d, m, 3)
    v[5] = 1.0  # a fully tied unit
    y[[0, 3, m - 1], 1] = np.nan
    y[2, 2] = np.nan
    th = thrush_correlation(v, y)
    ps = preselect_correlation(v, y)
    rows = range(0, d, 7) if m > 100 else range(d)
    for b in range(3):
        keep = ~np.isnan(y[:, b])
        for j in rows:
            assert th[j, b] == pytest.approx(brute_thrush(v[j, keep], y[keep, b]), abs=1e-12)
            assert ps[j, b] == pytest.approx(brute_preselect(v[j, keep], y[keep, b]), abs=1e-12)
    vt = np.ascontiguousarray(v.T).T  # model-major memory, as the zarr reader yields
    np.testing.assert_array_equal(thrush_correlation(vt, y), th)
    np.testing.assert_array_equal(preselect_correlation(vt, y), ps)
    np.testing.assert_array_equal(thrush_correlation(v.astype(np.float32), y), th)
    codes = encode_ranks(v)
    np.testing.assert_array_equal(thrush_from_codes(codes, y), th)
    np.testing.assert_array_equal(preselect_from_codes(codes, y), ps)
    vi = rng.integers(0, 3, size=(d, m)).astype(np.int16)
    np.testing.assert_array_equal(
        thrush_correlation(vi, y), thrush_correlation(vi.astype(np.float64), y)
    )
    for statistic in STATS:
        res = screen(vt, y, k=25, statistic=statistic, chunk_units=97)
        stat = th if statistic == "thrush" else ps
        for b, r in enumerate(res):
            want = _full_sort_topk(stat[:, b], strength_of(stat[:, b], statistic, True), 25)
            np.testing.assert_array_equal(r.indices, want)
            np.testing.assert_array_equal(r.thrush, th[want, b])
            np.testing.assert_allclose(r.preselect, ps[want, b], rtol=0, atol=1e-12)


STATS = ("thrush", "preselect")

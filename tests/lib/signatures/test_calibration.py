"""Calibrated (max-T) signatures vs brute force, their error rate on noise, planted truth."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import rankdata

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import build_rank_store
from sigmap_lib.signatures import (
    MaxTPartial,
    extract_signature,
    extract_signatures,
    general_quality,
    max_t_threshold,
    merge_max_t,
    pooled_strata,
)
from sigmap_lib.worlds import make_synthetic_world, planted_recovery

# ----------------------------------------------------------------------------------------
# brute force: the full (n_units, n_models) matrix, numpy / scipy, one permutation at a time


def _thrush_brute(r: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Normalized Thrush of rank rows ``r`` with scores ``y`` (METHODS §2 literally)."""
    m = y.size
    c = np.sign(y[:, None] - y[None, :]).sum(axis=1)
    best = rankdata(-y, method="ordinal")  # the best model least perplexed attains the max
    iu = np.triu_indices(m, 1)
    den = (np.sign(y[iu[0]] - y[iu[1]]) * (best[iu[1]] - best[iu[0]])).sum()
    return -(r @ c) / den


def _brute_partial(
    v, y, perms, shared, strength, strata=None, statistic="spearman", every_unit=False
):
    """The calibrated statistic from its definition: ĝ = −mean value, residuals of units
    (lstsq) and scores (statsmodels OLS) on [1, spline(ĝ)] (+ stratum indicators), the
    Pearson (numpy) or Spearman (scipy) correlation of the two residuals, Freedman–Lane
    permutations re-fitted by OLS. The null: each permutation's maximum strength, or with
    ``every_unit`` every unit's strength under every permutation, shape (P, d)."""
    top = (lambda x: x) if every_unit else np.max
    import statsmodels.api as sm
    from scipy.stats import norm, spearmanr
    from sklearn.preprocessing import SplineTransformer

    from sigmap_lib.signatures import basis_shape

    m = y.size
    g = -v.mean(axis=0)
    n_knots, degree = basis_shape(m)
    z = SplineTransformer(
        n_knots=n_knots, degree=degree, knots="quantile", extrapolation="linear"
    ).fit_transform(((g - g.mean()) / g.std())[:, None])
    z = np.column_stack([np.ones(m), z])
    if strata is not None:
        lab = pooled_strata(strata)
        z = np.column_stack([z] + [(lab == s).astype(float) for s in np.unique(lab)])
    zs = (g - g.mean()) / g.std()
    # the score side's design: z, or z and a cubic spline, whichever has the smallest BIC
    designs = [z]
    for n in (3, 5, 8, 12):
        if m - (int(np.linalg.matrix_rank(z)) + n + 2) < 9:
            break
        sp = SplineTransformer(n_knots=n, degree=3, knots="quantile", extrapolation="linear")
        designs.append(np.column_stack([z, sp.fit_transform(zs[:, None])]))

    def bic(x):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ssr = sm.OLS(y, x).fit(method="pinv").ssr
        return m * np.log(max(ssr, 1e-300) / m) + np.log(m) * np.linalg.matrix_rank(x)

    zy = designs[int(np.argmin([bic(x) for x in designs]))]
    # units on the base design, scores on their own
    coef, *_ = np.linalg.lstsq(z, v.T, rcond=None)
    z_units = z

    def spread(e):  # exp of the OLS fit of log|e| on [1, z(g)]
        a = np.log(np.abs(e) + 1e-9 * max(np.abs(e).max(), 1e-300))
        return np.exp(sm.OLS(a, sm.add_constant(zs)).fit().fittedvalues)

    ru = v - (z_units @ coef).T
    tiny = np.linalg.norm(ru, axis=1) <= 1e-7 * np.linalg.norm(v - v.mean(1, keepdims=True), axis=1)

    def resid(w, x=zy):
        import warnings

        with warnings.catch_warnings():  # the spline and the intercept are collinear: pinv
            warnings.simplefilter("ignore")
            return sm.OLS(w, x).fit(method="pinv").resid

    def student(e):
        return resid(e / spread(e))

    def stat(e):
        if statistic == "spearman":
            rho = spearmanr(np.column_stack([ru.T, e])).statistic[-1, :-1]
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                rho = np.corrcoef(np.vstack([ru, e]))[-1, :-1]
        return np.where(tiny, 0.0, -np.nan_to_num(rho))

    e = resid(y)
    yc = y - y.mean()
    if e @ e <= 1e-18 * max(yc @ yc, 1e-300):
        e = np.zeros(m)
    obs = stat(student(e))
    if shared:
        base = norm.ppf(np.arange(1.0, m + 1) / (m + 1))
        xs = [resid(base[p], z) for p in perms]
        null = np.array([top(strength(stat(resid(x / spread(x), z)))) for x in xs])
        return obs, null, g
    s0 = spread(e)
    null = np.array([top(strength(stat(student(resid(s0 * (e / s0)[p]))))) for p in perms])
    return obs, null, g


def brute_max_t(
    values: np.ndarray,
    y: np.ndarray,
    cal,
    method: str,
    shared: bool,
    two_sided: bool = True,
    strata=None,
    statistic: str = "spearman",
):
    """Observed statistic of every unit and the null maxima of ``cal.permutations``."""
    strength = np.abs if two_sided else (lambda x: x)
    mask = ~np.isnan(y)
    yy = y[mask]
    m = int(mask.sum())
    r = rankdata(values[:, mask], axis=1, method="average")  # re-ranked within the subset
    perms = cal.permutations
    if method == "calibrated":
        return _brute_partial(values[:, mask], yy, perms, shared, strength, strata, statistic)
    obs = _thrush_brute(r, yy)
    base = np.arange(1.0, m + 1) if shared else yy
    null = np.array([strength(_thrush_brute(r, base[p])).max() for p in perms])
    return obs, null, None


def _problem(seed: int, d: int = 300, m: int = 15):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((d, m))
    v[: d // 3] = rng.integers(0, 3, size=(d // 3, m))  # heavy ties in the values
    v[9] = 1.0  # a fully tied unit
    a = rng.standard_normal(m)
    v[[20, 200]] = -a + 0.2 * rng.standard_normal((2, m))
    y = rng.integers(0, 6, size=(m, 3)).astype(float)  # tied scores
    y[:, 0] = a + 0.1 * rng.standard_normal(m)
    y[[1, 4], 1] = np.nan  # benchmark 1 is screened on a subset of the models
    y[7, 2] = np.nan
    return v, y


@pytest.mark.parametrize(
    "method,partial",
    [("calibrated", "pearson"), ("calibrated", "spearman"), ("calibrated-marginal", None)],
)
@pytest.mark.parametrize("shared", [False, True])
def test_streamed_max_t_equals_brute_force(method: str, partial, shared: bool) -> None:
    v, y = _problem(5)
    opt = {"partial_statistic": partial} if partial else {}
    alpha = 0.95  # a low threshold: many units pass, so many statistics are compared
    ref = None
    n_compared = 0
    for chunk in (37, 256, 5000):
        sigs = extract_signatures(
            v, y, method=method, shared_null=shared, n_permutations=30, alpha=alpha,
            chunk_units=chunk, seed=3, **opt,
        )  # fmt: skip
        for b, s in enumerate(sigs):
            cal = s.calibration
            assert s.method == method and cal.method == method
            assert cal.shared is shared and cal.n_permutations == 30
            assert cal.n_models == int((~np.isnan(y[:, b])).sum()) and cal.n_units == len(v)
            obs, null, g = brute_max_t(
                v, y[:, b], cal, method, shared, statistic=partial or "spearman"
            )
            if g is not None:
                np.testing.assert_allclose(cal.general_quality, g, rtol=1e-12)
            # partial: float32 products of exact codes (~1e-7 relative); marginal: exact
            np.testing.assert_allclose(cal.null_max, null, rtol=1e-5, atol=1e-7)
            if method == "calibrated-marginal":
                np.testing.assert_array_equal(cal.null_max, null)
            st = np.abs(obs)
            assert cal.observed_max == pytest.approx(st.max(), rel=1e-12)
            t = np.quantile(np.append(null, st.max()), 1 - alpha, method="higher")
            assert cal.threshold == pytest.approx(t, rel=1e-5)
            want = np.flatnonzero(st > t)
            want = want[np.lexsort((want, -st[want]))]
            n_compared += want.size
            np.testing.assert_array_equal(s.units, want)
            np.testing.assert_allclose(cal.values, obs[want], rtol=1e-10, atol=1e-12)
            # Spearman and Thrush are discrete: a unit can tie a permutation maximum exactly
            rn, rs = np.round(null, 9), np.round(st[want], 9)
            p_adj = (1 + (rn[None, :] >= rs[:, None]).sum(axis=1)) / 31
            np.testing.assert_allclose(cal.adjusted_p, p_adj)
            assert np.isnan(s.coef).all() and s.coef.size == s.units.size
        if ref is None:
            ref = sigs
        for a, b in zip(ref, sigs):  # the chunk size changes nothing but rounding
            np.testing.assert_array_equal(a.units, b.units)
            np.testing.assert_allclose(a.calibration.null_max, b.calibration.null_max, rtol=1e-6)
    assert n_compared >= 3 * 6  # at least 6 units per chunk size pass
    # the planted pair leads the first benchmark's signature
    assert set(ref[0].units[:2].tolist()) == {20, 200}


@pytest.mark.parametrize("method", ["calibrated", "calibrated-marginal"])
def test_more_than_128_models_use_uint16_codes(method: str) -> None:
    rng = np.random.default_rng(21)
    d, m = 80, 140
    v = rng.standard_normal((d, m))
    v[:20] = rng.integers(0, 4, size=(20, m))
    y = rng.standard_normal(m)
    v[7] = -y + 0.5 * rng.standard_normal(m)
    y[3] = np.nan
    [s] = extract_signatures(v, y, method=method, n_permutations=12, alpha=0.9, seed=0)
    obs, null, _ = brute_max_t(v, y, s.calibration, method, False)
    np.testing.assert_allclose(s.calibration.null_max, null, rtol=1e-9, atol=1e-12)
    st = np.abs(obs)
    t = np.quantile(np.append(null, st.max()), 0.1, method="higher")
    want = np.flatnonzero(st > t)
    np.testing.assert_array_equal(s.units, want[np.lexsort((want, -st[want]))])
    assert 7 in s.units


def test_shared_null_carries_one_set_of_columns_per_model_set() -> None:
    v, y = _problem(6)
    y[:, 2] = y[:, 0] * 2.0  # same models as benchmark 0
    sigs = extract_signatures(v, y, shared_null=True, n_permutations=25, seed=1)
    c0, c1, c2 = (s.calibration for s in sigs)
    np.testing.assert_array_equal(c0.permutations, c2.permutations)
    np.testing.assert_array_equal(c0.null_max, c2.null_max)  # one set of columns
    assert c1.permutations.shape == (25, 13)  # benchmark 1 has 13 scored models
    per = extract_signatures(v, y, shared_null=False, n_permutations=25, seed=1)
    assert not np.array_equal(per[0].calibration.permutations, per[2].calibration.permutations)


def test_one_sided_test_uses_the_signed_statistic() -> None:
    v, y = _problem(7)
    v[30] = -v[20]  # the planted unit reversed: strong, but anti-predictive
    two = extract_signature(v, y[:, 0], n_permutations=40, seed=2)
    one = extract_signature(v, y[:, 0], n_permutations=40, seed=2, two_sided=False)
    assert 30 in two.units and 30 not in one.units
    assert (one.calibration.values > 0).all() and not one.calibration.two_sided
    obs, null, _ = brute_max_t(v, y[:, 0], one.calibration, "calibrated", False, False)
    np.testing.assert_allclose(one.calibration.null_max, null, rtol=1e-5, atol=1e-7)
    t = np.quantile(np.append(null, obs.max()), 0.95, method="higher")
    want = np.flatnonzero(obs > t)
    np.testing.assert_array_equal(np.sort(one.units), want)
    assert one.calibration.observed_max == pytest.approx(obs.max(), rel=1e-12)


def test_buffer_overflow_takes_a_second_pass_with_the_same_result() -> None:
    v, y = _problem(8, d=1500)
    kw = dict(n_permutations=30, alpha=0.95, seed=4, chunk_units=200)
    big = extract_signatures(v, y, **kw)
    small = extract_signatures(v, y, buffer_units=2, **kw)
    assert sum(a.units.size > 2 for a in big) >= 2  # more units pass than the buffer holds
    for a, b in zip(big, small):
        assert b.extra["second_pass"] == (a.units.size >= 2) and not a.extra["second_pass"]
        np.testing.assert_array_equal(a.units, b.units)
        np.testing.assert_array_equal(a.calibration.values, b.calibration.values)
        np.testing.assert_array_equal(a.calibration.adjusted_p, b.calibration.adjusted_p)
    # a buffer that is large enough needs no second pass, whatever its size
    strict = extract_signatures(v, y, n_permutations=30, seed=4, buffer_units=3)
    assert not any(s.extra["second_pass"] for s in strict if s.units.size < 3)


def test_sources_agree_values_rank_store_and_per_model_arrays(tmp_path) -> None:
    v, y = _problem(9)
    v = v.astype(np.float32)
    m = v.shape[1]
    arrays = [v[:, j].copy() for j in range(m)]
    store = build_rank_store(
        arrays, [f"m{j}" for j in range(m)], np.ones(len(v)), tmp_path / "r", chunk_units=128,
    )  # fmt: skip
    kw = dict(n_permutations=20, alpha=0.5, seed=0, chunk_units=128)
    for method in ("calibrated", "calibrated-marginal"):
        a = extract_signatures(v, y, method=method, **kw)
        # the marginal test needs only the ranks; the partial one the values beside them
        extra = {"nll_arrays": arrays} if method == "calibrated" else {}
        b = extract_signatures(store, y, method=method, **extra, **kw)
        c = extract_signatures(arrays, y, method=method, **kw)
        for sa, sb, sc in zip(a, b, c):
            for s in (sb, sc):
                np.testing.assert_array_equal(sa.units, s.units)
                np.testing.assert_allclose(sa.calibration.null_max, s.calibration.null_max)
                np.testing.assert_allclose(sa.calibration.values, s.calibration.values)
    with pytest.raises(SigmapInputError, match="per-unit values"):
        extract_signatures(store, y, method="calibrated", **kw)


def test_general_quality_is_minus_the_mean_value(tmp_path) -> None:
    v, _ = _problem(10)
    np.testing.assert_allclose(general_quality(v, chunk_units=100), -v.mean(axis=0), rtol=1e-12)
    sub = np.array([True, False] * 7 + [True])
    np.testing.assert_allclose(
        general_quality([v[:, j] for j in range(v.shape[1])], sub, chunk_units=64),
        -v[:, sub].mean(axis=0),
        rtol=1e-12,
    )
    store = build_rank_store(
        [v[:, j] for j in range(v.shape[1])], [f"m{j}" for j in range(v.shape[1])],
        np.ones(len(v)), tmp_path / "r",
    )  # fmt: skip
    with pytest.raises(SigmapInputError, match="not from rank codes"):
        general_quality(store)


# ----------------------------------------------------------------------------------------
# the merge of partial results


def _partial(stat: np.ndarray, null: np.ndarray, units: np.ndarray, k: int) -> MaxTPartial:
    """The max-T partial of some units computed directly (every unit, full sort)."""
    st = np.abs(stat)
    tops, vals = [], []
    for b in range(stat.shape[1]):
        order = np.lexsort((units, -st[:, b]))[:k]
        tops.append(units[order])
        vals.append(stat[order, b])
    return MaxTPartial(
        null_max=np.abs(null).max(axis=0) if len(units) else np.zeros(null.shape[1]),
        observed_max=st.max(axis=0) if len(units) else np.zeros(stat.shape[1]),
        top_units=tops, top_values=vals, buffer_units=k, two_sided=True, n_units=len(units),
    )  # fmt: skip


def test_merge_of_partials_equals_the_partial_of_the_union() -> None:
    rng = np.random.default_rng(0)
    d, b, c, k = 500, 3, 7, 12
    stat = np.round(rng.uniform(-1, 1, (d, b)), 2)  # ties in strength
    null = rng.uniform(-1, 1, (d, c))
    units = np.arange(d)
    whole = _partial(stat, null, units, k)
    for split in (1, 77, 250, 499):
        for order in ((0, 1), (1, 0)):
            parts = [slice(0, split), slice(split, d)]
            p = [_partial(stat[s], null[s], units[s], k) for s in parts]
            got = merge_max_t(p[order[0]], p[order[1]])
            np.testing.assert_array_equal(got.null_max, whole.null_max)
            np.testing.assert_array_equal(got.observed_max, whole.observed_max)
            assert got.n_units == d
            for j in range(b):
                np.testing.assert_array_equal(got.top_units[j], whole.top_units[j])
                np.testing.assert_array_equal(got.top_values[j], whole.top_values[j])
    # three shards, merged left or right first
    s3 = [slice(0, 100), slice(100, 260), slice(260, d)]
    p3 = [_partial(stat[s], null[s], units[s], k) for s in s3]
    left = merge_max_t(merge_max_t(p3[0], p3[1]), p3[2])
    right = merge_max_t(p3[0], merge_max_t(p3[1], p3[2]))
    for j in range(b):
        np.testing.assert_array_equal(left.top_units[j], right.top_units[j])
        np.testing.assert_array_equal(left.top_units[j], whole.top_units[j])
    with pytest.raises(SigmapInputError, match="different designs"):
        merge_max_t(whole, _partial(stat, null, units, k + 1))


def test_threshold_rule() -> None:
    null = np.linspace(0.1, 0.9, 199)
    assert max_t_threshold(null, 0.95) == np.quantile(np.append(null, 0.95), 0.95, method="higher")
    assert max_t_threshold(null[:19], 2.0) == 2.0  # P < 1/α − 1: nothing can pass
    with pytest.raises(SigmapInputError, match="alpha"):
        max_t_threshold(null, 0.5, alpha=1.5)


# ----------------------------------------------------------------------------------------
# error rates on noise


def _noise_world(rng: np.random.Generator, m: int = 20, d: int = 500):
    """Units that move with general quality g (and noise), like the synthetic world."""
    g = rng.standard_normal(m)
    load = rng.uniform(0.0, 0.4, d)
    v = 3 + rng.gamma(2.0, 1.0, d)[:, None] - load[:, None] * g[None, :]
    return g, v + rng.standard_normal((d, m))


def test_familywise_error_on_pure_noise_is_at_most_alpha() -> None:
    """200 runs at m = 20, d = 500, P = 99, under both nulls: scores permuted across models
    (independent of every unit) and scores that depend on general quality only (no unit
    has a specific association). FWER = share of runs with a non-empty signature; it must
    not exceed α by more than 3 binomial standard errors."""
    rng = np.random.default_rng(2026)
    runs, alpha = 200, 0.05
    hits: dict[str, int] = {}
    for r in range(runs):
        g, v = _noise_world(rng)
        y = np.column_stack(
            [rng.permutation(g + 0.5 * rng.standard_normal(20)), g + 0.5 * rng.standard_normal(20)]
        )
        for shared in (False, True):
            sigs = extract_signatures(v, y, n_permutations=99, shared_null=shared, seed=r)
            for null, s in zip(("permuted", "general"), sigs):
                key = f"partial/{'shared' if shared else 'per-benchmark'}/{null}"
                hits[key] = hits.get(key, 0) + (not s.empty)
        [marg] = extract_signatures(v, y[:, 0], method="calibrated-marginal", n_permutations=99)
        hits["marginal/permuted"] = hits.get("marginal/permuted", 0) + (not marg.empty)
    bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)
    fwer = {k: n / runs for k, n in hits.items()}
    assert len(fwer) == 5
    assert all(f <= bound for f in fwer.values()), fwer
    # and the test is not vacuous: it does reject at about the nominal rate
    assert np.mean(list(fwer.values())) >= 0.02, fwer


def test_empty_signatures_are_valid_objects() -> None:
    rng = np.random.default_rng(11)
    _, v = _noise_world(rng)
    y = np.column_stack([rng.standard_normal(20), rng.standard_normal(20)])
    y[3, 1] = np.nan
    for method in ("calibrated", "calibrated-marginal"):
        sigs = extract_signatures(v, y, method=method, n_permutations=99, benchmark_names="ab")
        for s in sigs:
            assert s.empty and s.units.size == 0 and s.coef.size == 0
            assert s.units.dtype == np.int64 and s.method == method
            cal = s.calibration
            assert cal.units.size == 0 and cal.adjusted_p.size == 0
            assert cal.null_max.shape == (99,) and cal.observed_max <= cal.threshold
            assert cal.reason.startswith("no unit above the max-T threshold")
            summary = s.summary()
            json.dumps(summary, allow_nan=False)  # strict JSON
            assert summary["empty"] and summary["units"] == [] and summary["method"] == method
            assert summary["calibration"]["n_permutations"] == 99
            assert summary["calibration"]["threshold"] == pytest.approx(cal.threshold)
    # scores ranked exactly like general quality: nothing is left once ĝ is regressed out
    yg = general_quality(v)
    [s] = extract_signatures(v, yg, n_permutations=19)
    assert s.empty and "smooth function of general quality" in s.calibration.reason


def test_summary_carries_method_calibration_and_adjusted_p() -> None:
    v, y = _problem(12, m=16)
    s = extract_signature(v, y[:, 0], n_permutations=49)
    out = s.summary()
    json.dumps(out, allow_nan=False)
    assert out["method"] == "calibrated" and not out["empty"]
    assert out["units"] == s.units.tolist() and out["coef"] == [None] * s.units.size
    cal = out["calibration"]
    assert cal["adjusted_p"] == s.calibration.adjusted_p.tolist()
    assert len(cal["null_max"]) == 49 and cal["null_max_summary"]["max"] == max(cal["null_max"])
    assert cal["p_value"] == pytest.approx(min(cal["adjusted_p"]))


# ----------------------------------------------------------------------------------------
# planted truth


@pytest.fixture(scope="module")
def planted_world(tmp_path_factory):
    return make_synthetic_world(
        tmp_path_factory.mktemp("cal") / "w", n_models=32, n_units=3000, n_functions=4,
        n_benchmarks=8, planted_per_function=5, n_items=100, n_respondents=0, seed=0,
    )  # fmt: skip


def test_planted_recovery_on_the_synthetic_world(planted_world) -> None:
    w = planted_world
    values = np.stack([np.asarray(a) for a in w.nll_arrays()], axis=1)
    cal = extract_signatures(values, w.scores, benchmark_names=w.benchmarks, seed=0)
    rec = planted_recovery(w, cal)
    assert rec["precision"] >= 0.9 and rec["recall"] >= 0.75, rec
    aic = extract_signatures(values, w.scores, benchmark_names=w.benchmarks, method="aic")
    rec_aic = planted_recovery(w, aic)
    assert rec["precision"] > rec_aic["precision"] + 0.5  # the paper's AIC overfits
    # every calibrated unit carries an adjusted p-value below α
    for s in cal:
        assert (s.calibration.adjusted_p <= 0.05).all()
    # the same scores permuted across models: (almost) nothing
    rng = np.random.default_rng(1)
    perm = np.stack([rng.permutation(w.scores[:, b]) for b in range(8)], axis=1)
    noise = extract_signatures(values, perm, benchmark_names=w.benchmarks, seed=1)
    assert sum(s.units.size for s in noise) <= 2


# ----------------------------------------------------------------------------------------
# methods and validation


def test_method_resolution_and_validation() -> None:
    v, y = _problem(13)
    with pytest.raises(SigmapInputError, match="unknown signature method 'stepwise'; known: "):
        extract_signatures(v, y, method="stepwise")
    with pytest.raises(SigmapInputError, match="does not take criterion"):
        extract_signatures(v, y, method="bic", criterion="aic")
    with pytest.raises(SigmapInputError, match="method='calibrated' does not take loo; its"):
        extract_signatures(v, y, loo=True)
    with pytest.raises(SigmapInputError, match="'calibrated-marginal' does not take statistic"):
        extract_signatures(v, y, method="calibrated-marginal", statistic="preselect")
    with pytest.raises(SigmapInputError, match="n_permutations must be None or an integer in"):
        extract_signatures(v, y, n_permutations=0)
    with pytest.raises(
        SigmapInputError, match="3 scored models; the calibrated signature test needs >= 12"
    ):
        extract_signatures(v[:, :3], np.arange(3.0))
    with pytest.raises(SigmapInputError, match="benchmark bad"):
        extract_signatures(v, np.ones(len(y)), benchmark_names=["bad"])
    nan_v = v.copy()
    nan_v[5, 2] = np.nan
    with pytest.raises(SigmapInputError, match="NaN at unit 5"):
        extract_signatures(nan_v, y)
    with pytest.raises(SigmapInputError, match="NaN at unit 5"):
        extract_signatures(nan_v, y, method="calibrated-marginal")


def test_forward_selection_gets_max_t_calibration_from_its_own_null() -> None:
    v, y = _problem(14)
    s = extract_signature(v, y[:, 0], k=30, method="ebic", n_permutations=19, seed=1)
    assert s.method == "ebic" and s.null is not None
    cal = s.calibration
    np.testing.assert_array_equal(cal.null_max, s.null.best_strength)
    assert cal.observed_max == s.screen.best and cal.method == "calibrated-marginal"
    st = s.screen.strength[s.selection.selected]
    want = (1 + (s.null.best_strength[None, :] >= st[:, None]).sum(axis=1)) / 20
    np.testing.assert_allclose(cal.adjusted_p, want)
    np.testing.assert_array_equal(cal.units, s.units)
    np.testing.assert_array_equal(s.coef, s.selection.coef)
    assert extract_signature(v, y[:, 0], k=30, method="ebic").calibration is None

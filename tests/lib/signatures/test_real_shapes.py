"""The pieces that keep the calibrated test valid for the shapes real scores have — the score
side's own basis, the studentized residuals, permutation blocks of similar quality, pooled
small strata — each against an independent computation; the whole statistic against its
definition; and the level on null scores built from the real models' loadings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.stats import spearmanr

from sigmap_lib.signatures import (
    BLOCK_MODELS,
    distinct_permutations,
    extract_signatures,
    pooled_strata,
    quality_basis,
    quality_blocks,
    score_basis,
    score_scale,
    stratified_permutations,
)
from sigmap_lib.worlds import hard_world


@pytest.mark.parametrize("seed", range(4))
def test_score_scale_is_the_ols_fit_of_log_abs_residuals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(12, 60))
    g = rng.standard_normal(m)
    e = rng.standard_normal((m, 3)) * np.exp(-0.5 * g)[:, None]
    z = (g - g.mean()) / g.std()
    got = score_scale(e, g)
    for c in range(3):
        fit = sm.OLS(np.log(np.abs(e[:, c]) + 1e-9 * np.abs(e[:, c]).max()), sm.add_constant(z))
        np.testing.assert_allclose(got[:, c], np.exp(fit.fit().fittedvalues), rtol=1e-8)


@pytest.mark.parametrize("seed", range(4))
def test_quality_blocks_are_runs_of_similar_quality_within_strata(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(12, 90))
    g = rng.standard_normal(m)
    lab = pooled_strata(rng.choice(list("abcdefgh"), m))
    blocks = quality_blocks(g, lab)
    for s in np.unique(lab):
        idx = np.flatnonzero(lab == s)
        expect = max(1, round(idx.size / BLOCK_MODELS))
        bs = np.unique(blocks[idx])
        assert bs.size == expect  # never across strata, round(n / 4) blocks
        sizes = [int((blocks == b).sum()) for b in bs]
        assert max(sizes) - min(sizes) <= 1
        # consecutive in quality: every model of a block is below every model of the next
        order = idx[np.argsort(g[idx])]
        assert (np.diff(blocks[order]) >= 0).all()


def _compositions(n: int, k: int, lo: int, hi: int):
    """Every way to write n as k ordered parts in lo..hi."""
    if k == 0:
        if n == 0:
            yield ()
        return
    for first in range(lo, min(hi, n) + 1):
        for rest in _compositions(n - first, k - 1, lo, hi):
            yield (first, *rest)


@pytest.mark.parametrize("seed", range(6))
def test_score_aligned_blocks_are_the_least_squares_cut_by_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(8, 19))
    g = rng.standard_normal(m)
    y = rng.standard_normal((m, int(rng.integers(1, 3)))) + 2.0 * (g > 0)[:, None]
    blocks = quality_blocks(g, scores=y)
    order = np.argsort(g)
    z = (y - y.mean(axis=0)) / y.std(axis=0)
    zs = z[order]

    def cost(sizes: tuple[int, ...]) -> float:
        edges = np.cumsum((0, *sizes))
        return sum(
            float(((zs[a:b] - zs[a:b].mean(axis=0)) ** 2).sum())
            for a, b in itertools.pairwise(edges)
        )

    k = max(1, round(m / BLOCK_MODELS))
    lo, hi = min(BLOCK_MODELS - 1, m // k), max(2 * BLOCK_MODELS - 1, -(-m // k))
    best = min(_compositions(m, k, lo, hi), key=cost)
    got = tuple(int((blocks == b).sum()) for b in range(k))
    assert (np.diff(blocks[order]) >= 0).all()  # runs consecutive in quality
    assert cost(got) == pytest.approx(cost(best), rel=1e-12, abs=1e-12)


def test_score_aligned_blocks_keep_models_in_their_band_across_a_step() -> None:
    rng = np.random.default_rng(3)
    g = np.sort(rng.standard_normal(45))
    band = np.searchsorted(np.quantile(g, [0.2, 0.4, 0.6, 0.8]), g)
    y = band + 0.1 * rng.standard_normal(45)
    aligned = quality_blocks(g, scores=y)
    fixed = quality_blocks(g)
    straddles = lambda b: sum(np.unique(band[b == k]).size > 1 for k in np.unique(b))  # noqa: E731
    assert straddles(aligned) == 0
    assert straddles(fixed) > 0  # runs of fixed size cut across the bands


def test_distinct_permutations_counts_by_brute_force() -> None:
    rng = np.random.default_rng(0)
    blocks = np.array([0, 1, 0, 1, 1, 2, 0])
    n = sum(
        1 for p in itertools.permutations(range(blocks.size)) if (blocks[list(p)] == blocks).all()
    )
    assert distinct_permutations(blocks) == n == 3 * 2 * 3 * 2 * 1
    perms = stratified_permutations(rng, 400, blocks.size, blocks)
    assert (blocks[perms] == blocks).all()
    assert len({tuple(p) for p in perms}) == n  # all of them are drawn


def test_pooled_strata_keep_large_families_and_pool_the_rest() -> None:
    lab = np.array(["p"] * 5 + ["q"] * 3 + ["r", "r", "s", "t"])
    out = pooled_strata(lab)
    assert out[:8].tolist() == ["p"] * 5 + ["q"] * 3
    assert set(out[8:].tolist()) == {"(small strata)"}
    assert pooled_strata(None) is None


@pytest.mark.parametrize("seed", range(3))
def test_score_basis_contains_the_quality_basis_and_minimizes_bic(seed: int) -> None:
    from sklearn.preprocessing import SplineTransformer

    rng = np.random.default_rng(seed)
    m = 48
    g = rng.standard_normal(m)
    q = quality_basis(g)
    for y in (g + 0.5 * rng.standard_normal(m), (g > 0.3) + 0.05 * rng.standard_normal(m)):
        qb = score_basis(q, g, y)
        assert np.allclose(qb @ (qb.T @ q), q)  # nested: residuals on qb are orthogonal to q
        # brute force: OLS BIC (statsmodels, up to its constant) of every candidate design
        z = ((g - g.mean()) / g.std())[:, None]
        designs = [q]
        for n in (3, 5, 8, 12):
            st = SplineTransformer(n_knots=n, degree=3, knots="quantile", extrapolation="linear")
            designs.append(np.hstack([q, st.fit_transform(z)]))
        fits = [sm.OLS(y, x).fit() for x in designs]
        ranks = [int(np.linalg.matrix_rank(x)) for x in designs]
        bic = [m * np.log(f.ssr / m) + np.log(m) * r for f, r in zip(fits, ranks)]
        assert qb.shape[1] == ranks[int(np.argmin(bic))]
    # a step is fitted by a wider basis; a straight line is not
    assert score_basis(q, g, (g > 0.3) + 0.05 * rng.standard_normal(m)).shape[1] > q.shape[1]


@pytest.mark.parametrize("seed", range(3))
def test_the_statistic_is_the_spearman_correlation_of_its_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = hard_world("threshold", 40, 300, rng)
    [sig] = extract_signatures(w.values, w.scores, n_permutations=19, buffer_units=300)
    cal = sig.calibration
    v = w.values.astype(np.float64)
    g = -v.mean(axis=0)
    y = w.scores[:, 0]
    q = quality_basis(g)
    qb = score_basis(q, g, y)
    assert qb.shape[1] > q.shape[1]  # a sharp logistic: the basis is widened
    e = y - qb @ (qb.T @ y)
    t = e / score_scale(e, g)
    t = t - qb @ (qb.T @ t)
    r = v - (v @ q) @ q.T  # units on the base basis
    ref = np.array([spearmanr(r[j], t).statistic for j in range(v.shape[0])])
    # the signature's units are the strongest, with the sign "better models less perplexed"
    top = np.argsort(-np.abs(ref), kind="stable")[:5]
    assert cal.observed_max == pytest.approx(np.abs(ref).max(), abs=1e-9)
    buffered = extract_signatures(
        w.values, w.scores, n_permutations=19, alpha=0.99, buffer_units=300
    )[0]
    got = dict(zip(buffered.units.tolist(), buffered.calibration.values.tolist()))
    for j in top:
        if j in got:
            assert got[j] == pytest.approx(-ref[j], abs=1e-9)
    assert cal.blocks is not None and cal.n_distinct_permutations >= 24**10
    assert sig.summary()["calibration"]["n_distinct_permutations"] > 1e13


@pytest.mark.realdata
def test_null_scores_of_real_shapes_on_real_loadings(shared_data) -> None:
    from sigmap_lib.inputs import read_perplexity_correlations
    from sigmap_lib.perf.recovery import real_null_scores

    mm = read_perplexity_correlations(shared_data / "realmodels")
    arc = mm.scores()[:, mm.benchmarks.index("arc_easy")]
    runs = 60
    for shape in ("hinge", "threshold", "step", "shrinking"):
        rng = np.random.default_rng([len(shape), 5])
        hits = 0
        for run in range(runs):
            y = real_null_scores(shape, mm.values, rng, arc)
            [sig] = extract_signatures(mm.values, y, n_permutations=99, seed=run)
            hits += not sig.empty
        # the previous default: 0.15-0.19 on these shapes; at a true 0.05, P(> 8 of 60) < 0.01
        assert hits <= 8, f"{shape}: {hits} of {runs} null runs claimed a document"


@pytest.mark.realdata
def test_real_families_as_strata_keep_power(shared_data) -> None:
    from sigmap_lib.inputs import read_perplexity_correlations
    from sigmap_lib.perf.recovery import plant_documents

    mm = read_perplexity_correlations(shared_data / "realmodels")
    rng = np.random.default_rng(11)
    found = {"none": 0, "families": 0}
    for run in range(8):
        v, y, rows = plant_documents(mm.values, 0.8, rng)
        for key, strata in (("none", None), ("families", mm.families)):
            [sig] = extract_signatures(v, y, n_permutations=99, seed=run, strata=strata)
            found[key] += len(set(rows.tolist()) & set(sig.units.tolist()))
            if strata is not None:
                # 39 families, most of one or two models: pooled, and still plenty to permute
                assert sig.calibration.n_distinct_permutations > 1e20
    assert found["none"] > 0 and found["families"] >= 0.5 * found["none"]


def _partitions(n: int, largest: int | None = None):
    """All partitions of ``n`` into positive parts (non-increasing)."""
    largest = n if largest is None else largest
    if n == 0:
        yield []
        return
    for k in range(min(n, largest), 0, -1):
        for rest in _partitions(n - k, k):
            yield [k, *rest]


def test_every_design_the_test_accepts_allows_many_permutations() -> None:
    from sigmap_lib.errors import SigmapInputError
    from sigmap_lib.signatures import MIN_MODELS_CALIBRATED, check_calibrated_models

    accepted = 0
    for m in range(MIN_MODELS_CALIBRATED, 25):
        for sizes in _partitions(m):
            lab = np.repeat(np.arange(len(sizes)), sizes)
            try:
                check_calibrated_models(m, lab if len(sizes) > 1 else None)
            except SigmapInputError:
                continue
            accepted += 1
            blocks = quality_blocks(np.linspace(0.0, 1.0, m), pooled_strata(lab))
            assert distinct_permutations(blocks) >= 2592, (m, sizes)  # 14 models: 6, 6, 2
    assert accepted > 1000


def test_each_benchmark_is_permuted_within_blocks_cut_for_its_own_scores() -> None:
    rng = np.random.default_rng(5)
    m, d = 40, 300
    g = rng.standard_normal(m)
    values = -g[None, :] + 0.3 * rng.standard_normal((d, m))
    band = np.searchsorted(np.quantile(g, [0.25, 0.5, 0.75]), g)
    scores = np.column_stack([band + 0.05 * rng.standard_normal(m), g + rng.standard_normal(m)])
    sigs = extract_signatures(values, scores, n_permutations=99, seed=0)
    ghat = -values.mean(axis=0)
    for j, sig in enumerate(sigs):
        cal = sig.calibration
        expect = quality_blocks(ghat, scores=scores[:, j])
        np.testing.assert_array_equal(cal.blocks, expect)
        assert (expect[cal.permutations] == expect).all()  # permutations stay in the blocks
    assert not np.array_equal(sigs[0].calibration.blocks, sigs[1].calibration.blocks)

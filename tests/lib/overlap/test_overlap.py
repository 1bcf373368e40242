"""Tests of sigmap_lib.overlap against scipy / brute force on random inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy.stats import kstest, spearmanr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap import (
    OverlapMatrix,
    SignedUnits,
    UnitBits,
    bootstrap_ci,
    performance_overlap,
    semantic_overlap,
    signature_model_scores,
    signature_overlap,
    signature_overlap_null,
    signed_units,
    spearman_matrix,
)
from sigmap_lib.signatures import extract_signatures, unit_orientation


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ---------------------------------------------------------------- performance overlap
def test_performance_overlap_matches_scipy_pairwise_complete() -> None:
    rng = np.random.default_rng(1)
    m, b = 120, 5
    latent = rng.standard_normal(m)
    x = latent[:, None] * rng.uniform(0.2, 1.5, b) + rng.standard_normal((m, b))
    x = np.round(x, 1)  # ties
    x[rng.random((m, b)) < 0.25] = np.nan
    x[:100, 4] = np.nan  # benchmark 4 shares only few models with the others
    names = [f"bm{j}" for j in range(b)]
    df = pl.DataFrame(
        {"model": [f"m{i}" for i in range(m)], **{n: x[:, j] for j, n in enumerate(names)}}
    )
    res = performance_overlap(df, min_common=10)
    assert res.labels == tuple(names)
    for i in range(b):
        for j in range(b):
            mask = np.isfinite(x[:, i]) & np.isfinite(x[:, j])
            assert res.n_common[i, j] == mask.sum()
            if i == j:
                assert res.values[i, j] == 1.0
            elif mask.sum() < 10:
                assert np.isnan(res.values[i, j])
            else:
                ref = spearmanr(x[mask, i], x[mask, j]).statistic
                assert res.values[i, j] == pytest.approx(ref, abs=1e-12)
    assert np.allclose(res.values, res.values.T, equal_nan=True)
    # pandas input and (names, array) input give the same matrix
    res_pd = performance_overlap(df.to_pandas(), min_common=10)
    res_arr = performance_overlap((names, x), min_common=10)
    np.testing.assert_allclose(res_pd.values, res.values, equal_nan=True)
    np.testing.assert_allclose(res_arr.values, res.values, equal_nan=True)


def test_spearman_matrix_no_nan_fast_path_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 6, size=(40, 7)).astype(float)
    rho, n = spearman_matrix(x)
    ref = spearmanr(x).statistic
    np.testing.assert_allclose(rho, ref, atol=1e-12)
    assert (n == 40).all()


def test_performance_overlap_validation() -> None:
    with pytest.raises(SigmapInputError, match="non-numeric"):
        performance_overlap(pl.DataFrame({"id": ["a", "b"], "x": [1.0, 2.0]}))
    with pytest.raises(SigmapInputError, match="min_common"):
        performance_overlap(pd.DataFrame({"x": [1.0, 2.0]}), min_common=1)


# ---------------------------------------------------------------- semantic overlap
def _brute_semantic(ea: np.ndarray, eb: np.ndarray, n: int, draws_a, draws_b) -> np.ndarray:
    return np.array(
        [
            float(
                (ea[ia].mean(0) @ eb[ib].mean(0))
                / np.linalg.norm(ea[ia].mean(0))
                / np.linalg.norm(eb[ib].mean(0))
            )
            for ia, ib in zip(draws_a, draws_b)
        ]
    )


def test_semantic_overlap_matches_brute_force_of_its_draws() -> None:
    """Reproduce the bootstrap by brute force using the documented draw rule (the size-n
    sample of draw t = the n items with the smallest keys of the benchmark's generator)."""
    from sigmap_lib.overlap._semantic import _draw_keys, _label_rng

    rng = np.random.default_rng(3)
    emb = {
        "a": rng.standard_normal((30, 8)) + 0.5,
        "b": rng.standard_normal((12, 8)) + 0.3,
        "c": rng.standard_normal((20, 8)),
    }
    T = 50
    res = semantic_overlap(emb, T=T, seed=7)
    unit = {k: _unit(v) for k, v in emb.items()}
    for x, y in [("a", "b"), ("a", "c"), ("b", "c")]:
        n = min(len(emb[x]), len(emb[y]))

        def draws(k: str, n: int = n) -> list[np.ndarray]:
            if len(emb[k]) == n:
                return [np.arange(n)] * T
            keys = _draw_keys(_label_rng(7, k), T, len(emb[k]))
            return [np.argsort(row)[:n] for row in keys]

        cos = _brute_semantic(unit[x], unit[y], n, draws(x), draws(y))
        assert res.get(x, y) == pytest.approx(cos.mean(), abs=1e-5)
        assert res.extra["sd"][res.index(x), res.index(y)] == pytest.approx(
            cos.std(ddof=1), abs=1e-5
        )
        assert res.n_common[res.index(x), res.index(y)] == n
    assert np.allclose(res.values, res.values.T)
    assert np.all(np.diag(res.values) == 1.0)
    # a pair's value does not depend on the other benchmarks present
    sub = semantic_overlap({"c": emb["c"], "a": emb["a"]}, T=T, seed=7)
    assert sub.get("a", "c") == pytest.approx(res.get("a", "c"), abs=1e-6)


def test_semantic_overlap_with_replacement_and_n_max_brute_force() -> None:
    from sigmap_lib.overlap._semantic import _label_rng

    rng = np.random.default_rng(4)
    emb = {"a": rng.standard_normal((25, 6)) + 0.4, "b": rng.standard_normal((40, 6)) + 0.4}
    T, n_max = 40, 10
    res = semantic_overlap(emb, T=T, seed=1, replace=True, n_max=n_max)
    ua, ub = _unit(emb["a"]), _unit(emb["b"])
    da = _label_rng(1, "a").integers(0, 25, size=(T, 10))
    db = _label_rng(1, "b").integers(0, 40, size=(T, 10))
    cos = _brute_semantic(ua, ub, 10, da, db)
    assert res.get("a", "b") == pytest.approx(cos.mean(), abs=1e-5)


def test_sample_questions_is_a_seeded_ordered_subset_per_benchmark() -> None:
    from sigmap_lib.overlap import sample_questions

    rng = np.random.default_rng(4)
    qs = {f"b{i}": [f"b{i}-q{j}" for j in range(int(rng.integers(1, 60)))] for i in range(8)}
    got = sample_questions(qs, 20, seed=3)
    for label, texts in qs.items():
        pick = got[label]
        assert len(pick) == min(20, len(texts)) and len(set(pick)) == len(pick)
        assert pick == [t for t in texts if t in set(pick)]  # a subset, in order
    # a benchmark's sample does not depend on the others, and the seed matters
    assert sample_questions({"b3": qs["b3"]}, 20, seed=3)["b3"] == got["b3"]
    long = [k for k, v in qs.items() if len(v) > 25]
    assert any(sample_questions(qs, 20, seed=4)[k] != got[k] for k in long)
    # every question is drawn about equally often (uniform sampling without replacement)
    hits = np.zeros(50)
    for seed in range(400):
        for t in sample_questions({"x": [str(j) for j in range(50)]}, 10, seed=seed)["x"]:
            hits[int(t)] += 1
    assert kstest(hits, "norm", args=(80, np.sqrt(400 * 0.2 * 0.8))).pvalue > 1e-3
    with pytest.raises(SigmapInputError, match="max_questions must be >= 1"):
        sample_questions(qs, 0)


def test_semantic_size_matching_removes_size_bias() -> None:
    """Benchmarks of 50 and 5000 questions from ONE pool: the size-matched overlap with a
    50-question reference is the same (within error), the unmatched estimator is not."""
    dim, s2 = 64, 0.02
    matched_small, matched_large, unmatched_small, unmatched_large = [], [], [], []
    for rep in range(12):
        rng = np.random.default_rng(100 + rep)
        mu = rng.standard_normal(dim)
        mu *= np.sqrt(s2) / np.linalg.norm(mu)

        def draw(n: int, mu: np.ndarray = mu, rng: np.random.Generator = rng) -> np.ndarray:
            return mu + rng.standard_normal((n, dim)) / np.sqrt(dim)

        ref, small, large = draw(50), draw(50), draw(5000)
        res = semantic_overlap(
            {"ref": ref, "small": small, "large": large}, T=200, seed=rep, self_similarity=False
        )
        matched_small.append(res.get("ref", "small"))
        matched_large.append(res.get("ref", "large"))
        mref = _unit(ref).mean(0)
        for lst, e in ((unmatched_small, small), (unmatched_large, large)):
            me = _unit(e).mean(0)
            lst.append(mref @ me / np.linalg.norm(mref) / np.linalg.norm(me))
    d_matched = np.array(matched_large) - np.array(matched_small)
    d_unmatched = np.array(unmatched_large) - np.array(unmatched_small)
    se_m = d_matched.std(ddof=1) / np.sqrt(len(d_matched))
    se_u = d_unmatched.std(ddof=1) / np.sqrt(len(d_unmatched))
    assert abs(d_matched.mean()) < 3 * se_m + 0.01
    assert d_unmatched.mean() > 6 * se_u  # the all-questions mean favours the large benchmark
    assert d_unmatched.mean() > 0.1


def test_semantic_self_similarity_and_validation() -> None:
    rng = np.random.default_rng(5)
    emb = {"a": rng.standard_normal((41, 5)) + 1.0, "b": rng.standard_normal((9, 5))}
    res = semantic_overlap(emb, T=30)
    ss = res.extra["self_similarity"]
    assert ss.shape == (2,) and np.all(ss <= 1.0 + 1e-9) and ss[0] > 0.5
    with pytest.raises(SigmapInputError, match="dim"):
        semantic_overlap({"a": np.ones((3, 4)), "b": np.ones((3, 5))})
    with pytest.raises(SigmapInputError, match="T must be"):
        semantic_overlap({"a": np.ones((3, 4))}, T=1)
    with pytest.raises(SigmapInputError, match="NaN"):
        semantic_overlap({"a": np.full((3, 4), np.nan)})


# ---------------------------------------------------------------- signature overlap
def _world(m: int = 24, d: int = 200, b: int = 3, seed: int = 0, signal: float = 0.0):
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((m, b))
    nbytes = rng.integers(1, 8, size=d).astype(float)
    nll = rng.gamma(2.0, 1.0, size=(d, m)) * nbytes[:, None]
    if signal:
        nll[: 10 * b] -= signal * np.repeat(y.T, 10, axis=0) * nbytes[: 10 * b, None]
    bpb_all = nll / (nbytes[:, None] * np.log(2))
    return y, nll, nbytes, bpb_all.mean(0), bpb_all.std(0)


def test_signature_overlap_matches_direct_computation() -> None:
    _, nll, nbytes, mu, sd = _world(seed=1)
    rng = np.random.default_rng(1)
    sigs = {
        "x": rng.choice(200, 7, replace=False),
        "y": rng.choice(200, 3, replace=False),
        "z": rng.choice(200, 12, replace=False),
    }
    res = signature_overlap(sigs, UnitBits(nll, nbytes, mu, sd))
    z = (nll / (nbytes[:, None] * np.log(2)) - mu) / sd  # (d, m)
    s = {k: z[v].mean(0) for k, v in sigs.items()}
    for a in sigs:
        for b in sigs:
            ref = 1.0 if a == b else spearmanr(s[a], s[b]).statistic
            assert res.get(a, b) == pytest.approx(ref, abs=1e-12)
    np.testing.assert_allclose(res.extra["model_scores"][:, 0], s["x"])
    # same result through a callable reader over a subset of rows with custom unit ids
    keep = np.unique(np.concatenate(list(sigs.values())))
    ids = keep * 10 + 5
    sigs10 = {k: v * 10 + 5 for k, v in sigs.items()}
    res2 = signature_overlap(sigs10, UnitBits(nll[keep], nbytes[keep], mu, sd, units=ids))
    np.testing.assert_allclose(res2.values, res.values)
    _, s3 = signature_model_scores(sigs, UnitBits(lambda u: nll[u], lambda u: nbytes[u], mu, sd))
    np.testing.assert_allclose(s3, res.extra["model_scores"])
    with pytest.raises(SigmapInputError, match="not among the rows"):
        signature_overlap({"x": [9999]}, UnitBits(nll[keep], nbytes[keep], mu, sd, units=ids))


def test_unit_bits_standardise_any_units_and_any_models() -> None:
    """``z`` against the formula on the full matrix, for array, callable and id-mapped
    readers, and for a subset of the models; bad moments and bytes give one line each."""
    _, nll, nbytes, mu, sd = _world(seed=8)
    z = (nll / (nbytes[:, None] * np.log(2)) - mu) / sd
    rng = np.random.default_rng(8)
    wanted = np.sort(rng.choice(200, 15, replace=False))
    models = np.array([4, 0, 2])
    readers = (
        UnitBits(nll, nbytes, mu, sd),
        UnitBits.of_matrix(nll, nbytes),
        UnitBits(lambda u: nll[u], lambda u: nbytes[u], mu, sd),
        UnitBits(nll[wanted], nbytes[wanted], mu, sd, units=wanted),
    )
    for bits in readers:
        assert bits.n_models == nll.shape[1]
        np.testing.assert_allclose(bits.z(wanted), z[wanted], rtol=1e-12)
        sub = bits.for_models(models)
        assert sub.n_models == 3
        np.testing.assert_allclose(sub.z(wanted), z[wanted][:, models], rtol=1e-12)
    with pytest.raises(SigmapInputError, match="bpb_sd must be finite and > 0"):
        UnitBits(nll, nbytes, mu, np.r_[sd[:-1], 0.0])
    with pytest.raises(SigmapInputError, match=r"must be \(n_models,\)"):
        UnitBits(nll, nbytes, mu, sd[:-1])
    with pytest.raises(SigmapInputError, match="unit_nbytes must be > 0"):
        UnitBits(nll, np.zeros_like(nbytes), mu, sd).z(wanted)
    with pytest.raises(SigmapInputError, match=r"unit_nbytes \(n_units,\)"):
        UnitBits.of_matrix(nll, nbytes[:-1])
    with pytest.raises(SigmapInputError, match="bits must be a UnitBits"):
        signature_model_scores({"x": [1]}, {"nll": nll})  # type: ignore[arg-type]


def test_oriented_signature_scores_match_a_signed_mean() -> None:
    _, nll, nbytes, mu, sd = _world(seed=4)
    rng = np.random.default_rng(4)
    z = (nll / (nbytes[:, None] * np.log(2)) - mu) / sd
    sigs = {
        k: SignedUnits(rng.choice(200, n, replace=False), rng.choice([-1.0, 1.0], n))
        for k, n in (("x", 6), ("y", 1), ("w", 11))
    }
    labels, s = signature_model_scores(sigs, UnitBits(nll, nbytes, mu, sd))
    for b, k in enumerate(labels):
        ref = np.array([[o * z[u, i] for u, o in zip(*sigs[k])] for i in range(z.shape[1])])
        np.testing.assert_allclose(s[:, b], ref.mean(axis=1))
    # all +1 is the plain mean over the units
    _, plain = signature_model_scores({"x": sigs["x"].units}, UnitBits(nll, nbytes, mu, sd))
    np.testing.assert_allclose(plain[:, 0], z[sigs["x"].units].mean(0))
    for bad, match in (
        (SignedUnits([1, 2], [1.0]), "orientations"),
        (SignedUnits([1, 2], [1.0, 0.5]), r"\+1 or -1"),
    ):
        with pytest.raises(SigmapInputError, match=match):
            signature_model_scores({"x": bad}, UnitBits(nll, nbytes, mu, sd))


def test_orientation_recovers_the_overlap_of_two_sided_signatures() -> None:
    """Planted truth: benchmarks a and b both track a skill f; a's signature holds units
    that f makes easier and units it makes harder (as a data mix does: more of one domain,
    less of another). The unsigned mean cancels them; the oriented one finds the overlap."""
    rng = np.random.default_rng(7)
    m, d = 48, 60
    f = rng.standard_normal(m)
    load = np.r_[np.full(20, -1.0), np.full(20, 1.0), np.zeros(20)]  # easier, harder, neither
    nll = 8.0 + load[:, None] * f[None, :] + 0.5 * rng.standard_normal((d, m))
    nbytes = np.full(d, 4.0)
    bpb = nll / (nbytes[:, None] * np.log(2))
    bits = UnitBits(nll, nbytes, bpb.mean(0), bpb.std(0))
    a_units = np.r_[0:8, 20:28]
    a_sign = np.r_[np.ones(8), -np.ones(8)]
    b_units = np.arange(8, 16)
    # the directions a signature's statistic would give: sign of Spearman(−NLL, f)
    ref = np.sign([spearmanr(-nll[u], f).statistic for u in a_units])
    np.testing.assert_array_equal(ref, a_sign)
    signed = signature_overlap({"a": SignedUnits(a_units, a_sign), "b": b_units}, bits).get(
        "a", "b"
    )
    unsigned = signature_overlap({"a": a_units, "b": b_units}, bits).get("a", "b")
    assert signed > 0.8
    assert abs(unsigned) < signed - 0.5


def test_signature_orientation_comes_from_its_statistics() -> None:
    rng = np.random.default_rng(3)
    m, d = 40, 300
    y = rng.standard_normal(m)
    values = rng.standard_normal((d, m))
    values[5] = -y + 0.1 * rng.standard_normal(m)  # better models less perplexed
    values[9] = y + 0.1 * rng.standard_normal(m)  # better models more perplexed
    [sig] = extract_signatures(values, y, method="calibrated-marginal", n_permutations=99)
    assert set(sig.units.tolist()) >= {5, 9}
    ref = np.sign([spearmanr(-values[u], y).statistic for u in sig.units])
    np.testing.assert_array_equal(sig.orientation, ref)
    np.testing.assert_array_equal(signed_units(sig).orientation, ref)


def test_unit_orientation_against_a_loop() -> None:
    rng = np.random.default_rng(0)
    stat = rng.standard_normal(200)
    coef = rng.standard_normal(200)
    stat[rng.random(200) < 0.4] = np.nan
    coef[rng.random(200) < 0.3] = np.nan
    stat[:3], coef[3] = 0.0, 0.0
    ref = []
    for s_, c in zip(stat, coef):
        if np.isfinite(s_) and s_ != 0:
            ref.append(np.sign(s_))
        elif np.isfinite(c) and c != 0:
            ref.append(-np.sign(c))
        else:
            ref.append(1.0)
    np.testing.assert_array_equal(unit_orientation(stat, coef), ref)
    np.testing.assert_array_equal(unit_orientation(stat), np.where(stat < 0, -1.0, 1.0))
    with pytest.raises(SigmapInputError, match="coef"):
        unit_orientation(stat, coef[:5])


def _top_k_extract(nll: np.ndarray, k: int = 5):
    from scipy.stats import rankdata

    r = rankdata(nll, axis=1)
    r = (r - r.mean(1, keepdims=True)) / r.std(1, keepdims=True)

    def extract(scores: np.ndarray) -> dict[str, np.ndarray]:
        ry = rankdata(scores, axis=0)
        ry = (ry - ry.mean(0)) / ry.std(0)
        corr = r @ ry / r.shape[1]  # (d, B) Spearman
        return {f"b{j}": np.argsort(-np.abs(corr[:, j]))[:k] for j in range(scores.shape[1])}

    return extract


def test_signature_null_p_values_are_uniform_under_null_world() -> None:
    pvals = []
    for rep in range(120):
        y, nll, nbytes, mu, sd = _world(m=20, d=120, b=2, seed=1000 + rep)
        bits = UnitBits(nll, nbytes, mu, sd)
        res = signature_overlap_null(_top_k_extract(nll), y, bits, n_perm=19, seed=rep)
        pvals.append(res.extra["p_value"][0, 1])
    p = np.array(pvals)
    # exact test: p uniform on {1/20, ..., 1}; KS against U(0,1) after jittering within bins
    jitter = p - np.random.default_rng(0).uniform(0, 1 / 20, p.size)
    assert kstest(jitter, "uniform").pvalue > 0.01
    assert 0.0 < (p <= 0.1).mean() < 0.22


def test_signature_null_detects_planted_shared_signal() -> None:
    y, nll, nbytes, mu, sd = _world(m=30, d=150, b=2, seed=5)
    y[:, 1] = y[:, 0] + 0.05 * y[:, 1]
    rng = np.random.default_rng(5)
    nll[:20] -= 1.5 * y[:, 0][None, :] * nbytes[:20, None] + 0.0 * rng.random()
    res = signature_overlap_null(
        _top_k_extract(nll), y, UnitBits(nll, nbytes, mu, sd), n_perm=39, seed=1, mode="independent"
    )
    assert res.values[0, 1] > 0.8
    assert res.extra["p_value"][0, 1] <= 0.05
    assert np.isnan(res.extra["p_value"][0, 0])


def test_bootstrap_ci_matches_scipy_loop() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((15, 3))
    x[:, 1] += x[:, 0]
    res = bootstrap_ci(x, labels=["p", "q", "r"], n_boot=200, level=0.9, seed=3)
    idx = np.random.default_rng(3).integers(0, 15, size=(200, 15))
    boots = np.array([spearmanr(x[i][:, 0], x[i][:, 1]).statistic for i in idx])
    assert res.extra["ci_low"][0, 1] == pytest.approx(np.nanquantile(boots, 0.05), abs=1e-10)
    assert res.extra["ci_high"][0, 1] == pytest.approx(np.nanquantile(boots, 0.95), abs=1e-10)
    assert res.get("p", "q") == pytest.approx(spearmanr(x[:, 0], x[:, 1]).statistic)


def test_overlap_matrix_frames_roundtrip() -> None:
    v = np.array([[1.0, 0.3, np.nan], [0.3, 1.0, 0.5], [np.nan, 0.5, 1.0]])
    m = OverlapMatrix(labels=("a", "b", "c"), values=v, level="x", extra={"sd": np.ones((3, 3))})
    back = OverlapMatrix.from_frame(m.to_frame())
    np.testing.assert_allclose(back.values, v, equal_nan=True)
    long = m.to_long()
    assert long.height == 3 and "sd" in long.columns
    assert m.subset(["c", "a"]).get("a", "c") != m.subset(["c", "a"]).get("a", "c")  # NaN
    assert m.subset(["c", "b"]).get("b", "c") == 0.5
    with pytest.raises(SigmapInputError, match="duplicate"):
        OverlapMatrix(labels=("a", "a"), values=np.eye(2))

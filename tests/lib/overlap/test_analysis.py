"""Tests of sigmap_lib.overlap against scipy / brute force on random inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.cluster.hierarchy import cophenet, linkage
from scipy.spatial.distance import squareform
from scipy.stats import mannwhitneyu, spearmanr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap import (
    OverlapMatrix,
    agreement,
    cluster,
    function_matrix,
    group_test,
    spread,
)


def _random_matrix(b: int, seed: int) -> OverlapMatrix:
    rng = np.random.default_rng(seed)
    v = rng.uniform(-0.2, 0.9, size=(b, b))
    v = (v + v.T) / 2
    np.fill_diagonal(v, 1.0)
    return OverlapMatrix(labels=tuple(f"b{i}" for i in range(b)), values=v, level="test")


def _meta(b: int, seed: int) -> dict[str, dict[str, str]]:
    rng = np.random.default_rng(seed)
    return {
        f"b{i}": {
            "family": f"fam{rng.integers(0, 3)}",
            "format": ["mc", "gen"][rng.integers(0, 2)],
            "function": f"fn{rng.integers(0, 4)}",
        }
        for i in range(b)
    }


@pytest.mark.parametrize("by", ["family", "format"])
def test_group_test_matches_brute_force_and_scipy(by: str) -> None:
    m = _random_matrix(14, 1)
    meta = _meta(14, 2)
    res = group_test(m, meta, by=by)
    same, cross = [], []
    for i, j in itertools.combinations(range(14), 2):
        (same if meta[f"b{i}"][by] == meta[f"b{j}"][by] else cross).append(m.values[i, j])
    ref = mannwhitneyu(same, cross, alternative="two-sided")
    assert res["U"] == pytest.approx(ref.statistic)
    assert res["p"] == pytest.approx(ref.pvalue)
    # rank-biserial by brute force: P(same > cross) - P(same < cross)
    s, c = np.array(same), np.array(cross)
    rb = (np.sign(s[:, None] - c[None, :])).mean()
    assert res["rank_biserial"] == pytest.approx(rb)
    assert res["median_same"] == pytest.approx(np.median(same))
    assert res["n_same"] == len(same) and res["n_cross"] == len(cross)
    with pytest.raises(SigmapInputError, match="b0"):
        group_test(m, {k: v for k, v in meta.items() if k != "b0"}, by=by)


def test_function_matrix_brute_force() -> None:
    m = _random_matrix(12, 3)
    m.values[0, 5] = m.values[5, 0] = np.nan  # NaN pairs are skipped
    fns = {k: v["function"] for k, v in _meta(12, 4).items()}
    res = function_matrix(m, fns)
    names = res["functions"]
    for a, b in itertools.product(names, names):
        vals = [
            m.values[i, j]
            for i, j in itertools.combinations(range(12), 2)
            if {fns[f"b{i}"], fns[f"b{j}"]} == {a, b}
            and (a != b or fns[f"b{i}"] == a)
            and np.isfinite(m.values[i, j])
        ]
        got = res["matrix"][names.index(a), names.index(b)]
        if vals:
            assert got == pytest.approx(np.mean(vals))
        else:
            assert np.isnan(got)
    pairs = [(i, j) for i, j in itertools.combinations(range(12), 2) if np.isfinite(m.values[i, j])]
    within = [m.values[i, j] for i, j in pairs if fns[f"b{i}"] == fns[f"b{j}"]]
    crossv = [m.values[i, j] for i, j in pairs if fns[f"b{i}"] != fns[f"b{j}"]]
    assert res["within_mean"] == pytest.approx(np.mean(within))
    assert res["cross_mean"] == pytest.approx(np.mean(crossv))
    assert np.allclose(res["matrix"], res["matrix"].T, equal_nan=True)


def _exact_within_p(m: OverlapMatrix, fns: dict[str, str]) -> float:
    """Every distinct relabelling of the benchmarks, enumerated."""
    labels = list(m.labels)
    pairs = [
        (i, j)
        for i, j in itertools.combinations(range(len(labels)), 2)
        if np.isfinite(m.values[i, j])
    ]

    def diff(lab: tuple[str, ...]) -> float:
        w = [m.values[i, j] for i, j in pairs if lab[i] == lab[j]]
        c = [m.values[i, j] for i, j in pairs if lab[i] != lab[j]]
        return np.mean(w) - np.mean(c)

    obs = diff(tuple(fns[k] for k in labels))
    null = [diff(p) for p in set(itertools.permutations([fns[k] for k in labels]))]
    return float(np.mean(np.array(null) >= obs - 1e-12))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_within_function_p_matches_exact_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = _random_matrix(7, seed)
    fns = {f"b{i}": f for i, f in enumerate(["x", "x", "x", "y", "y", "z", "z"])}
    if seed == 1:  # benchmarks of one function overlap more: a small p
        for i, j in itertools.combinations(range(7), 2):
            if fns[f"b{i}"] == fns[f"b{j}"]:
                m.values[i, j] = m.values[j, i] = 0.95 + 0.04 * rng.random()
    exact = _exact_within_p(m, fns)
    got = function_matrix(m, fns, n_perm=20_000, seed=seed)["within_p"]
    assert got == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / 20_000) + 1e-3)
    if seed == 1:
        assert got < 0.01
    assert np.isnan(function_matrix(m, fns, n_perm=0)["within_p"])
    one = {k: "x" for k in fns}  # no cross-function pair: nothing to test
    assert np.isnan(function_matrix(m, one)["within_p"])


def test_spread_matches_numpy() -> None:
    m = _random_matrix(10, 5)
    v = m.values[np.triu_indices(10, 1)]
    s = spread(m)
    assert s["n"] == 45
    assert s["iqr"] == pytest.approx(np.quantile(v, 0.75) - np.quantile(v, 0.25))
    assert s["sd"] == pytest.approx(v.std(ddof=1))
    assert s["frac_in_band"] == pytest.approx(((v >= 0.1) & (v <= 0.4)).mean())
    assert s["min"] == v.min() and s["max"] == v.max()


def test_cluster_average_linkage_matches_scipy_and_recovers_blocks() -> None:
    rng = np.random.default_rng(6)
    groups = np.repeat([0, 1, 2], 4)
    v = np.where(groups[:, None] == groups[None, :], 0.8, 0.1) + rng.normal(0, 0.03, (12, 12))
    v = (v + v.T) / 2
    np.fill_diagonal(v, 1)
    perm = rng.permutation(12)
    v, groups = v[np.ix_(perm, perm)], groups[perm]
    m = OverlapMatrix(labels=tuple(f"b{i}" for i in range(12)), values=v)
    res = cluster(m)
    d = 1 - v
    np.fill_diagonal(d, 0)
    ref = linkage(squareform(d, checks=False), method="average")
    # same tree (cophenetic distances) as scipy's average linkage
    np.testing.assert_allclose(cophenet(res.linkage), cophenet(ref))
    flat = res.clusters(3)
    for g in range(3):
        ids = {flat[f"b{i}"] for i in np.nonzero(groups == g)[0]}
        assert len(ids) == 1
    assert sorted(res.order) == sorted(m.labels)
    # leaves of a block are contiguous in the order
    pos = np.array([res.order.index(f"b{i}") for i in range(12)])
    for g in range(3):
        p = np.sort(pos[groups == g])
        assert p[-1] - p[0] == 3
    m.values[0, 1] = m.values[1, 0] = np.nan
    with pytest.raises(SigmapInputError, match="NaN"):
        cluster(m)
    assert len(cluster(m, fill_nan=0.0).order) == 12


def test_agreement_matches_scipy() -> None:
    a = _random_matrix(9, 7)
    b = _random_matrix(9, 8)
    b.values[:] = 0.5 * a.values + 0.5 * b.values
    b = b.subset(list(reversed(b.labels)))  # order must not matter
    res = agreement(a, b)
    iu = np.triu_indices(9, 1)
    bb = b.subset(list(a.labels)).values[iu]
    ref = spearmanr(a.values[iu], bb)
    assert res["rho"] == pytest.approx(ref.statistic)
    assert res["p"] == pytest.approx(ref.pvalue)
    assert res["n_pairs"] == 36


def test_signature_content_alignment_with_fake_encoder() -> None:
    import hashlib

    class Enc:
        sigmap_id = "fake-align"

        def encode(self, texts, **kw):
            out = []
            for t in texts:
                seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
                out.append(np.random.default_rng(seed).standard_normal(8))
            return np.array(out)

    from sigmap_lib.overlap import signature_content_alignment

    units = {"k": ["u1", "u2"], "m": ["u3"]}
    qs = {"k": ["q1", "q2", "q3"], "m": ["q4"]}
    res = signature_content_alignment(units, qs, Enc(), functions={"k": "knowledge", "m": "math"})
    enc = Enc()

    def f(texts):
        v = enc.encode(texts)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        mv = v.mean(0)
        return mv / np.linalg.norm(mv)

    pb = res["per_benchmark"]
    assert pb.filter(pb["benchmark"] == "k")["cosine"][0] == pytest.approx(
        f(units["k"]) @ f(qs["k"]), abs=1e-6
    )
    pf = res["per_function"]
    assert pf["function"].to_list() == ["knowledge", "math"]
    assert pf["mean_cosine"][1] == pytest.approx(f(units["m"]) @ f(qs["m"]), abs=1e-6)

"""Sharded views (issue #13): the coverage choice against brute force, and the rank codes and
statistics of several shards' stores against one store of all units."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import ConcatArray, ShardedRanks, build_rank_store, select_coverage
from sigmap_lib.signatures import extract_signatures, screen


def _brute_force(shards, models, min_models):
    """Best (score, n_models, units) over EVERY subset of the models."""
    best = (0, 0, 0)
    for r in range(min_models, len(models) + 1):
        for sub in itertools.combinations(models, r):
            units = sum(n for _, n, done in shards if set(sub) <= set(done))
            if units:
                best = max(best, (len(sub) * units, len(sub), units))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_select_coverage_is_the_brute_force_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    models = [f"m{i}" for i in range(int(rng.integers(3, 8)))]
    shards = []
    for j in range(int(rng.integers(1, 9))):
        p = rng.uniform(0.3, 1.0)
        done = [m for m in models if rng.random() < p]
        shards.append((f"s{j}", int(rng.integers(1, 50)), done))
    cov = select_coverage(shards, models, min_models=3)
    want = _brute_force(shards, models, 3)
    got = (len(cov.models) * cov.n_units, len(cov.models), cov.n_units) if cov.models else (0, 0, 0)
    assert got == want
    # the chosen models are complete on every used shard, and no other shard holds them all
    by_key = {k: set(d) for k, _, d in shards}
    assert all(set(cov.models) <= by_key[s] for s in cov.shards)
    assert all(not set(cov.models) <= by_key[s] for s in cov.excluded_shards) or not cov.models
    assert cov.models == [m for m in models if m in set(cov.models)]  # registry order
    assert cov.total_units == sum(n for _, n, _ in shards)


def test_select_coverage_errors_and_empty() -> None:
    with pytest.raises(SigmapInputError, match="repeat"):
        select_coverage([("a", 1, []), ("a", 2, [])], ["m"])
    with pytest.raises(SigmapInputError, match="not in the model list"):
        select_coverage([("a", 1, ["x"])], ["m"])
    cov = select_coverage([("a", 5, ["m1", "m2"])], ["m1", "m2", "m3"])
    assert cov.models == [] and cov.excluded_shards == ["a"] and cov.missing == {"a": ["m3"]}


@pytest.mark.parametrize("seed", range(5))
def test_concat_array_indexes_like_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = [rng.standard_normal((int(n), 3)) for n in rng.integers(0, 9, size=7)]
    parts[0] = rng.standard_normal((4, 3))
    whole = np.concatenate(parts)
    a = ConcatArray(parts)
    assert a.shape == whole.shape and len(a) == len(whole)
    np.testing.assert_array_equal(np.asarray(a), whole)
    for _ in range(30):
        i, j = sorted(rng.integers(-len(whole), len(whole) + 3, size=2).tolist())
        np.testing.assert_array_equal(a[i:j], whole[i:j])
        idx = rng.integers(-len(whole), len(whole), size=int(rng.integers(0, 12)))
        np.testing.assert_array_equal(a[idx], whole[idx])
        np.testing.assert_array_equal(a[idx, 1], whole[idx, 1])
    np.testing.assert_array_equal(a[::3], whole[::3])
    with pytest.raises(IndexError):
        a[[len(whole)]]


def _data(seed: int, n: int = 2500, m: int = 9):
    rng = np.random.default_rng(seed)
    nll = rng.integers(0, 5, size=(n, m)).astype(np.float32)  # many ties
    nll[rng.random(n) < 0.2] = nll[3]  # identical rows: tied strengths
    nbytes = rng.integers(1, 9, size=n)
    scores = rng.standard_normal((m, 3))
    scores[[1, 5], 1] = np.nan  # one benchmark scored by 7 models
    return nll, nbytes, scores


@pytest.mark.parametrize("seed", range(3))
def test_sharded_ranks_equal_one_store_of_all_units(tmp_path: Path, seed: int) -> None:
    nll, nbytes, scores = _data(seed)
    n, m = nll.shape
    cuts = [0, 7, 300, 301, 1100, 1500, 2222, 2400, n]  # 8 uneven shards
    keys = [f"m{j}" for j in range(m)]
    extra = nll[:, :2] + 0.5  # two more models on some shards (re-ranked away in the view)
    stores = []
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        arrays = list(nll[a:b].T)
        names = list(keys)
        if i % 2:
            arrays += list(extra[a:b].T)
            names += ["x1", "x2"]
        stores.append(build_rank_store(arrays, names, nbytes[a:b], tmp_path / f"s{i}"))
    view = ShardedRanks.from_stores(stores, keys, chunk_units=128)
    whole = build_rank_store(list(nll.T), keys, nbytes, tmp_path / "whole", chunk_units=128)
    assert view.n_units == n and view.model_keys == keys and view.n_shards == 8
    np.testing.assert_array_equal(view.ranks(), whole.ranks())
    np.testing.assert_array_equal(view.array()[[5, 2000, 7, 301]], whole.array()[[5, 2000, 7, 301]])
    np.testing.assert_allclose(view.bpb_mean, whole.bpb_mean, rtol=1e-12)
    np.testing.assert_allclose(view.bpb_sd, whole.bpb_sd, rtol=1e-10)
    for r_view, r_whole in zip(
        screen(view, scores, k=40), screen(whole, scores, k=40), strict=True
    ):
        np.testing.assert_array_equal(r_view.indices, r_whole.indices)
        np.testing.assert_array_equal(r_view.thrush, r_whole.thrush)
        np.testing.assert_array_equal(r_view.hist_counts, r_whole.hist_counts)
    kw = {"method": "calibrated-marginal", "n_permutations": 19, "seed": 1, "shared_null": True}
    for a, b in zip(
        extract_signatures(view, scores, **kw), extract_signatures(whole, scores, **kw), strict=True
    ):
        np.testing.assert_array_equal(a.units, b.units)
        np.testing.assert_allclose(a.calibration.null_max, b.calibration.null_max, rtol=1e-12)
    # the partial test reads the values: per-shard arrays joined, as the assets pass them
    # (it needs >= 12 scored models: five more columns of values)
    v = np.column_stack([nll, nll[:, :5] + 0.25])
    y = np.vstack([np.nan_to_num(scores), np.random.default_rng(seed).standard_normal((5, 3))])
    parts = [
        ConcatArray([v[a:b, j] for a, b in itertools.pairwise(cuts)]) for j in range(v.shape[1])
    ]
    kw = {"n_permutations": 19, "seed": 1}
    for a, b in zip(
        extract_signatures(parts, y, **kw), extract_signatures(list(v.T), y, **kw), strict=True
    ):
        np.testing.assert_array_equal(a.units, b.units)
        np.testing.assert_allclose(a.calibration.null_max, b.calibration.null_max, rtol=1e-6)
    with pytest.raises(SigmapInputError, match="lacks models"):
        ShardedRanks.from_stores(stores, [*keys, "x1"])

"""Per-shard bits-per-byte moments merge into the monolithic ones (issue #13)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import BpbMoments, bpb_moments, build_rank_store, merge_bpb_moments
from sigmap_lib.nll._moments import RunningMoments

_CUTS = [0, 1, 17, 900, 905, 2500, 2501, 4000, 6100]  # 8 uneven shards


def _data(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    n = _CUTS[-1]
    nll = [(rng.gamma(2.0, 1.5 + j, n) + 30.0).astype(np.float32) for j in range(5)]
    nbytes = rng.integers(1, 13, n)
    return nll, nbytes


def test_merged_moments_equal_monolithic(tmp_path) -> None:
    nll, nbytes = _data(0)
    keys = [f"m{j}" for j in range(len(nll))]
    parts = [
        bpb_moments([x[a:b] for x in nll], keys, nbytes[a:b]) for a, b in itertools.pairwise(_CUTS)
    ]
    parts = [BpbMoments.from_dict(json.loads(json.dumps(p.to_dict()))) for p in parts]
    rng = np.random.default_rng(1)
    merged = merge_bpb_moments([parts[i] for i in rng.permutation(len(parts))])
    bpb = np.column_stack(nll).astype(np.float64) / (nbytes[:, None] * math.log(2.0))
    # numpy on the whole array
    np.testing.assert_array_equal(merged.count, np.full(5, len(nbytes)))
    np.testing.assert_allclose(merged.mean, bpb.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(merged.sd, bpb.std(axis=0), rtol=1e-11)
    np.testing.assert_allclose(merged.sum_squares, (bpb**2).sum(axis=0), rtol=1e-12)
    # the streamed moments of the rank store (RunningMoments, chunk by chunk)
    run = RunningMoments(5)
    run.update(np.column_stack(nll), 1.0 / (nbytes * math.log(2.0)))
    np.testing.assert_allclose(merged.mean, run.mean, rtol=1e-13)
    np.testing.assert_allclose(merged.sd, run.sd, rtol=1e-11)
    store = build_rank_store(nll, keys, nbytes, tmp_path / "ranks", chunk_units=333)
    np.testing.assert_allclose(merged.mean, store.bpb_mean, rtol=1e-13)
    np.testing.assert_allclose(merged.sd, store.bpb_sd, rtol=1e-11)


def test_models_missing_from_shards_have_their_own_coverage() -> None:
    nll, nbytes = _data(2)
    keys = [f"m{j}" for j in range(5)]
    parts = []
    covered = {k: np.zeros(len(nbytes), bool) for k in keys}
    for i, (a, b) in enumerate(itertools.pairwise(_CUTS)):
        have = [j for j in range(5) if (i + j) % 3]  # each shard misses some models
        parts.append(bpb_moments([nll[j][a:b] for j in have], [keys[j] for j in have], nbytes[a:b]))
        for j in have:
            covered[keys[j]][a:b] = True
    merged = merge_bpb_moments(parts)
    assert sorted(merged.model_keys) == keys
    for j, key in enumerate(merged.model_keys):
        mask = covered[key]
        x = nll[int(key[1:])][mask].astype(np.float64) / (nbytes[mask] * math.log(2.0))
        assert merged.count[j] == mask.sum() < len(nbytes)
        np.testing.assert_allclose(merged.mean[j], x.mean(), rtol=1e-13)
        np.testing.assert_allclose(merged.sd[j], x.std(), rtol=1e-11)


def test_bpb_moments_validation() -> None:
    with pytest.raises(SigmapInputError, match="unit 1 has 0"):
        bpb_moments([np.ones(3)], ["a"], [1, 0, 2])
    with pytest.raises(SigmapInputError, match="model a: NLL is NaN at unit 2"):
        bpb_moments([np.array([1.0, 2.0, np.nan])], ["a"], [1, 1, 1])
    with pytest.raises(SigmapInputError, match="shape"):
        bpb_moments([np.ones(3)], ["a"], [1, 1])
    with pytest.raises(SigmapInputError, match="no moments"):
        merge_bpb_moments([])
    empty = bpb_moments([np.ones(0)], ["a"], np.ones(0))
    one = bpb_moments([np.array([math.log(2.0)])], ["a"], [1])
    both = merge_bpb_moments([empty, one])
    assert both.count.tolist() == [1] and both.mean.tolist() == [1.0] and both.sd.tolist() == [0]
    assert np.isnan(empty.mean).all()

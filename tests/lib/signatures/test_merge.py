"""Exact merges of per-shard screening results equal the monolithic screen (issue #13)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures import (
    ScreenPartial,
    corpus_k,
    merge_histograms,
    merge_null_maxima,
    merge_screen,
    screen,
    screen_partial,
    thrush_correlation,
)

# >= 7 uneven shards: one of a single unit, several smaller than k, one empty-ish tail
_CUTS = [0, 1, 13, 400, 430, 1100, 1111, 1900, 2400, 2401, 3000]


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, m = _CUTS[-1], 9
    values = rng.integers(0, 4, size=(n, m)).astype(np.float64)  # many tied values
    values[rng.random(n) < 0.3] = values[5]  # many identical rows: tied strengths
    values[2000] = values[7]
    scores = rng.standard_normal((m, 3))
    scores[[1, 4], 1] = np.nan  # benchmark 1 is scored by 7 models only
    scores[0, 2] = np.nan
    scores[3, 2] = scores[2, 2]  # tied scores
    return values, scores


def _parts(values: np.ndarray, scores: np.ndarray, k: int, **kw: object) -> list[ScreenPartial]:
    parts = [
        screen_partial(values[a:b], scores, k=k, unit_offset=a, key=f"s{i}", **kw)
        for i, (a, b) in enumerate(itertools.pairwise(_CUTS))
    ]
    # every partial goes through JSON (as stored per shard) and comes back equal
    back = [ScreenPartial.from_dict(json.loads(json.dumps(p.to_dict()))) for p in parts]
    assert back == parts
    return back


@pytest.mark.parametrize(
    ("statistic", "two_sided"),
    [("thrush", True), ("thrush", False), ("preselect", True), ("preselect", False)],
)
def test_merged_screen_equals_monolithic(statistic: str, two_sided: bool) -> None:
    values, scores = _data(0)
    k = corpus_k(0.01, len(values))
    assert k == 30
    kw = {"statistic": statistic, "two_sided": two_sided, "n_bins": 50}
    parts = _parts(values, scores, k, **kw)
    rng = np.random.default_rng(1)
    merged = merge_screen([parts[i] for i in rng.permutation(len(parts))])  # any order
    whole = screen(values, scores, q=0.01, chunk_units=256, **kw)
    assert len(merged) == len(whole) == 3
    for m, w in zip(merged, whole):
        # ties are real: the K-th strength is shared by units left out of the top K
        assert np.array_equal(m.indices, w.indices), (statistic, two_sided, m.benchmark)
        np.testing.assert_array_equal(m.strength, w.strength)
        np.testing.assert_array_equal(m.thrush, w.thrush)
        np.testing.assert_array_equal(m.preselect, w.preselect)
        np.testing.assert_array_equal(m.hist_counts, w.hist_counts)
        np.testing.assert_array_equal(m.hist_edges, w.hist_edges)
        np.testing.assert_array_equal(m.models_used, w.models_used)
        assert (m.n_units, m.k, m.statistic, m.two_sided) == (w.n_units, w.k, statistic, two_sided)
    if statistic == "thrush" and two_sided:  # ties at the K-th strength cross the cut
        st = np.abs(thrush_correlation(values, scores[:, 0]))
        kth = merged[0].strength[-1]
        assert (st == kth).sum() > (merged[0].strength == kth).sum()


def test_rebased_partials_merge_like_offset_ones() -> None:
    values, scores = _data(2)
    k = 25
    parts = _parts(values, scores, k)
    local = [
        screen_partial(values[a:b], scores, k=k, key=p.key).rebase(a)
        for p, (a, b) in zip(parts, itertools.pairwise(_CUTS))
    ]
    assert local == parts
    # a file added in front shifts every offset: rebasing gives the shifted global indices
    shifted = merge_screen([p.rebase(p.unit_offset + 1000) for p in parts])
    for s, m in zip(shifted, merge_screen(parts)):
        assert np.array_equal(s.indices, m.indices + 1000)


def test_merge_screen_rejects_inconsistent_partials() -> None:
    values, scores = _data(3)
    parts = _parts(values, scores, 20)
    with pytest.raises(SigmapInputError, match="overlap"):
        merge_screen([parts[2], parts[3].rebase(parts[2].unit_offset + 1)])
    other_k = screen_partial(values[:50], scores, k=21, unit_offset=5000, key="x")
    with pytest.raises(SigmapInputError, match="different k"):
        merge_screen([parts[0], other_k])
    with pytest.raises(SigmapInputError, match="fewer than k=21"):
        merge_screen([parts[0], other_k], k=21)
    other_stat = screen_partial(
        values[:50], scores, k=20, unit_offset=5000, key="y", statistic="preselect"
    )
    with pytest.raises(SigmapInputError, match="screened differently"):
        merge_screen([parts[0], other_stat])
    with pytest.raises(SigmapInputError, match="corpus-wide k=20"):
        ScreenPartial.from_results(screen(values[:50], scores, k=10), k=20)
    with pytest.raises(SigmapInputError, match="not q"):
        screen_partial(values, scores, k=3, q=0.1)


def test_null_maxima_and_histograms_merge_exactly() -> None:
    rng = np.random.default_rng(4)
    values, scores = _data(4)
    y = scores[:, 0]
    perms = np.column_stack([y[rng.permutation(len(y))] for _ in range(40)])  # (m, P)
    strength = np.abs(thrush_correlation(values, perms))  # (n_units, P)
    whole_max = strength.max(axis=0)
    per_shard = [strength[a:b].max(axis=0) for a, b in itertools.pairwise(_CUTS)]
    np.testing.assert_array_equal(merge_null_maxima(per_shard), whole_max)
    np.testing.assert_array_equal(merge_null_maxima(per_shard[::-1]), whole_max)
    with pytest.raises(SigmapInputError, match="different shapes"):
        merge_null_maxima([per_shard[0], per_shard[1][:-1]])
    with pytest.raises(SigmapInputError, match="NaN"):
        merge_null_maxima([per_shard[0], np.full(40, np.nan)])

    edges = np.linspace(0.0, 1.0, 33)
    hists = [np.histogram(strength[a:b, 0], edges)[0] for a, b in itertools.pairwise(_CUTS)]
    np.testing.assert_array_equal(
        merge_histograms(hists, [edges] * len(hists)), np.histogram(strength[:, 0], edges)[0]
    )
    with pytest.raises(SigmapInputError, match="bin edges"):
        merge_histograms(hists[:2], [edges, edges[:-1]])


def test_partials_with_headroom_and_subsets_merge_to_the_monolithic_screen() -> None:
    """Shards screened with a larger k (headroom for corpus growth) give exactly the
    monolithic top-k for any smaller k; a benchmark subset of a partial merges like a
    screen of those benchmarks alone."""
    values, scores = _data(5)
    for k in (1, 7, 20):
        parts = _parts(values, scores, 2 * k + 3)
        merged = merge_screen(parts, k=k)
        whole = screen(values, scores, k=k)
        for a, b in zip(merged, whole, strict=True):
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_array_equal(a.strength, b.strength)
            np.testing.assert_array_equal(a.hist_counts, b.hist_counts)
    parts = _parts(values, scores, 20)
    pick = [scores.shape[1] - 1, 0]
    merged = merge_screen([p.subset(pick) for p in parts])
    whole = screen(values, scores[:, pick], k=20)
    for a, b in zip(merged, whole, strict=True):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.thrush, b.thrush)

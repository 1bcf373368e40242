"""When a stored per-shard screening partial is reused (outside Dagster)."""

from __future__ import annotations

import numpy as np

from sigmap_lib.signatures import merge_screen, partial_key, reuse_partial, screen_partial

MODELS = [f"m{i}" for i in range(6)]


def _key(y: np.ndarray, names: list[str], statistic: str = "thrush"):
    return partial_key(MODELS, "s0", "r0", y, names, statistic=statistic, two_sided=True)


def test_a_valid_partial_is_reused_for_a_subset_of_its_benchmarks() -> None:
    rng = np.random.default_rng(0)
    values, y = rng.standard_normal((30, 6)), rng.standard_normal((6, 3))
    record = _key(y, ["a", "b", "c"]).record(screen_partial(values, y, k=5))
    part = reuse_partial(record, _key(y[:, [2, 0]], ["c", "a"]), k=4)
    direct = screen_partial(values, y[:, [2, 0]], k=5)
    for got, want in zip(merge_screen([part], k=4), merge_screen([direct], k=4)):
        np.testing.assert_array_equal(got.indices, want.indices)


def test_a_partial_is_not_reused_when_anything_it_was_computed_from_changed() -> None:
    rng = np.random.default_rng(0)
    values, y = rng.standard_normal((30, 6)), rng.standard_normal((6, 2))
    record = _key(y, ["a", "b"]).record(screen_partial(values, y, k=5))
    assert reuse_partial(record, _key(y, ["a", "b"]), k=5) is not None
    changed = y.copy()
    changed[0, 1] += 1.0  # benchmark b rescored
    assert reuse_partial(record, _key(changed, ["a", "b"]), k=5) is None
    assert reuse_partial(record, _key(changed[:, :1], ["a"]), k=5) is not None  # a is unchanged
    assert reuse_partial(record, _key(y, ["a", "b"], statistic="preselect"), k=5) is None
    assert reuse_partial(record, _key(y, ["a", "b"]), k=6) is None  # kept too few candidates
    assert reuse_partial({}, _key(y, ["a", "b"]), k=1) is None
    one = _key(y[:, :1], ["a"])
    assert reuse_partial(record, one, k=5, same_benchmarks=True) is None

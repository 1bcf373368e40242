"""Empty signatures are results: NaN pairs with a recorded reason, left out of the tests,
the clustering and the null, and stated in the report."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.overlap import UnitBits, signature_overlap, signature_overlap_null
from sigmap_lib.reporting import build_overlap_report, level_analyses

REASON = "no signature above chance at m = 12, d = 40, α = 0.05"
META = {
    b: {"family": f, "format": "mc", "function": fn}
    for b, f, fn in [
        ("a", "F1", "math"),
        ("b", "F1", "math"),
        ("c", "F2", "code"),
        ("d", "F2", "code"),
    ]
}


def _world(seed: int = 0):
    rng = np.random.default_rng(seed)
    nll = rng.gamma(4.0, 2.0, size=(40, 12))
    nbytes = rng.integers(2, 8, size=40)
    return UnitBits.of_matrix(nll, nbytes)


def test_empty_signature_gives_nan_pairs_and_the_reason() -> None:
    bits = _world()
    sigs = {"a": [0, 1], "b": [1, 2], "c": [], "d": [5]}
    m = signature_overlap(sigs, bits, no_signature={"c": REASON})
    full = signature_overlap({k: v for k, v in sigs.items() if v}, bits)
    i = m.labels.index("c")
    assert np.isnan(np.delete(m.values[i], i)).all() and m.values[i, i] == 1.0
    assert m.extra["no_signature"] == {"c": REASON}
    assert np.isnan(m.extra["model_scores"][:, i]).all()
    sub = m.subset(["a", "b", "d"])
    np.testing.assert_allclose(sub.values, full.values)  # the others are unaffected
    assert signature_overlap(sigs, bits).extra["no_signature"] == {"c": "empty signature"}


def test_null_counts_an_empty_permutation_as_no_overlap() -> None:
    bits = _world(1)
    rng = np.random.default_rng(2)
    y = rng.normal(size=(12, 2))
    calls = iter(range(1000))

    def extract(scores):
        k = next(calls)
        if k == 0:
            return {"x": [0, 1], "y": [0, 2]}  # observed
        return {"x": [0, 1], "y": [] if k % 2 else [3]}  # half the permutations: empty

    res = signature_overlap_null(extract, y, bits, n_perm=20, seed=0)
    assert res.extra["null_finite"][0, 1] == 10
    null = res.extra["null"][:, 0, 1]
    obs = res.values[0, 1]
    expect = (1 + np.sum(null[np.isfinite(null)] >= obs - 1e-12)) / 21
    assert res.extra["p_value"][0, 1] == pytest.approx(expect)


def test_analyses_leave_out_benchmarks_without_signature_and_count_them() -> None:
    m = signature_overlap(
        {"a": [0, 1], "b": [1, 2], "c": [], "d": [5, 6]}, _world(3), no_signature={"c": REASON}
    )
    res = level_analyses(m, META)
    assert res["left_out"] == {
        "benchmarks_without_signature": {"c": REASON},
        "pairs_left_out": 3,
        "pairs": 6,
    }
    assert "c" not in res["cluster"].order and len(res["cluster"].order) == 3
    ref = level_analyses(m.subset(["a", "b", "d"]), {k: v for k, v in META.items() if k != "c"})
    assert res["family"]["n_same"] + res["family"]["n_cross"] == 3
    assert res["family"]["U"] == ref["family"]["U"] or np.isnan(ref["family"]["U"])


def test_report_states_no_signature_above_chance(tmp_path) -> None:
    m = signature_overlap(
        {"a": [0, 1], "b": [1, 2], "c": [], "d": [5, 6]}, _world(4), no_signature={"c": REASON}
    )
    sections, summary = build_overlap_report({"signature": m}, META, tmp_path)
    text = "\n".join(s.text for s in sections if s.text)
    assert "1 benchmark(s) have no signature (" + REASON in text
    assert summary["levels"]["signature"]["left_out"]["pairs_left_out"] == 3

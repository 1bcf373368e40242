"""The signature level's pieces outside Dagster: the stored matrix form, the pair
intervals, the corpus half-split and the units in context."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sigmap_lib.inputs import Document, build_corpus_store
from sigmap_lib.overlap import (
    OverlapMatrix,
    bootstrap_ci,
    corpus_half_split,
    load_overlap_matrix,
    pair_intervals,
    save_overlap_matrix,
    unit_contexts,
)


def test_a_stored_matrix_reads_back_with_counts_extras_and_missing_signatures(
    tmp_path: Path,
) -> None:
    values = np.array([[1.0, 0.3, np.nan], [0.3, 1.0, np.nan], [np.nan, np.nan, 1.0]])
    m = OverlapMatrix(labels=("a", "b", "c"), values=values, level="signature")
    m.n_common = np.full((3, 3), 12)
    m.extra["no_signature"] = {"c": "no unit above chance at m = 12"}
    p = np.arange(9.0).reshape(3, 3)
    save_overlap_matrix(m, tmp_path / "s.parquet", tmp_path / "s.npz", {"p_value": p})
    back = load_overlap_matrix(tmp_path / "s.parquet", tmp_path / "s.npz", level="signature")
    assert back.labels == m.labels and back.level == "signature"
    np.testing.assert_array_equal(back.values, values)
    np.testing.assert_array_equal(back.n_common, m.n_common)
    np.testing.assert_array_equal(back.extra["p_value"], p)
    assert back.extra["no_signature"] == {"c": "no unit above chance at m = 12"}
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically, nothing left over


def test_pair_intervals_are_the_bootstrap_of_the_scored_columns_placed_in_full() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(25, 4))
    x[:, 1] = np.nan  # "b" has no signature
    got = pair_intervals(x, list("abcd"), without=["b"], n_boot=40, seed=3)
    want = bootstrap_ci(x[:, [0, 2, 3]], labels=list("acd"), n_boot=40, seed=3)
    keep = np.ix_([0, 2, 3], [0, 2, 3])
    np.testing.assert_array_equal(got["ci_low"][keep], want.extra["ci_low"])
    np.testing.assert_array_equal(got["ci_high"][keep], want.extra["ci_high"])
    assert np.isnan(got["ci_low"][1]).all() and np.isnan(got["ci_high"][:, 1]).all()
    assert pair_intervals(x, list("abcd"), without=["a", "b", "c"]) == {}


def test_the_half_split_never_cuts_a_document() -> None:
    assert corpus_half_split([0, 0, 1, 1, 1, 1, 2, 2]) == 2  # the middle unit is in doc 1
    assert corpus_half_split([0, 1, 1, 1, 1, 1, 1, 1]) == 1
    assert corpus_half_split([5, 5, 5]) is None  # one document: no halves
    assert corpus_half_split([]) is None


def test_unit_contexts_show_each_unit_after_its_left_context(tmp_path: Path) -> None:
    text = "one two three four five"
    corpus = build_corpus_store([Document("d", "d", text)], tmp_path / "corpus")
    got = unit_contexts(corpus, {"x": np.array([4, 1]), "empty": np.array([], dtype=int)}, 2)
    assert got == {"x": ["three four five", "one two"]}

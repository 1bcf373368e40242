"""The smallest planted world: its draws, its planted truth, and its bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures import CalibratedPartial
from sigmap_lib.worlds import planted_values


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_planted_values_are_the_documented_draws(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(9)
    values = rng.standard_normal((50, 9))
    values[[4, 30, 2]] = -a + 0.3 * rng.standard_normal((3, 9))
    null = rng.standard_normal((9, 2))
    got_values, got_scores = planted_values(
        50, 9, [4, 30, 2], noise=0.3, n_null_benchmarks=2, seed=seed
    )
    np.testing.assert_array_equal(got_values, values)
    np.testing.assert_array_equal(got_scores, np.column_stack([a, null]))


def test_planted_units_track_the_score_and_a_method_finds_them() -> None:
    values, scores = planted_values(300, 24, [11, 250], noise=0.0, seed=5)
    for u in (11, 250):
        assert pearsonr(values[u], scores[:, 0]).statistic == pytest.approx(-1.0)
    [sig] = CalibratedPartial(n_permutations=199).extract(values, scores, names=["b"])
    assert {11, 250} <= set(sig.units.tolist())  # (a false claim beside them: ≤ 5 %)


@pytest.mark.parametrize(
    ("args", "kw", "match"),
    [
        ((10, 5, [10]), {}, r"distinct indices in \[0, 10\)"),
        ((10, 5, [1, 1]), {}, "distinct"),
        ((10, 1, [1]), {}, "n_models >= 2"),
        ((10, 5, [1]), {"noise": -1.0}, "must be >= 0"),
    ],
)
def test_bad_input_is_one_clear_line(args, kw, match) -> None:
    with pytest.raises(SigmapInputError, match=match):
        planted_values(*args, **kw)

"""The smallest detectable partial correlation: the closed form against the exact null of a
correlation (scipy's beta distribution) and against permutation thresholds on fresh worlds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures import (
    MIN_MODELS_CALIBRATED,
    detectable_rho,
    extract_signatures,
    models_needed,
)
from sigmap_lib.worlds import hard_world


@pytest.mark.parametrize("df,d,alpha", [(8, 10_000, 0.05), (26, 10_000, 0.05), (58, 500, 0.1)])
def test_closed_form_is_the_bonferroni_quantile_of_the_exact_correlation_null(
    df: int, d: int, alpha: float
) -> None:
    # under the null, a correlation with n = df + 2 observations is 2·Beta(n/2 − 1, n/2 − 1) − 1
    n = df + 2
    a = n / 2.0 - 1.0
    exact = 2.0 * beta.isf(alpha / (2.0 * d), a, a) - 1.0
    q = 4  # any basis rank: df = m − q − 1
    assert detectable_rho(df + q + 1, d, alpha, basis_columns=q) == pytest.approx(exact, abs=1e-9)


def test_more_units_or_a_smaller_alpha_raise_the_threshold_more_models_lower_it() -> None:
    assert detectable_rho(32, 1e6) > detectable_rho(32, 1e4) > detectable_rho(32, 100)
    assert detectable_rho(32, 1e4, 0.01) > detectable_rho(32, 1e4, 0.05)
    assert detectable_rho(64, 1e4) < detectable_rho(32, 1e4) < detectable_rho(17, 1e4)
    assert detectable_rho(32, 1e4, two_sided=False) < detectable_rho(32, 1e4)
    assert detectable_rho(4, 1e4) == 1.0  # no residual degrees of freedom


@pytest.mark.parametrize("rho,d", [(0.8, 10_000), (0.6, 10_000), (0.5, 177_111), (0.99, 100)])
def test_models_needed_is_the_first_m_below_rho(rho: float, d: int) -> None:
    m = models_needed(rho, d)
    assert m >= MIN_MODELS_CALIBRATED
    assert detectable_rho(m, d) < rho
    assert all(detectable_rho(k, d) >= rho for k in range(MIN_MODELS_CALIBRATED, m))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(SigmapInputError, match="rho"):
        models_needed(1.2, 100)
    with pytest.raises(SigmapInputError, match="n_units"):
        detectable_rho(32, 0)
    with pytest.raises(SigmapInputError, match="more than"):
        models_needed(0.05, 10**6, max_models=200)


@pytest.mark.slow
@pytest.mark.parametrize("m", [16, 32, 64])
def test_matches_the_permutation_thresholds_on_fresh_hard_worlds(m: int) -> None:
    rng = np.random.default_rng([m, 7])
    d = 2000
    thresholds = []
    for run in range(6):
        w = hard_world("linear", m, d, rng)
        [sig] = extract_signatures(w.values, w.scores, n_permutations=199, seed=run)
        thresholds.append(sig.calibration.threshold)
    assert detectable_rho(m, d) == pytest.approx(np.median(thresholds), abs=0.03)

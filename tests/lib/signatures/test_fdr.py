"""The false-discovery mode: the pooled permutation null against every permuted statistic
computed from its definition, the step-up rule against brute force, and the rate on fresh
worlds (complete nulls of the hard kind, and planted signal)."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures import NULL_BINS, extract_signatures, fdr_threshold
from sigmap_lib.signatures._calibration import DesignOptions, calibrated_signatures
from sigmap_lib.worlds import hard_world

from .test_calibration import _brute_partial, _problem


def _brute_step_up(null: np.ndarray, s: np.ndarray, q: float) -> set[int]:
    """Benjamini–Hochberg with pooled permutation counts: V(t) = #{null >= t} / P."""
    p = null.shape[0]
    best = -1
    for k, t in enumerate(np.sort(s)[::-1]):
        if (null >= t).sum() / p <= q * (s >= t).sum():
            best = k
    if best < 0:
        return set()
    t = np.sort(s)[::-1][best]
    return set(np.flatnonzero(s >= t).tolist())


@pytest.mark.parametrize("seed", range(6))
def test_fdr_threshold_equals_the_step_up_on_bin_centres(seed: int) -> None:
    rng = np.random.default_rng(seed)
    P, d = 20, 400
    centre = lambda x: (np.floor(x * NULL_BINS) + 0.5) / NULL_BINS  # noqa: E731
    null = centre(rng.beta(2, 8, size=(P, d)))
    real = centre(np.concatenate([rng.uniform(0.6, 1.0, 15), rng.beta(2, 8, d - 15)]))
    hist = np.histogram(null, bins=NULL_BINS, range=(0.0, 1.0))[0]
    for q in (0.05, 0.1, 0.3):
        t = fdr_threshold(hist, P, real, None, q=q, lo=0.0, n_units=d)
        assert set(np.flatnonzero(real > t).tolist()) == _brute_step_up(null, real, q)
    # off the bin centres the pooled count takes the whole bin: never more claims
    raw = rng.beta(2, 8, size=(P, d))
    hist = np.histogram(raw, bins=NULL_BINS, range=(0.0, 1.0))[0]
    real = np.concatenate([rng.uniform(0.5, 1.0, 20), rng.beta(2, 8, d - 20)])
    t = fdr_threshold(hist, P, real, None, q=0.1, lo=0.0, n_units=d)
    assert set(np.flatnonzero(real > t).tolist()) <= _brute_step_up(raw, real, 0.1)


def test_buffer_overflow_continues_down_the_histogram_of_real_statistics() -> None:
    rng = np.random.default_rng(1)
    w = hard_world("linear", 32, 3000, rng, planted_rho=0.8, n_planted=300)
    kw = dict(n_permutations=49, seed=2, fdr=0.2)
    [big] = extract_signatures(w.values, w.scores, buffer_units=4096, **kw)
    [small] = extract_signatures(w.values, w.scores, buffer_units=20, **kw)
    assert big.units.size > 20 and small.extra["second_pass"]
    # the histogram's count is a lower bound of the real count: a subset, most of it kept
    assert set(small.units.tolist()) <= set(big.units.tolist())
    assert small.units.size >= 0.8 * big.units.size


@pytest.mark.parametrize("shared", [False, True])
def test_pooled_null_holds_every_permuted_statistic(shared: bool) -> None:
    v, y = _problem(4)
    y = y[:, [0, 2]]  # both benchmarks: every model or all but one
    options = DesignOptions(
        method="calibrated", n_permutations=15, shared_null=shared, two_sided=True, seed=7,
        chunk_units=97,
    )  # fmt: skip
    [a, b] = calibrated_signatures(v, y, options, alpha=0.05, buffer_units=64, fdr=0.2)
    for res, col in ((a, 0), (b, 1)):
        cal = res.calibration
        mask = ~np.isnan(y[:, col])
        _, every, _ = _brute_partial(
            v[:, mask], y[mask, col], cal.permutations, shared, np.abs, every_unit=True
        )
        assert every.shape == (15, len(v)) and cal.fdr == 0.2
        np.testing.assert_allclose(every.max(axis=1), cal.null_max, rtol=1e-5, atol=1e-7)
        # the claims: the step-up with the pooled permuted statistics, behind the gate
        st = np.abs(_brute_partial(v[:, mask], y[mask, col], cal.permutations, shared,
                                   np.abs)[0])  # fmt: skip
        gate = st.max() > np.quantile(np.append(cal.null_max, st.max()), 0.8, method="higher")
        want = _brute_step_up(every, st, 0.2) if gate else set()
        got = set(res.units.tolist())
        # bins of 1/4096 can only remove claims at the edge
        assert got <= want and len(want - got) <= 1


@pytest.mark.parametrize("scenario", ["linear", "reallike", "hinge", "step"])
def test_on_complete_nulls_the_rate_is_the_gate_s(scenario: str) -> None:
    rng = np.random.default_rng([3, len(scenario)])
    runs, hits = 40, 0
    for run in range(runs):
        w = hard_world(scenario, 32, 2000, rng)
        [s] = extract_signatures(w.values, w.scores, n_permutations=99, seed=run, fdr=0.05)
        hits += not s.empty
        if s.empty:
            assert "fdr = 0.05" in s.calibration.reason
    assert hits <= 6  # at a true rate of 0.05, more than 6 of 40 has p < 0.01


def test_with_planted_signal_the_false_share_stays_near_q_and_recall_beats_max_t() -> None:
    rng = np.random.default_rng(4)
    fdp, found_fdr, found_fwer, runs = [], 0, 0, 30
    for run in range(runs):
        w = hard_world("linear", 32, 3000, rng, planted_rho=0.7, n_planted=40)
        truth = set(w.planted[0].tolist())
        [s] = extract_signatures(w.values, w.scores, n_permutations=99, seed=run, fdr=0.1)
        [f] = extract_signatures(w.values, w.scores, n_permutations=99, seed=run)
        u = set(s.units.tolist())
        fdp.append(len(u - truth) / max(len(u), 1))
        found_fdr += len(u & truth)
        found_fwer += len(set(f.units.tolist()) & truth)
    assert np.mean(fdp) <= 0.1 + 0.05
    assert found_fdr >= 1.5 * found_fwer


def test_fdr_is_an_option_of_the_partial_test_per_benchmark() -> None:
    w = hard_world("linear", 24, 300, np.random.default_rng(5))
    with pytest.raises(
        SigmapInputError, match=r"fdr must be None or a number in \(0.0, 1.0\), got 1.5"
    ):
        extract_signatures(w.values, w.scores, fdr=1.5)
    with pytest.raises(SigmapInputError, match="fwer='benchmark'"):
        extract_signatures(w.values, w.scores, fdr=0.1, fwer="all")
    with pytest.raises(SigmapInputError, match="does not take fdr"):
        extract_signatures(w.values, w.scores, method="calibrated-marginal", fdr=0.1)
    [s] = extract_signatures(w.values, w.scores, fdr=0.1, n_permutations=19)
    assert s.summary()["calibration"]["fdr"] == 0.1

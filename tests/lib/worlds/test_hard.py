"""The hard worlds' arrays are computed in place, with the same floating-point operations as
their formulas: the same float32 values as the formulas written out as expressions (the
reference here), for every scenario, clustered or not."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds import HARD_SCENARIOS, clustered_world, hard_world
from sigmap_lib.worlds._hard import REALLIKE_SCENARIOS, _scores


def _formula_values(scenario: str, m: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``v = μ − λ·h(g) + √(1 − λ²)·ε`` (+ family offsets) of :func:`hard_world`, unplanted,
    one expression per array, drawing in the documented order."""
    real, curved = scenario in REALLIKE_SCENARIOS, scenario == "curved"
    g = rng.standard_normal(m)
    lam = rng.uniform(*((0.9, 0.995) if real else (0.3, 0.9)), d)
    c = rng.uniform(*((-0.5, 0.5) if curved else (-0.3, 0.3)), d)
    h = g + c[:, None] * (g**2 - 1.0) / np.sqrt(2.0)
    if real:
        kink, at = rng.uniform(-0.4, 0.4, d), rng.uniform(-1.0, 1.0, d)
        h = h + kink[:, None] * np.tanh(3.0 * (g - at[:, None]))
    h = (h - h.mean(1, keepdims=True)) / h.std(1, keepdims=True)
    t3 = scenario == "t3"
    eps = rng.standard_t(3, (d, m)) / np.sqrt(3.0) if t3 else rng.standard_normal((d, m))
    if curved:
        eps = eps * np.exp(rng.uniform(-0.5, 0.5, d)[:, None] * g)
    if real:
        f = rng.standard_normal((3, m))
        a = rng.standard_normal((d, 3)) * np.sqrt([0.24, 0.18, 0.10])
        eps = (a @ f + np.sqrt(0.48) * eps) * np.exp(-0.4 * g)
    offset, extra = np.zeros(m), np.zeros((d, m))
    if scenario == "families":
        strata = rng.integers(0, 4, m)
        offset = rng.standard_normal(4)[strata]
        hit = rng.random(d) < 0.3
        extra[hit] = rng.uniform(0.5, 1.5, hit.sum())[:, None] * offset
    _scores(scenario, g, rng, offset)  # the scores are drawn before the unit means
    mu = rng.uniform(2.0, 6.0, d)
    return (mu[:, None] - lam[:, None] * h + np.sqrt(1 - lam**2)[:, None] * eps + extra).astype(
        np.float32
    )


@pytest.mark.parametrize("scenario", HARD_SCENARIOS)
@pytest.mark.parametrize("seed", [11, 12])
def test_hard_world_is_its_formulas(scenario: str, seed: int) -> None:
    w = hard_world(scenario, 17, 300, np.random.default_rng(seed))
    want = _formula_values(scenario, 17, 300, np.random.default_rng(seed))
    assert w.values.dtype == np.float32
    np.testing.assert_array_equal(w.values, want)


@pytest.mark.parametrize("scenario", ["linear", "reallike", "t3", "curved"])
@pytest.mark.parametrize("planted_rho", [None, 0.6])
def test_clustered_world_is_its_formula(scenario: str, planted_rho) -> None:
    n_docs, per, m = 25, 8, 12
    kw = {"planted_rho": planted_rho, "planted_documents": 2}
    cw = clustered_world(scenario, m, n_docs, per, np.random.default_rng(5), **kw)
    # the same draws: the units of hard_world, then each document's effect and kink
    rng = np.random.default_rng(5)
    n_planted = 2 * per if planted_rho else 5
    w = hard_world(scenario, m, n_docs * per, rng, planted_rho=planted_rho, n_planted=n_planted)
    effect = 0.3 * rng.standard_normal((n_docs, m))
    kink = rng.uniform(-0.3, 0.3, n_docs)[:, None] * np.tanh(
        3.0 * (w.quality - rng.uniform(-1.0, 1.0, n_docs)[:, None])
    )
    doc = np.repeat(np.arange(n_docs), per)
    spread = np.sqrt(1.0 - w.loadings**2)[:, None]
    want = (w.values + spread * effect[doc] + kink[doc]).astype(np.float32)
    np.testing.assert_array_equal(cw.world.values, want)


def test_bad_scenarios_are_one_clear_line() -> None:
    with pytest.raises(SigmapInputError, match="scenario must be one of"):
        hard_world("nope", 8, 10, np.random.default_rng(0))
    with pytest.raises(SigmapInputError, match="no families"):
        clustered_world("families", 8, 3, 4, np.random.default_rng(0))

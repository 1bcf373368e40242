"""The hard worlds' arrays are computed in place, with the same floating-point operations as
their formulas: the same float32 values as the formulas written out (kept here as the
reference), for every scenario, planted or not, clustered or not."""

from __future__ import annotations

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds import HARD_SCENARIOS, clustered_world, hard_world
from sigmap_lib.worlds._hard import REALLIKE_SCENARIOS, _scores, _standardize


def _reference_hard_world(
    scenario, n_models, n_units, rng, *, n_benchmarks=1, planted_rho=None, n_planted=5,
    n_families=4,
):  # fmt: skip
    """The formulas of :func:`hard_world`, one expression each."""
    m, d = int(n_models), int(n_units)
    g = rng.standard_normal(m)
    reallike = scenario in REALLIKE_SCENARIOS
    lam = rng.uniform(0.9, 0.995, d) if reallike else rng.uniform(0.3, 0.9, d)
    curved = scenario == "curved"
    c = rng.uniform(-0.5, 0.5, d) if curved else rng.uniform(-0.3, 0.3, d)
    h = g[None, :] + c[:, None] * (g[None, :] ** 2 - 1.0) / np.sqrt(2.0)
    if reallike:
        # a kink of its own per unit: a sharp tanh step at a random quality
        kink = rng.uniform(-0.4, 0.4, d)[:, None]
        at = rng.uniform(-1.0, 1.0, d)[:, None]
        h = h + kink * np.tanh(3.0 * (g[None, :] - at))
    h = (h - h.mean(axis=1, keepdims=True)) / h.std(axis=1, keepdims=True)
    if scenario == "t3":
        eps = rng.standard_t(3, (d, m)) / np.sqrt(3.0)
    else:
        eps = rng.standard_normal((d, m))
    if curved:
        eps *= np.exp(rng.uniform(-0.5, 0.5, d)[:, None] * g[None, :])
    if reallike:
        # three more model factors shared by the units (the real matrix, after removing
        # quality: 24 %, 18 % and 10 % of the residual variance), and unit noise that
        # spreads more among weak models (2.2x between the weakest and strongest fifth)
        f = rng.standard_normal((3, m))
        a = rng.standard_normal((d, 3)) * np.sqrt(np.array([0.24, 0.18, 0.10]))
        eps = (a @ f + np.sqrt(0.48) * eps) * np.exp(-0.4 * g)[None, :]
    strata = None
    offset = np.zeros(m)
    unit_offset = np.zeros((d, m))
    if scenario == "families":
        strata = rng.integers(0, n_families, m)
        fam = rng.standard_normal(n_families)
        offset = fam[strata]
        hit = rng.random(d) < 0.3
        unit_offset[hit] = rng.uniform(0.5, 1.5, int(hit.sum()))[:, None] * offset[None, :]
    y = np.empty((m, n_benchmarks))
    planted: list[np.ndarray] = []
    for b in range(n_benchmarks):
        if planted_rho is None:
            y[:, b] = _scores(scenario, g, rng, offset)
            planted.append(np.zeros(0, dtype=np.int64))
            continue
        z = _standardize(rng.standard_normal(m))
        y[:, b] = g + z + offset
        units = np.arange(b * n_planted, (b + 1) * n_planted, dtype=np.int64)
        if units[-1] >= d:
            raise SigmapInputError(f"{n_benchmarks} × {n_planted} planted units need d >= that")
        e2 = rng.standard_normal((units.size, m))
        eps[units] = -planted_rho * z[None, :] + np.sqrt(1.0 - planted_rho**2) * e2
        planted.append(units)
    v = (
        rng.uniform(2.0, 6.0, d)[:, None]
        - lam[:, None] * h
        + np.sqrt(1.0 - lam[:, None] ** 2) * eps
        + unit_offset
    )
    return v.astype(np.float32), y, g, strata, planted, lam


def _reference_clustered_values(
    scenario, n_models, n_documents, units_per_document, rng, *, planted_rho=None,
    planted_documents=1, document_effect=0.3,
):  # fmt: skip
    """The formulas of :func:`clustered_world`'s values, one expression each."""
    n_docs, per = int(n_documents), int(units_per_document)
    d = n_docs * per
    planted = int(planted_documents) * per if planted_rho is not None else 5
    if planted > d:
        raise SigmapInputError(f"{planted_documents} planted documents need n_documents >= that")
    v0, _, g, _, _, lam = _reference_hard_world(
        scenario, n_models, d, rng, planted_rho=planted_rho, n_planted=planted
    )
    docs = np.repeat(np.arange(n_docs, dtype=np.int64), per)
    effect = document_effect * rng.standard_normal((n_docs, g.size))
    kink = rng.uniform(-0.3, 0.3, n_docs)[:, None] * np.tanh(
        3.0 * (g[None, :] - rng.uniform(-1.0, 1.0, n_docs)[:, None])
    )
    spread = np.sqrt(1.0 - lam**2)[:, None]
    return (v0 + spread * effect[docs] + kink[docs]).astype(np.float32)


@pytest.mark.parametrize("scenario", HARD_SCENARIOS)
@pytest.mark.parametrize("planted_rho", [None, 0.7])
def test_hard_world_is_its_formulas_bit_for_bit(scenario: str, planted_rho) -> None:
    kw = {"n_benchmarks": 2, "planted_rho": planted_rho, "n_planted": 4}
    w = hard_world(scenario, 17, 300, np.random.default_rng(11), **kw)
    v, y, g, strata, planted, lam = _reference_hard_world(
        scenario, 17, 300, np.random.default_rng(11), **kw
    )
    assert w.values.dtype == np.float32 and w.values.shape == (300, 17)
    np.testing.assert_array_equal(w.values, v)
    np.testing.assert_array_equal(w.scores, y)
    np.testing.assert_array_equal(w.quality, g)
    np.testing.assert_array_equal(w.loadings, lam)
    assert (w.strata is None) == (strata is None)
    assert [p.tolist() for p in w.planted] == [p.tolist() for p in planted]


@pytest.mark.parametrize("scenario", ["linear", "reallike", "t3", "curved"])
@pytest.mark.parametrize("planted_rho", [None, 0.6])
def test_clustered_world_is_its_formulas_bit_for_bit(scenario: str, planted_rho) -> None:
    kw = {"planted_rho": planted_rho, "planted_documents": 2}
    cw = clustered_world(scenario, 12, 25, 8, np.random.default_rng(5), **kw)
    want = _reference_clustered_values(scenario, 12, 25, 8, np.random.default_rng(5), **kw)
    np.testing.assert_array_equal(cw.world.values, want)
    assert cw.documents.tolist() == np.repeat(np.arange(25), 8).tolist()


def test_bad_scenarios_are_one_clear_line() -> None:
    with pytest.raises(SigmapInputError, match="scenario must be one of"):
        hard_world("nope", 8, 10, np.random.default_rng(0))
    with pytest.raises(SigmapInputError, match="no families"):
        clustered_world("families", 8, 3, 4, np.random.default_rng(0))

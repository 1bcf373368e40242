"""Multi-resolution signatures: group sums and min-P against brute force, the hierarchy's
error on fresh clustered null worlds of the hard kind, and planted documents found where
unit max-T finds nothing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import build_rank_store
from sigmap_lib.signatures import (
    MIN_UNITS_CALIBRATED,
    CalibratedMultiResolution,
    extract_signatures,
    group_sums,
    max_t_threshold,
    minp_adjusted,
)
from sigmap_lib.signatures._calibration import (
    DesignOptions,
    adjusted_p_values,
    calibrated_signatures,
)
from sigmap_lib.signatures._max_t import value_sums
from sigmap_lib.worlds import clustered_world, hard_world

P = 99
RUNS = 40
MAX_HITS = 6  # at a true error of 0.05, more than 6 of 40 has p < 0.01


@pytest.mark.parametrize("seed", range(3))
def test_group_sums_equal_a_groupby_at_every_chunk_size(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d, m = 500, 7
    values = rng.standard_normal((d, m)).astype(np.float32)
    docs = rng.integers(0, 40, d)  # not contiguous, some groups may be empty
    src = rng.integers(0, 3, d)
    frame = pd.DataFrame(values.astype(np.float64))
    for chunk in (1, 64, 1000):
        (s_docs, s_src), total, n = group_sums(values, [docs, src], chunk_units=chunk)
        want = frame.groupby(docs).sum().reindex(range(docs.max() + 1), fill_value=0.0)
        np.testing.assert_allclose(s_docs, want.to_numpy(), rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(s_src, frame.groupby(src).sum().to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(total, values.astype(np.float64).sum(axis=0), rtol=1e-12)
        assert n == d
    per_model = [values[:, j] for j in range(m)]
    (again,), _, _ = group_sums(per_model, [docs], chunk_units=77)
    np.testing.assert_allclose(again, s_docs, rtol=1e-12)


def test_group_sums_refuse_rank_codes_and_name_a_nan(tmp_path) -> None:
    values = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    arrays = [values[:, j].copy() for j in range(4)]
    store = build_rank_store(arrays, [f"m{j}" for j in range(4)], np.ones(50), tmp_path / "r")
    with pytest.raises(SigmapInputError, match="not of rank codes"):
        group_sums(store, [np.zeros(50, dtype=int)])
    values[7, 2] = np.nan
    with pytest.raises(SigmapInputError, match="model column 2: value is NaN at unit 7"):
        group_sums(values, [np.zeros(50, dtype=int)])
    values[7, 2] = np.inf
    with pytest.raises(SigmapInputError, match=r"model column 2: an infinite value in units 0\.\."):
        group_sums(values, [np.zeros(50, dtype=int)], chunk_units=64)
    with pytest.raises(SigmapInputError, match=r"model column 2: an infinite value in units 0\.\."):
        value_sums(values, chunk_units=64)


def _brute_minp(mats: list[np.ndarray], level: int, s: float) -> tuple[float, float]:
    n = mats[0].size
    minp = [min(np.sum(mx >= mx[w]) / n for mx in mats) for w in range(n)]
    p = np.sum(mats[level] >= s) / n
    return p, sum(mp <= p for mp in minp) / n


@pytest.mark.parametrize("seed", range(5))
def test_minp_equals_brute_force_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, levels = 30, 3
    mats = [np.round(rng.random(n), 1) for _ in range(levels)]  # many ties
    mp = minp_adjusted(mats, alpha=0.2)
    for lv in range(levels):
        s = np.concatenate([mats[lv][:5], rng.random(3)])
        want = np.array([_brute_minp(mats, lv, float(x)) for x in s])
        np.testing.assert_allclose(mp.p(lv, s), want[:, 0])
        np.testing.assert_allclose(mp.adjusted(lv, s), want[:, 1])
        # claimed iff above the level's threshold
        np.testing.assert_array_equal(mp.claimed(lv, s), s > mp.threshold(lv))


@pytest.mark.parametrize("seed", range(5))
def test_one_level_is_max_t(seed: int) -> None:
    rng = np.random.default_rng(seed)
    null, observed = rng.random(99), rng.uniform(0.5, 1.0)
    mp = minp_adjusted([np.concatenate([[observed], null])], alpha=0.05)
    assert mp.threshold(0) == max_t_threshold(null, observed, 0.05)
    s = rng.uniform(0.0, observed, 50)
    np.testing.assert_allclose(mp.adjusted(0, s), adjusted_p_values(np.sort(null), s))


def test_the_error_of_min_p_holds_on_exchangeable_worlds() -> None:
    # three dependent levels of exchangeable worlds: a claim in the real world (index 0)
    # happens at most alpha of the time
    rng = np.random.default_rng(11)
    claims = 0
    for _ in range(2000):
        base = rng.standard_normal(100)
        mats = [base + s * rng.standard_normal(100) for s in (0.0, 0.5, 3.0)]
        mp = minp_adjusted(mats, alpha=0.05)
        claims += any(mp.claimed(lv, [m[0]])[0] for lv, m in enumerate(mats))
    assert claims / 2000 <= 0.05 + 2.5 * np.sqrt(0.05 * 0.95 / 2000)


def test_every_level_uses_the_same_quality_and_permutations() -> None:
    rng = np.random.default_rng(2)
    w = hard_world("reallike", 24, 600, rng)
    docs = np.repeat(np.arange(60), 10)
    (s,), total, d = group_sums(w.values, [docs])
    options = DesignOptions(
        method="calibrated", n_permutations=P, shared_null=False, two_sided=True, seed=5,
        chunk_units=128, quality_sums=(total, d),
    )  # fmt: skip
    [units] = calibrated_signatures(w.values, w.scores, options, alpha=0.05, buffer_units=64)
    [groups] = calibrated_signatures(s / 10.0, w.scores, options, alpha=0.05, buffer_units=64)
    a, b = units.calibration, groups.calibration
    np.testing.assert_array_equal(a.permutations, b.permutations)
    np.testing.assert_allclose(a.general_quality, b.general_quality)
    assert a.n_units == 600 and b.n_units == 60


def test_a_level_of_singletons_reproduces_the_flat_calibrated_signature() -> None:
    # two identical levels: each world's min-P is its p, so min-P is max-T
    rng = np.random.default_rng(3)
    w = hard_world("linear", 32, 800, rng, planted_rho=0.9, n_planted=6)
    [flat] = extract_signatures(w.values, w.scores, n_permutations=P, seed=4)
    method = CalibratedMultiResolution(levels={"copy": np.arange(800)}, n_permutations=P)
    [multi] = method.extract(w.values, w.scores, names=["b"], seed=4)
    assert flat.units.size >= 4
    copy, unit = multi.extra["levels"]
    assert sorted(copy["groups"]) == sorted(unit["groups"]) == sorted(flat.units.tolist())
    np.testing.assert_allclose(sorted(unit["adjusted_p"]), sorted(flat.calibration.adjusted_p))
    assert unit["threshold"] == pytest.approx(flat.calibration.threshold)


@pytest.mark.parametrize(
    "scenario", ["linear", "curved", "t3", "reallike", "hinge", "step", "shrinking"]
)
def test_error_over_the_hierarchy_holds_on_clustered_null_worlds(scenario: str) -> None:
    rng = np.random.default_rng([6, len(scenario)])
    hits = 0
    for run in range(RUNS):
        cw = clustered_world(scenario, 32, 100, 20, rng, n_sources=8)
        levels = {"source": cw.sources, "document": cw.documents}
        method = CalibratedMultiResolution(levels=levels, n_permutations=P)
        [sig] = method.extract(cw.world.values, cw.world.scores, names=["b"], seed=run)
        hits += not sig.empty
        assert sig.empty == all(not lv["groups"] for lv in sig.extra["levels"])
    assert hits <= MAX_HITS, f"{scenario}: {hits} of {RUNS} null runs claimed something"


def test_planted_documents_are_found_where_unit_max_t_finds_nothing() -> None:
    rng = np.random.default_rng(7)
    doc_hits = unit_hits = false_docs = 0
    runs, planted = 10, 3
    for run in range(runs):
        cw = clustered_world(
            "linear", 32, 300, 20, rng, planted_rho=0.55, planted_documents=planted
        )
        w = cw.world
        [flat] = extract_signatures(w.values, w.scores, n_permutations=P, seed=run)
        unit_hits += np.isin(flat.units, w.planted[0]).sum()
        method = CalibratedMultiResolution(levels={"document": cw.documents}, n_permutations=P)
        [sig] = method.extract(w.values, w.scores, names=["b"], seed=run)
        docs = sig.extra["levels"][0]["groups"]
        doc_hits += np.isin(docs, cw.planted_documents[0]).sum()
        false_docs += len(docs) - np.isin(docs, cw.planted_documents[0]).sum()
        # the signature's units are the claimed documents' units
        assert set(sig.units.tolist()) >= set(np.flatnonzero(np.isin(cw.documents, docs)))
    assert doc_hits / (runs * planted) >= 0.6
    assert unit_hits / (runs * planted * 20) < 0.1
    assert false_docs <= 2


def test_summary_is_json_and_through_extract_signatures() -> None:
    rng = np.random.default_rng(8)
    cw = clustered_world("linear", 24, 40, 10, rng, planted_rho=0.7, planted_documents=2)
    docs = np.char.add("doc-", cw.documents.astype(str))  # any labels
    [sig] = extract_signatures(
        cw.world.values, cw.world.scores, method="calibrated-multiresolution",
        levels={"document": docs}, n_permutations=P,
    )  # fmt: skip
    s = json.loads(json.dumps(sig.summary()))
    assert s["method"] == "calibrated-multiresolution"
    assert [lv["level"] for lv in s["levels"]] == ["document", "unit"]
    assert set(s["levels"][0]["groups"]) <= {f"doc-{i}" for i in range(40)}
    assert s["calibration"]["method"] == "calibrated-multiresolution"


def test_bad_levels_and_too_few_units_get_one_line() -> None:
    rng = np.random.default_rng(9)
    w = hard_world("linear", 24, 200, rng)
    with pytest.raises(SigmapInputError, match="needs levels="):
        CalibratedMultiResolution().extract(w.values, w.scores, names=["b"])
    with pytest.raises(SigmapInputError, match="levels must be None or a non-empty mapping"):
        CalibratedMultiResolution(levels=[1, 2]).extract(w.values, w.scores, names=["b"])
    with pytest.raises(SigmapInputError, match="levels must be"):
        CalibratedMultiResolution(levels={"unit": np.zeros(200)}).extract(
            w.values, w.scores, names=["b"]
        )
    with pytest.raises(SigmapInputError, match="level 'document': 199 group labels for 200"):
        CalibratedMultiResolution(levels={"document": np.zeros(199)}).extract(
            w.values, w.scores, names=["b"]
        )
    with pytest.raises(SigmapInputError, match="fwer must be one of"):
        CalibratedMultiResolution(levels={"d": np.zeros(200)}, fwer="all").extract(
            w.values, w.scores, names=["b"]
        )
    small = w.values[: MIN_UNITS_CALIBRATED - 1]
    with pytest.raises(SigmapInputError, match=f"63 units; .* needs >= {MIN_UNITS_CALIBRATED}"):
        extract_signatures(small, w.scores)
    extract_signatures(w.values[:MIN_UNITS_CALIBRATED], w.scores, n_permutations=19)


def _two_way_documents(seed: int = 3):
    """Forty documents of ten units: document 0 tracks the score (better models less
    perplexed), document 1 against it, weakly unit by unit; unit 395 tracks it strongly."""
    rng = np.random.default_rng(seed)
    m, docs = 24, np.repeat(np.arange(40), 10)
    g, z = rng.standard_normal(m), rng.standard_normal(m)
    values = -g + rng.standard_normal((400, m))
    values[:10] += -0.8 * z
    values[10:20] += 0.8 * z
    values[395] = -g - 3.0 * z + 0.1 * rng.standard_normal(m)
    return values, (g + z)[:, None], docs


def test_each_unit_carries_the_claim_that_holds_it() -> None:
    from sigmap_lib.inputs import Document, build_corpus_store
    from sigmap_lib.signatures import signature_table

    values, scores, docs = _two_way_documents()
    method = CalibratedMultiResolution(levels={"document": docs}, n_permutations=199)
    [sig] = method.extract(values, scores, names=["b"])
    (doc_level, unit_level) = sig.extra["levels"]
    assert sorted(doc_level["groups"]) == [0, 1] and 395 in unit_level["groups"]
    alone = dict(zip(unit_level["groups"], unit_level["statistics"]))
    stat = dict(zip(doc_level["groups"], doc_level["statistics"]))
    adj = dict(zip(doc_level["groups"], doc_level["adjusted_p"]))
    assert stat[0] > 0 > stat[1]
    levels, stats, orient = sig.claim_levels, sig.statistics, sig.orientation
    for i, u in enumerate(sig.units.tolist()):
        if u in alone:  # claimed on its own: its own statistic
            assert levels[i] == "unit" and stats[i] == alone[u]
        else:
            d = int(docs[u])
            assert levels[i] == "document" and stats[i] == stat[d]
            assert orient[i] == (1.0 if d == 0 else -1.0)
    assert sorted(sig.at_level("document").units.tolist() + list(alone)) == sorted(
        set(range(20)) | set(alone)
    )
    assert sorted(sig.at_level("unit").units.tolist()) == sorted(alone)
    assert sig.at_level("source").units.size == 0 and sig.at_level(None) is sig
    corpus = build_corpus_store([Document("d", "d", "a b c d e " * 80)], "c")
    rows = {r["unit"]: r for r in signature_table(sig, corpus, n_left=1)}
    inside = next(u for u in range(10, 20) if u not in alone)  # of document 1, by it alone
    assert rows[395]["level"] == "unit" and rows[inside]["level"] == "document"
    assert rows[inside]["adjusted_p"] == adj[1] and rows[inside]["statistic"] == stat[1]
    # a single-level method: every unit is its own claim
    [flat] = extract_signatures(values, scores, n_permutations=199)
    assert set(flat.claim_levels.tolist()) <= {"unit"} and flat.at_level("unit").units.size


def test_the_signature_level_of_overlap_at_one_level(monkeypatch) -> None:
    """At a level, the observed matrix uses that level's claims and the null's re-extracted
    signatures keep the same level."""
    import sigmap_lib.overlap._signature as mod
    from sigmap_lib.overlap import UnitBits, signature_level, signature_overlap

    values, scores, docs = _two_way_documents()
    scores = np.hstack([scores, scores + 0.3 * np.random.default_rng(1).standard_normal((24, 1))])
    method = CalibratedMultiResolution(levels={"document": docs}, n_permutations=99)
    sigs = {s.benchmark: s for s in method.extract(values, scores, names=["a", "b"])}
    bits = UnitBits.of_matrix(values, np.full(400, 4))
    seen: list[set] = []
    null = mod.signature_overlap_null

    def spy(extract, *args, **kwargs):
        seen.extend(set(s.claim_levels.tolist()) for s in extract(scores).values())
        return null(extract, *args, **kwargs)

    monkeypatch.setattr(mod, "signature_overlap_null", spy)
    at_doc = {k: s.at_level("document") for k, s in sigs.items()}
    observed, _ = signature_level(
        values, scores, at_doc, bits, nll_arrays=values, method=method, n_permutations=3,
        n_bootstrap=10, level="document",
    )  # fmt: skip
    want = signature_overlap(at_doc, bits)
    np.testing.assert_array_equal(observed.values, want.values)
    assert seen and all(levels <= {"document"} for levels in seen)

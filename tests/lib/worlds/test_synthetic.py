"""Synthetic world: deterministic, valid world folder, planted truth, recovery metric."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import yaml
from scipy.stats import spearmanr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds import SyntheticWorld, make_synthetic_world, planted_recovery


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> SyntheticWorld:
    return make_synthetic_world(
        tmp_path_factory.mktemp("syn") / "w", n_models=12, n_units=2300, n_benchmarks=5, seed=3
    )


def test_world_folder_format(world: SyntheticWorld) -> None:
    root = world.root
    models = yaml.safe_load((root / "models.yaml").read_text())["models"]
    assert [e["id"] for e in models] == world.model_ids and len(models) == 12
    for e in models:
        arr = np.load(root / e["nll_source"])
        assert arr.dtype == np.float32 and arr.shape == (2300,) and (arr > 0).all()
    cat = yaml.safe_load((root / "catalog.yaml").read_text())["benchmarks"]
    assert list(cat) == world.benchmarks
    assert {c["function"] for c in cat.values()} == set(world.functions)
    scores = pl.read_csv(root / "scores.csv")
    assert scores.columns == ["model", *world.benchmarks]
    for b in world.benchmarks:
        items = pl.read_parquet(root / cat[b]["items"])
        assert items.columns == ["item_id", "text"] and items.height >= 60
        assert all(t.isascii() and t == t.lower() for t in items["text"])
        resp = pl.read_parquet(root / cat[b]["responses"])
        # the registry models first, then item-only respondents (metabench needs hundreds)
        ids = resp["model"].to_list()
        m = len(world.model_ids)
        assert ids[:m] == world.model_ids
        assert (
            len(ids) > m
            and all(i.startswith("respondent/") for i in ids[m:])
            and len(set(ids)) == len(ids)
        )
        assert resp.columns[1:] == items["item_id"].to_list()
        r = resp.drop("model").to_numpy()
        assert set(np.unique(r)) <= {0, 1}
        np.testing.assert_allclose(scores[b].to_numpy(), 100 * r[:m].mean(axis=1))
    # the catalog and registry parse with the project's own readers
    from sigmap_lib.inputs import read_catalog, read_registry

    assert set(read_catalog(root / "catalog.yaml")) == set(world.benchmarks)
    assert len(read_registry(root / "models.yaml")) == 12


def test_corpus_has_exactly_n_units_one_per_word(world: SyntheticWorld) -> None:
    from sigmap_lib.inputs import read_corpus, segment_units

    total = 0
    for doc in read_corpus(world.root / "corpus"):
        text = doc.text
        assert text.isascii() and text == text.lower()
        assert len(segment_units(text)) == len(text.split())
        total += len(text.split())
    assert total == world.n_units == 2300


def test_planted_units_follow_their_ability(world: SyntheticWorld) -> None:
    nll = np.stack(world.nll_arrays(), axis=1)  # (d, m)
    ab = world.truth["abilities"]
    for f, units in world.planted.items():
        a = np.array([ab[mid][f] for mid in world.model_ids])
        rhos = [spearmanr(nll[u], a)[0] for u in units]
        assert np.mean(rhos) < -0.7  # more able -> less perplexed
    rng = np.random.default_rng(0)
    noise = np.setdiff1d(np.arange(world.n_units), world.all_planted)
    f0 = world.functions[0]
    a0 = np.array([ab[mid][f0] for mid in world.model_ids])
    sample = rng.choice(noise, 300, replace=False)
    rhos = [spearmanr(nll[u], a0)[0] for u in sample]
    assert np.mean(rhos) < 0.0  # the general factor links them (ability loads on it)
    g = np.array([world.truth["general_quality"][mid] for mid in world.model_ids])
    rg = np.array([spearmanr(nll[u], g)[0] for u in sample])
    # strong and uneven: better models are less perplexed on nearly every unit, by how much
    # depends on the unit
    assert np.mean(rg) < -0.4 and np.quantile(rg, 0.9) - np.quantile(rg, 0.1) > 0.3


def test_deterministic_and_reloadable(tmp_path, world: SyntheticWorld) -> None:
    w2 = make_synthetic_world(tmp_path / "w2", n_models=12, n_units=2300, n_benchmarks=5, seed=3)
    np.testing.assert_array_equal(w2.scores, world.scores)
    for a, b in zip(w2.nll_arrays(), world.nll_arrays()):
        np.testing.assert_array_equal(a, b)
    assert json.loads((w2.root / "truth.json").read_text()) == world.truth
    assert (w2.root / "corpus" / "docs.jsonl").read_bytes() == (
        world.root / "corpus" / "docs.jsonl"
    ).read_bytes()
    w3 = make_synthetic_world(tmp_path / "w3", n_models=12, n_units=2300, n_benchmarks=5, seed=4)
    assert not np.array_equal(w3.scores, world.scores)
    again = SyntheticWorld.load(world.root)
    np.testing.assert_array_equal(again.scores, world.scores)
    assert not any(p.name.startswith("w2.tmp") for p in tmp_path.iterdir())


def test_planted_recovery_counts(world: SyntheticWorld) -> None:
    b0, b1 = world.benchmarks[:2]
    p0 = world.planted[world.benchmark_function[b0]]
    p1 = world.planted[world.benchmark_function[b1]]
    noise = int(np.setdiff1d(np.arange(world.n_units), world.all_planted)[0])
    rec = planted_recovery(world, {b0: [p0[0], p0[1], noise, p1[0]], b1: []})
    r0 = rec["per_benchmark"][b0]
    assert r0["true_positives"] == 2 and r0["recall"] == 2 / len(p0)
    assert r0["precision"] == 0.5 and r0["precision_any_planted"] == 0.75 and r0["hit"]
    r1 = rec["per_benchmark"][b1]
    assert r1["recall"] == 0 and np.isnan(r1["precision"]) and not r1["hit"]
    assert rec["precision"] == 0.5 and rec["hit_rate"] == 0.5
    with pytest.raises(SigmapInputError, match="not in this synthetic world"):
        planted_recovery(world, {"nope": [1]})

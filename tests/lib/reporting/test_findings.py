from __future__ import annotations

import numpy as np
import polars as pl

from sigmap_lib.reporting import domain_shares, matching_domain_summary


def test_domain_shares_match_brute_force_counts() -> None:
    rng = np.random.default_rng(0)
    domains = np.array(["code", "prose", "arithmetic"])
    unit_domain = domains[rng.integers(0, 3, 5000)]
    sigs = {"b1": rng.choice(5000, 40, replace=False), "b2": rng.choice(5000, 7, replace=False)}
    out = domain_shares(sigs, unit_domain, {"b1": "code", "b2": "arithmetic"})
    for bench, units in sigs.items():
        for dom in domains:
            row = out.filter((pl.col("benchmark") == bench) & (pl.col("domain") == dom)).row(
                0, named=True
            )
            n = sum(1 for u in units if unit_domain[u] == dom)
            corpus = sum(1 for d in unit_domain if d == dom) / len(unit_domain)
            assert row["units"] == n
            assert np.isclose(row["share"], n / len(units))
            assert np.isclose(row["corpus_share"], corpus)
            assert np.isclose(row["lift"], (n / len(units)) / corpus)
    summary = matching_domain_summary(out, {"b1": "code", "b2": "arithmetic"})
    assert summary["benchmark"].to_list() == ["b1", "b2"]
    assert summary.filter(pl.col("benchmark") == "b1")["domain"][0] == "code"


def test_planted_domain_gives_lift_above_one() -> None:
    unit_domain = np.array(["code"] * 100 + ["prose"] * 900)
    out = domain_shares({"b": np.arange(0, 10)}, unit_domain, {"b": "code"})
    row = out.filter(pl.col("domain") == "code").row(0, named=True)
    assert row["share"] == 1.0 and np.isclose(row["lift"], 10.0)

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


def test_no_signature_at_all_gives_empty_tables_with_their_columns(tmp_path) -> None:
    """A world where no benchmark has a signature (e.g. too few models for the calibrated
    test): the domain tables are empty but keep their columns, and the truth section says so
    instead of failing."""
    import json

    from sigmap_lib.reporting import truth_sections

    unit_domain = np.array(["code", "prose", "prose"])
    shares = domain_shares({}, unit_domain, {"a": "coding"})
    assert shares.height == 0
    assert shares.columns == [
        "benchmark",
        "function",
        "domain",
        "units",
        "share",
        "corpus_share",
        "lift",
    ]
    summary = matching_domain_summary(shares, {"a": "code"})
    assert summary.height == 0 and "signature_share" in summary.columns
    (tmp_path / "truth.json").write_text(
        json.dumps(
            {"doc_domain": {"d0": "code", "d1": "prose"}, "benchmarks": {"A": {"domain": "code"}}}
        )
    )
    catalog = [{"key": "a", "benchmark": "A", "function": "coding"}]
    sections, found = truth_sections(tmp_path, {}, catalog, np.array([0, 1, 1]), ["d0", "d1"])
    assert found == {"domain_match": []}
    assert [t for t, _ in sections[0].tables] == ["all domains"]
    # the report before any corpus was read (no document ids): no domain section, no error
    assert truth_sections(tmp_path, {}, catalog, np.zeros(0, np.int64), None) == ([], {})

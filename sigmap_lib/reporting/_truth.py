"""Findings that need a world's known truth: planted recovery (synthetic world) and where
signatures fall among the corpus domains (zoo)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.reporting._html import Section


def truth_sections(
    world_root: str | Path,
    signatures: Mapping[str, np.ndarray],
    catalog: Sequence[Mapping[str, Any]],
    unit_doc: np.ndarray,
    doc_ids: Sequence[str] | None = None,
) -> tuple[list[Section], dict[str, Any]]:
    """Report sections and summary entries from the world's ``truth.json`` (if any).

    Parameters
    ----------
    world_root : path
        The world folder; without a ``truth.json`` nothing is reported.
    signatures : mapping
        Benchmark key -> signature unit indices.
    catalog : sequence of mappings
        Catalog rows with ``key``, ``benchmark`` (name) and ``function``.
    unit_doc : np.ndarray, shape (n_units,)
        Document index of every corpus unit.
    doc_ids : sequence of str, optional
        Document ids, in document-index order (to look up ``truth["doc_domain"]`` when it
        maps ids to domains).

    Returns
    -------
    sections : list of Section
        "Planted truth" for a synthetic world (recall, precision, hit rate per benchmark);
        "Where do signatures fall?" for a world whose truth gives each document's domain.
    summary : dict
        ``{"planted_recovery": {...}}`` or ``{"domain_match": [...]}`` (empty without truth).

    Examples
    --------
    A world with document domains: benchmark ``b`` targets ``code`` and its two signature
    units both lie in the code document.

    >>> import json, tempfile, pathlib
    >>> import numpy as np
    >>> from sigmap_lib.reporting import truth_sections
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "truth.json").write_text(json.dumps(
    ...     {"doc_domain": {"d0": "prose", "d1": "code"}, "benchmarks": {"B": {"domain": "code"}}}))
    >>> catalog = [{"key": "b", "benchmark": "B", "function": "coding"}]
    >>> sections, summary = truth_sections(
    ...     root, {"b": np.array([3, 4])}, catalog, np.array([0, 0, 0, 1, 1]), ["d0", "d1"])
    >>> [s.title for s in sections]
    ['Where do signatures fall? (zoo truth)']
    >>> [round(r["signature_share"], 2) for r in summary["domain_match"]]
    [1.0]
    """
    import polars as pl

    world_root = Path(world_root)
    truth_path = world_root / "truth.json"
    if not truth_path.exists():
        return [], {}
    truth = json.loads(truth_path.read_text())
    names = {r["key"]: r["benchmark"] for r in catalog}
    functions = {r["key"]: r["function"] for r in catalog}
    if "planted" in json.dumps(list(truth.keys())):
        from sigmap_lib.worlds import SyntheticWorld, planted_recovery

        rec = planted_recovery(
            SyntheticWorld.load(world_root), {names[k]: v for k, v in signatures.items()}
        )
        per = pl.DataFrame(
            [
                {"benchmark": b, **{k: v for k, v in r.items() if not isinstance(v, (list, dict))}}
                for b, r in rec["per_benchmark"].items()
            ]
        )
        text = (
            f"Planted-unit recall {rec['recall']:.2f}, precision {rec['precision']:.2f}, "
            f"hit rate {rec['hit_rate']:.2f} (benchmarks whose signature contains ≥ 1 planted unit of its function)."
        )
        return [
            Section("Planted truth (synthetic world)", text, tables=[("per benchmark", per)])
        ], {"planted_recovery": {k: v for k, v in rec.items() if k != "per_benchmark"}}
    doc_domain = truth.get("doc_domain") or truth.get("corpus_domains")
    if not doc_domain:
        return [], {}
    from sigmap_lib.reporting._findings import domain_shares, matching_domain_summary

    if isinstance(doc_domain, dict):
        if doc_ids is None:  # no corpus read yet (the report before the cells): no section
            return [], {}
        per_doc = np.array([doc_domain.get(str(d), "unknown") for d in doc_ids])
    else:
        per_doc = np.asarray(doc_domain)
    unit_domain = per_doc[np.asarray(unit_doc)]
    shares = domain_shares(signatures, unit_domain, functions)
    by_name = truth.get("benchmarks", {})
    key_of = {r["benchmark"]: r["key"] for r in catalog}
    bench_domain = {
        key_of[n]: v["domain"]
        for n, v in by_name.items()
        if isinstance(v, dict) and v.get("domain") and n in key_of
    }
    match = matching_domain_summary(shares, bench_domain)
    text = (
        "Share of each benchmark's signature units that fall in each corpus domain, against the domain's "
        "share of all corpus units (lift > 1: the signature over-represents the domain)."
    )
    tables = (
        [("signature share in the domain the benchmark's function targets", match)]
        if match.height
        else []
    )
    tables.append(("all domains", shares))
    return [Section("Where do signatures fall? (zoo truth)", text, tables=tables)], {
        "domain_match": match.to_dicts() if match.height else []
    }

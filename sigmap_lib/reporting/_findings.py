"""Findings that need the truth of a constructed world (zoo / synthetic).

- :func:`domain_shares`: where a benchmark's signature units fall, by corpus domain,
  against the domain's share of all corpus units (does a code benchmark's signature
  fall on code?).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def domain_shares(
    signatures: Mapping[str, Sequence[int] | np.ndarray],
    unit_domain: np.ndarray,
    functions: Mapping[str, str] | None = None,
):
    """Share of each benchmark's signature units per corpus domain vs the corpus share.

    Parameters
    ----------
    signatures : mapping benchmark -> unit indices
    unit_domain : ndarray of str, shape (n_units,)
        Domain label of every corpus unit (the domain of its document).
    functions : mapping benchmark -> function, optional
        Added as a column, with ``matching_share`` = share of units in the domain named
        like the function (when such a domain exists) and ``lift`` = that share divided by
        the domain's corpus share.

    Returns
    -------
    polars.DataFrame
        One row per (benchmark, domain): ``benchmark``, ``function``, ``domain``,
        ``units``, ``share``, ``corpus_share``, ``lift`` (share / corpus_share).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.reporting import domain_shares
    >>> unit_domain = np.array(["code"] * 20 + ["prose"] * 80)  # domain of each corpus unit
    >>> sigs = {"humaneval": [0, 3, 5, 90], "lambada": [30, 40, 50, 60]}
    >>> functions = {"humaneval": "code", "lambada": "prose"}
    >>> shares = domain_shares(sigs, unit_domain, functions=functions)
    >>> shares.select("benchmark", "domain", "units", "share", "corpus_share", "lift").rows()
    [('humaneval', 'code', 3, 0.75, 0.2, 3.75), ('humaneval', 'prose', 1, 0.25, 0.8, 0.3125),
     ('lambada', 'code', 0, 0.0, 0.2, 0.0), ('lambada', 'prose', 4, 1.0, 0.8, 1.25)]
    """
    import polars as pl

    unit_domain = np.asarray(unit_domain).astype(str)
    domains, counts = np.unique(unit_domain, return_counts=True)
    corpus_share = dict(zip(domains.tolist(), (counts / counts.sum()).tolist()))
    rows = []
    for bench, units in signatures.items():
        units = np.asarray(units, dtype=np.int64)
        labels = unit_domain[units] if units.size else np.array([], dtype=str)
        for dom in domains.tolist():
            n = int((labels == dom).sum())
            share = n / units.size if units.size else float("nan")
            rows.append(
                {
                    "benchmark": bench,
                    "function": (functions or {}).get(bench, ""),
                    "domain": dom,
                    "units": n,
                    "share": share,
                    "corpus_share": corpus_share[dom],
                    "lift": share / corpus_share[dom] if corpus_share[dom] > 0 else float("nan"),
                }
            )
    schema = {
        "benchmark": pl.String,
        "function": pl.String,
        "domain": pl.String,
        "units": pl.Int64,
        "share": pl.Float64,
        "corpus_share": pl.Float64,
        "lift": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)  # the same columns when no benchmark has units


def matching_domain_summary(shares, bench_domain: Mapping[str, str]):
    """Per benchmark: the share of its signature units in the corpus domain it targets.

    ``bench_domain`` maps a benchmark to the corpus domain whose text exercises its skill
    (e.g. ``cloze_arithmetic`` → ``arithmetic``); benchmarks without one are left out.
    ``lift`` > 1 means the signature over-represents that domain relative to the corpus.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.reporting import domain_shares, matching_domain_summary
    >>> unit_domain = np.array(["code"] * 20 + ["prose"] * 80)  # domain of each corpus unit
    >>> sigs = {"humaneval": [0, 3, 5, 90], "lambada": [30, 40, 50, 60], "arc": [1, 2]}
    >>> shares = domain_shares(sigs, unit_domain)
    >>> summary = matching_domain_summary(shares, {"humaneval": "code", "lambada": "prose"})
    >>> summary.select("benchmark", "domain", "signature_share", "corpus_share", "lift").rows()
    [('humaneval', 'code', 0.75, 0.2, 3.75), ('lambada', 'prose', 1.0, 0.8, 1.25)]
    """
    import polars as pl

    rows = []
    for bench in shares["benchmark"].unique(maintain_order=True).to_list():
        sub = shares.filter(pl.col("benchmark") == bench)
        dom = bench_domain.get(bench)
        if dom is None or dom not in sub["domain"].to_list():
            continue
        r = sub.filter(pl.col("domain") == dom).row(0, named=True)
        rows.append(
            {
                "benchmark": bench,
                "function": sub["function"][0],
                "domain": dom,
                "signature_share": r["share"],
                "corpus_share": r["corpus_share"],
                "lift": r["lift"],
            }
        )
    schema = {
        "benchmark": pl.String,
        "function": pl.String,
        "domain": pl.String,
        "signature_share": pl.Float64,
        "corpus_share": pl.Float64,
        "lift": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)

"""A signature as a table of units in their corpus context."""

from __future__ import annotations

from typing import Any

import numpy as np


def signature_table(signature: Any, corpus: Any, *, n_left: int = 20) -> list[dict[str, Any]]:
    """One row per signature unit: its text with left context, statistic, adjusted p-value,
    coefficient and bootstrap frequency (NaN where the method has none), and the level whose
    claim holds it (``"unit"``, or the group level of a multi-resolution signature, whose
    statistic and adjusted p-value are then the group's).

    Parameters
    ----------
    signature : Signature
    corpus : CorpusStore
        The corpus the unit indices refer to (``context(unit, n_left)``, ``unit_doc``).
    n_left : int
        Units of left context.

    Returns
    -------
    list of dict
        Keys ``order, unit, text, left_context, statistic, adjusted_p, coef,
        bootstrap_freq, doc, level``, in the signature's order (empty for an empty signature).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.inputs import Document, build_corpus_store
    >>> from sigmap_lib.signatures import extract_signatures, signature_table
    >>> corpus = build_corpus_store([Document("d", "d", "the cat sat on the mat " * 20)], "corpus")
    >>> rng = np.random.default_rng(0)
    >>> y = rng.standard_normal(16)
    >>> values = rng.standard_normal((corpus.n_units, 16))
    >>> values[7] = -y  # unit 7 is perfectly predictive
    >>> [sig] = extract_signatures(values, y, method="calibrated-marginal", n_permutations=99)
    >>> row = signature_table(sig, corpus, n_left=3)[0]
    >>> row["unit"], row["text"], row["left_context"], round(row["statistic"], 2), row["adjusted_p"]
    (7, 'cat', 'the mat the ', 1.0, 0.01)
    """
    cal = signature.calibration
    units = signature.units.tolist()
    stat = signature.statistics
    padj = np.full(len(units), np.nan)
    if "claims" in signature.extra:
        padj = np.asarray(signature.extra["claims"]["adjusted_p"], dtype=np.float64)
    elif cal is not None and len(cal.units):
        pos = {int(u): i for i, u in enumerate(cal.units.tolist())}
        for i, u in enumerate(units):
            if u in pos:
                padj[i] = cal.adjusted_p[pos[u]]
    freq = signature.bootstrap_frequency
    levels = signature.claim_levels
    rows = []
    for i, u in enumerate(units):
        left, text = corpus.context(int(u), n_left=n_left)
        rows.append(
            {
                "order": i + 1,
                "unit": int(u),
                "text": text,
                "left_context": left,
                "statistic": float(stat[i]),
                "adjusted_p": float(padj[i]),
                "coef": float(signature.coef[i]),
                "bootstrap_freq": float(freq[i]) if freq is not None else float("nan"),
                "doc": int(corpus.unit_doc[int(u)]),
                "level": str(levels[i]),
            }
        )
    return rows

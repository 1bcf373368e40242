"""What a small world can and cannot say: the report's honesty sections (issue 17, item 7).

Pure functions on plain data (lists, dicts, arrays):

* :func:`signature_resolution` — the smallest adjusted p-value the max-T permutation test
  (METHODS §3b) can give with ``m`` models and ``P`` permutations, whether a signature at
  ``α`` is possible at all, and the banner text when it is not;
* :func:`model_table` — one row per model: bits per byte, benchmark scores, used or dropped
  and why;
* :func:`skip_reasons` — the benchmarks and stages that were skipped, with their reasons;
* :func:`honest_sections` — these as report sections plus a JSON-able summary.

The rule (:func:`signature_resolution`)
---------------------------------------
A unit's adjusted p-value is ``(1 + #{T*_p ≥ |ρ_j|}) / (P + 1)``, so it is at least

``p_min = max(1 / (P + 1), k / m!)``

* ``1 / (P + 1)``: the observed maximum is one of the ``P + 1`` values of the threshold's
  quantile; with ``t = np.quantile([T*_1..T*_P, T_obs], 1 − α, method="higher")`` a unit can
  only exceed ``t`` when ``1 / (P + 1) < α`` (``P ≥ 20`` at ``α = 0.05``);
* ``k / m!``: the scores of ``m`` models have ``m!`` orderings, and at least ``k`` of them
  reach the observed maximum exactly — the observed ordering, and for a two-sided rank
  statistic its reverse (the reversed ranking negates every centred rank correlation, so
  ``|ρ|`` is unchanged): ``k = 2``. A random permutation hits one of them with probability
  ``k / m!``, so the permutation p-value estimates a number ``≥ k / m!`` however large ``P``.

A signature at ``α`` is possible only when ``p_min < α``: at ``α = 0.05`` that needs
``m ≥ 5`` models (``2/5! = 0.017``; ``2/4! = 0.083``) and ``P ≥ 20`` permutations. Rank
correlations of ``m`` untied rankings take only ``m(m² − 1)/6 + 1`` distinct values, and
when the corpus has at least ``m!/k`` units it can hold a unit for every distinguishable
ordering: the null maxima may then reach the observed maximum under most permutations
(a caution, not a certainty: it depends on the units).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sigmap_lib.reporting._html import Section

#: Statuses of :func:`model_table`.
USED = "used"


def _threshold_allows(n_permutations: int, alpha: float) -> bool:
    """Can any unit exceed the max-T threshold with ``P`` permutations (best case)?"""
    vals = np.append(np.zeros(int(n_permutations)), 1.0)
    return bool(np.quantile(vals, 1.0 - alpha, method="higher") < 1.0)


def signature_resolution(
    n_models: int,
    n_permutations: int,
    alpha: float = 0.05,
    *,
    two_sided: bool = True,
    n_units: int | None = None,
) -> dict[str, Any]:
    """The smallest attainable max-T p-value and whether a signature at ``alpha`` is possible.

    Parameters
    ----------
    n_models : int
        ``m``, the scored models of the benchmark (or of the world).
    n_permutations : int
        ``P``, the permutations of the max-T null.
    alpha : float
        Family-wise error level in (0, 1).
    two_sided : bool
        Two-sided rank statistic: an ordering and its reverse give the same ``|ρ|``
        (``k = 2`` equivalent orderings instead of 1).
    n_units : int, optional
        ``d``, the units tested: flags the caution ``d ≥ m!/k`` (every distinguishable
        ordering of the models may occur among the units).

    Returns
    -------
    dict
        ``n_models``, ``n_permutations``, ``alpha``, ``n_units``, ``orderings`` (``m!``),
        ``equivalent_orderings`` (``k``), ``distinct_values`` (of a rank correlation of ``m``
        untied rankings), ``p_floor_permutations`` (``1/(P+1)``), ``p_floor_orderings``
        (``k/m!``), ``p_min`` (the larger), ``min_models`` and ``min_permutations`` (the
        smallest ``m`` and ``P`` for which a signature at ``alpha`` is possible),
        ``possible`` (bool), ``limited_by`` (list of ``"models"`` / ``"permutations"``),
        ``orderings_covered`` (``d ≥ m!/k``; None without ``n_units``), ``level``
        (``"impossible"``, ``"caution"`` or None), ``rule`` (the rule as text) and
        ``banner`` (text, or None when the signature level can mean something).

    Examples
    --------
    >>> from sigmap_lib.reporting import signature_resolution
    >>> r = signature_resolution(4, 199)
    >>> r["orderings"], round(r["p_floor_orderings"], 3), r["possible"], r["limited_by"]
    (24, 0.083, False, ['models'])
    >>> r["min_models"], r["min_permutations"]
    (5, 20)
    >>> r = signature_resolution(16, 199, n_units=177_111)
    >>> r["p_min"], r["possible"], r["level"], r["banner"] is None
    (0.005, True, None, True)
    >>> signature_resolution(12, 3)["limited_by"]
    ['permutations']
    >>> signature_resolution(8, 199, n_units=177_111)["level"]  # 8!/2 = 20,160 orderings
    'caution'
    """
    m, p = int(n_models), int(n_permutations)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    k = 2 if two_sided else 1
    orderings = math.factorial(max(m, 0))
    floor_perm = 1.0 / (p + 1) if p >= 0 else 1.0
    floor_ord = min(1.0, k / orderings) if m >= 2 else 1.0
    p_min = max(floor_perm, floor_ord)
    min_models = 2
    while k / math.factorial(min_models) >= alpha:
        min_models += 1
    min_perm = 1
    while not _threshold_allows(min_perm, alpha):
        min_perm += 1
    limited = []
    if m < min_models:
        limited.append("models")
    if p < 1 or not _threshold_allows(p, alpha):
        limited.append("permutations")
    possible = not limited
    covered = None if n_units is None else bool(m >= 2 and int(n_units) >= orderings / k)
    level = "impossible" if not possible else ("caution" if covered else None)
    distinct = m * (m * m - 1) // 6 + 1 if m >= 2 else 1
    rule = (
        f"A unit's adjusted p-value is at least max(1/(P + 1), {k}/m!): 1/(P + 1) because the "
        f"observed maximum is one of the P + 1 values of the max-T quantile, {k}/m! because "
        f"of the m! orderings of m models' scores {'the observed one and its reverse reach' if k == 2 else 'the observed one reaches'} "
        "the observed maximum exactly. A signature at α is possible only when this floor is "
        f"below α: at α = {alpha:g}, m ≥ {min_models} models and P ≥ {min_perm} permutations."
    )
    banner = None
    if level == "impossible":
        why = []
        if "models" in limited:
            why.append(
                f"m = {m} models have only {orderings} orderings, so no p-value can go below "
                f"{k}/{orderings} = {floor_ord:.3g} ≥ α = {alpha:g} (needs m ≥ {min_models})"
            )
        if "permutations" in limited:
            why.append(
                f"P = {p} permutations resolve p-values only down to 1/(P + 1) = "
                f"{floor_perm:.3g}, and the threshold is then the largest value (needs P ≥ {min_perm})"
            )
        banner = (
            "The signature level cannot mean anything here: no unit can pass the max-T test "
            f"at α = {alpha:g} — " + "; ".join(why) + ". Empty signatures are forced by the "
            "design, not evidence of no signal, and no unit listed is significant at α."
        )
    elif level == "caution":
        banner = (
            f"Few models for the signature level: m = {m} models give only {orderings // k} "
            f"distinguishable orderings and rank correlations with {distinct} distinct "
            f"values, while d = {int(n_units or 0)} units are tested — the permutation maxima "
            "can reach the observed maximum under most permutations, so empty signatures are "
            f"expected (smallest attainable p-value {p_min:.3g})."
        )
    return {
        "n_models": m,
        "n_permutations": p,
        "alpha": float(alpha),
        "n_units": None if n_units is None else int(n_units),
        "orderings": orderings if orderings < 2**53 else float(orderings),
        "equivalent_orderings": k,
        "distinct_values": distinct,
        "p_floor_permutations": floor_perm,
        "p_floor_orderings": floor_ord,
        "p_min": p_min,
        "min_models": min_models,
        "min_permutations": min_perm,
        "possible": possible,
        "limited_by": limited,
        "orderings_covered": covered,
        "level": level,
        "rule": rule,
        "banner": banner,
    }


def model_table(
    registry: Sequence[str],
    used: Sequence[str],
    bpb_mean: Sequence[float],
    bpb_sd: Sequence[float],
    scores: Mapping[str, Mapping[str, float]],
    benchmarks: Sequence[str],
    *,
    partial_nll: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One row per model: bits per byte, benchmark scores, and used or dropped with the reason.

    Parameters
    ----------
    registry : sequence of str
        Model ids of ``models.yaml`` in file order.
    used : sequence of str
        Model ids of the rank coverage, in its order (``bpb_mean`` / ``bpb_sd`` align).
    bpb_mean, bpb_sd : sequence of float
        Per-model mean and sd of the bits per byte over the coverage's units.
    scores : mapping model id -> {benchmark: score}
        Scores as reported (models outside the registry are listed as dropped).
    benchmarks : sequence of str
        Score columns, in this order.
    partial_nll : sequence of str
        Registry models with complete NLL on some shards but left out of the coverage
        (the others outside the coverage have no complete NLL).

    Returns
    -------
    list of dict
        Keys ``model``, ``status``, ``reason``, ``bpb_mean``, ``bpb_sd``, ``n_scores``, then
        one key per benchmark (None where there is no score). ``status`` is ``"used"`` or
        ``"dropped"``; ``reason`` one of ``"not in models.yaml"``, ``"no complete NLL"``,
        ``"not in the coverage (complete on too few shards)"``, ``"no scores"`` (joined by
        ``"; "``), empty when used.

    Examples
    --------
    >>> from sigmap_lib.reporting import model_table
    >>> rows = model_table(
    ...     ["a", "b", "c", "d"], ["a", "d"], [1.2, 0.9], [0.3, 0.2],
    ...     {"a": {"arc": 0.5}, "b": {"arc": 0.4}, "x": {"arc": 0.1}}, ["arc"],
    ...     partial_nll=["b"])
    >>> [(r["model"], r["status"], r["reason"]) for r in rows]  # doctest: +NORMALIZE_WHITESPACE
    [('a', 'used', ''), ('b', 'dropped', 'not in the coverage (complete on too few shards)'),
     ('c', 'dropped', 'no complete NLL; no scores'), ('d', 'dropped', 'no scores'),
     ('x', 'dropped', 'not in models.yaml; no complete NLL')]
    >>> rows[0]["bpb_mean"], rows[0]["arc"], rows[2]["bpb_mean"]
    (1.2, 0.5, None)
    """
    pos = {mid: i for i, mid in enumerate(used)}
    partial = set(partial_nll)
    reg = list(dict.fromkeys(registry))
    extra = [mid for mid in list(used) + list(scores) if mid not in set(reg)]
    rows = []
    for mid in reg + list(dict.fromkeys(extra)):
        sc = scores.get(mid, {}) or {}
        finite = {
            b: float(v)
            for b, v in sc.items()
            if b in benchmarks and v is not None and np.isfinite(float(v))
        }
        reasons = []
        if mid not in set(reg):
            reasons.append("not in models.yaml")
        if mid not in pos:
            reasons.append(
                "not in the coverage (complete on too few shards)"
                if mid in partial
                else "no complete NLL"
            )
        if not finite:
            reasons.append("no scores")
        i = pos.get(mid)
        row = {
            "model": mid,
            "status": USED if not reasons else "dropped",
            "reason": "; ".join(reasons),
            "bpb_mean": None if i is None else float(bpb_mean[i]),
            "bpb_sd": None if i is None else float(bpb_sd[i]),
            "n_scores": len(finite),
        }
        row |= {b: finite.get(b) for b in benchmarks}
        rows.append(row)
    return rows


def skip_reasons(
    catalog: Sequence[str],
    *,
    scored: Sequence[str] = (),
    screening: Mapping[str, Mapping[str, Any]] | None = None,
    signatures: Mapping[str, Mapping[str, Any] | None] | None = None,
    current_ranks: str | None = None,
    levels: Mapping[str, str | None] | None = None,
) -> list[dict[str, str]]:
    """The benchmarks and stages that were skipped or gave nothing, each with its reason.

    Parameters
    ----------
    catalog : sequence of str
        Benchmark keys of the catalog.
    scored : sequence of str
        Benchmarks with at least one score.
    screening : mapping benchmark -> screening summary, optional
        A ``"skipped"`` field is a screening skip.
    signatures : mapping benchmark -> signature summary (None when missing), optional
        ``"skipped"``, an empty signature (its calibration's ``"reason"``), a
        ``"ranks_dir"`` other than ``current_ranks`` (stale) are reported.
    current_ranks : str, optional
        The identity of the current rank coverage.
    levels : mapping level -> reason (None = computed), optional

    Returns
    -------
    list of dict
        ``{"what", "stage", "reason"}`` per skip, catalog order, levels last.

    Examples
    --------
    >>> from sigmap_lib.reporting import skip_reasons
    >>> rows = skip_reasons(
    ...     ["arc", "gsm8k", "math"], scored=["arc", "gsm8k"],
    ...     screening={"gsm8k": {"skipped": "all scores tied"}},
    ...     signatures={"arc": {"units": [], "ranks_dir": "r1",
    ...                         "calibration": {"reason": "no unit above the max-T threshold"}}},
    ...     current_ranks="r1", levels={"signature": "needs >= 2 signatures", "semantic": None})
    >>> [(r["what"], r["stage"], r["reason"]) for r in rows]  # doctest: +NORMALIZE_WHITESPACE
    [('arc', 'signature', 'empty: no unit above the max-T threshold'),
     ('gsm8k', 'screening', 'all scores tied'),
     ('math', 'scores', 'in the catalog but no model has a score'),
     ('signature', 'overlap level', 'needs >= 2 signatures')]
    """
    scored_set = set(scored)
    screening = screening or {}
    signatures = signatures or {}
    rows: list[dict[str, str]] = []
    for b in catalog:
        if b not in scored_set:
            rows.append(
                {"what": b, "stage": "scores", "reason": "in the catalog but no model has a score"}
            )
            continue
        scr = screening.get(b) or {}
        if "skipped" in scr:
            rows.append({"what": b, "stage": "screening", "reason": str(scr["skipped"])})
            continue
        if b not in signatures:
            continue
        s = signatures[b]
        if s is None:
            rows.append({"what": b, "stage": "signature", "reason": "no signature stored"})
        elif "skipped" in s:
            rows.append({"what": b, "stage": "signature", "reason": str(s["skipped"])})
        elif current_ranks is not None and s.get("ranks_dir") not in (None, current_ranks):
            rows.append(
                {
                    "what": b,
                    "stage": "signature",
                    "reason": "stale: built on another model set (re-materialize signatures)",
                }
            )
        elif "settings" in s or "units" in s:
            if not s.get("units"):
                cal = s.get("calibration") or {}
                why = cal.get("reason") or f"nothing selected ({s.get('method', '?')})"
                rows.append({"what": b, "stage": "signature", "reason": f"empty: {why}"})
    for lv, why in (levels or {}).items():
        if why:
            rows.append({"what": lv, "stage": "overlap level", "reason": str(why)})
    return rows


def honest_sections(
    models: Sequence[Mapping[str, Any]],
    skipped: Sequence[Mapping[str, str]],
    resolution: Mapping[str, Any],
) -> tuple[list[Section], dict[str, Any]]:
    """The report sections for the models, the skips and the signature level's resolution.

    Parameters
    ----------
    models : rows of :func:`model_table`
    skipped : rows of :func:`skip_reasons`
    resolution : result of :func:`signature_resolution`

    Returns
    -------
    sections : list of Section
        ``"Can the signature level mean anything here?"`` (the rule, and the banner when
        there is one), ``"Models"``, ``"Skipped benchmarks and stages"``.
    summary : dict
        JSON-able: ``models`` (the rows), ``models_used``, ``models_dropped``,
        ``skipped`` (the rows), ``signature_resolution`` (without the long texts'
        duplicates) and ``banner``.

    Examples
    --------
    >>> from sigmap_lib.reporting import (honest_sections, model_table, signature_resolution,
    ...                                   skip_reasons)
    >>> rows = model_table(["a", "b"], ["a"], [1.0], [0.2], {"a": {"arc": 0.5}}, ["arc"])
    >>> secs, summ = honest_sections(rows, skip_reasons(["arc"]), signature_resolution(4, 199))
    >>> [s.title for s in secs]
    ['Can the signature level mean anything here?', 'Models', 'Skipped benchmarks and stages']
    >>> summ["models_used"], summ["models_dropped"], summ["banner"].startswith("The signature")
    (1, {'b': 'no complete NLL; no scores'}, True)
    """
    res = dict(resolution)
    text = (
        f"**Rule.** {res['rule']} Here: m = {res['n_models']}, P = {res['n_permutations']}, "
        f"smallest attainable adjusted p-value {res['p_min']:.3g} "
        f"({'a signature is possible' if res['possible'] else 'no signature is possible'})."
    )
    if res.get("banner"):
        text = f"**Warning.** {res['banner']}\n\n" + text
    used = [r for r in models if r["status"] == USED]
    dropped = {r["model"]: r["reason"] for r in models if r["status"] != USED}
    mtext = (
        f"{len(used)} of {len(models)} models are used (in the rank coverage, with scores). "
        "Bits per byte: mean and sd over the coverage's units."
    )
    if dropped:
        mtext += " Dropped: " + "; ".join(f"{k} ({v})" for k, v in dropped.items()) + "."
    stext = (
        f"{len(skipped)} skip(s)."
        if skipped
        else "Nothing was skipped: every catalog benchmark "
        "was scored, screened and has a non-empty signature, and every level was computed."
    )
    sections = [
        Section("Can the signature level mean anything here?", text),
        Section("Models", mtext, tables=[("per model", list(models))]),
        Section(
            "Skipped benchmarks and stages",
            stext,
            tables=[("skips", list(skipped))] if skipped else [],
        ),
    ]
    summary = {
        "models": [dict(r) for r in models],
        "models_used": len(used),
        "models_dropped": dropped,
        "skipped": [dict(r) for r in skipped],
        "signature_resolution": res,
        "banner": res.get("banner"),
    }
    return sections, summary

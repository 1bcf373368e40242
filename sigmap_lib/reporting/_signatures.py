"""Report sections for the signatures themselves: units in context, statistics and adjusted
p-values, and each benchmark's threshold against its permutation null."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.reporting._html import Section


def null_threshold_plot(
    null_max: Sequence[float],
    threshold: float,
    observed_max: float,
    path: str | Path,
    *,
    title: str = "",
) -> Path:
    """Histogram of the permutation null of the maximum |statistic| with the threshold and the
    observed maximum marked (PNG).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.reporting import null_threshold_plot
    >>> null = np.random.default_rng(0).uniform(0.6, 0.8, 199)
    >>> null_threshold_plot(null, float(np.quantile(null, 0.95)), 0.93, "null.png", title="arc")
    PosixPath('null.png')
    """
    from sigmap_lib.reporting._plots import pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.hist(np.asarray(null_max, dtype=float), bins=30, color="0.6", label="null max |statistic|")
    ax.axvline(threshold, color="tab:blue", lw=1.5, label=f"threshold {threshold:.3f}")
    ax.axvline(
        observed_max, color="tab:red", lw=1.5, ls="--", label=f"observed max {observed_max:.3f}"
    )
    ax.set_xlabel("maximum |statistic| over all units")
    ax.set_ylabel("permutations")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.12, bottom=0.16, right=0.97, top=0.9)
    return save_png(fig, path, tight=False)  # the margins above fit the labels and title


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def signature_rows(summaries: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per benchmark: method, units, models, the max-T test, LOO R² and whether a
    signature at α was attainable at all (:func:`signature_resolution`).

    Parameters
    ----------
    summaries : mapping
        Benchmark -> ``Signature.summary()`` (as stored; a ``"skipped"`` one gives a row
        with its reason).

    Returns
    -------
    list of dict
        Keys ``benchmark, method, units, significant`` (units with adjusted p < α; None
        without a calibration), ``models, threshold, observed max, p (global), P, LOO R²,
        attainable, note``. ``LOO R²`` is None where the method did not compute it;
        ``attainable`` is None without a calibration.

    Examples
    --------
    >>> from sigmap_lib.reporting import signature_rows
    >>> cal = {"n_permutations": 199, "threshold": 0.9, "observed_max": 0.95, "alpha": 0.05,
    ...        "p_value": 0.005, "n_models": 4, "n_units": 400, "reason": None}
    >>> [row] = signature_rows({"arc": {"method": "aic", "units": [3, 9], "n_models": 4,
    ...                                 "loo_r2": 0.41, "calibration": cal}})
    >>> row["units"], row["LOO R²"], row["attainable"]
    (2, 0.41, False)
    >>> row["note"]
    'no signature attainable at α = 0.05: m = 4 < 5 models'
    """
    from sigmap_lib.reporting._honest import signature_resolution

    rows = []
    for bm, s in summaries.items():
        if "skipped" in s:
            rows.append(
                {"benchmark": bm, "method": None, "units": 0, "note": f"skipped: {s['skipped']}"}
            )
            continue
        cal = s.get("calibration") or {}
        n = len(s.get("units", []))
        m = cal.get("n_models", s.get("n_models"))
        d, alpha, p = cal.get("n_units"), cal.get("alpha"), cal.get("n_permutations")
        attainable, note = None, ""
        if m is not None and p is not None:
            res = signature_resolution(
                int(m), int(p), float(alpha or 0.05), two_sided=cal.get("two_sided", True)
            )
            attainable = res["possible"]
            if not attainable:
                why = []
                if "models" in res["limited_by"]:
                    why.append(f"m = {m} < {res['min_models']} models")
                if "permutations" in res["limited_by"]:
                    why.append(f"P = {p} < {res['min_permutations']} permutations")
                note = f"no signature attainable at α = {res['alpha']:g}: " + ", ".join(why)
        if not n:
            empty = f"no signature above chance at m = {m}, d = {d}, α = {alpha}"
            note = f"{empty}; {note}" if note else empty
        rows.append(
            {
                "benchmark": bm,
                "method": s.get("method"),
                "units": n,
                "significant": sum(
                    1 for v in cal.get("adjusted_p") or [] if v is not None and v < (alpha or 0.05)
                )
                if cal
                else None,
                "models": m,
                "threshold": cal.get("threshold"),
                "observed max": cal.get("observed_max"),
                "p (global)": cal.get("p_value"),
                "P": p,
                "LOO R²": _finite(s.get("loo_r2")),
                "attainable": attainable,
                "controlled for family": cal.get("controlled_for_strata") if cal else None,
                "FWER over": _FWER_OVER.get(cal.get("fwer")) if cal else None,
                "note": note,
            }
        )
    return rows


_FWER_OVER = {"benchmark": "each benchmark's units", "all": "all benchmarks' units"}


def detection_text(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """What the calibrated signatures could detect: per set of (m, d), the threshold as the
    smallest detectable ``|partial ρ|`` and the models needed to detect 0.6 and 0.8.

    Parameters
    ----------
    summaries : mapping
        Benchmark -> ``Signature.summary()`` (as stored).

    Returns
    -------
    str
        Empty when no benchmark has a calibrated partial test.

    Examples
    --------
    >>> from sigmap_lib.reporting import detection_text
    >>> cal = {"statistic": "partial-spearman", "threshold": 0.77, "n_models": 32,
    ...        "n_units": 10_000, "alpha": 0.05, "fwer": "benchmark",
    ...        "controlled_for_strata": False}
    >>> print(detection_text({"arc": {"calibration": cal}, "gsm8k": {"calibration": cal}}))
    **What these models can detect.** A unit enters a signature when its partial correlation with the benchmark given general quality exceeds the max-T threshold, so the threshold is the smallest detectable |partial ρ| (a unit exactly at it is found about half the time). m = 32 models, d = 10,000 units (arc, gsm8k): threshold 0.77 (closed form 0.75); detecting |partial ρ| = 0.8 takes about 27 models and 0.6 about 54 at this d. Family-wise error controlled at α = 0.05 over each benchmark's units; not controlled for model family.
    """
    from sigmap_lib.signatures import detectable_rho, models_needed

    groups: dict[tuple[int, int, float, int | None], list[tuple[str, float]]] = {}
    scope: set[str] = set()
    strata: set[bool] = set()
    rates: set[float] = set()
    for bm, s in summaries.items():
        cal = s.get("calibration") or {}
        if not str(cal.get("statistic", "")).startswith("partial") or cal.get("threshold") is None:
            continue
        q = cal.get("basis_columns")
        key = (
            int(cal["n_models"]),
            int(cal["n_units"]),
            float(cal.get("alpha") or 0.05),
            None if q is None else int(q),
        )
        groups.setdefault(key, []).append((bm, float(cal["threshold"])))
        scope.add(str(cal.get("fwer") or "benchmark"))
        strata.add(bool(cal.get("controlled_for_strata")))
        if cal.get("fdr") is not None:
            rates.add(float(cal["fdr"]))
    if not groups:
        return ""
    parts = [
        "**What these models can detect.** A unit enters a signature when its partial "
        "correlation with the benchmark given general quality exceeds the max-T threshold, so "
        "the threshold is the smallest detectable |partial ρ| (a unit exactly at it is found "
        "about half the time)."
    ]
    for (m, d, alpha, q), rows in sorted(groups.items(), key=lambda kv: kv[0][:3]):
        ts = [t for _, t in rows]
        t = f"{ts[0]:.2f}" if len(set(ts)) == 1 else f"{min(ts):.2f}–{max(ts):.2f}"
        names = ", ".join(b for b, _ in rows)
        parts.append(
            f"m = {m} models, d = {d:,} units ({names}): threshold {t} (closed form "
            f"{detectable_rho(m, d, alpha, basis_columns=q):.2f}); detecting |partial ρ| = 0.8 takes about "
            f"{models_needed(0.8, d, alpha)} models and 0.6 about {models_needed(0.6, d, alpha)}"
            " at this d."
        )
    alphas = sorted({a for _, _, a, _ in groups})
    over = " and ".join(_FWER_OVER[k] for k in sorted(scope) if k in _FWER_OVER)
    fam = {frozenset([True]): "controlled for model family (permutations within families)",
           frozenset([False]): "not controlled for model family"}.get(
        frozenset(strata), "controlled for model family on some benchmarks only")  # fmt: skip
    parts.append(
        f"Family-wise error controlled at α = {', '.join(f'{a:g}' for a in alphas)} over "
        f"{over}; {fam}."
        if not rates
        else f"False-discovery rate controlled at q = {', '.join(f'{r:g}' for r in sorted(rates))}"
        " (a permutation null pooled over the units, behind a max-T gate at q: on a world "
        f"without signal nothing is claimed with probability ≥ 1 − q); {fam}."
    )
    levels = levels_text(summaries)
    return " ".join(parts) + (f"\n\n{levels}" if levels else "")


def levels_text(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """The multi-resolution signatures' claims per level, with what each level can detect.

    Parameters
    ----------
    summaries : mapping
        Benchmark -> ``Signature.summary()`` (as stored); those without ``levels`` are
        passed over.

    Returns
    -------
    str
        Empty when no signature is multi-resolution.

    Examples
    --------
    >>> from sigmap_lib.reporting import levels_text
    >>> cal = {"n_models": 32, "alpha": 0.05}
    >>> lv = [{"level": "document", "n_groups": 1000, "groups": [4, 9], "threshold": 0.74},
    ...       {"level": "unit", "n_groups": 100000, "groups": [], "threshold": 0.83}]
    >>> print(levels_text({"arc": {"calibration": cal, "levels": lv}}))
    **Levels.** Multi-resolution signatures test groups of units (their mean value per model) beside the units, with the family-wise error held over all levels together (single-step min-P); a claimed group's units are in the signature. arc (m = 32): document 2 of 1,000 claimed (threshold 0.74; one level alone: 0.69, |partial ρ| = 0.6 needs about 44 models); unit 0 of 100,000 claimed (threshold 0.83; one level alone: 0.79, |partial ρ| = 0.6 needs about 64 models).
    """
    from sigmap_lib.signatures import detectable_rho, models_needed

    rows = []
    for bm, s in summaries.items():
        levels = s.get("levels")
        cal = s.get("calibration") or {}
        if not levels or not cal:
            continue
        m, alpha = int(cal["n_models"]), float(cal.get("alpha") or 0.05)
        parts = [
            f"{lv['level']} {len(lv['groups']):,} of {int(lv['n_groups']):,} claimed (threshold "
            f"{float(lv['threshold']):.2f}; one level alone: "
            f"{detectable_rho(m, int(lv['n_groups']), alpha):.2f}, |partial ρ| = 0.6 needs "
            f"about {models_needed(0.6, int(lv['n_groups']), alpha)} models)"
            for lv in levels
        ]
        rows.append(f"{bm} (m = {m}): " + "; ".join(parts) + ".")
    if not rows:
        return ""
    return (
        "**Levels.** Multi-resolution signatures test groups of units (their mean value per "
        "model) beside the units, with the family-wise error held over all levels together "
        "(single-step min-P); a claimed group's units are in the signature. " + " ".join(rows)
    )


def signature_sections(
    summaries: Mapping[str, Mapping[str, Any]],
    units: Mapping[str, Sequence[Mapping[str, Any]]],
    plots_dir: str | Path,
    *,
    max_units: int = 12,
    drawn: Mapping[str, str | Path] | None = None,
) -> list[Section]:
    """One report section with every benchmark's signature and its calibration.

    Parameters
    ----------
    summaries : mapping
        Benchmark -> ``Signature.summary()`` (as stored).
    units : mapping
        Benchmark -> rows of :func:`sigmap_lib.signatures.signature_table`.
    plots_dir : path
        Where the null-vs-threshold plots go.
    max_units : int
        Units shown per benchmark.
    drawn : mapping, optional
        Benchmark -> a null-vs-threshold plot (:func:`null_threshold_plot`) already drawn
        from the same summary, shown as it is when the file exists; the others are drawn
        into ``plots_dir``.

    Examples
    --------
    >>> from sigmap_lib.reporting import signature_sections
    >>> cal = {"n_permutations": 3, "threshold": 0.8, "observed_max": 0.7, "alpha": 0.05,
    ...        "null_max": [0.6, 0.7, 0.8], "n_models": 12, "n_units": 400,
    ...        "reason": "no unit above the max-T threshold"}
    >>> [sec] = signature_sections({"arc": {"method": "calibrated", "units": [], "calibration": cal}},
    ...                            {"arc": []}, "plots")
    >>> sec.title, "no signature above chance" in sec.text
    ('Signatures', True)
    """
    rows, tables, images = signature_rows(summaries), [], []
    for row, (bm, s) in zip(rows, summaries.items()):
        cal = s.get("calibration") or {}
        n = row["units"]
        if n:
            shown = []
            for u in list(units.get(bm, []))[:max_units]:
                r = {
                    "#": u.get("order"),
                    "left context": "…" + str(u.get("left_context", ""))[-50:],
                    "unit": str(u.get("text", "")),
                    "statistic": u.get("statistic"),
                    "adjusted p": u.get("adjusted_p"),
                }
                for key, col in (("coef", "coef"), ("bootstrap_freq", "bootstrap freq")):
                    if _finite(u.get(key)) is not None:
                        r[col] = u[key]
                shown.append(r)
            loo = row.get("LOO R²")
            cap = f"{bm}: signature units in context ({row['method']}, {n} units"
            cap += f", LOO R² {loo:.3g})" if loo is not None else ", LOO R² not computed)"
            tables.append((cap, shown))
        if not cal.get("null_max") or cal.get("threshold") is None:
            continue
        done = (drawn or {}).get(bm)
        if done is not None and Path(done).is_file():
            images.append((bm, Path(done)))
        else:
            png = null_threshold_plot(
                [v for v in cal["null_max"] if v is not None],
                float(cal["threshold"]),
                float(cal.get("observed_max") or np.nan),
                Path(plots_dir) / f"signature_null_{bm}.png",
                title=f"{bm}: threshold vs permutation null (P = {cal['n_permutations']})",
            )
            images.append((bm, png))
    empty = [r["benchmark"] for r in rows if r["units"] == 0]
    sig = [r for r in rows if r.get("significant")]
    text = (
        f"{len(rows) - len(empty)} of {len(rows)} benchmarks have a non-empty signature; "
        f"{len(sig)} have a signature above chance (units with max-T adjusted p < α, "
        "family-wise error ≤ α over all units)."
    )
    blocked = [r["benchmark"] for r in rows if r.get("attainable") is False]
    if blocked:
        text += (
            f" For {len(blocked)} of them no signature at α was attainable at all with these "
            "m and P (column *attainable*): their units, if any, are not significant."
        )
    for r in rows:
        if r["units"] == 0:
            text += f" {r['benchmark']}: {r['note']}."
    if detect := detection_text(summaries):
        text += "\n\n" + detect
    return [Section("Signatures", text, tables=[("per benchmark", rows), *tables], images=images)]

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
    return save_png(fig, path)


def signature_sections(
    summaries: Mapping[str, Mapping[str, Any]],
    units: Mapping[str, Sequence[Mapping[str, Any]]],
    plots_dir: str | Path,
    *,
    max_units: int = 12,
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
    rows, tables, images = [], [], []
    for bm, s in summaries.items():
        cal = s.get("calibration") or {}
        n = len(s.get("units", []))
        m, d, alpha = cal.get("n_models"), cal.get("n_units"), cal.get("alpha")
        rows.append(
            {
                "benchmark": bm,
                "method": s.get("method"),
                "units": n,
                "threshold": cal.get("threshold"),
                "observed max": cal.get("observed_max"),
                "P": cal.get("n_permutations"),
                "note": "" if n else f"no signature above chance at m = {m}, d = {d}, α = {alpha}",
            }
        )
        if n:
            tables.append(
                (
                    f"{bm}: signature units in context",
                    [
                        {
                            "#": u["order"],
                            "left context": "…" + str(u["left_context"])[-50:],
                            "unit": str(u["text"]),
                            "statistic": u["statistic"],
                            "adjusted p": u["adjusted_p"],
                        }
                        for u in list(units.get(bm, []))[:max_units]
                    ],
                )
            )
        if cal.get("null_max") and cal.get("threshold") is not None:
            png = null_threshold_plot(
                [v for v in cal["null_max"] if v is not None],
                float(cal["threshold"]),
                float(cal.get("observed_max") or np.nan),
                Path(plots_dir) / f"signature_null_{bm}.png",
                title=f"{bm}: threshold vs permutation null (P = {cal['n_permutations']})",
            )
            images.append((bm, png))
    empty = [r["benchmark"] for r in rows if r["units"] == 0]
    text = (
        f"{len(rows) - len(empty)} of {len(rows)} benchmarks have a signature above chance "
        "(max-T permutation test, family-wise error ≤ α over all units)."
    )
    for r in rows:
        if r["units"] == 0:
            text += f" {r['benchmark']}: {r['note']}."
    return [Section("Signatures", text, tables=[("per benchmark", rows), *tables], images=images)]

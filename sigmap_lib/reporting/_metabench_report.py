"""The metabench report: its summary numbers, plots and HTML sections."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sigmap_lib.metabench import MetabenchFit


@dataclass(frozen=True)
class MetabenchReport:
    """What :func:`metabench_report` wrote.

    Attributes
    ----------
    summary : dict
        Benchmarks, item counts, compression, test RMSEs, the joint model and the skips.
    table : pandas.DataFrame
        Per-benchmark RMSE table (:meth:`MetabenchFit.rmse_table`).
    html, reconstruction, information : Path
        The report and its two plots.
    """

    summary: dict[str, Any]
    table: Any
    html: Path
    reconstruction: Path
    information: Path


def metabench_report(
    fit: MetabenchFit,
    n_items: int,
    plots_dir: str | os.PathLike,
    html_path: str | os.PathLike,
    *,
    skipped: dict[str, str] | None = None,
    not_exported: dict[str, str] | None = None,
    joint_error: str | None = None,
) -> MetabenchReport:
    """Summarise a metabench fit and write its report: reconstruction and information
    plots, the per-benchmark RMSE table, the joint reconstruction and the skips.

    Parameters
    ----------
    fit : MetabenchFit
        The fitted metabench (``joint`` may be None).
    n_items : int
        Items of the fitted benchmarks before selection.
    plots_dir, html_path : path-like
        Where the two PNGs go, and the HTML file.
    skipped : dict, optional
        Benchmark -> why it was left out.
    not_exported : dict, optional
        Benchmark -> why its items were not exported.
    joint_error : str, optional
        Why the joint model could not be fitted.

    Returns
    -------
    MetabenchReport

    Examples
    --------
    >>> from sigmap_lib.metabench import TINY_SETTINGS, fit_metabench, simulate_benchmarks
    >>> from sigmap_lib.reporting import metabench_report
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> fit = fit_metabench(responses, scores, **TINY_SETTINGS)
    >>> report = metabench_report(fit, 70, ".", "metabench.html", skipped={"mmlu": "no items"})
    >>> report.summary["benchmarks"], report.summary["items_total"], report.html.name
    (['arc', 'gsm8k'], 70, 'metabench.html')
    """
    from sigmap_lib.reporting._html import Section, render_html_report
    from sigmap_lib.reporting._metabench_plots import plot_reconstruction, plot_test_information

    skipped, not_exported, joint = dict(skipped or {}), dict(not_exported or {}), fit.joint
    rec_png = plot_reconstruction(fit, Path(plots_dir) / "metabench_reconstruction.png")
    info_png = plot_test_information(fit, Path(plots_dir) / "metabench_information.png")
    table = fit.rmse_table()
    summary = {
        "benchmarks": list(fit.benchmarks),
        "items_total": int(n_items),
        "items_selected": fit.n_selected,
        "compression_pct": 100.0 * fit.n_selected / max(n_items, 1),
        "test_rmse": fit.test_rmse,
        "grand_test_rmse": fit.grand_test_rmse,
        "factor_spearman_with_grand": float(joint.factor_spearman) if joint is not None else None,
        "skipped_benchmarks": skipped,
        "joint_error": joint_error,
        # which joint model predicts the grand score (GAM, or the guard's ridge) and why
        "joint_model": joint.joint_models.get("grand") if joint is not None else None,
    }
    sections = [
        Section(
            "Summary",
            f"{fit.n_selected} of {n_items} items kept ({summary['compression_pct']:.1f}%). "
            f"Grand-score test RMSE {fit.grand_test_rmse:.3g} points; one-factor Spearman with "
            f"the grand score {summary['factor_spearman_with_grand']}. Each benchmark's score "
            "is reconstructed by a GAM on θ, plus the selected items' percent correct and "
            "linear predictor when cross-validation prefers them (`covariates`); "
            "`test_rmse_theta` is θ alone, and `random_test_rmse` reconstructs random "
            "same-size subsets from the same summaries.",
            tables=[("per benchmark", table)],
        ),
        Section("Reconstruction", images=[("reconstructed vs true (test models)", rec_png)]),
        Section("Test information", images=[("test information curves", info_png)]),
    ]
    if joint is not None:
        sections.append(
            Section(
                "Joint reconstruction",
                "Each benchmark's score from all θs jointly, and the grand score.",
                tables=[("RMSE (points)", joint.rmse_table.reset_index(names="target"))],
            )
        )
    if skipped or not_exported:
        rows = [{"benchmark": k, "skipped": v} for k, v in skipped.items()]
        rows += [
            {"benchmark": k, "skipped": f"distilled, items not exported: {v}"}
            for k, v in not_exported.items()
        ]
        sections.append(
            Section(
                "Skipped",
                "Benchmarks left out, each with its reason.",
                tables=[("benchmarks", rows)],
            )
        )
    html = render_html_report(sections, html_path, title="sigmap — metabench")
    return MetabenchReport(summary, table, Path(html), rec_png, info_png)

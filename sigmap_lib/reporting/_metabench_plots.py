"""Plots of a metabench fit: reconstruction and test information."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_file
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import item_information
from sigmap_lib.metabench import MetabenchFit

# ---------------------------------------------------------------------------
# plots


def plot_reconstruction(fit: MetabenchFit, path: str | os.PathLike) -> Path:
    """Scatter of reconstructed vs true score for the test models, one panel per benchmark (PNG).

    Examples
    --------
    >>> from sigmap_lib.metabench import TINY_SETTINGS, fit_metabench, simulate_benchmarks
    >>> from sigmap_lib.reporting import plot_reconstruction
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> fit = fit_metabench(responses, scores, **TINY_SETTINGS)  # tiny settings: fast
    >>> plot_reconstruction(fit, "reconstruction.png")  # one panel per benchmark, test models
    PosixPath('reconstruction.png')
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bms = list(fit.benchmarks)
    ncol = min(3, len(bms))
    nrow = int(np.ceil(len(bms) / ncol))
    figure, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 4 * nrow), squeeze=False)
    for ax, bm in zip(axes.ravel(), bms, strict=False):
        t = fit.benchmarks[bm].thetas
        t = t[t["role"] == "test"]
        ax.scatter(t["score"], t["score_pred"], s=6, alpha=0.6)
        lo, hi = (
            float(t[["score", "score_pred"]].min().min()),
            float(t[["score", "score_pred"]].max().max()),
        )
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_title(
            f"{bm}: {len(fit.benchmarks[bm].selected)} items, RMSE {fit.benchmarks[bm].test_rmse:.2f}"
        )
        ax.set_xlabel("true score")
        ax.set_ylabel("reconstructed")
    for ax in axes.ravel()[len(bms) :]:
        ax.axis("off")
    figure.tight_layout()
    return _save_fig(figure, path)


def plot_test_information(fit: MetabenchFit, path: str | os.PathLike) -> Path:
    """Test information curves (sum of selected items' information) per benchmark (PNG).

    A curve's height at θ is about ``1 / SE(θ)²`` of θ estimated from the selected items,
    so it shows over which range of ability the reduced test measures precisely.

    Examples
    --------
    >>> from sigmap_lib.metabench import TINY_SETTINGS, fit_metabench, simulate_benchmarks
    >>> from sigmap_lib.reporting import plot_test_information
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
    >>> fit = fit_metabench({"gsm8k": responses["gsm8k"]}, scores, **TINY_SETTINGS)
    >>> plot_test_information(fit, "test_information.png")  # one curve per benchmark, here one
    PosixPath('test_information.png')
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(-4, 4, 201)
    figure, ax = plt.subplots(figsize=(6, 4))
    for bm, f in fit.benchmarks.items():
        ax.plot(grid, item_information(f.params, grid).sum(axis=1), label=f"{bm} ({f.irt_model})")
    ax.set_xlabel("θ")
    ax.set_ylabel("test information")
    ax.legend(fontsize=8)
    figure.tight_layout()
    return _save_fig(figure, path)


def _save_fig(figure: Any, path: str | os.PathLike) -> Path:
    import matplotlib.pyplot as plt

    dest = Path(path)
    try:
        with atomic_file(dest) as tmp:
            figure.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(figure)
    return dest


def plot_scored_models(fit: MetabenchFit, results: list[dict], path: str | os.PathLike) -> Path:
    """Where scored models fall on each benchmark's reconstruction (PNG).

    One panel per benchmark: the fit's respondents (grey: true full score against θ), the
    θ-only reconstruction curve, and each scored model (red: reconstructed score at its θ,
    with its prediction interval and θ ± SE).

    Parameters
    ----------
    fit : MetabenchFit
    results : list of dict
        :meth:`sigmap_lib.metabench.MetabenchScorer.score` output.
    path : path of the PNG.

    Examples
    --------
    >>> from sigmap_lib.metabench import (
    ...     TINY_SETTINGS, MetabenchScorer, fit_metabench, simulate_benchmarks,
    ... )
    >>> from sigmap_lib.reporting import plot_scored_models
    >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30}, seed=0)
    >>> fit = fit_metabench(responses, scores, **TINY_SETTINGS)
    >>> res = MetabenchScorer.from_fit(fit).score({"new/model": {"arc": {i: 1 for i in fit.selected["arc"][:5]}}})
    >>> plot_scored_models(fit, res, "scored.png")
    PosixPath('scored.png')
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bms = [bm for bm in fit.benchmarks if any(bm in r["benchmarks"] for r in results)]
    if not bms:
        raise SigmapInputError("plot_scored_models: no scored benchmark of this fit")
    ncol = min(3, len(bms))
    nrow = int(np.ceil(len(bms) / ncol))
    figure, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
    for ax, bm in zip(axes.flat, bms):
        f = fit.benchmarks[bm]
        th = f.thetas
        ax.scatter(th["theta"], th["score"], s=6, c="0.7", label="fit respondents")
        grid = np.linspace(th["theta"].min() - 0.5, th["theta"].max() + 0.5, 200)
        ax.plot(grid, f.gam.predict(grid), c="0.3", lw=1, label="reconstruction (θ)")
        for r in results:
            b = r["benchmarks"].get(bm)
            if b is None:
                continue
            lo, hi = b["score_interval"]
            ax.errorbar(
                b["theta"],
                b["score"],
                yerr=[[b["score"] - lo], [hi - b["score"]]],
                xerr=b["theta_se"],
                fmt="o",
                c="tab:red",
                ms=5,
                capsize=3,
            )
            ax.annotate(
                r["model"][-24:],
                (b["theta"], b["score"]),
                fontsize=7,
                xytext=(4, 4),
                textcoords="offset points",
            )
        ax.set_title(bm, fontsize=9)
        ax.set_xlabel("θ")
        ax.set_ylabel("full score")
    for ax in list(axes.flat)[len(bms) :]:
        ax.axis("off")
    figure.tight_layout()
    return _save_fig(figure, path)

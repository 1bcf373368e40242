"""PNG plots of overlap matrices and helpers (matplotlib, Agg backend).

Every function writes one PNG atomically (temporary name, then rename) and returns the
``Path`` written. matplotlib is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_file
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap import OverlapMatrix


def pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: str | Path, dpi: int = 110, *, tight: bool = True) -> Path:
    """Write ``fig`` as a PNG (atomically) and close it. ``tight`` crops the canvas to what
    is drawn, which costs a second rendering pass (about half of a simple plot's time):
    plots whose labels fit the default margins pass ``tight=False``."""
    path = Path(path)
    try:
        with atomic_file(path) as tmp:
            fig.savefig(tmp, dpi=dpi, bbox_inches="tight" if tight else None, format="png")
    finally:
        pyplot().close(fig)
    return path


def heatmap(
    matrix: OverlapMatrix,
    path: str | Path,
    *,
    title: str = "",
    order: Sequence[str] | None = None,
    cluster_order: bool = True,
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    annotate: bool | None = None,
) -> Path:
    """Heatmap of an overlap matrix, rows/columns ordered by clustering.

    Parameters
    ----------
    matrix : OverlapMatrix
    path : str or Path
        PNG to write.
    order : sequence of str, optional
        Explicit label order; otherwise the dendrogram leaf order of
        :func:`sigmap_lib.overlap.cluster` (NaN treated as overlap 0) when
        ``cluster_order``, else the matrix order.
    vmin, vmax : float, optional
        Colour range (default: range of the off-diagonal values).
    annotate : bool, optional
        Write values into cells (default: when B <= 15).

    Examples
    --------
    >>> from sigmap_lib.overlap import toy_overlap
    >>> from sigmap_lib.reporting import heatmap
    >>> m, _ = toy_overlap()
    >>> heatmap(m, "performance_heatmap.png", title="performance overlap")  # clustered order
    PosixPath('performance_heatmap.png')
    """
    plt = pyplot()
    b = len(matrix.labels)
    if b == 0:
        raise SigmapInputError("heatmap: empty overlap matrix")
    if order is None and cluster_order and b > 2:
        from sigmap_lib.overlap import cluster

        order = cluster(matrix, fill_nan=0.0).order
    m = matrix.subset(list(order)) if order is not None else matrix
    vals = m.values
    off = m.off_diagonal()
    off = off[np.isfinite(off)]
    if vmin is None:
        vmin = float(off.min()) if off.size else 0.0
    if vmax is None:
        vmax = float(off.max()) if off.size else 1.0
    if vmax <= vmin:
        vmax = vmin + 1e-6
    size = min(24.0, 2.5 + 0.28 * b)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    shown = vals.copy()
    np.fill_diagonal(shown, np.nan)
    im = ax.imshow(shown, vmin=vmin, vmax=vmax, cmap=cmap, interpolation="nearest")
    fs = max(4, min(10, int(220 / max(b, 1))))
    ax.set_xticks(range(b), m.labels, rotation=90, fontsize=fs)
    ax.set_yticks(range(b), m.labels, fontsize=fs)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=f"{matrix.level or 'overlap'}")
    if annotate if annotate is not None else b <= 15:
        for i in range(b):
            for j in range(b):
                if i != j and np.isfinite(vals[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{vals[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=fs - 1,
                        color="w",
                    )
    ax.set_title(title or f"{matrix.level} overlap (diagonal blank)")
    return save_png(fig, path)


def dendrogram(matrix: OverlapMatrix, path: str | Path, *, title: str = "") -> Path:
    """Dendrogram of average-linkage clustering on ``1 − overlap`` (NaN → overlap 0).

    Examples
    --------
    >>> from sigmap_lib.overlap import toy_overlap
    >>> from sigmap_lib.reporting import dendrogram
    >>> path = dendrogram(toy_overlap()[0], "performance_dendrogram.png")
    >>> path.name, path.stat().st_size > 0
    ('performance_dendrogram.png', True)
    """
    plt = pyplot()
    from scipy.cluster.hierarchy import dendrogram as scipy_dendrogram

    from sigmap_lib.overlap import cluster

    b = len(matrix.labels)
    if b < 2:
        raise SigmapInputError("dendrogram: need at least 2 benchmarks")
    res = cluster(matrix, fill_nan=0.0)
    fig, ax = plt.subplots(figsize=(min(24.0, 3 + 0.25 * b), 4.5))
    scipy_dendrogram(
        res.linkage,
        labels=list(res.labels),
        ax=ax,
        leaf_rotation=90,
        leaf_font_size=max(4, min(10, int(220 / b))),
        color_threshold=None,
    )
    ax.set_ylabel("1 − overlap (average linkage)")
    ax.set_title(title or f"{matrix.level} overlap: clustering")
    return save_png(fig, path)


def level_distributions(
    levels: Mapping[str, OverlapMatrix | np.ndarray], path: str | Path, *, title: str = ""
) -> Path:
    """The off-diagonal values of several levels side by side (violin + box + points).

    Parameters
    ----------
    levels : mapping name -> OverlapMatrix or 1-D array of values

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import toy_overlap
    >>> from sigmap_lib.reporting import level_distributions
    >>> m, _ = toy_overlap()
    >>> semantic = np.array([0.15, 0.3, 0.22, 0.4, 0.35, 0.18])  # or a second OverlapMatrix
    >>> level_distributions({"semantic": semantic, "performance": m}, "levels.png")
    PosixPath('levels.png')
    """
    plt = pyplot()
    names, data = [], []
    for name, m in levels.items():
        v = m.off_diagonal() if isinstance(m, OverlapMatrix) else np.asarray(m, dtype=float).ravel()
        v = v[np.isfinite(v)]
        if v.size:
            names.append(str(name))
            data.append(v)
    if not data:
        raise SigmapInputError("level_distributions: no finite values in any level")
    fig, ax = plt.subplots(figsize=(2.2 + 1.8 * len(data), 4.5))
    pos = np.arange(1, len(data) + 1)
    multi = [i for i, d in enumerate(data) if d.size > 1 and np.ptp(d) > 0]
    if multi:
        ax.violinplot([data[i] for i in multi], positions=pos[multi], showextrema=False)
    ax.boxplot(data, positions=pos, widths=0.15, showfliers=False)
    rng = np.random.default_rng(0)
    for p, d in zip(pos, data):
        ax.scatter(p + rng.uniform(-0.08, 0.08, d.size), d, s=6, alpha=0.5, color="k")
    ax.set_xticks(pos, [f"{n}\n(n={d.size})" for n, d in zip(names, data)])
    ax.axhspan(0.1, 0.4, color="orange", alpha=0.08, label="0.1–0.4")
    ax.set_ylabel("pairwise overlap (off-diagonal)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or "overlap values per level")
    return save_png(fig, path)


def correlation_histogram(
    edges: np.ndarray, counts: np.ndarray, path: str | Path, title: str = "", *, log: bool = True
) -> Path:
    """Histogram from precomputed bin ``edges`` ``(k+1,)`` and ``counts`` ``(k,)``
    (e.g. the screening correlations of all corpus units), log count axis by default.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.reporting import correlation_histogram
    >>> r = np.random.default_rng(0).normal(0, 0.1, size=10_000)  # e.g. screening correlations
    >>> counts, edges = np.histogram(r, bins=40)
    >>> correlation_histogram(edges, counts, "correlations.png", title="unit-score correlations")
    PosixPath('correlations.png')
    """
    plt = pyplot()
    edges = np.asarray(edges, dtype=float)
    counts = np.asarray(counts, dtype=float)
    if edges.ndim != 1 or counts.ndim != 1 or edges.size != counts.size + 1:
        raise SigmapInputError(
            f"correlation_histogram: need edges (k+1,) and counts (k,), got {edges.shape} and {counts.shape}"
        )
    if not np.all(np.diff(edges) > 0):
        raise SigmapInputError("correlation_histogram: edges must be strictly increasing")
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.stairs(counts, edges, fill=True, alpha=0.7)
    if log and (counts > 0).any():
        ax.set_yscale("log")
    ax.set_xlabel("correlation")
    ax.set_ylabel("units")
    ax.set_title(title, fontsize=9)
    fig.subplots_adjust(left=0.12, bottom=0.15, right=0.97, top=0.9)
    return save_png(fig, path, tight=False)  # the margins above fit the labels and title


def scatter_true_vs_pred(
    true: np.ndarray,
    pred: np.ndarray,
    path: str | Path,
    title: str = "",
    *,
    xlabel: str = "true score",
    ylabel: str = "reconstructed score",
) -> Path:
    """Scatter of predicted vs true values with the identity line, RMSE and Spearman ρ.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.reporting import scatter_true_vs_pred
    >>> rng = np.random.default_rng(0)
    >>> true = rng.uniform(20, 80, size=50)
    >>> pred = true + rng.normal(0, 3, size=50)
    >>> scatter_true_vs_pred(true, pred, "reconstruction.png", title="arc")  # RMSE, rho in title
    PosixPath('reconstruction.png')
    """
    plt = pyplot()
    from scipy.stats import spearmanr

    t = np.asarray(true, dtype=float).ravel()
    p = np.asarray(pred, dtype=float).ravel()
    if t.shape != p.shape or t.size == 0:
        raise SigmapInputError(
            f"scatter_true_vs_pred: true {t.shape} and pred {p.shape} must be equal, non-empty"
        )
    ok = np.isfinite(t) & np.isfinite(p)
    t, p = t[ok], p[ok]
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(t, p, s=6, alpha=0.5)
    lo = float(min(t.min(), p.min())) if t.size else 0.0
    hi = float(max(t.max(), p.max())) if t.size else 1.0
    ax.plot([lo, hi], [lo, hi], color="k", lw=1)
    rmse = float(np.sqrt(np.mean((t - p) ** 2))) if t.size else float("nan")
    rho = float(spearmanr(t, p).statistic) if t.size > 2 else float("nan")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(
        (title + "\n" if title else "") + f"RMSE {rmse:.3g}, Spearman ρ {rho:.3f}, n={t.size}"
    )
    return save_png(fig, path)

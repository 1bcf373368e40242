"""Labelled square overlap matrices and their Spearman / bootstrap helpers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError

# ---------------------------------------------------------------------------------------
# The result type
# ---------------------------------------------------------------------------------------

#: The three overlap levels, in the order the report and every table list them.
LEVELS: tuple[str, ...] = ("semantic", "performance", "signature")


@dataclass
class OverlapMatrix:
    """A labelled square overlap matrix.

    Attributes
    ----------
    labels : tuple of str
        Benchmark names, in row/column order.
    values : np.ndarray
        ``(B, B)`` float64, symmetric, diagonal 1; NaN where undefined.
    n_common : np.ndarray or None
        ``(B, B)`` int64: the number of observations behind each value (common models
        for performance/signature overlap, questions per bootstrap draw for semantic).
    level : str
        ``"semantic"``, ``"performance"``, ``"signature"`` or free text.
    extra : dict
        Level-specific extras (documented by the producing function).
    """

    labels: tuple[str, ...]
    values: np.ndarray
    n_common: np.ndarray | None = None
    level: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = tuple(str(x) for x in self.labels)
        self.values = np.asarray(self.values, dtype=np.float64)
        b = len(self.labels)
        if self.values.shape != (b, b):
            raise SigmapInputError(
                f"OverlapMatrix: values have shape {self.values.shape}, expected ({b}, {b}) for {b} labels"
            )
        if len(set(self.labels)) != b:
            raise SigmapInputError(f"OverlapMatrix: duplicate labels in {list(self.labels)}")
        if self.n_common is not None:
            self.n_common = np.asarray(self.n_common, dtype=np.int64)
            if self.n_common.shape != (b, b):
                raise SigmapInputError(
                    f"OverlapMatrix: n_common has shape {self.n_common.shape}, expected ({b}, {b})"
                )

    def __len__(self) -> int:
        return len(self.labels)

    def index(self, label: str) -> int:
        """Position of ``label`` (raises :class:`SigmapInputError` when unknown)."""
        try:
            return self.labels.index(label)
        except ValueError:
            raise SigmapInputError(
                f"benchmark {label!r} is not in the overlap matrix (have {list(self.labels)})"
            ) from None

    def get(self, a: str, b: str) -> float:
        """The overlap value of benchmarks ``a`` and ``b``."""
        return float(self.values[self.index(a), self.index(b)])

    def off_diagonal(self) -> np.ndarray:
        """Upper-triangle values (``i < j``) in row-major order, NaNs included."""
        iu = np.triu_indices(len(self.labels), k=1)
        return self.values[iu]

    def pairs(self) -> list[tuple[str, str]]:
        """Label pairs ``(a, b)`` matching :meth:`off_diagonal`."""
        iu = np.triu_indices(len(self.labels), k=1)
        return [(self.labels[i], self.labels[j]) for i, j in zip(*iu)]

    def subset(self, labels: Sequence[str]) -> OverlapMatrix:
        """The sub-matrix of ``labels`` (in that order); ``extra`` keeps only square
        ``(B, B)`` arrays (re-indexed) and per-benchmark ``(B,)`` arrays."""
        idx = np.array([self.index(x) for x in labels], dtype=np.int64)
        b = len(self.labels)
        extra: dict[str, Any] = {}
        for k, v in self.extra.items():
            if isinstance(v, np.ndarray) and v.shape == (b, b):
                extra[k] = v[np.ix_(idx, idx)]
            elif isinstance(v, np.ndarray) and v.shape == (b,):
                extra[k] = v[idx]
        return OverlapMatrix(
            labels=tuple(labels),
            values=self.values[np.ix_(idx, idx)],
            n_common=None if self.n_common is None else self.n_common[np.ix_(idx, idx)],
            level=self.level,
            extra=extra,
        )

    def to_frame(self):
        """Wide polars DataFrame: column ``benchmark`` then one float column per label."""
        import polars as pl

        data: dict[str, Any] = {"benchmark": list(self.labels)}
        for j, lab in enumerate(self.labels):
            data[lab] = self.values[:, j]
        return pl.DataFrame(data)

    def to_long(self, include_diagonal: bool = False):
        """Long polars DataFrame of the pairs ``a < b`` (row order): columns ``a``, ``b``,
        ``value``, ``n_common`` (if any) and every square ``(B, B)`` array of ``extra``."""
        import polars as pl

        b = len(self.labels)
        iu = np.triu_indices(b, k=0 if include_diagonal else 1)
        data: dict[str, Any] = {
            "a": [self.labels[i] for i in iu[0]],
            "b": [self.labels[j] for j in iu[1]],
            "value": self.values[iu],
        }
        if self.n_common is not None:
            data["n_common"] = self.n_common[iu]
        for k, v in self.extra.items():
            if (
                isinstance(v, np.ndarray)
                and v.shape == (b, b)
                and np.issubdtype(v.dtype, np.number)
            ):
                data[k] = v[iu]
        return pl.DataFrame(data)

    @classmethod
    def from_frame(cls, frame, level: str = "") -> OverlapMatrix:
        """Inverse of :meth:`to_frame` (polars or pandas wide frame with ``benchmark``)."""
        import polars as pl

        if not isinstance(frame, pl.DataFrame):
            frame = pl.from_pandas(frame)
        if "benchmark" not in frame.columns:
            raise SigmapInputError("overlap frame has no 'benchmark' column")
        labels = [str(x) for x in frame["benchmark"].to_list()]
        missing = [x for x in labels if x not in frame.columns]
        if missing:
            raise SigmapInputError(f"overlap frame lacks columns for benchmarks {missing}")
        values = frame.select(labels).to_numpy().astype(np.float64)
        return cls(labels=tuple(labels), values=values, level=level)


# ---------------------------------------------------------------------------------------
# Helpers: ranks and Spearman
# ---------------------------------------------------------------------------------------
def _rank_columns(x: np.ndarray) -> np.ndarray:
    """Average ranks of each column (no NaN allowed)."""
    from scipy.stats import rankdata

    return rankdata(x, axis=0, method="average")


def _pearson_columns(r: np.ndarray) -> np.ndarray:
    """Pearson correlation matrix of the columns of ``r``; NaN for constant columns."""
    c = r - r.mean(axis=0, keepdims=True)
    norm = np.sqrt((c * c).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        u = c / norm
        out = u.T @ u
    bad = ~(norm > 1e-12 * max(1.0, float(np.abs(r).max(initial=0.0))))
    out[bad, :] = np.nan
    out[:, bad] = np.nan
    return np.clip(out, -1.0, 1.0)


def spearman_matrix(x: np.ndarray, *, min_common: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise-complete Spearman correlations between the columns of ``x``.

    Parameters
    ----------
    x : np.ndarray
        ``(n_obs, k)`` float; NaN marks a missing value.
    min_common : int
        Pairs with fewer common (both-finite) rows get NaN.

    Returns
    -------
    rho : np.ndarray
        ``(k, k)`` Spearman ρ (ties get average ranks, as in ``scipy.stats.spearmanr``),
        diagonal 1 for non-constant columns; NaN where undefined (constant columns, too
        few common rows).
    n_common : np.ndarray
        ``(k, k)`` int64, rows where both columns are finite.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import spearman_matrix
    >>> x = np.array([[1.0, 2.0, 9.0], [2.0, 4.0, np.nan], [3.0, 3.0, 7.0], [4.0, 8.0, 6.0]])
    >>> rho, n_common = spearman_matrix(x)
    >>> np.round(rho, 3).tolist()
    [[1.0, 0.8, -1.0], [0.8, 1.0, -1.0], [-1.0, -1.0, 1.0]]
    >>> n_common.tolist()  # column 2 has one NaN
    [[4, 4, 3], [4, 4, 3], [3, 3, 3]]
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise SigmapInputError(
            f"spearman_matrix expects a 2-D (n_obs, k) array, got shape {x.shape}"
        )
    finite = np.isfinite(x)
    fin = finite.astype(np.int64)
    n_common = fin.T @ fin
    k = x.shape[1]
    if finite.all():
        rho = _pearson_columns(_rank_columns(x)) if x.shape[0] >= 2 else np.full((k, k), np.nan)
    else:
        rho = np.full((k, k), np.nan)
        for i in range(k):
            for j in range(i, k):
                mask = finite[:, i] & finite[:, j]
                if mask.sum() < 2:
                    continue
                sub = _rank_columns(x[mask][:, [i, j]])
                r = _pearson_columns(sub)[0, 1] if i != j else _pearson_columns(sub[:, :1])[0, 0]
                rho[i, j] = rho[j, i] = r
    low = n_common < min_common
    rho[low] = np.nan
    return rho, n_common


def bootstrap_ci(
    model_scores: np.ndarray | OverlapMatrix,
    *,
    labels: Sequence[str] | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> OverlapMatrix:
    """Percentile bootstrap intervals over models for a Spearman overlap matrix.

    Models (rows) are resampled with replacement; the Spearman matrix of the resampled
    columns is recomputed (ties from duplicated models get average ranks). The columns
    (e.g. signature scores) are held fixed, so the interval reflects which models were
    evaluated, not the uncertainty of signature selection (see
    :func:`signature_overlap_null` for that). Resamples where a column is constant are
    dropped for that pair.

    Parameters
    ----------
    model_scores : np.ndarray or OverlapMatrix
        ``(n_models, B)`` without NaN, or an :class:`OverlapMatrix` from
        :func:`signature_overlap` (its ``extra["model_scores"]``).
    labels : sequence of str, optional
        Column names (taken from the matrix when one is given).
    n_boot : int
        Bootstrap resamples; resample ``r`` uses row indices
        ``default_rng(seed).integers(0, n_models, (n_boot, n_models))[r]``.
    level : float
        Two-sided coverage, in (0, 1).
    seed : int

    Returns
    -------
    OverlapMatrix
        Values = the Spearman matrix of the full sample; ``extra["ci_low"]``,
        ``extra["ci_high"]``, ``extra["boot_sd"]`` ``(B, B)``, ``extra["n_boot"]``, ``extra["level"]``,
        ``extra["model_scores"]`` (the input ``(n_models, B)`` scores).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import bootstrap_ci
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=(40, 3))  # 40 models x 3 signature scores
    >>> s[:, 1] += s[:, 0]
    >>> ci = bootstrap_ci(s, labels=["arc", "mmlu", "gsm8k"], n_boot=200)
    >>> round(ci.get("arc", "mmlu"), 3)
    0.833
    >>> np.round([ci.extra["ci_low"][0, 1], ci.extra["ci_high"][0, 1]], 3).tolist()
    [0.712, 0.907]
    """
    if isinstance(model_scores, OverlapMatrix):
        if "model_scores" not in model_scores.extra:
            raise SigmapInputError(
                "bootstrap_ci: the overlap matrix carries no extra['model_scores']"
            )
        labels = model_scores.labels
        x = np.asarray(model_scores.extra["model_scores"], dtype=np.float64)
    else:
        x = np.asarray(model_scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3:
        raise SigmapInputError(
            f"bootstrap_ci: model_scores must be (n_models >= 3, B), got shape {x.shape}"
        )
    if not np.isfinite(x).all():
        raise SigmapInputError("bootstrap_ci: model_scores contain NaN/inf")
    if not 0 < level < 1:
        raise SigmapInputError(f"bootstrap_ci: level must be in (0, 1), got {level}")
    if n_boot < 2:
        raise SigmapInputError(f"bootstrap_ci: n_boot must be >= 2, got {n_boot}")
    m, nb = x.shape
    labels = [f"b{j}" for j in range(nb)] if labels is None else [str(v) for v in labels]
    if len(labels) != nb:
        raise SigmapInputError(f"bootstrap_ci: {len(labels)} labels for {nb} columns")
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, m, size=(n_boot, m))
    xb = x[idx]  # (n_boot, m, B)
    r = rankdata(xb, axis=1, method="average")
    r -= r.mean(axis=1, keepdims=True)
    norm = np.sqrt((r * r).sum(axis=1))  # (n_boot, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = r / norm[:, None, :]
        boots = np.einsum("rmi,rmj->rij", u, u)
    bad = norm <= 1e-12
    boots[bad[:, :, None] | bad[:, None, :]] = np.nan
    boots = np.clip(boots, -1.0, 1.0)
    alpha = (1.0 - level) / 2.0
    lo = np.nanquantile(boots, alpha, axis=0)
    hi = np.nanquantile(boots, 1.0 - alpha, axis=0)
    extra = {
        "ci_low": lo,
        "ci_high": hi,
        "boot_sd": np.nanstd(boots, axis=0, ddof=1),
        "n_boot": int(n_boot),
        "level": float(level),
        "model_scores": x,
    }
    return spearman_overlap(x, labels, "signature", min_common=3, extra=extra)


def spearman_overlap(
    x: np.ndarray, labels: Sequence[str], level: str, *, min_common: int, extra: dict[str, Any]
) -> OverlapMatrix:
    """The :class:`OverlapMatrix` of the Spearman ρ between the columns of ``x``
    (:func:`spearman_matrix`, diagonal set to 1), labelled ``labels``; ``n_common`` =
    the rows where both columns are finite."""
    rho, n = spearman_matrix(x, min_common=min_common)
    np.fill_diagonal(rho, 1.0)
    return OverlapMatrix(labels=tuple(labels), values=rho, n_common=n, level=level, extra=extra)


def toy_overlap(level: str = "performance") -> tuple[OverlapMatrix, dict[str, dict[str, str]]]:
    """A four-benchmark overlap matrix and its catalog metadata, for examples and tests.

    ``arc`` and ``arc_easy`` (family ARC, multiple choice, reasoning) overlap 0.8,
    ``gsm8k`` and ``math`` (generative, math; families of their own) 0.7, and the four
    cross-function pairs 0.1 to 0.3.

    Returns
    -------
    matrix : OverlapMatrix
        Labels ``arc, arc_easy, gsm8k, math``, level ``level``.
    meta : dict
        benchmark -> ``{"family", "format", "function"}``.

    Examples
    --------
    >>> from sigmap_lib.overlap import toy_overlap
    >>> m, meta = toy_overlap()
    >>> m.labels, m.level, m.values[0].tolist()
    (('arc', 'arc_easy', 'gsm8k', 'math'), 'performance', [1.0, 0.8, 0.2, 0.1])
    >>> meta["gsm8k"]
    {'family': 'GSM8K', 'format': 'gen', 'function': 'math'}
    """
    values = [[1, 0.8, 0.2, 0.1], [0.8, 1, 0.3, 0.2], [0.2, 0.3, 1, 0.7], [0.1, 0.2, 0.7, 1]]
    meta = {
        "arc": {"family": "ARC", "format": "mc", "function": "reasoning"},
        "arc_easy": {"family": "ARC", "format": "mc", "function": "reasoning"},
        "gsm8k": {"family": "GSM8K", "format": "gen", "function": "math"},
        "math": {"family": "MATH", "format": "gen", "function": "math"},
    }
    return OverlapMatrix(tuple(meta), np.array(values), level=level), meta


# ---------------------------------------------------------------------------------------
# Stored form: a parquet table of values beside an npz of the other arrays
# ---------------------------------------------------------------------------------------
def save_overlap_matrix(
    matrix: OverlapMatrix,
    table_path: Any,
    arrays_path: Any,
    extra_arrays: dict[str, Any] | None = None,
) -> Any:
    """Store an overlap matrix: its values as a wide parquet table (:meth:`to_frame`) and
    its common-model counts, ``extra_arrays`` and the why of benchmarks without a
    signature (``extra["no_signature"]``) as one npz; both written atomically.

    Parameters
    ----------
    matrix : OverlapMatrix
        ``(B, B)`` values with ``labels``.
    table_path, arrays_path : path-like
        Where the parquet table and the npz go.
    extra_arrays : dict, optional
        Name -> array stored beside the values (``(B, B)`` p-values, intervals, ...).

    Returns
    -------
    path-like
        ``table_path``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from sigmap_lib.overlap import load_overlap_matrix, save_overlap_matrix, toy_overlap
    >>> m, _ = toy_overlap()
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = save_overlap_matrix(m, d / "m.parquet", d / "m.npz", {"p_value": m.values * 0})
    >>> back = load_overlap_matrix(d / "m.parquet", d / "m.npz", level="performance")
    >>> back.labels == m.labels, bool(np.allclose(back.values, m.values))
    (True, True)
    >>> sorted(back.extra)
    ['p_value']
    """
    from sigmap_lib._util import atomic_file

    with atomic_file(table_path) as tmp:
        matrix.to_frame().write_parquet(tmp)
    arrays = {"values": matrix.values, "labels": np.array(matrix.labels)}
    if matrix.n_common is not None:
        arrays["n_common"] = matrix.n_common
    for k, v in (extra_arrays or {}).items():
        arrays[k] = np.asarray(v)
    no_sig = (matrix.extra or {}).get("no_signature") or {}
    if no_sig:  # benchmarks without a signature and why (NaN rows)
        arrays["no_signature_labels"] = np.array(list(no_sig), dtype=str)
        arrays["no_signature_reasons"] = np.array(list(no_sig.values()), dtype=str)
    with atomic_file(arrays_path, suffix=".tmp.npz") as tmp:
        np.savez(tmp, **arrays)
    return table_path


def load_overlap_matrix(table_path: Any, arrays_path: Any, level: str = "") -> OverlapMatrix:
    """Read a matrix :func:`save_overlap_matrix` stored (counts and extras included).

    Parameters
    ----------
    table_path, arrays_path : path-like
        The parquet table and the npz of one stored matrix.
    level : str
        The overlap level it is (``semantic``, ``performance``, ``signature``).

    Returns
    -------
    OverlapMatrix
        ``(B, B)`` values; ``extra`` holds the stored arrays and ``no_signature``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sigmap_lib.overlap import load_overlap_matrix, save_overlap_matrix, toy_overlap
    >>> m, _ = toy_overlap()
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = save_overlap_matrix(m, d / "m.parquet", d / "m.npz")
    >>> load_overlap_matrix(d / "m.parquet", d / "m.npz").values.shape == m.values.shape
    True
    """
    import polars as pl

    m = OverlapMatrix.from_frame(pl.read_parquet(table_path), level=level)
    npz = np.load(arrays_path, allow_pickle=False)
    if "n_common" in npz:
        m.n_common = npz["n_common"]
    m.extra.update({k: npz[k] for k in npz.files if k not in ("values", "labels", "n_common")})
    if "no_signature_labels" in npz:
        m.extra["no_signature"] = dict(
            zip(npz["no_signature_labels"].tolist(), npz["no_signature_reasons"].tolist())
        )
    return m


def pair_intervals(
    model_scores: np.ndarray,
    labels: Sequence[str],
    *,
    without: Sequence[str] = (),
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Bootstrap intervals (:func:`bootstrap_ci`) of the pairs whose columns have a score,
    as full ``(B, B)`` matrices with NaN where a column is in ``without``.

    Parameters
    ----------
    model_scores : np.ndarray
        ``(n_models, B)`` per-model scores of the ``B`` labels (columns of ``without``
        may be NaN).
    labels : sequence of str
        The ``B`` column names.
    without : sequence of str
        Labels without a score (e.g. benchmarks with an empty signature).
    n_boot, seed : int
        As in :func:`bootstrap_ci`.

    Returns
    -------
    dict
        ``{"ci_low", "ci_high"}``, each ``(B, B)``; empty when fewer than two labels have
        a score.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import pair_intervals
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(20, 3))
    >>> x[:, 2] = np.nan
    >>> ci = pair_intervals(x, ["a", "b", "c"], without=["c"], n_boot=50)
    >>> ci["ci_low"].shape, bool(np.isnan(ci["ci_low"][0, 2])), bool(ci["ci_low"][0, 1] <= 1)
    ((3, 3), True, True)
    >>> pair_intervals(x, ["a", "b", "c"], without=["b", "c"])
    {}
    """
    labels = list(labels)
    keep = [b for b in labels if b not in set(without)]
    if len(keep) < 2:
        return {}
    idx = [labels.index(b) for b in keep]
    ci = bootstrap_ci(np.asarray(model_scores)[:, idx], labels=keep, n_boot=n_boot, seed=seed)
    out = {}
    for name in ("ci_low", "ci_high"):
        full = np.full((len(labels), len(labels)), np.nan)
        full[np.ix_(idx, idx)] = ci.extra[name]
        out[name] = full
    return out

"""Stage 2 of a benchmark signature: greedy forward selection (METHODS.md §3).

Model: ``y_std = β₀ + Σ_{j∈S} β_j x_std,j + ε`` by OLS, where ``y`` and every candidate
column are standardized across the ``m`` models (mean 0, population sd 1, ``ddof=0``).
Starting from the intercept-only model, each step adds the candidate with the largest
reduction of the residual sum of squares; selection stops when the best candidate does
not lower the criterion (then no candidate does: the penalty is the same for all), when
``k = min(m − 3, max_features)``, when no admissible candidate is left, or (stop reason
``"perfect_fit"``) when the best candidate would leave ``RSS <= 1e-12·m`` (an
interpolating fit whose criterion is −∞; it is not added).

Criteria, with ``k`` selected features, ``RSS`` on the standardized scale:

* ``aic  = m·ln(RSS/m) + 2·(k + 1)``
* ``bic  = m·ln(RSS/m) + ln(m)·(k + 1)``
* ``ebic = bic + 2·γ·k·ln(p)`` (Chen & Chen 2008), ``p`` = number of candidates
  (``n_candidates`` unless ``ebic_p`` is given).

These equal statsmodels' ``OLS(...).fit().aic`` / ``.bic`` minus the constant
``m·(1 + ln 2π)``.

Algorithm (vectorized over candidate blocks): keep an orthonormal basis ``Q`` of the
constant and the selected columns, the residual ``r ⟂ Q``, and for every candidate the
squared norm of its part orthogonal to ``Q``, ``‖x̃_j‖² = ‖x_j‖² − Σ_i (q_iᵀx_j)²``.
Because ``r ⟂ Q``, ``x̃_jᵀr = x_jᵀr``, so the RSS reduction ``(x_jᵀr)²/‖x̃_j‖²`` of every
candidate needs one pass ``Xᵀ[r, q_new]`` per step: O(m·p) time, no rewriting of ``X``.
Candidates with ``‖x̃_j‖² ≤ collinear_tol·m`` (constant, or within the span of the
selected columns) are never picked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError

CRITERIA = ("aic", "bic", "ebic")


@dataclass
class SelectionResult:
    """Result of :func:`forward_select`.

    Attributes
    ----------
    selected : numpy.ndarray of int64, shape (k,)
        Candidate column indices in order of entry.
    coef : numpy.ndarray, shape (k,)
        OLS coefficients on the standardized scale (y and columns standardized).
    intercept_raw, coef_raw : float, numpy.ndarray (k,)
        The same fit on the original scale: ``y ≈ intercept_raw + X[:, selected] @ coef_raw``.
    criterion : str
    criterion_path : numpy.ndarray, shape (k + 1,)
        Criterion of the model with 0, 1, ..., k features.
    rss_path : numpy.ndarray, shape (k + 1,)
        Residual sum of squares (standardized scale) along the path; ``rss_path[0] = m``.
    r2, adj_r2 : float
        In-sample R² and adjusted R² of the final model.
    stop_reason : str
        ``"criterion"``, ``"max_features"``, ``"no_candidates"`` or ``"perfect_fit"``.
    n_models, n_candidates : int
    n_excluded : int
        Candidates that were constant across models (never admissible).
    """

    selected: np.ndarray
    coef: np.ndarray
    intercept_raw: float
    coef_raw: np.ndarray
    criterion: str
    criterion_path: np.ndarray
    rss_path: np.ndarray
    r2: float
    adj_r2: float
    stop_reason: str
    n_models: int
    n_candidates: int
    n_excluded: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        return int(self.selected.size)


def criterion_value(rss: float, m: int, k: int, criterion: str, *, p: int, gamma: float) -> float:
    """Criterion of an OLS model with intercept + ``k`` features (see module docstring).

    ``rss`` is on the standardized scale, ``m`` the number of models, ``p`` the EBIC
    search-space size and ``gamma`` its γ (both ignored by ``"aic"`` and ``"bic"``).

    Examples
    --------
    >>> from sigmap_lib.signatures import criterion_value
    >>> round(criterion_value(2.0, 10, 1, "aic", p=100, gamma=0.5), 3)  # 10·ln(0.2) + 2·2
    -12.094
    >>> round(criterion_value(2.0, 10, 1, "ebic", p=100, gamma=0.5), 3)
    -6.884
    """
    base = m * math.log(rss / m)
    if criterion == "aic":
        return base + 2.0 * (k + 1)
    pen = math.log(m) * (k + 1)
    if criterion == "bic":
        return base + pen
    return base + pen + 2.0 * gamma * k * math.log(max(p, 1))


def standardize_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns centred and divided by their population sd (constant columns left at 0).

    Returns ``(z, mean, sd)`` with ``z`` float64 ``(m, p)``.
    """
    mean = x.mean(axis=0)
    z = x - mean
    sd = np.sqrt((z * z).mean(axis=0))
    ok = sd > 0
    z[:, ok] /= sd[ok]
    z[:, ~ok] = 0.0
    return z, mean, sd


def forward_select(
    X: Any,
    y: Any,
    criterion: str = "aic",
    *,
    max_features: int | None = None,
    gamma: float = 0.5,
    ebic_p: int | None = None,
    collinear_tol: float = 1e-8,
    block: int = 1 << 16,
) -> SelectionResult:
    """Greedy forward stepwise OLS with an information criterion.

    Parameters
    ----------
    X : array_like, shape (n_models, n_candidates)
        Candidate columns (e.g. each candidate unit's per-model values); finite.
    y : array_like, shape (n_models,)
        Benchmark scores (finite; subset the models beforehand).
    criterion : {"aic", "bic", "ebic"}
    max_features : int, optional
        Extra cap on ``k`` (always ``k <= n_models − 3``).
    gamma : float
        EBIC γ in [0, 1].
    ebic_p : int, optional
        Size of the search space in the EBIC penalty (default ``n_candidates``).
    collinear_tol : float
        Candidates whose part orthogonal to the current model has squared norm
        ``<= collinear_tol · n_models`` are skipped.
    block : int
        Candidate columns per vectorized block (bounds temporaries to ``O(m·block)``).

    Returns
    -------
    SelectionResult

    Examples
    --------
    Twelve models, five candidate columns; the scores follow column 3:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import forward_select
    >>> rng = np.random.default_rng(1)
    >>> X = rng.standard_normal((12, 5))  # (n_models, n_candidates)
    >>> y = 2.0 * X[:, 3] + 0.5 * rng.standard_normal(12)
    >>> res = forward_select(X, y, "bic")
    >>> res.selected.tolist(), res.stop_reason, round(res.r2, 3)
    ([3], 'criterion', 0.969)
    >>> np.round(res.coef_raw, 2).tolist()  # y ≈ intercept_raw + X[:, selected] @ coef_raw
    [2.15]
    """
    if criterion not in CRITERIA:
        raise SigmapInputError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    if not 0.0 <= gamma <= 1.0:
        raise SigmapInputError(f"ebic gamma must be in [0, 1], got {gamma}")
    xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if xa.ndim != 2:
        raise SigmapInputError(f"X must be (n_models, n_candidates), got shape {xa.shape}")
    if ya.ndim != 1 or ya.shape[0] != xa.shape[0]:
        raise SigmapInputError(
            f"y must be (n_models,) = ({xa.shape[0]},) to match X, got shape {ya.shape}"
        )
    m, p = xa.shape
    if m < 4:
        raise SigmapInputError(f"forward selection needs at least 4 models, got {m}")
    if not np.isfinite(xa).all():
        raise SigmapInputError("X contains NaN or inf")
    if not np.isfinite(ya).all():
        raise SigmapInputError("y contains NaN or inf; drop unscored models first")
    y_mean = ya.mean()
    y_sd = ya.std()
    if y_sd == 0:
        raise SigmapInputError("y is constant across models; nothing to select")
    ys = (ya - y_mean) / y_sd
    # candidate-major copy (p, m): every block of candidates is contiguous for the GEMMs
    zt = np.array(xa.T, dtype=np.float64, order="C")
    del xa
    x_mean = zt.mean(axis=1)
    zt -= x_mean[:, None]
    x_sd = np.sqrt(np.einsum("ij,ij->i", zt, zt) / m)
    ok = x_sd > 0
    zt[ok] /= x_sd[ok, None]
    zt[~ok] = 0.0
    cap = m - 3 if max_features is None else min(m - 3, int(max_features))
    if cap < 0:
        raise SigmapInputError(f"max_features must be >= 0, got {max_features}")
    pp = p if ebic_p is None else int(ebic_p)

    norms = np.where(x_sd > 0, float(m), 0.0)  # ‖x̃_j‖², standardized columns have ‖x‖² = m
    admissible = norms > collinear_tol * m
    n_excluded = int((~admissible).sum())
    r = ys.copy()
    basis: list[np.ndarray] = []
    selected: list[int] = []
    rss = float(r @ r)
    rss_path = [rss]
    crit_path = [criterion_value(rss, m, 0, criterion, p=pp, gamma=gamma)]
    stop = "max_features" if cap == 0 else "criterion"
    xr = _xt(zt, r[:, None], block)[:, 0]  # x_jᵀ r for all j

    while len(selected) < cap:
        gain = np.zeros(p)
        np.divide(xr * xr, norms, out=gain, where=admissible)
        gain[~admissible] = -1.0
        j = int(np.argmax(gain))
        if gain[j] < 0:
            stop = "no_candidates"
            break
        # exact orthogonalization of the chosen column (two passes of Gram–Schmidt)
        v = zt[j].copy()
        for _ in range(2):
            for q in basis:
                v -= (q @ v) * q
        nv = float(np.sqrt(v @ v))
        if nv * nv <= collinear_tol * m:  # drifted below the guard: exclude and retry
            admissible[j] = False
            continue
        q_new = v / nv
        r_new = r - (q_new @ r) * q_new
        rss_new = float(r_new @ r_new)
        k_new = len(selected) + 1
        if rss_new <= 1e-12 * m:  # the next model would interpolate y: stop before it
            stop = "perfect_fit"
            break
        c_new = criterion_value(rss_new, m, k_new, criterion, p=pp, gamma=gamma)
        if not c_new < crit_path[-1]:
            stop = "criterion"
            break
        selected.append(j)
        basis.append(q_new)
        r = r_new
        rss_path.append(rss_new)
        crit_path.append(c_new)
        both = _xt(zt, np.stack([r, q_new], axis=1), block)
        xr = both[:, 0]
        norms -= both[:, 1] ** 2
        admissible[j] = False
        admissible &= norms > collinear_tol * m
        if len(selected) >= cap:
            stop = "max_features"
    sel = np.asarray(selected, dtype=np.int64)
    if sel.size:
        design = np.column_stack([np.ones(m), zt[sel].T])
        beta, *_ = np.linalg.lstsq(design, ys, rcond=None)
        coef = beta[1:]
        coef_raw = coef * y_sd / x_sd[sel]
        intercept_raw = float(y_mean - (coef_raw * x_mean[sel]).sum())
    else:
        coef = np.zeros(0)
        coef_raw = np.zeros(0)
        intercept_raw = float(y_mean)
    rss_final = rss_path[-1]
    r2 = 1.0 - rss_final / m
    k = int(sel.size)
    adj = 1.0 - (1.0 - r2) * (m - 1) / (m - k - 1)
    return SelectionResult(
        selected=sel,
        coef=coef,
        intercept_raw=intercept_raw,
        coef_raw=coef_raw,
        criterion=criterion,
        criterion_path=np.asarray(crit_path),
        rss_path=np.asarray(rss_path),
        r2=float(r2),
        adj_r2=float(adj),
        stop_reason=stop,
        n_models=m,
        n_candidates=p,
        n_excluded=n_excluded,
    )


def _xt(zt: np.ndarray, v: np.ndarray, block: int) -> np.ndarray:
    """``z v`` for candidate-major ``zt (p, m)`` and ``v (m, c)``, in row blocks."""
    p = zt.shape[0]
    out = np.empty((p, v.shape[1]))
    for s in range(0, p, block):
        np.matmul(zt[s : s + block], v, out=out[s : s + block])
    return out

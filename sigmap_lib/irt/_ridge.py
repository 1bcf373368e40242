"""Ridge regression with an unpenalised intercept and exact leave-one-out predictions.

Used for metabench's "linear predictor" of a benchmark's full score from the 0/1 answers
to its selected items (the ``.l`` covariates of the original ``meta.R``). The penalty is
chosen by exact leave-one-out error, which for penalised least squares needs one SVD:
with the centred design ``Xc = U S V'``, the hat matrix is
``H = 11'/n + U diag(s² / (s² + α)) U'`` and the leave-one-out residual of row i is
``(y_i − ŷ_i) / (1 − H_ii)`` — exact, not an approximation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sigmap_lib.errors import SigmapInputError

#: penalty grid, as multiples of the mean squared singular value of the centred design
RELATIVE_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-4, 2, 25))


def design_matrix(x: np.ndarray, p: int, what: str) -> np.ndarray:
    """``x`` as a float ``(n, p)`` array; any other shape is an error naming ``what``."""
    arr = np.asarray(x, float)
    if arr.ndim != 2 or arr.shape[1] != p:
        raise SigmapInputError(f"{what}: expected shape (n, {p}), got {arr.shape}")
    return arr


@dataclass
class RidgeFit:
    """A fitted ridge regression ``y ≈ intercept + x @ coef``.

    Attributes
    ----------
    coef : ndarray, shape (p,)
    intercept : float
    alpha : float
        Chosen penalty (on ``||coef||²``; the intercept is not penalised).
    loo_rmse : dict[float, float]
        Leave-one-out RMSE for every penalty tried.
    loo_pred : ndarray, shape (n,)
        Each training row's prediction from the fit without that row.
    """

    coef: np.ndarray
    intercept: float
    alpha: float
    loo_rmse: dict[float, float]
    loo_pred: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions, shape ``(n,)``, for ``x`` of shape ``(n, p)``."""
        return self.intercept + design_matrix(x, len(self.coef), "ridge predict") @ self.coef


def fit_ridge(
    x: np.ndarray,
    y: np.ndarray,
    *,
    alphas: tuple[float, ...] | None = None,
    what: str = "ridge",
) -> RidgeFit:
    """Ridge regression with the penalty chosen by exact leave-one-out error.

    Parameters
    ----------
    x : ndarray, shape (n, p)
        Design without an intercept column (finite values).
    y : ndarray, shape (n,)
    alphas : penalties to try; default ``RELATIVE_ALPHAS`` times the mean squared
        singular value of the centred ``x`` (a scale-free grid).
    what : label for error messages.

    Returns
    -------
    RidgeFit

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.irt import fit_ridge
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(50, 3))
    >>> y = 2 + x @ np.array([1.0, -0.5, 0.0]) + rng.normal(0, 0.1, size=50)
    >>> rf = fit_ridge(x, y)
    >>> rf.coef.round(2).tolist(), round(rf.intercept, 2)
    ([1.02, -0.51, 0.01], 1.99)
    >>> rf.loo_pred.shape, round(rf.loo_rmse[rf.alpha], 3)  # exact leave-one-out
    ((50,), 0.1)
    """
    xa = np.asarray(x, float)
    ya = np.asarray(y, float).reshape(-1)
    if xa.ndim != 2:
        raise SigmapInputError(f"{what}: x must be 2-D (n, p), got shape {xa.shape}")
    n = len(ya)
    if len(xa) != n:
        raise SigmapInputError(f"{what}: x has {len(xa)} rows but y has {n}")
    if n < 3:
        raise SigmapInputError(f"{what}: need at least 3 observations, got {n}")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise SigmapInputError(f"{what}: x or y contains NaN/inf")
    xm, ym = xa.mean(axis=0), ya.mean()
    u, s, vt = np.linalg.svd(xa - xm, full_matrices=False)
    keep = s > s.max(initial=0.0) * 1e-12
    u, s, vt = u[:, keep], s[keep], vt[keep]
    uty = u.T @ (ya - ym)
    u2 = u**2
    s2 = s**2
    if alphas is None:
        scale = float(s2.mean()) if len(s2) else 1.0
        alphas = tuple(scale * a for a in RELATIVE_ALPHAS)
    if not alphas or min(alphas) <= 0:
        raise SigmapInputError(f"{what}: penalties must be positive, got {alphas}")
    loo: dict[float, float] = {}
    best: tuple[float, float, np.ndarray] | None = None
    for a in alphas:
        shrink = s2 / (s2 + a)
        fitted = ym + u @ (shrink * uty)
        h = 1.0 / n + u2 @ shrink
        pred = ya - (ya - fitted) / (1.0 - h)
        err = float(np.sqrt(np.mean((pred - ya) ** 2)))
        loo[float(a)] = err
        if best is None or err < best[0]:
            best = (err, float(a), pred)
    assert best is not None
    _, alpha, loo_pred = best
    coef = vt.T @ (s / (s2 + alpha) * uty)
    return RidgeFit(
        coef=coef,
        intercept=float(ym - xm @ coef),
        alpha=alpha,
        loo_rmse=loo,
        loo_pred=loo_pred,
    )

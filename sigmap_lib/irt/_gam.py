"""Additive-model score reconstruction: normalized score ~ s(x1) + s(x2) + ...

:func:`fit_gam` fits a Gaussian GAM with statsmodels ``GLMGam`` (cubic B-spline smooths,
one per covariate, second-derivative penalty) and chooses the smoothing weight ``alpha``
by K-fold cross-validation over a log grid (one common alpha for all smooths, covariates
standardised first so one grid fits all scales). This replaces mgcv's adaptive smoother
``s(x, bs = "ad")`` of the original metabench pipeline.

:func:`fit_pspline` is a fast NumPy P-spline (fixed penalty, one covariate) used where
thousands of fits are needed (the random-subsampling stage).

Predictions clip covariates to the training range (constant extrapolation), which keeps
a spline from running away for a model outside the calibration population.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import ClassVar, Self

import numpy as np

from sigmap_lib._util._checks import array_like
from sigmap_lib._util._threads import single_blas_thread
from sigmap_lib.errors import SigmapInputError

DEFAULT_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-6, 3, 10))


def _as_2d(x: np.ndarray, what: str) -> np.ndarray:
    return array_like(
        x, f"{what}: covariates", ndim=2, shape="1-D or 2-D (n, k)", promote_1d=True, finite=True
    )


@dataclass(frozen=True)
class TrainingScale:
    """Covariates standardised with the training mean and sd (an sd of 0 counts as 1),
    clipped to the training range first: constant extrapolation outside it.

    Attributes
    ----------
    center, scale, lo, hi : numpy.ndarray, shape (k,)
        The training mean, sd, minimum and maximum of each covariate.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.irt import TrainingScale
    >>> scaling = TrainingScale.fit(np.array([[0.0, 5.0], [2.0, 5.0]]))
    >>> scaling.transform(np.array([[1.0, 5.0], [9.0, 0.0]])).tolist()  # 9 clips to 2
    [[0.0, 0.0], [1.0, 0.0]]
    """

    center: np.ndarray
    scale: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> TrainingScale:
        """The scaling of training covariates ``x`` of shape ``(n, k)``."""
        scale = x.std(axis=0)
        scale[scale == 0] = 1.0
        return cls(center=x.mean(axis=0), scale=scale, lo=x.min(axis=0), hi=x.max(axis=0))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """``(clip(x, lo, hi) − center) / scale``, shape of ``x``; the training rows
        themselves are only standardised."""
        return (np.clip(x, self.lo, self.hi) - self.center) / self.scale


class TrainedOnArrays:
    """A regression kept as its training arrays and a few hyper-parameters: saved as plain
    arrays (``x_train``, ``y_train`` and :meth:`to_dict`) and refitted bit-for-bit on load
    (:meth:`from_arrays`).

    A subclass (a dataclass with ``x_train``, ``y_train``, its hyper-parameters and its RMSE
    table as fields) declares ``hyper`` (hyper-parameter -> type), ``rmse_table`` (the field
    with the RMSE of every penalty tried), ``kind`` (the tag it is saved under; None: none)
    and ``what`` (its name in error messages).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.irt import GamModel
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0.0, 1.0, size=(40, 1))
    >>> y = np.sin(3.0 * x[:, 0]) + rng.normal(0.0, 0.1, 40)
    >>> gam = GamModel(x_train=x, y_train=y, alpha=1.0, df=6, degree=3)
    >>> gam.to_dict()
    {'alpha': 1.0, 'df': 6, 'degree': 3, 'cv_rmse': {}}
    >>> again = GamModel.from_arrays(gam.x_train, gam.y_train, gam.to_dict())
    >>> bool(np.array_equal(again.predict(x), gam.predict(x)))
    True
    """

    hyper: ClassVar[dict[str, type]]
    rmse_table: ClassVar[str]
    kind: ClassVar[str | None] = None
    what: ClassVar[str]
    x_train: np.ndarray
    y_train: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])

    def covariates(self, x: np.ndarray) -> np.ndarray:
        """``x`` as finite ``(n, n_features)`` covariates (``(n,)`` counts as one), or one line."""
        arr = _as_2d(x, f"{self.what} predict")
        if arr.shape[1] != self.n_features:
            raise SigmapInputError(
                f"{self.what} predict: expected {self.n_features} covariates, got {arr.shape[1]}"
            )
        return arr

    def to_dict(self) -> dict:
        out: dict = {} if self.kind is None else {"kind": self.kind}
        out |= {k: getattr(self, k) for k in self.hyper}
        out[self.rmse_table] = {str(k): v for k, v in getattr(self, self.rmse_table).items()}
        return out

    @classmethod
    def from_arrays(cls, x: np.ndarray, y: np.ndarray, meta: dict) -> Self:
        params = {k: cast(meta[k]) for k, cast in cls.hyper.items()}
        table = {float(k): float(v) for k, v in meta.get(cls.rmse_table, {}).items()}
        return cls(  # type: ignore[call-arg]
            x_train=np.asarray(x, float),
            y_train=np.asarray(y, float),
            **params,
            **{cls.rmse_table: table},
        )


@dataclass
class GamModel(TrainedOnArrays):
    """A fitted Gaussian GAM (see :func:`fit_gam`); refittable from its stored inputs.

    Attributes
    ----------
    alpha : float
        Chosen penalty weight (common to all smooths).
    cv_rmse : dict[float, float]
        Cross-validated RMSE for every alpha tried (empty when alpha was given).
    x_train, y_train : training data (kept so the model can be saved as plain arrays
        and refitted bit-for-bit on load).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    alpha: float
    df: int
    degree: int
    cv_rmse: dict[float, float] = field(default_factory=dict)
    _res: object | None = field(default=None, repr=False)
    _scaling: TrainingScale | None = field(default=None, repr=False)
    hyper: ClassVar[dict[str, type]] = {"alpha": float, "df": int, "degree": int}
    rmse_table: ClassVar[str] = "cv_rmse"
    what: ClassVar[str] = "GAM"

    def __post_init__(self) -> None:
        if self._res is None:
            self._scaling = TrainingScale.fit(self.x_train)
            z = self._scaling.transform(self.x_train)
            self._res = _glmgam_fit(z, self.y_train, self.alpha, self.df, self.degree)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted scores, shape ``(n,)``, for covariates ``(n, k)`` (or ``(n,)`` if k = 1)."""
        assert self._scaling is not None
        z = self._scaling.transform(self.covariates(x))
        return np.asarray(self._res.predict(exog=np.ones((len(z), 1)), exog_smooth=z), dtype=float)


def _glmgam_fit(z: np.ndarray, y: np.ndarray, alpha: float, df: int, degree: int):
    """The GLMGam fit on standardised covariates ``z``."""
    with single_blas_thread():
        return _glmgam_fit_impl(z, y, alpha, df, degree)


def _glmgam_fit_impl(z: np.ndarray, y: np.ndarray, alpha: float, df: int, degree: int):
    import statsmodels.api as sm
    from statsmodels.gam.api import BSplines, GLMGam

    k = z.shape[1]
    smoother = BSplines(z, df=[df] * k, degree=[degree] * k, include_intercept=False)
    model = GLMGam(
        y,
        exog=np.ones((len(y), 1)),
        smoother=smoother,
        alpha=[alpha] * k,
        family=sm.families.Gaussian(),
    )
    # With tied covariates (e.g. θ of a sum-score estimator) some B-spline columns are
    # empty: statsmodels warns that the *unpenalised* design is rank-deficient, but the
    # penalty makes the fit unique, so that warning (emitted once per fit, hundreds of times
    # in a pipeline run) is silenced here and only here.
    from statsmodels.tools.sm_exceptions import SingularMatrixWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularMatrixWarning)
        return model.fit()


def fit_gam(
    x: np.ndarray,
    y: np.ndarray,
    *,
    alpha: float | None = None,
    alphas: tuple[float, ...] = DEFAULT_ALPHAS,
    df: int = 20,
    degree: int = 3,
    n_folds: int = 5,
    seed: int = 0,
    what: str = "GAM",
) -> GamModel:
    """Fit ``y ~ s(x_1) + ... + s(x_k)`` with cross-validated smoothing.

    Parameters
    ----------
    x : ndarray, shape (n,) or (n, k)
        Covariates (e.g. theta, or all benchmarks' thetas).
    y : ndarray, shape (n,)
        Target (normalized score, 0-100).
    alpha : float, optional
        Fixed penalty weight; when None it is chosen from ``alphas`` by ``n_folds``-fold CV.
    df, degree : B-spline basis size and degree per smooth.
    seed : fold assignment seed.
    what : label for error messages.

    Returns
    -------
    GamModel with ``.predict(x)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.irt import fit_gam
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=120)
    >>> score = 50 + 20 * np.tanh(theta) + rng.normal(0, 2, size=120)
    >>> gam = fit_gam(theta, score, df=8)  # alpha chosen by 5-fold CV
    >>> gam.alpha, len(gam.cv_rmse)
    (0.01, 10)
    >>> gam.predict(np.array([-1.0, 0.0, 1.0])).round(1).tolist()  # truth 34.8, 50.0, 65.2
    [34.6, 50.0, 64.4]
    >>> gam.predict(np.array([-10.0, 10.0])).round(1).tolist()  # clipped to the training range
    [29.8, 69.8]
    """
    xa = _as_2d(x, what)
    ya = np.asarray(y, dtype=float).reshape(-1)
    if len(ya) != len(xa):
        raise SigmapInputError(f"{what}: x has {len(xa)} rows but y has {len(ya)}")
    if not np.all(np.isfinite(ya)):
        raise SigmapInputError(f"{what}: target contains NaN/inf")
    if len(ya) < max(4 * df, 20):
        raise SigmapInputError(
            f"{what}: need at least {max(4 * df, 20)} observations, got {len(ya)}"
        )
    cv: dict[float, float] = {}
    if alpha is None:
        with single_blas_thread():
            cv = _cv_alphas(xa, ya, alphas, df, degree, n_folds, seed)
        alpha = min(cv, key=cv.get)
    return GamModel(x_train=xa, y_train=ya, alpha=float(alpha), df=df, degree=degree, cv_rmse=cv)


def _cv_alphas(
    x: np.ndarray,
    y: np.ndarray,
    alphas: tuple[float, ...],
    df: int,
    degree: int,
    n_folds: int,
    seed: int,
) -> dict[float, float]:
    """K-fold CV RMSE of the GLMGam penalised least-squares fit for each alpha.

    For the Gaussian family GLMGam's PIRLS reduces to one penalised least-squares solve
    ``(X'X + 2 P(alpha)) beta = X'y`` (statsmodels doubles the penalty matrix); we build
    GLMGam's design and penalty once and solve that system per fold, which is what
    ``GLMGam(...).fit()`` would do, without refitting the statsmodels object 5 x |alphas| times.
    """
    import statsmodels.api as sm
    from statsmodels.gam.api import BSplines, GLMGam

    z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) == 0, 1.0, x.std(axis=0))
    k = z.shape[1]
    smoother = BSplines(z, df=[df] * k, degree=[degree] * k, include_intercept=False)
    model = GLMGam(
        y,
        exog=np.ones((len(y), 1)),
        smoother=smoother,
        alpha=[1.0] * k,
        family=sm.families.Gaussian(),
    )
    design = np.asarray(model.exog, float)
    folds = np.random.default_rng(seed).permutation(len(y)) % n_folds
    grams = []
    for f in range(n_folds):
        tr = folds != f
        grams.append((design[tr].T @ design[tr], design[tr].T @ y[tr]))
    out: dict[float, float] = {}
    for a in alphas:
        pen = 2.0 * np.asarray(model.penal.penalty_matrix(alpha=[a] * k), float)
        sse = 0.0
        for f in range(n_folds):
            te = folds == f
            xtx, xty = grams[f]
            beta = np.linalg.lstsq(xtx + pen, xty, rcond=None)[0]
            sse += float(np.sum((y[te] - design[te] @ beta) ** 2))
        out[float(a)] = float(np.sqrt(sse / len(y)))
    return out


# ---------------------------------------------------------------------------
# Fast fixed-penalty P-spline (one covariate), for thousands of fits.


@dataclass
class PSpline:
    """Penalised cubic B-spline fit of ``y ~ s(x)`` (see :func:`fit_pspline`)."""

    knots: np.ndarray
    coef: np.ndarray
    lo: float
    hi: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        return (
            _pspline_basis(np.clip(np.asarray(x, float), self.lo, self.hi), self.knots) @ self.coef
        )


def _pspline_basis(x: np.ndarray, knots: np.ndarray) -> np.ndarray:
    from scipy.interpolate import BSpline

    return BSpline.design_matrix(x, knots, 3, extrapolate=True).toarray()


def fit_pspline(
    x: np.ndarray, y: np.ndarray, *, n_segments: int = 8, penalty: float = 1.0
) -> PSpline:
    """Eilers-Marx P-spline: cubic B-splines on equal segments, 2nd-difference penalty.

    ``x`` and ``y`` are 1-D of equal length; the penalty is relative to the basis Gram
    matrix trace so it is scale-free in n.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.irt import fit_pspline
    >>> x = np.linspace(-2.0, 2.0, 50)
    >>> spline = fit_pspline(x, 50 + 20 * np.tanh(x))  # noise-free: it follows the curve
    >>> spline.predict(np.array([-1.0, 0.0, 1.0])).round(1).tolist()  # truth 34.8, 50.0, 65.2
    [34.8, 50.0, 65.2]
    """
    xa = np.asarray(x, float).reshape(-1)
    ya = np.asarray(y, float).reshape(-1)
    lo, hi = float(xa.min()), float(xa.max())
    if hi <= lo:
        hi = lo + 1e-9
    h = (hi - lo) / n_segments
    knots = lo + h * np.arange(-3, n_segments + 4)
    basis = _pspline_basis(xa, knots)
    dmat = np.diff(np.eye(basis.shape[1]), n=2, axis=0)
    gram = basis.T @ basis
    lam = penalty * np.trace(gram) / basis.shape[1] * 1e-2
    coef = np.linalg.solve(gram + lam * dmat.T @ dmat + 1e-10 * np.eye(len(gram)), basis.T @ ya)
    return PSpline(knots=knots, coef=coef, lo=lo, hi=hi)

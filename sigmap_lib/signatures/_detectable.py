"""What a calibrated signature can detect: the smallest partial correlation that passes.

A unit enters a benchmark's calibrated signature when its ``|partial ρ|`` (the correlation
of its residual with the scores' residual, given general quality) exceeds the max-T
threshold ``t``, so ``t`` *is* the smallest detectable ``|partial ρ|``: a unit whose true
partial correlation equals ``t`` is found about half the time, a weaker one rarely.

``t`` is measured by the permutations of every run. To say *before* a run what ``m``
models and ``d`` units can detect, and how many models it takes to detect a given effect,
:func:`detectable_rho` approximates it in closed form: the residuals of ``m`` models on the
``q``-column quality basis leave ``m − q − 1`` degrees of freedom, under the null a
correlation ``r`` with ``ν`` degrees of freedom has ``r √ν / √(1 − r²) ~ t_ν``, and the
maximum over ``d`` nearly independent units is Bonferroni's ``α / d`` (two-sided: ``α / 2d``)
quantile. It matches the medians of the permutation thresholds measured by
``sigmap bench recovery`` (fresh hard worlds, d = 1e4, P = 199: 0.95 / 0.76 / 0.56 at
m = 16 / 32 / 64; approximation 0.94 / 0.75 / 0.55) and is tested against permutation
thresholds on fresh worlds.
"""

from __future__ import annotations

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures._max_t import MIN_MODELS_CALIBRATED, basis_shape


def _basis_rank(m: int) -> int:
    n_knots, degree = basis_shape(m)
    return n_knots + degree - 1  # the spline's columns sum to one: the intercept is among them


def detectable_rho(
    n_models: int,
    n_units: int,
    alpha: float = 0.05,
    *,
    basis_columns: int | None = None,
    two_sided: bool = True,
) -> float:
    """The smallest ``|partial ρ|`` the calibrated test can detect (its max-T threshold).

    Parameters
    ----------
    n_models : int
        ``m``, the scored models.
    n_units : int
        ``d``, the corpus units tested.
    alpha : float
        Family-wise error level.
    basis_columns : int, optional
        ``q``, the rank of the quality basis including the intercept (a signature's
        ``calibration.basis_columns``); default: the basis the library uses at ``m``
        (3 below 16 models, 5 from 16; with strata add one column per stratum but one).
    two_sided : bool

    Returns
    -------
    float
        The approximate threshold in (0, 1]; 1.0 when ``m − q − 1 < 1``.

    Examples
    --------
    >>> from sigmap_lib.signatures import detectable_rho
    >>> [round(detectable_rho(m, 10_000), 2) for m in (16, 32, 64)]
    [0.94, 0.75, 0.55]
    >>> round(detectable_rho(32, 1_000_000), 2)  # more units: a stricter threshold
    0.83
    """
    from scipy.stats import t as student_t

    m, d = int(n_models), int(n_units)
    if d < 1:
        raise SigmapInputError(f"n_units must be >= 1, got {n_units}")
    if not 0.0 < alpha < 1.0:
        raise SigmapInputError(f"alpha must be in (0, 1), got {alpha}")
    q = _basis_rank(m) if basis_columns is None else int(basis_columns)
    df = m - q - 1
    if df < 1:
        return 1.0
    tail = alpha / d / (2.0 if two_sided else 1.0)
    tq = float(student_t.isf(tail, df))
    return float(tq / np.sqrt(tq * tq + df))


def models_needed(
    rho: float, n_units: int, alpha: float = 0.05, *, max_models: int = 100_000
) -> int:
    """The fewest models at which :func:`detectable_rho` falls below ``rho``.

    Parameters
    ----------
    rho : float in (0, 1)
        The partial correlation to detect.
    n_units : int
        ``d``.
    alpha : float
    max_models : int
        Search bound.

    Returns
    -------
    int
        At least :data:`~sigmap_lib.signatures.MIN_MODELS_CALIBRATED`.

    Examples
    --------
    >>> from sigmap_lib.signatures import models_needed
    >>> models_needed(0.8, 10_000), models_needed(0.6, 10_000)
    (27, 54)
    """
    if not 0.0 < rho < 1.0:
        raise SigmapInputError(f"rho must be in (0, 1), got {rho}")
    for m in range(MIN_MODELS_CALIBRATED, max_models + 1):  # not monotone where the basis grows
        if detectable_rho(m, n_units, alpha) < rho:
            return m
    raise SigmapInputError(f"|partial ρ| = {rho} needs more than {max_models} models")

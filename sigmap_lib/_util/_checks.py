"""Boundary checks of array arguments (modelled on statsmodels' ``array_like``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError


def array_like(
    obj: Any,
    name: str,
    *,
    ndim: int | None = None,
    dtype: Any = np.float64,
    shape: str | None = None,
    promote_1d: bool = False,
    real: bool = False,
    finite: bool = False,
    no_inf: str | None = None,
) -> np.ndarray:
    """``obj`` as an ndarray, checked at the library's boundary.

    Parameters
    ----------
    obj : array-like
        The argument.
    name : str
        How error messages name it (``"scores"``, ``"X: covariates"``).
    ndim : int, optional
        Required number of dimensions (after ``promote_1d``).
    dtype : dtype or None
        Convert to this dtype (``None`` keeps the input's).
    shape : str, optional
        Human description of the expected shape for the error message, e.g.
        ``"unit-major (n_units, n_models)"``.
    promote_1d : bool
        Turn a 1-D input of length ``n`` into an ``(n, 1)`` column.
    real : bool
        Require a real numeric dtype (no strings, objects or complex numbers).
    finite : bool
        Reject NaN and ±inf.
    no_inf : str, optional
        Reject ±inf (NaN allowed), with this hint appended to the message.

    Returns
    -------
    np.ndarray

    Raises
    ------
    SigmapInputError
        Naming ``name``, what was expected and what was found.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib._util import array_like
    >>> array_like([1, 2, 3], "scores", ndim=2, promote_1d=True).shape
    (3, 1)
    >>> array_like([[1.0, float("nan")]], "X", ndim=2, finite=True)
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: X contain NaN/inf
    >>> array_like(np.zeros(3), "values", ndim=2, shape="unit-major (n_units, n_models)")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: values must be unit-major (n_units, n_models), got shape (3,)
    """
    arr = np.asarray(obj) if dtype is None else np.asarray(obj, dtype=dtype)
    if promote_1d and arr.ndim == 1:
        arr = arr[:, None]
    if ndim is not None and arr.ndim != ndim:
        want = shape or f"{ndim}-D"
        raise SigmapInputError(f"{name} must be {want}, got shape {arr.shape}")
    if real and (
        not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating)
    ):
        raise SigmapInputError(f"{name} must be real numbers, got dtype {arr.dtype}")
    if finite and not np.all(np.isfinite(arr)):
        raise SigmapInputError(f"{name} contain NaN/inf")
    if no_inf is not None and np.isinf(arr).any():
        raise SigmapInputError(f"{name} contain +/-inf{no_inf}")
    return arr

"""The smallest planted world: per-unit values of a few models, some units tracking a score.

For examples and quick checks of a selection method (as scikit-learn's ``make_regression``
is for estimators): no dependence on general quality, so any method should find the planted
units. The hard worlds that test error control are :func:`~sigmap_lib.worlds.hard_world`
and :func:`~sigmap_lib.worlds.clustered_world`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sigmap_lib.errors import SigmapInputError


def planted_values(
    n_units: int,
    n_models: int,
    planted: Sequence[int],
    *,
    noise: float = 0.1,
    n_null_benchmarks: int = 0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal unit values with ``planted`` units tracking a standard-normal score.

    Drawn in this order from ``numpy.random.default_rng(seed)``: the score ``a``
    (``n_models``), the values (``n_units × n_models``), the planted units' noise, then the
    ``n_null_benchmarks`` unrelated score columns. A planted unit's values are
    ``-a + noise · ε``: lower (fewer bits per byte) for models that score higher.

    Parameters
    ----------
    n_units, n_models : int
    planted : sequence of int
        Indices of the units that track the score (distinct, in ``[0, n_units)``).
    noise : float
        Standard deviation of a planted unit's own noise (0: exactly ``-a``).
    n_null_benchmarks : int
        Score columns unrelated to every unit, after the first.

    Returns
    -------
    values : numpy.ndarray, shape (n_units, n_models)
    scores : numpy.ndarray, shape (n_models, 1 + n_null_benchmarks)
        Column 0 is ``a``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.worlds import planted_values
    >>> values, scores = planted_values(400, 16, [5, 120], n_null_benchmarks=1)
    >>> values.shape, scores.shape
    ((400, 16), (16, 2))
    >>> np.corrcoef(values[5], scores[:, 0])[0, 1].round(2)
    np.float64(-1.0)
    """
    idx = np.asarray(planted, dtype=np.intp).reshape(-1)
    if n_units < 1 or n_models < 2:
        raise SigmapInputError(
            f"planted_values: need n_units >= 1 and n_models >= 2, got {n_units}, {n_models}"
        )
    if idx.size and (idx.min() < 0 or idx.max() >= n_units or np.unique(idx).size != idx.size):
        raise SigmapInputError(
            f"planted_values: planted units must be distinct indices in [0, {n_units}), "
            f"got {idx.tolist()}"
        )
    if noise < 0 or n_null_benchmarks < 0:
        raise SigmapInputError(
            "planted_values: noise and n_null_benchmarks must be >= 0, "
            f"got {noise}, {n_null_benchmarks}"
        )
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n_models)
    values = rng.standard_normal((n_units, n_models))
    values[idx] = -a + noise * rng.standard_normal((idx.size, n_models))
    null = rng.standard_normal((n_models, n_null_benchmarks))
    return values, np.column_stack([a, null])

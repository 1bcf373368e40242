"""Score direction: benchmarks whose stored value is better when lower (error rates,
perplexities) and the transform that makes every score higher-is-better.

sigmap's statistics read "higher score = better model" (a signature's sign, the performance
level's correlations, metabench's IRT). A benchmark reported as an error rate or a perplexity
declares it in the catalog (``direction: lower``, optionally ``transform:``) and the scores
are transformed once, as they are read (:func:`~sigmap_lib.inputs.read_score_sources`); the
score table holds the transformed scores and the scores report, the catalog table and the
overlap report name the transform of every benchmark.

=============  ===========  =======================================================
transform      direction    use
=============  ===========  =======================================================
``x``          higher       accuracies, pass rates (the default)
``-x``         lower        any lower-is-better value (the default for ``lower``)
``1 - x``      lower        error rates in [0, 1] (accuracy = 1 − error)
``100 - x``    lower        error rates in per cent
``-log(x)``    lower        perplexities (minus the log perplexity: the mean log
                            likelihood per token, word or byte, up to a constant)
=============  ===========  =======================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError

DIRECTIONS = ("higher", "lower")

#: transform name -> (direction it applies to, function)
SCORE_TRANSFORMS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "x": ("higher", lambda x: x),
    "-x": ("lower", lambda x: -x),
    "1 - x": ("lower", lambda x: 1.0 - x),
    "100 - x": ("lower", lambda x: 100.0 - x),
    "-log(x)": ("lower", lambda x: -np.log(x)),
}


def check_direction(direction: Any, transform: Any, where: str) -> tuple[str, str]:
    """The ``(direction, transform)`` a catalog entry declares, validated.

    ``direction`` defaults to ``"higher"``; ``transform`` to ``"x"`` (higher) or ``"-x"``
    (lower). A transform that does not turn the declared direction into higher-is-better is
    an error.

    Examples
    --------
    >>> from sigmap_lib.inputs import check_direction
    >>> check_direction(None, None, "arc"), check_direction("lower", "1 - x", "arc")
    (('higher', 'x'), ('lower', '1 - x'))
    >>> check_direction("lower", None, "lambada")
    ('lower', '-x')
    >>> check_direction("higher", "-log(x)", "lambada")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: lambada: transform '-log(x)' is for scores where lower
    is better, but direction is 'higher'; set direction: lower, or transform: x
    """
    d = "higher" if direction is None else str(direction).strip()
    if d not in DIRECTIONS:
        raise SigmapInputError(
            f"{where}: direction {direction!r} is not one of {list(DIRECTIONS)} "
            "(higher: a larger score is better; lower: errors, perplexities)"
        )
    t = ("x" if d == "higher" else "-x") if transform is None else str(transform).strip()
    if t not in SCORE_TRANSFORMS:
        raise SigmapInputError(
            f"{where}: transform {transform!r} is not one of {list(SCORE_TRANSFORMS)}"
        )
    if SCORE_TRANSFORMS[t][0] != d:
        fix = "x" if d == "higher" else "-x"
        raise SigmapInputError(
            f"{where}: transform {t!r} is for scores where {SCORE_TRANSFORMS[t][0]} is better, "
            f"but direction is {d!r}; set direction: {SCORE_TRANSFORMS[t][0]}, or transform: {fix}"
        )
    return d, t


def apply_score_transform(values: Any, transform: str, where: str) -> np.ndarray:
    """Higher-is-better scores from stored values.

    Parameters
    ----------
    values : array_like, shape (n,)
    transform : str
        A name of :data:`SCORE_TRANSFORMS`.
    where : str
        Named in the error (the benchmark and file).

    Returns
    -------
    numpy.ndarray of float64, shape (n,)

    Examples
    --------
    >>> from sigmap_lib.inputs import apply_score_transform
    >>> apply_score_transform([0.25, 0.5], "1 - x", "arc").tolist()
    [0.75, 0.5]
    >>> apply_score_transform([1.0, 0.0], "-log(x)", "benchmark 'lambada'")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: benchmark 'lambada': transform -log(x) needs positive
    values, got 0 (row 1); is this column a perplexity?
    """
    if transform not in SCORE_TRANSFORMS:
        raise SigmapInputError(f"{where}: unknown transform {transform!r}")
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if transform == "-log(x)" and (x <= 0).any():
        i = int(np.flatnonzero(x <= 0)[0])
        raise SigmapInputError(
            f"{where}: transform -log(x) needs positive values, got {x[i]:g} (row {i}); "
            "is this column a perplexity?"
        )
    return np.asarray(SCORE_TRANSFORMS[transform][1](x), dtype=np.float64)

"""Benchmark signatures: the mode → method table and the one function that dispatches.

Every method of METHODS.md §2–§3b is a class on :class:`~sigmap_lib.signatures.SignatureMethod`
(:mod:`._max_t_methods`, :mod:`._lasso`, :mod:`._forward`). :data:`SIGNATURE_METHODS` maps
each mode to its class; :func:`extract_signatures` looks the mode up, builds the method with
the parameters given (only its own: another method's parameter is an error naming the
method's parameters) and runs it. A new method is one module with its class and one row
here (:func:`register_method` adds one at run time); docs/DEVELOPING.md shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures._forward import ForwardAIC, ForwardBIC, ForwardEBIC
from sigmap_lib.signatures._lasso import AuthorsLasso
from sigmap_lib.signatures._max_t_methods import CalibratedMarginal, CalibratedPartial
from sigmap_lib.signatures._method import SignatureMethod
from sigmap_lib.signatures._multiresolution import CalibratedMultiResolution
from sigmap_lib.signatures._result import Signature
from sigmap_lib.signatures._statistics import as_scores

#: The signature methods by mode (``method=``): the default first.
SIGNATURE_METHODS: dict[str, type[SignatureMethod]] = {
    "calibrated": CalibratedPartial,
    "calibrated-marginal": CalibratedMarginal,
    "calibrated-multiresolution": CalibratedMultiResolution,
    "lasso": AuthorsLasso,
    "aic": ForwardAIC,
    "bic": ForwardBIC,
    "ebic": ForwardEBIC,
}


def method_class(method: str | SignatureMethod | type[SignatureMethod]) -> type[SignatureMethod]:
    """The class of a signature method, from its mode, an instance or the class itself.

    Examples
    --------
    >>> from sigmap_lib.signatures import method_class
    >>> cls = method_class("calibrated")
    >>> cls.__name__, cls.calibrated, cls.reads_values, "strata" in cls.parameter_names()
    ('CalibratedPartial', True, True, True)
    >>> method_class("lasso").calibrated
    False
    >>> method_class("max-t")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: unknown signature method 'max-t'; known: calibrated, calibrated-marginal, calibrated-multiresolution, lasso, aic, bic, ebic
    """
    if isinstance(method, SignatureMethod):
        return type(method)
    if isinstance(method, type) and issubclass(method, SignatureMethod):
        return method
    cls = SIGNATURE_METHODS.get(method) if isinstance(method, str) else None
    if cls is None:
        raise SigmapInputError(
            f"unknown signature method {method!r}; known: {', '.join(SIGNATURE_METHODS)}"
        )
    return cls


def register_method(cls: type[SignatureMethod], *, replace: bool = False) -> type[SignatureMethod]:
    """Add a row to :data:`SIGNATURE_METHODS` (usable as a class decorator).

    The class must subclass :class:`~sigmap_lib.signatures.SignatureMethod` and set a
    ``name``; an existing mode is replaced only with ``replace=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import (
    ...     SIGNATURE_METHODS, Signature, SignatureMethod, extract_signatures, register_method)
    >>> @register_method
    ... class FirstUnit(SignatureMethod):
    ...     "Every benchmark's signature is unit 0 (a toy)."
    ...     name = "first-unit"
    ...     def __init__(self, *, unit: int = 0):
    ...         self.unit = unit
    ...     def _extract(self, source, scores, run):
    ...         used = ~np.isnan(scores)
    ...         return [Signature(n, [self.unit], used[:, b], method=self.name)
    ...                 for b, n in enumerate(run.names)]
    >>> [s.units.tolist() for s in extract_signatures(np.zeros((5, 4)), np.ones((4, 2)),
    ...                                               method="first-unit", unit=3)]
    [[3], [3]]
    >>> del SIGNATURE_METHODS["first-unit"]
    """
    if not (isinstance(cls, type) and issubclass(cls, SignatureMethod)) or not cls.name:
        raise SigmapInputError(f"{cls!r} is not a SignatureMethod subclass with a name")
    if cls.name in SIGNATURE_METHODS and SIGNATURE_METHODS[cls.name] is not cls and not replace:
        raise SigmapInputError(
            f"signature method {cls.name!r} exists ({SIGNATURE_METHODS[cls.name].__name__}): "
            "pass replace=True to replace it"
        )
    SIGNATURE_METHODS[cls.name] = cls
    return cls


def signature_method(
    method: str | SignatureMethod | type[SignatureMethod] = "calibrated", **params: Any
) -> SignatureMethod:
    """A signature method built from its mode and its own parameters (validated).

    Examples
    --------
    >>> from sigmap_lib.signatures import signature_method
    >>> signature_method("ebic", k=50, gamma=1.0)
    ForwardEBIC(k=50, gamma=1.0)
    >>> signature_method("calibrated", loo=True)
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: method='calibrated' does not take loo; its parameters: n_permutations, alpha, shared_null, two_sided, buffer_units, fwer, strata, partial_statistic, fdr
    """
    if isinstance(method, SignatureMethod):
        if params:
            raise SigmapInputError(
                f"parameters {sorted(params)} given with a built method {method!r}: "
                "set them when building it"
            )
        method.validate()
        return method
    cls = method_class(method)
    names = cls.parameter_names()
    unknown = [p for p in params if p not in names]
    if unknown:
        raise SigmapInputError(
            f"method={cls.name!r} does not take {', '.join(unknown)}; its parameters: "
            f"{', '.join(names) or '(none)'}"
        )
    built = cls(**params)
    built.validate()
    return built


def extract_signatures(
    source: Any,
    scores: Any,
    *,
    method: str | SignatureMethod = "calibrated",
    nll_arrays: Any = None,
    benchmark_names: Sequence[str] | None = None,
    seed: int = 0,
    chunk_units: int = 1 << 20,
    **params: Any,
) -> list[Signature]:
    """Signatures of several benchmarks, each in ONE streaming pass over all units.

    Parameters
    ----------
    source, nll_arrays, seed, chunk_units
        As in :meth:`SignatureMethod.extract <sigmap_lib.signatures.SignatureMethod.extract>`.
    scores : array_like, shape (n_models,) or (n_models, B)
        One benchmark or several (see ``SignatureMethod.extract``).
    method : str or SignatureMethod
        A mode of :data:`SIGNATURE_METHODS` or a built method: ``"calibrated"`` (default,
        :class:`~sigmap_lib.signatures.CalibratedPartial`: the max-T test of the partial
        correlation given general quality), ``"calibrated-marginal"``
        (:class:`~sigmap_lib.signatures.CalibratedMarginal`), ``"lasso"``
        (:class:`~sigmap_lib.signatures.AuthorsLasso`, the authors' code §2b), ``"aic" |
        "bic" | "ebic"`` (:class:`~sigmap_lib.signatures.ForwardSelection`, the paper's
        text §3).
    benchmark_names : sequence of str, optional
    **params
        The method's own parameters (see its class); another method's parameter is an
        error that lists this method's.

    Returns
    -------
    list[Signature], one per score column.

    Examples
    --------
    400 units by 16 models; units 5 and 120 are planted to track the first benchmark,
    the second benchmark is noise. The calibrated default finds exactly the planted units
    for the first and, rightly, nothing for the second:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signatures
    >>> from sigmap_lib.worlds import planted_values
    >>> values, scores = planted_values(400, 16, planted=[5, 120], n_null_benchmarks=1)
    >>> values.shape, scores.shape  # (n_units, n_models), (n_models, B)
    ((400, 16), (16, 2))
    >>> sigs = extract_signatures(values, scores, benchmark_names=["real", "noise"])
    >>> [(s.benchmark, s.method, s.units.tolist(), s.empty) for s in sigs]
    [('real', 'calibrated', [5, 120], False), ('noise', 'calibrated', [], True)]
    >>> sigs[0].calibration.adjusted_p.tolist()  # (1 + #{T* >= |stat|}) / (P + 1)
    [0.005, 0.005]

    The paper's forward selection by BIC, with the leave-one-model-out R² of the whole
    procedure; the second benchmark has no score for model 0:

    >>> a = scores[:, 0]
    >>> scores = np.column_stack([a, -a])
    >>> scores[0, 1] = np.nan
    >>> sigs = extract_signatures(
    ...     values, scores, benchmark_names=["up", "down"], method="bic", k=10, loo=True
    ... )
    >>> [(s.benchmark, s.method, s.units.tolist(), int(s.models_used.sum())) for s in sigs]
    [('up', 'bic', [120, 5, 39], 16), ('down', 'bic', [120, 5, 39], 15)]
    """
    built = signature_method(method, **params)
    y_all, _ = as_scores(scores)
    nb = y_all.shape[1]
    names = list(benchmark_names) if benchmark_names is not None else [f"#{b}" for b in range(nb)]
    if len(names) != nb:
        raise SigmapInputError(f"{len(names)} benchmark names for {nb} score columns")
    return built.extract(
        source, y_all, names=names, nll_arrays=nll_arrays, seed=seed, chunk_units=chunk_units
    )


def extract_signature(source: Any, scores: Any, **kwargs: Any) -> Signature:
    """One benchmark's signature; ``scores`` of shape ``(n_models,)``.

    See :func:`extract_signatures` for the parameters.

    Examples
    --------
    300 units by 12 models; units 5 and 120 are planted to track the scores:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signature
    >>> rng = np.random.default_rng(0)
    >>> scores, values = rng.standard_normal(12), rng.standard_normal((300, 12))  # 12 models
    >>> values[[5, 120]] = -scores + 0.1 * rng.standard_normal((2, 12))
    >>> sig = extract_signature(values, scores, method="bic", k=10, n_permutations=5)
    >>> sig.candidates[:2].tolist(), sig.units.tolist()  # screened, then selected
    ([120, 5], [5, 120, 21])
    >>> round(sig.selection.r2, 3), round(sig.null.p_best, 3)
    (0.997, 0.167)
    """
    y = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1:
        raise SigmapInputError(f"extract_signature takes (n_models,) scores, got {y.shape}")
    return extract_signatures(source, y, **kwargs)[0]

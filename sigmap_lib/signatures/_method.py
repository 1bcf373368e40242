"""The shared face of the signature methods, as scikit-learn has for its selectors.

A method is a class on :class:`SignatureMethod`: its constructor takes only the method's
own parameters (keyword-only, stored unchanged), ``_parameter_constraints`` declares what
each one accepts, and :meth:`SignatureMethod.extract` runs the method's own streaming pass
over the units and returns one :class:`~sigmap_lib.signatures.Signature` per benchmark.
What the rest of sigmap needs to know about a method is a class attribute (is it the
max-T test itself? does it read the per-unit values or only their ranks? how many models
does it need?), never a test of its name.

The mode → class table is :data:`~sigmap_lib.signatures.SIGNATURE_METHODS`;
:func:`~sigmap_lib.signatures.register_method` adds a row.
"""

from __future__ import annotations

import inspect
import numbers
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sigmap_lib.errors import SigmapInputError


@dataclass(frozen=True)
class Interval:
    """A real (or integral) parameter in ``[low, high]``; ``closed`` names the closed ends.

    Examples
    --------
    >>> from sigmap_lib.signatures import Interval
    >>> rule = Interval(float, 0.0, 1.0, closed="neither")
    >>> rule.accepts(0.05), rule.accepts(1.0), str(rule)
    (True, False, 'a number in (0.0, 1.0)')
    """

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"  # "both" | "left" | "right" | "neither"

    def accepts(self, value: Any) -> bool:
        kind = numbers.Integral if self.kind is int else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not np.isfinite(value):
            return False
        closed_low, closed_high = self.closed in ("both", "left"), self.closed in ("both", "right")
        lo_ok = self.low is None or (value >= self.low if closed_low else value > self.low)
        hi_ok = self.high is None or (value <= self.high if closed_high else value < self.high)
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        low = "-inf" if self.low is None else self.low
        high = "inf" if self.high is None else self.high
        return f"{what} in {left}{low}, {high}{right}"


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values.

    Examples
    --------
    >>> from sigmap_lib.signatures import Options
    >>> Options(("benchmark", "all")).accepts("all"), str(Options(("benchmark", "all")))
    (True, "one of ('benchmark', 'all')")
    """

    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        return any(value is v or (type(value) is type(v) and value == v) for v in self.values)

    def __str__(self) -> str:
        return f"one of {self.values}"


def _accepts(rule: Any, value: Any) -> bool:
    if rule is None:
        return value is None
    if rule == "array-like":
        return value is not None and np.ndim(value) == 1
    if rule is bool:
        return isinstance(value, bool | np.bool_)
    return rule.accepts(value)


def _describe(rule: Any) -> str:
    return {None: "None", "array-like": "a 1-D array", bool: "a bool"}.get(rule, str(rule))


@dataclass(frozen=True)
class Pass:
    """What one extraction passes to :meth:`SignatureMethod._extract` beside the data: the
    benchmarks' names, the per-unit values when the source holds only rank codes, the seed
    of every random draw and the units read at a time."""

    names: list[str]
    nll_arrays: Any
    seed: int
    chunk_units: int


class SignatureMethod(ABC):
    """Base class of the signature methods.

    Subclasses set the class attributes below, declare their parameters as keyword-only
    constructor arguments stored under the same names (a ``@dataclass(kw_only=True)``
    does it, and subclasses inherit the fields) with ``_parameter_constraints``, and
    implement :meth:`_extract` (``run``: a :class:`Pass`).

    Attributes
    ----------
    name : str
        The mode that selects the method (``method=`` of
        :func:`~sigmap_lib.signatures.extract_signatures`, the ``method`` setting).
    calibrated : bool
        The signature *is* a max-T test over all units: every signature (empty or not)
        carries a :class:`~sigmap_lib.signatures.Calibration` with its null, threshold
        and reason, and the family-wise error holds for it.
    reads_values : bool
        Reads the per-unit values (NLL) beyond their rank codes (then a RankStore source
        needs ``nll_arrays=``).
    fits_coefficients : bool
        Each signature unit carries a finite fitted coefficient (:attr:`Signature.coef`).
    min_models : int
        The fewest scored models the method accepts for a benchmark.
    min_units : int
        The fewest corpus units the method accepts (:meth:`check_units`).
    default_permutations : int
        ``n_permutations`` when not given.
    counterpart : str or None
        The mode of the same test on the other statistic (the robustness table runs it as
        the "other statistic" variant); None when the variant is a parameter change
        (:meth:`other_statistic`).
    """

    name: ClassVar[str] = ""
    calibrated: ClassVar[bool] = False
    reads_values: ClassVar[bool] = True
    fits_coefficients: ClassVar[bool] = False
    min_models: ClassVar[int] = 3
    min_units: ClassVar[int] = 1
    default_permutations: ClassVar[int] = 0
    counterpart: ClassVar[str | None] = None
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """The method's own parameters, in the constructor's order."""
        sig = inspect.signature(cls.__init__)
        return tuple(p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY)

    @classmethod
    def select_params(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of ``options`` that are parameters of this method (the rest are
        another method's: a robustness variant or a stored setting names them)."""
        names = cls.parameter_names()
        return {k: v for k, v in options.items() if k in names}

    @classmethod
    def check_models(cls, m: int, strata: Any = None, name: str = "") -> None:
        """Refuse a benchmark scored by too few models for this method (one line naming
        it and the fix)."""
        if m < cls.min_models:
            where = f"benchmark {name!r}: " if name else ""
            raise SigmapInputError(
                f"{where}{m} scored models; method={cls.name!r} needs >= {cls.min_models}"
            )

    @classmethod
    def check_units(cls, d: int) -> None:
        """Refuse a corpus of fewer than :attr:`min_units` units (one line naming it and the
        fix)."""
        if d < cls.min_units:
            raise SigmapInputError(
                f"{d} corpus units; method={cls.name!r} needs >= {cls.min_units} (general "
                "quality, the mean over the units, is too noisy below that): add units, or "
                "use method='aic' for an uncalibrated description"
            )

    def other_statistic(self) -> tuple[str, dict[str, Any]] | None:
        """The robustness table's "other statistic" variant as (label, parameter changes),
        for methods without a :attr:`counterpart`; None when there is none."""
        return None

    def get_params(self) -> dict[str, Any]:
        """The parameters as given (scikit-learn's ``get_params``)."""
        return {n: getattr(self, n) for n in self.parameter_names()}

    def validate(self) -> None:
        """Check every parameter against ``_parameter_constraints``: one line naming the
        method, the parameter, what it got and what it accepts."""
        for pname in self.parameter_names():
            rules = self._parameter_constraints.get(pname)
            if rules is None:
                continue
            value = getattr(self, pname)
            if not any(_accepts(r, value) for r in rules):
                allowed = " or ".join(_describe(r) for r in rules)
                raise SigmapInputError(
                    f"method={self.name!r}: {pname} must be {allowed}, got {value!r}"
                )

    def __repr__(self) -> str:
        init = inspect.signature(type(self).__init__).parameters
        shown = []
        for n, v in self.get_params().items():
            d = init[n].default
            arrays = isinstance(v, np.ndarray) or isinstance(d, np.ndarray)
            if not (v is d or (not arrays and v == d)):
                shown.append(f"{n}={v!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def extract(
        self,
        source: Any,
        scores: np.ndarray,
        *,
        names: Sequence[str],
        nll_arrays: Any = None,
        seed: int = 0,
        chunk_units: int = 1 << 20,
    ) -> list[Any]:
        """Signatures of every score column.

        Parameters
        ----------
        source : RankStore | (n_units, n_models) array | sequence of per-model arrays
            What :func:`sigmap_lib.signatures.screen` reads.
        scores : numpy.ndarray, shape (n_models, B)
            Higher = better; NaN = unscored (that model is left out of the benchmark; the
            benchmarks scored by the same models share their ranks, ``ĝ`` and passes).
        names : sequence of str, length B
        nll_arrays : per-model arrays of the per-unit values (NLL), optional
            For the methods that read values (``reads_values``): required with a RankStore
            source, ``source`` itself otherwise.
        seed : int
            Seed of every random draw (permutations, bootstrap).
        chunk_units : int
            Units read at a time (the result does not depend on it).

        Returns
        -------
        list[Signature], one per score column.
        """
        self.validate()
        return self._extract(source, scores, Pass(list(names), nll_arrays, seed, chunk_units))

    @abstractmethod
    def _extract(self, source: Any, scores: np.ndarray, run: Pass) -> list[Any]:
        """The method's pass over the units (parameters validated)."""

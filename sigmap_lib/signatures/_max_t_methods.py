"""The calibrated methods (METHODS §3b): a max-T permutation test over every unit.

:class:`CalibratedPartial` (``"calibrated"``, the default) tests the partial correlation
of each unit's values with the scores given general quality; :class:`CalibratedMarginal`
(``"calibrated-marginal"``) the same on the marginal Thrush correlation, from rank codes
alone. Both run :func:`~sigmap_lib.signatures._calibration.calibrated_signatures`: one
streaming pass whose chunk and shard partials merge exactly
(:func:`~sigmap_lib.signatures.merge_max_t`), and a second pass only when more units pass
the threshold than the buffer held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sigmap_lib.signatures._calibration import (
    FWER_SCOPES,
    PARTIAL_STATISTICS,
    DesignOptions,
    calibrated_signatures,
    check_calibrated_models,
)
from sigmap_lib.signatures._max_t import MIN_MODELS_CALIBRATED, MIN_UNITS_CALIBRATED
from sigmap_lib.signatures._method import Interval, Options, Pass, SignatureMethod
from sigmap_lib.signatures._result import Signature, values_source
from sigmap_lib.signatures._statistics import check_benchmark

_MAX_T_CONSTRAINTS: dict[str, list[Any]] = {
    "n_permutations": [None, Interval(int, 1, None)],
    "alpha": [Interval(float, 0.0, 1.0, closed="neither")],
    "shared_null": [bool],
    "two_sided": [bool],
    "buffer_units": [Interval(int, 1, None)],
    "fwer": [Options(FWER_SCOPES)],
}


@dataclass(kw_only=True, repr=False, eq=False)
class _MaxT(SignatureMethod):
    """What the two calibrated methods share: the max-T pass and its parameters."""

    calibrated: ClassVar[bool] = True
    #: the max-T test the pass runs (:data:`~sigmap_lib.signatures._calibration.CALIBRATED_METHODS`)
    max_t_test: ClassVar[str]
    default_permutations: ClassVar[int] = 199
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = _MAX_T_CONSTRAINTS

    n_permutations: int | None = None
    alpha: float = 0.05
    shared_null: bool = False
    two_sided: bool = True
    buffer_units: int = 1024
    fwer: str = "benchmark"

    def design_options(self, run: Pass, **fixed: Any) -> DesignOptions:
        """The options of this method's max-T pass in ``run`` (``fixed``: more of them)."""
        return DesignOptions(
            method=self.max_t_test,
            n_permutations=self.permutations,
            shared_null=self.shared_null,
            two_sided=self.two_sided,
            seed=run.seed,
            chunk_units=run.chunk_units,
            fwer=self.fwer,
            names=run.names,
            **self._design_options(),
            **fixed,
        )

    def _design_options(self) -> dict[str, Any]:
        return {}

    def _fdr(self) -> float | None:
        return None

    def _extract(self, source: Any, scores: np.ndarray, run: Pass) -> list[Signature]:
        for b, name in enumerate(run.names):
            check_benchmark(scores[:, b], name)
        found = calibrated_signatures(
            values_source(source, run.nll_arrays) if self.reads_values else source,
            scores,
            self.design_options(run),
            alpha=self.alpha,
            buffer_units=self.buffer_units,
            fdr=self._fdr(),
        )
        return [
            Signature(
                benchmark=run.names[b],
                units=r.units,
                models_used=r.models_used,
                method=self.name,
                calibration=r.calibration,
                extra=r.extra,
            )
            for b, r in enumerate(found)
        ]

    @property
    def permutations(self) -> int:
        """``n_permutations``, or the default 199 when None."""
        return self.default_permutations if self.n_permutations is None else self.n_permutations


@dataclass(kw_only=True, repr=False, eq=False)
class CalibratedPartial(_MaxT):
    """Max-T test of each unit's partial correlation with the scores given general quality.

    The Spearman (or Pearson) correlation of the unit's values and the scores, both
    residualized on a spline of the models' general quality ``ĝ`` (and on ``strata``);
    family-wise error ``alpha`` over all ``d`` units of each benchmark (``fwer="all"``:
    over all benchmarks together). An empty signature is a result, not an error.

    Parameters
    ----------
    n_permutations : int, optional
        Max-T permutations (default 199; 999 for reported p-values).
    alpha : float
        Family-wise error level.
    shared_null : bool
        One set of permutation columns per set of scored models (exact for untied scores).
    two_sided : bool
        Test ``|statistic|`` (default) or the signed statistic.
    buffer_units : int
        Units kept per benchmark in the running top-K (the result does not depend on it).
    fwer : {"benchmark", "all"}
        The error over each benchmark's units, or over all benchmarks' units together.
    strata : array_like, shape (n_models,), optional
        One label per model (e.g. its family): permutations within strata, stratum effects
        regressed out of units and scores.
    partial_statistic : {"spearman", "pearson"}
    fdr : float, optional
        Claim units at this false-discovery rate instead of the family-wise error
        ``alpha``: a permutation null pooled across units behind a max-T gate at level
        ``fdr`` (:func:`fdr_threshold`; ``fwer="benchmark"`` only).

    Examples
    --------
    >>> from sigmap_lib.signatures import CalibratedPartial
    >>> from sigmap_lib.worlds import planted_values
    >>> values, scores = planted_values(400, 16, planted=[5, 120])  # (n_units, n_models)
    >>> method = CalibratedPartial(n_permutations=99)
    >>> method
    CalibratedPartial(n_permutations=99)
    >>> [sig] = method.extract(values, scores, names=["real"])
    >>> sig.method, sig.units.tolist()
    ('calibrated', [5, 120])
    """

    name: ClassVar[str] = "calibrated"
    max_t_test: ClassVar[str] = "calibrated"
    min_models: ClassVar[int] = MIN_MODELS_CALIBRATED
    min_units: ClassVar[int] = MIN_UNITS_CALIBRATED
    counterpart: ClassVar[str | None] = "calibrated-marginal"
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = _MAX_T_CONSTRAINTS | {
        "strata": [None, "array-like"],
        "partial_statistic": [Options(PARTIAL_STATISTICS)],
        "fdr": [None, Interval(float, 0.0, 1.0, closed="neither")],
    }

    strata: Any = None
    partial_statistic: str = "spearman"
    fdr: float | None = None

    @classmethod
    def check_models(cls, m: int, strata: Any = None, name: str = "") -> None:
        check_calibrated_models(m, strata, name)

    def _design_options(self) -> dict[str, Any]:
        return {"strata": self.strata, "partial_statistic": self.partial_statistic}

    def _fdr(self) -> float | None:
        return self.fdr


@dataclass(kw_only=True, repr=False, eq=False)
class CalibratedMarginal(_MaxT):
    """Max-T test of each unit's marginal Thrush correlation with the scores (rank codes
    suffice). The parameters are :class:`CalibratedPartial`'s but ``strata`` and
    ``partial_statistic``.

    Examples
    --------
    >>> from sigmap_lib.signatures import CalibratedMarginal
    >>> from sigmap_lib.worlds import planted_values
    >>> values, scores = planted_values(400, 16, planted=[7], noise=0.0)
    >>> [sig] = CalibratedMarginal().extract(values, scores, names=["b"])
    >>> sig.units.tolist(), sig.calibration.statistic
    ([7], 'thrush')
    """

    name: ClassVar[str] = "calibrated-marginal"
    max_t_test: ClassVar[str] = "calibrated-marginal"
    reads_values: ClassVar[bool] = False
    counterpart: ClassVar[str | None] = "calibrated"

"""What a signature method returns: :class:`Signature` (the units, their statistics and
calibration, whatever the method), the permutation null of forward selection, the units'
directions, and the reads of selected units' values every method shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import RankStore, check_model_arrays, read_points
from sigmap_lib.signatures._calibration import Calibration
from sigmap_lib.signatures._screening import ScreenResult
from sigmap_lib.signatures._selection import SelectionResult

#: The level of a unit claimed on its own (a signature's finest level).
UNIT_LEVEL = "unit"


def gather_units(nll_arrays: Any, unit_indices: Any) -> np.ndarray:
    """Per-model values of selected units, reading only those units.

    Parameters
    ----------
    nll_arrays : sequence of per-model 1-D arrays (zarr / numpy / paths), or a unit-major
        ``(n_units, n_models)`` numpy array.
    unit_indices : array_like of int, shape (k,)
        Units to read (any order, duplicates allowed).

    Returns
    -------
    numpy.ndarray, shape (n_models, k), float64
        Column ``i`` holds unit ``unit_indices[i]`` for every model.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import gather_units
    >>> values = np.arange(15.0).reshape(5, 3)  # (n_units, n_models)
    >>> gather_units(values, [4, 0]).tolist()  # (n_models, k): model-major
    [[12.0, 0.0], [13.0, 1.0], [14.0, 2.0]]
    >>> per_model = [values[:, j] for j in range(3)]  # or zarr arrays / .npy paths
    >>> gather_units(per_model, [4, 0]).shape
    (3, 2)
    """
    idx = np.asarray(unit_indices, dtype=np.int64).reshape(-1)
    if isinstance(nll_arrays, np.ndarray) and nll_arrays.ndim == 2:
        d = nll_arrays.shape[0]
        _check_indices(idx, d)
        return np.asarray(nll_arrays[idx], dtype=np.float64).T.copy()
    arrays, d = check_model_arrays(list(nll_arrays))
    _check_indices(idx, d)
    uniq, inverse = np.unique(idx, return_inverse=True)
    out = np.empty((len(arrays), uniq.size), dtype=np.float64)
    for j, arr in enumerate(arrays):
        if uniq.size:
            out[j] = read_points(arr, uniq)
    return out[:, inverse]


def _check_indices(idx: np.ndarray, d: int) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= d):
        raise SigmapInputError(
            f"unit indices must be in [0, {d}), got range [{idx.min()}, {idx.max()}]"
        )


@dataclass
class NullCalibration:
    """Permutation null of the two-stage procedure for one benchmark.

    Attributes
    ----------
    best_strength : numpy.ndarray, shape (P,)
        Strongest screened strength under each permutation.
    final_criterion, r2, k : numpy.ndarray, shape (P,)
        Stage-2 final criterion, in-sample R², number of selected units under the null.
    criterion_paths : list of numpy.ndarray
    real_best, real_criterion, real_r2 : float
    p_best, p_criterion, p_r2 : float
        ``(1 + #{null at least as extreme}) / (1 + P)``.
    """

    best_strength: np.ndarray
    final_criterion: np.ndarray
    r2: np.ndarray
    k: np.ndarray
    criterion_paths: list[np.ndarray]
    real_best: float
    real_criterion: float
    real_r2: float
    p_best: float
    p_criterion: float
    p_r2: float

    def summary(self) -> dict[str, float]:
        return {
            "n_permutations": int(self.best_strength.size),
            "real_best_strength": self.real_best,
            "null_best_strength_median": float(np.median(self.best_strength)),
            "null_best_strength_q95": float(np.quantile(self.best_strength, 0.95)),
            "p_best_strength": self.p_best,
            "real_final_criterion": self.real_criterion,
            "null_final_criterion_median": float(np.median(self.final_criterion)),
            "p_final_criterion": self.p_criterion,
            "real_r2": self.real_r2,
            "null_r2_median": float(np.median(self.r2)),
            "p_r2": self.p_r2,
        }


def unit_orientation(statistic: Any, coef: Any = None) -> np.ndarray:
    """The direction of each signature unit: +1 where better-scoring models are less
    perplexed on it, −1 where they are more perplexed.

    A two-sided signature holds units of both directions; an average over its units that
    ignored the direction would let them cancel. The direction is the sign of the unit's
    statistic (calibrated and marginal tests: positive = less perplexed); without one (a
    forward-selection or Lasso signature fitted without calibration) it is minus the sign
    of the unit's coefficient on NLL; +1 when neither is known or either is 0.

    Parameters
    ----------
    statistic : array-like of float, shape (k,)
        Signed statistics (NaN where unknown).
    coef : array-like of float, shape (k,), optional
        Coefficients of the scores on the units' standardized NLL (NaN where unknown).

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
        Values in {−1, +1}.

    Examples
    --------
    >>> from sigmap_lib.signatures import unit_orientation
    >>> unit_orientation([0.8, -0.7, float("nan"), float("nan")], [None, None, 0.4, None]).tolist()
    [1.0, -1.0, -1.0, 1.0]
    """
    stat = np.asarray(statistic, dtype=np.float64).ravel()
    out = np.sign(stat)
    if coef is not None:
        c = np.asarray(coef, dtype=np.float64).ravel()
        if c.shape != stat.shape:
            raise SigmapInputError(
                f"unit_orientation: statistic has {stat.size} values but coef {c.size}"
            )
        out = np.where(np.isfinite(out), out, -np.sign(c))
    return np.where(np.isfinite(out) & (out != 0), out, 1.0)


@dataclass
class Signature:
    """A benchmark's signature and its calibration, whatever the method.

    Attributes
    ----------
    benchmark : str
    units : numpy.ndarray of int64, shape (k,)
        Corpus unit indices in the method's order: strongest statistic first
        (calibrated), largest ``|coef|`` first (lasso), order of entry (aic / bic / ebic).
        Empty (``k = 0``) when nothing stands out: see :attr:`empty`.
    models_used : numpy.ndarray of bool, shape (n_models,)
        Models with a score on this benchmark (the only ones used).
    method : {"calibrated", "calibrated-marginal", "lasso", "aic", "bic", "ebic"}
    coef : numpy.ndarray of float64, shape (k,)
        aic / bic / ebic: OLS coefficients on the standardized scale (``selection.coef``);
        lasso: Lasso coefficients on standardized NLL; calibrated: NaN (no model is fitted;
        the statistics are ``calibration.values``).
    calibration : Calibration or None
        The max-T calibration. Calibrated methods: always (it defines the signature).
        aic / bic / ebic / lasso: when ``n_permutations > 0``, the marginal max-T
        calibration of their units (aic / bic / ebic: from the same permutations as
        :attr:`null`, the maximum screening strength over all units; lasso: a
        ``"calibrated-marginal"`` pass); else None.
    selection : SelectionResult or None
        Stage-2 fit of aic / bic / ebic (columns = ``candidates``;
        ``units = candidates[selection.selected]``).
    screen : ScreenResult or None
        Stage-1 result of aic / bic / ebic.
    candidates : numpy.ndarray of int64, shape (K,)
        aic / bic / ebic: the screened units; lasso: the tail candidates (unit order);
        calibrated: empty (every unit is tested).
    loo_r2 : float or None
    loo_predictions : numpy.ndarray (n_models,) or None
        Held-out predictions (NaN for unscored models); aic / bic / ebic only.
    bootstrap_frequency : numpy.ndarray (k,) or None
    null : NullCalibration or None
        Forward selection's permutation null (aic / bic / ebic with ``n_permutations``).
    extra : dict
        Method details (``extra["lasso"]``: candidates, usable columns, α, iterations;
        calibrated-multiresolution: ``extra["levels"]``, each level's claims, and
        ``extra["claims"]``, the claim that holds each unit: its ``level``, ``statistic``
        and ``adjusted_p``, aligned with :attr:`units`).

    Examples
    --------
    Pure noise: the calibrated default finds nothing above chance, and says so:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signatures
    >>> rng = np.random.default_rng(1)
    >>> [sig] = extract_signatures(rng.standard_normal((300, 12)), rng.standard_normal(12))
    >>> sig.method, sig.empty, sig.units.tolist(), sig.coef.tolist()
    ('calibrated', True, [], [])
    >>> s = sig.summary()
    >>> s["empty"], s["calibration"]["n_permutations"], s["calibration"]["reason"][:20]
    (True, 199, 'no unit above the ma')
    >>> s["calibration"]["controlled_for_strata"], s["calibration"]["fwer"]
    (False, 'benchmark')
    """

    benchmark: str
    units: np.ndarray
    models_used: np.ndarray
    method: str = "aic"
    coef: np.ndarray | None = None
    calibration: Calibration | None = None
    selection: SelectionResult | None = None
    screen: ScreenResult | None = None
    candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loo_r2: float | None = None
    loo_predictions: np.ndarray | None = None
    bootstrap_frequency: np.ndarray | None = None
    null: NullCalibration | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.units = np.asarray(self.units, dtype=np.int64).reshape(-1)
        if self.coef is None:
            self.coef = (
                np.asarray(self.selection.coef, dtype=np.float64)
                if self.selection is not None
                else np.full(self.units.size, np.nan)
            )
        self.coef = np.asarray(self.coef, dtype=np.float64).reshape(-1)
        if self.coef.size != self.units.size:
            raise SigmapInputError(
                f"signature {self.benchmark}: {self.coef.size} coefficients for "
                f"{self.units.size} units"
            )

    @property
    def empty(self) -> bool:
        """No unit stands out ("no signature above chance at this m, d and α")."""
        return self.units.size == 0

    @property
    def statistics(self) -> np.ndarray:
        """``(k,)`` each unit's calibrated statistic (positive = better-scoring models are
        less perplexed on it); NaN where the signature has no calibration of the unit. A
        unit held by a group's claim (calibrated-multiresolution) has its group's."""
        if "claims" in self.extra:
            return np.asarray(self.extra["claims"]["statistic"], dtype=np.float64)
        stat = np.full(self.units.size, np.nan)
        cal = self.calibration
        if cal is not None and len(cal.units):
            pos = {int(u): i for i, u in enumerate(cal.units.tolist())}
            for i, u in enumerate(self.units.tolist()):
                if u in pos:
                    stat[i] = cal.values[pos[u]]
        return stat

    @property
    def claim_levels(self) -> np.ndarray:
        """``(k,)`` the level whose claim holds each unit: ``"unit"`` (the unit on its own;
        every unit of the single-level methods) or a group level of a calibrated-
        multiresolution signature (``"document"``, ``"source"``, ...)."""
        if "claims" in self.extra:
            return np.asarray(self.extra["claims"]["level"], dtype=object)
        return np.full(self.units.size, UNIT_LEVEL, dtype=object)

    def at_level(self, level: str | None) -> Signature:
        """The signature made of the claims of one level only (None or ``""``: all of it).

        Parameters
        ----------
        level : str or None
            ``"unit"`` (units claimed on their own) or a group level of the signature.

        Returns
        -------
        Signature
            The same signature with the units (and their coefficients, statistics and
            claims) of the other levels left out.

        Examples
        --------
        >>> import numpy as np
        >>> from sigmap_lib.signatures import Signature
        >>> claims = {"level": ["unit", "document", "document"], "statistic": [0.9, -0.6, -0.6],
        ...           "adjusted_p": [0.01, 0.02, 0.02]}
        >>> sig = Signature("b", np.array([4, 10, 11]), np.ones(8, bool), "calibrated-multiresolution",
        ...                 extra={"claims": claims})
        >>> doc = sig.at_level("document")
        >>> doc.units.tolist(), doc.orientation.tolist()
        ([10, 11], [-1.0, -1.0])
        """
        if not level:
            return self
        keep = self.claim_levels == level
        extra = dict(self.extra)
        if "claims" in extra:
            extra["claims"] = {
                k: [v for v, t in zip(vs, keep) if t] for k, vs in extra["claims"].items()
            }
        freq = self.bootstrap_frequency
        return replace(
            self,
            units=self.units[keep],
            coef=self.coef[keep],
            bootstrap_frequency=None if freq is None else freq[keep],
            extra=extra,
        )

    @property
    def orientation(self) -> np.ndarray:
        """``(k,)`` +1 where better-scoring models are less perplexed on the unit, −1 where
        they are more perplexed (:func:`unit_orientation` of :attr:`statistics` and
        :attr:`coef`)."""
        return unit_orientation(self.statistics, self.coef)

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary (NaN written as ``None``).

        Always: ``benchmark``, ``method``, ``empty``, ``units``, ``coef``, ``n_models``,
        ``n_candidates``, ``loo_r2`` and ``calibration`` (:meth:`Calibration.summary`, or
        None). calibrated-multiresolution adds ``levels`` (each level's claimed groups, their
        statistics, adjusted p-values and threshold); aic / bic / ebic add ``criterion``, ``criterion_path``, ``rss_path``, ``r2``,
        ``adj_r2``, ``best_strength`` and, when computed, ``bootstrap_frequency`` and
        ``null``; lasso adds ``lasso``.
        """
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "method": self.method,
            "empty": self.empty,
            "units": self.units.tolist(),
            "coef": [float(c) if np.isfinite(c) else None for c in self.coef.tolist()],
            "n_models": int(self.models_used.sum()),
            "n_candidates": int(self.candidates.size),
            "loo_r2": self.loo_r2,
            "calibration": None if self.calibration is None else self.calibration.summary(),
        }
        s = self.selection
        if s is not None:
            out |= {
                "criterion": s.criterion,
                "criterion_path": s.criterion_path.tolist(),
                "rss_path": s.rss_path.tolist(),
                "r2": s.r2,
                "adj_r2": s.adj_r2,
                "best_strength": self.screen.best if self.screen is not None else None,
            }
        if "lasso" in self.extra:
            out["lasso"] = dict(self.extra["lasso"])
        if "levels" in self.extra:
            out["levels"] = [dict(level) for level in self.extra["levels"]]
        if self.bootstrap_frequency is not None:
            out["bootstrap_frequency"] = self.bootstrap_frequency.tolist()
        if self.null is not None:
            out["null"] = self.null.summary()
        return out


def values_source(source: Any, nll_arrays: Any) -> Any:
    if nll_arrays is not None:
        return nll_arrays
    if isinstance(source, RankStore):
        raise SigmapInputError(
            "this method needs the per-unit values (NLL), not only their ranks: pass "
            "nll_arrays= with a RankStore source"
        )
    return source

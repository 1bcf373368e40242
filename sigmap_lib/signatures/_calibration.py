"""Calibrated signatures: a single-step max-T permutation test (Westfall–Young) over ALL
corpus units, computed in one streaming pass, valid when every unit loads on model quality.

Method ``"calibrated"`` (the default of :func:`sigmap_lib.signatures.extract_signatures`)
----------------------------------------------------------------------------------------
The question: does unit ``j``'s perplexity track benchmark ``b`` *beyond* general model
quality? With real LLMs nearly every unit's perplexity falls with quality, strongly and
unevenly (unit–quality correlations 0.3–0.9), and scores rise with it, often nonlinearly.
For each set of scored models ``S`` (benchmarks are grouped by the models that have a
score; ``m = |S|``):

1. **General quality** ``ĝ``: minus each model's mean per-unit value (NLL) over all ``d``
   units — its corpus bits per byte up to a constant, *not ranked* (one streamed pass).
   Its noise is that of a mean over ``d`` units, negligible at ``d ≥ 1e4``.
2. **Quality basis** ``Z = [1, spline(ĝ)]`` (+ one indicator per stratum with ``strata``;
   :func:`~sigmap_lib.signatures.quality_basis`: a quadratic below 16 models, a cubic spline
   with one interior knot from 16), orthonormalized to ``Q``. Strata of fewer than
   :data:`~sigmap_lib.signatures.MIN_STRATUM_MODELS` = 3 models are pooled into one
   (:func:`~sigmap_lib.signatures.pooled_strata`): real model sets have many families of one
   or two models, which cannot be permuted within and whose effects would use up the degrees
   of freedom.
3. **Statistic**: each unit's *values* residualized on ``Q`` (``r_j = (I − QQᵀ)v_j``); the
   benchmark's *scores* residualized on their own basis ``Q_b ⊇ Q``
   (:func:`~sigmap_lib.signatures.score_basis`: ``Q`` widened by a cubic spline of ``ĝ``
   with 3, 5, 8 or 12 knots when that lowers the BIC of the fit), then **studentized**:
   divided by their spread along quality, ``exp(a + b·z(ĝ))`` fitted to ``log |e|``
   (:func:`~sigmap_lib.signatures.score_scale`), and projected off ``Q_b`` again. The
   statistic is the Spearman correlation of ``r_j`` and that score residual
   (``partial_statistic="pearson"``: their Pearson correlation), with the sign of the Thrush
   correlation (positive = better models less perplexed).
4. **Null**: ``P`` Freedman–Lane permutations of the studentized residual, each multiplied
   back by the fitted spread, re-residualized on ``Q_b``, re-studentized and ranked —
   permuting **only within blocks** of models consecutive in ``ĝ``
   (:func:`~sigmap_lib.signatures.quality_blocks`; within strata when given):
   ``round(n / 4)`` runs of 3–7 models (:data:`~sigmap_lib.signatures.BLOCK_MODELS` = 4),
   cut where the benchmark's own scores jump — the cut with the least within-run sum of
   squares of the scores, by dynamic programming — so a score that steps along quality keeps
   each model in its band under the null (one cut for all scores with ``shared_null`` or
   ``fwer="all"``, whose permutations are shared). Per permutation the maximum ``|ρ|`` over all ``d`` units, in the same pass
   (per-chunk or per-shard maxima merge by ``max``: :func:`merge_max_t`). With
   ``shared_null`` one set of ``P`` columns serves every benchmark of the model set:
   permuted normal scores ``Φ⁻¹(i/(m+1))`` in a random order, residualized on ``Q`` (an
   approximation: the residual's own values are replaced by normal-shaped ones). The design
   allows ``Π_b n_b!`` distinct permutations (``Calibration.n_distinct_permutations``):
   13,824 or more without strata (three blocks of 4 at m = 12; a cut of unequal runs only
   adds permutations, since ``Π n_b!`` is least for the most equal cut), and at least 2,592 in every
   stratified design that keeps the :data:`MIN_RESIDUAL_DF` residual degrees of freedom the
   test requires (m = 12–24, every layout of strata; the fewest: 14 models in strata of 6,
   6 and 2), so the degrees-of-freedom rule is the one that refuses.

Why (derivation). Freedman–Lane's permutation null is exact when the score errors are
exchangeable given the nuisance fit; it needs nothing of the units. With real LLMs the units
are functions of quality to within a few per cent (documents correlate with ``ĝ`` at
−0.999), so whatever the basis misses of a unit's own shape dominates its residual; a score
residual that still carries a function of quality (a hinge where a benchmark leaves chance,
a step, a sharp logistic: what a small spline misses) then correlates with every such unit,
while its permutations do not — the maximum over ``d`` units overshoots the null (measured on
the 89 real models: 0.10–0.19 for these shapes). Three things restore exchangeability of the
score side: (a) the score basis bends where the scores do (chosen by BIC per benchmark, so a
straight score pays nothing); (b) studentizing removes a spread that changes with quality
(real ARC-Easy errors spread 3× more among the weakest fifth of models); (c) permuting only
among neighbours in quality keeps any remaining function of ``ĝ``, and any remaining
spread, nearly in place under the null. Each alone left a shape failing (measured:
knots alone fail the step and the spread; blocks alone fail the sharp logistic); the three
together hold the level on every shape measured (``sigmap bench recovery``,
docs/RESULTS.md). Blocks of a fixed size fail one shape: real ARC-Easy accuracies shuffled
within quintiles of quality on all 89 real models (0.068 in 1,000 runs), where blocks
straddle the quintile steps of both the mean and the spread; blocks aligned with the
quintiles gave 0.032, which is what cutting the blocks where the scores jump does without
knowing the quintiles. Choosing the cut from the scores groups similar scores, which brings
the permuted residuals closer to the observed one: it leans conservative (the null tables
of ``sigmap bench recovery`` measure it: 0.025–0.060 on every scenario, docs/RESULTS.md).
The cost in power comes from the widened score basis, which a benchmark that did not need it
sometimes gets (recall at m = 32, ρ = 0.8, d = 2,000 on the same 60 worlds: 0.71, 0.79 with
the widening switched off, 0.71 with the blocks switched off; against the previous design
0.632 vs 0.744 on the bench's 100 worlds, 0.656 with blocks of a fixed 4). The units stay on the base basis: residualizing
them on each benchmark's widened basis recovers a little power but costs one more pass over
the units per distinct basis.
5. **Threshold** ``t = np.quantile([T*_1..T*_P, T_obs], 1 − α, method="higher")``; the
   **signature** is every unit with ``|ρ| > t``, strongest first (ties: smaller unit
   index), each with its adjusted p-value ``(1 + #{T*_p ≥ |ρ_j|}) / (P + 1)``. An empty
   signature is a result. Any unit can only pass when ``P ≥ 1/α``.
6. **Scope**: ``fwer="benchmark"`` (default) controls the family-wise error over each
   benchmark's ``d`` units — with ``B`` benchmarks the chance that *some* benchmark gets a
   false unit is up to ``B·α`` (measured: 0.30 for 8 benchmarks at α = 0.05);
   ``fwer="all"`` controls it over all units of all benchmarks (one set of permutations
   shared by every benchmark, one threshold from the maximum over all; measured 0.04).
7. **Small m**: refused below :data:`~sigmap_lib.signatures.MIN_MODELS_CALIBRATED` = 12
   scored models (or fewer than 9 residual degrees of freedom with strata): below that the
   permutation maximum over 1e4 units is ≈ 1 (|Spearman| reaches 1 at m ≤ 10), so nothing
   can be detected. The smallest detectable ``|partial ρ|`` is the threshold itself:
   ≈ 0.97 at m = 12, 0.95 at 16, 0.76 at 32, 0.56 at 64 (d = 1e4);
   :func:`~sigmap_lib.signatures.detectable_rho` gives it in closed form for any ``m`` and
   ``d`` and :func:`~sigmap_lib.signatures.models_needed` the models a given effect needs
   (the overlap report states both).

Why not the earlier statistic (ranks of the values residualized linearly on the *rank* of
the mean rank code): ranking before residualizing leaves a shared nonlinear function of
quality in both residuals, every unit's statistic shifts (≈ +0.04) and the maximum over
``d`` units overshoots the permutation null — non-empty signatures in 15–27 % of null runs
at m = 32–64 and 87 % at m = 8. Residualizing the values on an unranked ĝ with a flexible
basis on both sides removes that shared part; ranking only the residuals keeps the
robustness to heavy tails. The level and power of the current design, scenario by
scenario (synthetic hard worlds, real-like worlds and the 89 real models' loadings), are in
docs/RESULTS.md ("Signatures on real shapes") with their commands.

Method ``"calibrated-marginal"``: the same test on the normalized Thrush correlation
(:func:`sigmap_lib.signatures.thrush_correlation`, no ``ĝ``); its permutations permute the
scores (Freedman–Lane on ``[1]``), the shared null permutes untied ranks.
``two_sided=False`` gives the one-sided test on the signed statistic.

Numerics: the codes are small integers (exact in any float type). The observed statistics
(and the per-unit norms) are float64 products, equal to a direct float64 computation to
rounding (~1e-14); the ``B·P`` or ``P`` permutation columns — almost all of the work —
are float32 products (half the time of float64 on this machine, measured). For the
partial statistic that leaves a relative error of ~1e-7 on the null maxima (tested to
1e-5 against float64 brute force), far below the Monte-Carlo error of the threshold. The
marginal Thrush statistic is discrete (ties between a null maximum and a unit's value
are common), so it is computed exactly: integer score columns ``−c`` (products below
``2**24``, exact in float32), each maximum divided once by the column's normalizer —
bit-identical to :func:`~sigmap_lib.signatures.thrush_correlation`. Single-threaded BLAS runs on L2-sized blocks
shared among a few Python threads, like the screening; no ``(chunk × P)`` matrix is ever
formed (blocks of 1024 units × 128 columns).

How many units can exceed ``t``? Any number: the pass keeps a running top-``K`` per
benchmark (``K = buffer_units``) and checks a certificate at the end — when the ``K``-th
kept strength is ``≤ t`` (or fewer than ``K`` units were seen) no unit outside the buffer
can exceed ``t``; otherwise a second pass collects every unit above the now known ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures._fdr import fdr_threshold
from sigmap_lib.signatures._max_t import (
    MIN_MODELS_CALIBRATED,
    MIN_RESIDUAL_DF,
    MIN_STRATUM_MODELS,
    MIN_UNITS_CALIBRATED,
    Group,
    _Design,
    build_design,
    distinct_permutations,
    max_t_pass,
    pooled_strata,
    quality_basis,
    value_sums,
)
from sigmap_lib.signatures._statistics import (
    per_mask_groups,
    strength_of,
)

CALIBRATED_METHODS = ("calibrated", "calibrated-marginal")
FWER_SCOPES = ("benchmark", "all")
PARTIAL_STATISTICS = ("spearman", "pearson")


@dataclass(frozen=True, kw_only=True)
class DesignOptions:
    """What fixes a calibrated pass before it reads a unit: the test, its permutations and
    the estimate of general quality (checked on construction).

    Several passes built from the same options and scores (the levels of a hierarchy) use
    the same ``ĝ``, residuals and permutation columns (:func:`calibrated_design`).

    Attributes
    ----------
    method : {"calibrated", "calibrated-marginal"}
    n_permutations : int
    shared_null, two_sided : bool
    seed : int or numpy.random.Generator
    chunk_units : int
        Units read at a time (the result does not depend on it).
    strata : array_like, shape (n_models,), optional
        ``"calibrated"`` only.
    fwer : {"benchmark", "all"}
    names : sequence of str, optional
        The benchmarks, for messages.
    partial_statistic : {"spearman", "pearson"}
    quality_sums : (numpy.ndarray of shape (n_models,), int), optional
        Per-model value sums and the unit count that give ``ĝ`` (default: read from the
        source).
    """

    method: str
    n_permutations: int
    shared_null: bool
    two_sided: bool
    seed: int | np.random.Generator
    chunk_units: int
    strata: Any = None
    fwer: str = "benchmark"
    names: Any = None
    partial_statistic: str = "spearman"
    quality_sums: tuple[np.ndarray, int] | None = None

    def __post_init__(self) -> None:
        if self.method not in CALIBRATED_METHODS:
            raise SigmapInputError(f"calibrated method must be one of {CALIBRATED_METHODS}")
        if self.n_permutations < 1:
            raise SigmapInputError(f"method={self.method!r} needs n_permutations >= 1")
        if self.fwer not in FWER_SCOPES:
            raise SigmapInputError(f"fwer must be one of {FWER_SCOPES}, got {self.fwer!r}")
        if self.partial_statistic not in PARTIAL_STATISTICS:
            raise SigmapInputError(
                f"partial_statistic must be one of {PARTIAL_STATISTICS}, "
                f"got {self.partial_statistic!r}"
            )


# ----------------------------------------------------------------------------------------
# result types


@dataclass
class Calibration:
    """Max-T permutation calibration of one benchmark's signature.

    Attributes
    ----------
    method : {"calibrated", "calibrated-marginal"}
        The max-T test: the partial correlation given general quality ``ĝ``, or the
        marginal Thrush correlation.
    statistic : {"partial-pearson", "partial-spearman", "thrush", "preselect"}
        The statistic whose maximum over all units is calibrated (``"preselect"`` only for
        forward selection screened by it).
    alpha : float
        Family-wise error level.
    n_permutations : int
        ``P``.
    shared : bool
        One set of permutation columns for every benchmark with the same scored models.
    two_sided : bool
    threshold : float
        ``t = np.quantile([T*_1..T*_P, T_obs], 1 − α, method="higher")``.
    null_max : numpy.ndarray, shape (P,)
        ``T*_p``: the largest strength over all units under each permutation.
    observed_max : float
        ``T_obs``: the largest strength over all units with the real scores.
    units : numpy.ndarray of int64, shape (k,)
        The units the per-unit values refer to (the signature's units, in its order).
    values : numpy.ndarray, shape (k,)
        Signed statistic of each unit.
    adjusted_p : numpy.ndarray, shape (k,)
        ``(1 + #{T*_p ≥ strength_j}) / (P + 1)`` (family-wise adjusted, single-step).
    n_models, n_units : int
        ``m`` (scored models of the benchmark) and ``d`` (units tested).
    general_quality : numpy.ndarray, shape (n_models,), or None
        ``ĝ`` over the benchmark's scored models (``"calibrated"`` only): minus each
        model's mean per-unit value.
    permutations : numpy.ndarray of int, shape (P, n_models), or None
        ``π_p``: permutation ``p`` maps the residual vector ``e`` to ``e[π_p]`` (over the
        scored models, in model order; shared by the model set when ``shared``).
    reason : str or None
        Why the signature is empty (``None`` when it is not).
    fwer : {"benchmark", "all"}
        The family the error is controlled over: this benchmark's ``d`` units, or every
        unit of every benchmark of the call (one threshold from the maximum over all).
    strata : numpy.ndarray, shape (n_models,), or None
        The stratum of each scored model when the test was stratified (permutations
        within strata, stratum effects regressed out), else ``None``.
    basis_columns : int or None
        Columns of the quality basis regressed out (``"calibrated"``; with the strata).
    blocks : numpy.ndarray of int, shape (n_models,), or None
        The permutation block of each scored model (``"calibrated"``).
    fdr : float or None
        The false-discovery rate the units were claimed at (the FDR mode: ``threshold``
        is then the false-discovery threshold, behind a max-T gate at this level); None
        when the claims hold the family-wise error ``alpha``.

    Examples
    --------
    Two planted units among 400, twelve models; 99 permutations:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import extract_signatures
    >>> rng = np.random.default_rng(0)
    >>> y, values = rng.standard_normal(12), rng.standard_normal((400, 12))  # (n_units, n_models)
    >>> values[[7, 300]] = -y + 0.05 * rng.standard_normal((2, 12))
    >>> [sig] = extract_signatures(values, y, method="calibrated-marginal", n_permutations=99)
    >>> cal = sig.calibration
    >>> sig.units.tolist(), cal.adjusted_p.tolist(), cal.null_max.shape
    ([7, 300], [0.01, 0.01], (99,))
    >>> bool(cal.threshold < cal.observed_max), cal.summary()["n_permutations"]
    (True, 99)
    """

    method: str
    statistic: str
    alpha: float
    n_permutations: int
    shared: bool
    two_sided: bool
    threshold: float
    null_max: np.ndarray
    observed_max: float
    units: np.ndarray
    values: np.ndarray
    adjusted_p: np.ndarray
    n_models: int
    n_units: int
    general_quality: np.ndarray | None = None
    permutations: np.ndarray | None = None
    reason: str | None = None
    fwer: str = "benchmark"
    strata: np.ndarray | None = None
    basis_columns: int | None = None
    blocks: np.ndarray | None = None
    fdr: float | None = None

    @property
    def n_distinct_permutations(self) -> int | None:
        """How many distinct permutations the design allows (``Π_b n_b!`` over the
        permutation blocks; ``None`` for the marginal test, which permutes all models)."""
        return None if self.blocks is None else distinct_permutations(self.blocks)

    @property
    def controlled_for_strata(self) -> bool:
        """Whether permutations stayed within strata (e.g. model families) and stratum
        effects were regressed out."""
        return self.strata is not None

    @property
    def p_value(self) -> float:
        """Global p-value ``(1 + #{T*_p ≥ T_obs}) / (P + 1)`` (= the smallest adjusted p)."""
        return adjusted_p_values(np.sort(self.null_max), np.array([self.observed_max]))[0]

    def summary(self) -> dict[str, Any]:
        """JSON-able summary: the test, threshold, null sample (and its quantiles) and
        the adjusted p-value of every unit."""
        null = self.null_max
        q = (lambda x: float(np.quantile(null, x))) if null.size else (lambda x: None)
        return {
            "method": self.method,
            "statistic": self.statistic,
            "alpha": self.alpha,
            "n_permutations": self.n_permutations,
            "shared": self.shared,
            "two_sided": self.two_sided,
            "threshold": _num(self.threshold),
            "observed_max": _num(self.observed_max),
            "p_value": _num(self.p_value),
            "null_max_summary": {
                "min": q(0.0),
                "median": q(0.5),
                "q95": q(0.95),
                "max": q(1.0),
                "mean": float(null.mean()) if null.size else None,
            },
            "null_max": [_num(v) for v in null.tolist()],
            "units": self.units.tolist(),
            "values": [_num(v) for v in self.values.tolist()],
            "adjusted_p": [_num(v) for v in self.adjusted_p.tolist()],
            "n_models": self.n_models,
            "n_units": self.n_units,
            "general_quality": None
            if self.general_quality is None
            else self.general_quality.tolist(),
            "reason": self.reason,
            "fwer": self.fwer,
            "fdr": self.fdr,
            "controlled_for_strata": self.controlled_for_strata,
            "strata": None if self.strata is None else [str(v) for v in self.strata.tolist()],
            "basis_columns": self.basis_columns,
            "blocks": None if self.blocks is None else self.blocks.tolist(),
            "n_distinct_permutations": None
            if self.blocks is None
            else float(min(self.n_distinct_permutations or 0, 1e300)),
        }


def _num(x: float) -> float | None:
    """A float for JSON (NaN / inf -> None)."""
    return float(x) if np.isfinite(x) else None


def adjusted_p_values(null_sorted: np.ndarray, strength: np.ndarray) -> np.ndarray:
    """``(1 + #{null ≥ s}) / (P + 1)`` for every ``s`` of ``strength``."""
    p = null_sorted.size
    ge = p - np.searchsorted(null_sorted, strength, side="left")
    return (1.0 + ge) / (p + 1.0)


def max_t_threshold(null_max: Any, observed_max: float, alpha: float = 0.05) -> float:
    """The max-T threshold ``np.quantile([T*_1..T*_P, T_obs], 1 − α, method="higher")``.

    Parameters
    ----------
    null_max : array_like, shape (P,)
        Largest strength over all units under each permutation.
    observed_max : float
        Largest strength over all units with the real scores.
    alpha : float
        Family-wise error level in (0, 1).

    Returns
    -------
    float
        Units whose strength is strictly above it form the signature.

    Examples
    --------
    >>> from sigmap_lib.signatures import max_t_threshold
    >>> null = [0.50, 0.61, 0.55, 0.58, 0.70, 0.52, 0.57, 0.66, 0.59, 0.62,
    ...         0.54, 0.60, 0.53, 0.64, 0.56, 0.51, 0.63, 0.65, 0.67, 0.69]
    >>> max_t_threshold(null, 0.9)  # 21 values: the 2nd largest
    0.7
    >>> max_t_threshold(null, 0.9, alpha=0.2)
    0.66
    """
    if not 0.0 < alpha < 1.0:
        raise SigmapInputError(f"alpha must be in (0, 1), got {alpha}")
    vals = np.append(np.asarray(null_max, dtype=np.float64).reshape(-1), float(observed_max))
    return float(np.quantile(vals, 1.0 - alpha, method="higher"))


# ----------------------------------------------------------------------------------------
# the whole test


@dataclass
class CalibratedResult:
    """One benchmark's calibrated signature (units, signed statistics, calibration)."""

    units: np.ndarray
    values: np.ndarray
    calibration: Calibration
    models_used: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


def check_calibrated_models(m: int, strata: Any = None, name: str = "") -> None:
    """Refuse a calibrated test that cannot hold its level or detect anything.

    Raises :class:`~sigmap_lib.errors.SigmapInputError` naming ``m`` when fewer than
    :data:`MIN_MODELS_CALIBRATED` models are scored, or when the quality basis and the
    strata leave fewer than :data:`MIN_RESIDUAL_DF` residual degrees of freedom.

    Examples
    --------
    >>> from sigmap_lib.signatures import check_calibrated_models
    >>> check_calibrated_models(32)
    >>> check_calibrated_models(8, name="arc")
    Traceback (most recent call last):
    ...
    sigmap_lib.errors.SigmapInputError: benchmark 'arc': 8 scored models; the calibrated signature test needs >= 12 (below that the permutation maximum over the units is close to 1 and nothing can be detected): score more models, or use method='aic' for an uncalibrated description
    """
    where = f"benchmark {name!r}: " if name else ""
    if m < MIN_MODELS_CALIBRATED:
        raise SigmapInputError(
            f"{where}{m} scored models; the calibrated signature test needs >= "
            f"{MIN_MODELS_CALIBRATED} (below that the permutation maximum over the units is "
            "close to 1 and nothing can be detected): score more models, or use method='aic' "
            "for an uncalibrated description"
        )
    if strata is not None:
        pooled = pooled_strata(strata)
        q = quality_basis(np.linspace(0.0, 1.0, m), pooled).shape[1]
        if m - q < MIN_RESIDUAL_DF:
            raise SigmapInputError(
                f"{where}{m} scored models in {len(set(pooled.tolist()))} strata (strata of "
                f"fewer than {MIN_STRATUM_MODELS} models pooled) leave {m - q} residual "
                "degrees of freedom after the quality basis and the strata; the calibrated "
                f"test needs >= {MIN_RESIDUAL_DF}: merge small strata or score more models"
            )


def calibrated_signatures(
    source: Any,
    y: np.ndarray,
    options: DesignOptions,
    *,
    alpha: float,
    buffer_units: int,
    design: _Design | None = None,
    fdr: float | None = None,
) -> list[CalibratedResult]:
    """Max-T calibrated signatures of every column of ``y (m, B)`` (see module docstring).

    ``source`` holds per-unit values for ``"calibrated"`` (rank codes suffice for the
    marginal test). ``design``: the scores' residuals and permutation columns from
    :func:`calibrated_design` with the same ``options`` (default: built here), so that
    several sources (the levels of a hierarchy) are tested with the same ones. ``fdr``:
    claim units at that false-discovery rate instead of the family-wise error ``alpha``
    (:mod:`._fdr`)."""
    if not 0.0 < alpha < 1.0:
        raise SigmapInputError(f"alpha must be in (0, 1), got {alpha}")
    if buffer_units < 1:
        raise SigmapInputError(f"buffer_units must be >= 1, got {buffer_units}")
    if fdr is not None and (options.method != "calibrated" or options.fwer != "benchmark"):
        raise SigmapInputError(
            "fdr= is an option of method='calibrated' with fwer='benchmark' (the rate is "
            "controlled per benchmark)"
        )
    if fdr is not None and not 0.0 < fdr < 1.0:
        raise SigmapInputError(f"fdr must be in (0, 1), got {fdr}")
    if design is None:
        design = calibrated_design(source, y, options)
    method, fwer = options.method, options.fwer
    n_permutations, two_sided = options.n_permutations, options.two_sided
    partial_statistic, chunk_units = options.partial_statistic, options.chunk_units
    design.pooled_null = fdr is not None
    part, _ = max_t_pass(source, design, buffer_units=buffer_units, chunk_units=chunk_units)
    # thresholds, and the certificate that the buffer holds every unit above them
    thresholds: dict[int, float] = {}
    spans: dict[int, tuple[Group, int]] = {}
    nulls: dict[int, np.ndarray] = {}
    for g in design.groups:
        for j, b in enumerate(g.cols.tolist()):
            spans[b] = (g, j)
            s0, s1 = g.null_span[j]
            nulls[b] = part.null_max[s0:s1].copy()
    observed = {b: float(part.observed_max[b]) for b in nulls}
    if fwer == "all":
        # one family: the maximum over every benchmark under the same permutation
        joint = np.max(np.vstack(list(nulls.values())), axis=0)
        joint_obs = max(observed.values())
        nulls = {b: joint for b in nulls}
        observed = {b: joint_obs for b in nulls}
    for b in nulls:
        thresholds[b] = max_t_threshold(nulls[b], observed[b], alpha)
    gated: set[int] = set()
    if fdr is not None:
        assert part.null_hist is not None and part.observed_hist is not None
        for b in nulls:
            if observed[b] <= max_t_threshold(nulls[b], observed[b], fdr):
                thresholds[b] = float("inf")  # the gate: max-T at level fdr
                gated.add(b)
                continue
            thresholds[b] = fdr_threshold(
                part.null_hist[b],
                n_permutations,
                part.strength(b),
                part.observed_hist[b],
                q=fdr,
                lo=0.0 if two_sided else -1.0,
                n_units=part.n_units,
            )
        for b in nulls:  # no claim: a finite threshold that nothing exceeds
            if not np.isfinite(thresholds[b]):
                gate = max_t_threshold(nulls[b], observed[b], fdr)
                thresholds[b] = max(gate, observed[b])
    overflow = {
        b: t
        for b, t in thresholds.items()
        if part.top_units[b].size >= buffer_units
        and part.n_units > buffer_units
        and part.strength(b)[buffer_units - 1] > t
    }
    collected: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if overflow:
        _, collected = max_t_pass(
            source, design, buffer_units=buffer_units, chunk_units=chunk_units, collect=overflow
        )
    out = []
    for b in range(design.n_bench):
        g, j = spans[b]
        t = thresholds[b]
        if b in collected:
            units, vals = collected[b]
        else:
            units, vals = part.top_units[b], part.top_values[b]
        st = strength_of(vals, "thrush", two_sided)
        keep = st > t
        units, vals, st = units[keep], vals[keep], st[keep]
        order = np.lexsort((units, -st))
        units, vals, st = units[order], vals[order], st[order]
        null = nulls[b]
        reason = g.reasons[j]
        if units.size == 0 and reason is None and fdr is not None:
            why = "the max-T gate" if b in gated else "the false-discovery threshold"
            reason = (
                f"no unit passes {why} at fdr = {fdr} "
                f"(m = {g.m}, d = {part.n_units}, P = {n_permutations})"
            )
        elif units.size == 0 and reason is None:
            scope = "" if fwer == "benchmark" else ", error controlled over all benchmarks"
            reason = (
                f"no unit above the max-T threshold {t:.4g} at alpha = {alpha} "
                f"(m = {g.m}, d = {part.n_units}, P = {n_permutations}{scope})"
            )
        cal = Calibration(
            method=method,
            statistic=f"partial-{partial_statistic}" if method == "calibrated" else "thrush",
            alpha=float(alpha),
            n_permutations=int(n_permutations),
            shared=bool(options.shared_null),
            two_sided=bool(two_sided),
            threshold=float(t),
            null_max=null,
            observed_max=observed[b],
            units=units.astype(np.int64),
            values=vals.astype(np.float64),
            adjusted_p=adjusted_p_values(np.sort(null), st),
            n_models=g.m,
            n_units=part.n_units,
            general_quality=None if g.ghat is None else g.ghat.copy(),
            permutations=g.perms[j],
            reason=reason if units.size == 0 else None,
            fwer=fwer,
            strata=None if g.strata is None else g.strata.copy(),
            basis_columns=None if g.basis is None else int(g.basis.shape[1]),
            blocks=None if g.blocks is None else g.blocks[j].copy(),
            fdr=fdr,
        )
        out.append(
            CalibratedResult(
                units=cal.units,
                values=cal.values,
                calibration=cal,
                models_used=g.mask.copy(),
                extra={"second_pass": b in collected},
            )
        )
    return out


def calibrated_design(source: Any, y: np.ndarray, options: DesignOptions) -> _Design:
    """What :func:`calibrated_signatures` fixes before its pass: the model groups, ``ĝ``,
    the scores' residuals and the permutation columns (checked: models, strata, units)."""
    method, strata, fwer, names = options.method, options.strata, options.fwer, options.names
    seed, quality_sums, chunk_units = options.seed, options.quality_sums, options.chunk_units
    groups = per_mask_groups(y)
    lab = None
    if strata is not None:
        lab = np.asarray(strata).reshape(-1)
        if lab.size != y.shape[0]:
            raise SigmapInputError(f"strata: {lab.size} labels for {y.shape[0]} models")
        if method != "calibrated":
            raise SigmapInputError("strata= is an option of method='calibrated'")
    if fwer == "all" and len(groups) > 1:
        raise SigmapInputError(
            "fwer='all' shares one set of model permutations among all benchmarks, so every "
            f"benchmark must be scored by the same models (here {len(groups)} different "
            "model sets): drop the models without every score, or use fwer='benchmark'"
        )
    if method == "calibrated":
        label = list(names) if names is not None else [f"#{b}" for b in range(y.shape[1])]
        for mk, cols in groups:
            check_calibrated_models(
                int(mk.sum()), None if lab is None else lab[mk], label[int(cols[0])]
            )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if method != "calibrated":
        sums, d = None, 1
    elif quality_sums is not None:
        sums, d = np.asarray(quality_sums[0], dtype=np.float64), int(quality_sums[1])
    else:
        sums, d = value_sums(source, chunk_units)
    if method == "calibrated" and d < MIN_UNITS_CALIBRATED:
        raise SigmapInputError(
            f"{d} units; the calibrated test estimates general quality as each model's mean "
            f"value over the units and needs >= {MIN_UNITS_CALIBRATED} for it to stand for "
            "quality (with fewer, units that load more on quality than the average track "
            "any score that depends on quality): add units, or test groups of units within "
            "a larger corpus (method='calibrated-multiresolution')"
        )
    return build_design(
        y,
        sums,
        groups,
        method=method,
        two_sided=options.two_sided,
        n_permutations=options.n_permutations,
        shared=options.shared_null,
        rng=rng,
        strata=lab,
        n_units=d,
        fwer=fwer,
        partial_statistic=options.partial_statistic,
    )


def calibration_from_null(
    *,
    units: np.ndarray,
    values: np.ndarray,
    strength: np.ndarray,
    null_max: np.ndarray,
    observed_max: float,
    alpha: float,
    statistic: str,
    two_sided: bool,
    n_models: int,
    n_units: int,
) -> Calibration:
    """Max-T calibration of given units from an existing null sample of the maximum
    screening strength (forward selection's permutation null: every unit, every permutation)."""
    null = np.asarray(null_max, dtype=np.float64)
    t = max_t_threshold(null, observed_max, alpha)
    return Calibration(
        method="calibrated-marginal",
        statistic=statistic,
        alpha=float(alpha),
        n_permutations=int(null.size),
        shared=False,
        two_sided=bool(two_sided),
        threshold=t,
        null_max=null,
        observed_max=float(observed_max),
        units=np.asarray(units, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
        adjusted_p=adjusted_p_values(np.sort(null), np.asarray(strength, dtype=np.float64)),
        n_models=int(n_models),
        n_units=int(n_units),
    )

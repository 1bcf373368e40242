"""Multi-resolution signatures: the calibrated partial test at every level of a hierarchy of
the corpus (sources → documents → units), the family-wise error held over all levels at once.

Why. Max-T over ``d`` units pays for every unit: at ``m = 32`` the smallest detectable
``|partial ρ|`` is 0.79 at ``d = 1e5`` and 0.86 at ``1e7`` (:func:`detectable_rho`). Real
text is organised: a signal that lives in a document shows in the document's mean value,
averaged over its units' independent noise, and there are 10³–10⁶ times fewer documents to
pay for (0.69 at 1e3 documents).

The test. A level is a labelling of the units into groups (a document id per unit, a source
id per unit). A group's value per model is the mean value of its units (bits per byte or
NLL). At every level the statistic is the calibrated default's
(:class:`~sigmap_lib.signatures.CalibratedPartial`): the rank correlation of the group's
values and the scores, both residualized on the same basis of the same general quality
``ĝ`` (from all ``d`` units, so a level of 8 sources gets the precise ``ĝ`` of the whole
corpus), with the same permutations ``π_1 … π_P`` of the score residuals at every level.
Permutation ``p`` gives each level's maximum ``M_ℓ[p]``; the real scores give ``M_ℓ[0]``.

Error control: single-step min-P over the union of all levels' hypotheses (Westfall and
Young 1993, Algorithm 2.8). For each of the ``P + 1`` worlds ``w`` (the real scores and
the permutations) and each level, ``p_ℓ(w) = #{w' : M_ℓ[w'] ≥ M_ℓ[w]} / (P + 1)``; the
world's smallest p over the levels is ``minp(w) = min_ℓ p_ℓ(w)``. A hypothesis of level
``ℓ`` with strength ``s`` gets ``p = #{w : M_ℓ[w] ≥ s} / (P + 1)`` and the adjusted
``p̃ = #{w : minp(w) ≤ p} / (P + 1)``; it is claimed when ``p`` is below ``c*``, the
``α``-quantile of ``minp`` over the worlds (``np.quantile(minp, α, method="lower")``;
with one level this is max-T's ``strength > threshold``). Under the complete
null the ``P + 1`` worlds are exchangeable (Freedman–Lane within blocks of similar ``ĝ``,
as for units), and a claim anywhere means ``minp(0) < c*``, which at most ``α(P + 1)`` of
the worlds' ``minp`` are: ``P(any claim at any level) ≤ α``;
and as with max-T, a claim on a true-null group only needs the worlds' maxima over the true
nulls, which the maxima over all groups bound (subset pivotality): the error is controlled
in the strong sense over units and groups together. Levels with few groups put their
maxima on a different scale; turning each level's maximum into its own p-value before the
minimum is what keeps a level of 20 sources from being drowned by a level of 1e6 units
(max-T on raw strengths would be). The price against one level alone is small because the
levels' maxima are dependent: ``c*`` lies between about ``α / L`` (``L`` independent
levels) and ``α`` (identical levels).

The hierarchy need not be nested for the error control; a significant group at one level
and the units inside it are both reported, so the claims read top-down (this source, and in
it these documents, and in them these units). A group's claim is about its mean: it does
not say every unit of it carries the signal. The signature's :attr:`Signature.units` are the
units covered by a claim at any level — claimed units and every unit of a claimed group —
in the order of the finest level's strength; ``extra["levels"]`` holds each level's claims.

Cost. One pass computes the group sums of every level and the total sums (``ĝ``) together
(a sparse product per chunk); the unit pass is the calibrated default's; each group level is
one more max-T pass over a matrix of ``n_groups × m`` means. Per-chunk partials merge exactly,
so sharded streaming works as for units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import scipy.sparse as sp

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures._calibration import (
    CalibratedResult,
    calibrated_design,
    calibrated_signatures,
)
from sigmap_lib.signatures._max_t_methods import CalibratedPartial
from sigmap_lib.signatures._method import Options, Pass
from sigmap_lib.signatures._result import UNIT_LEVEL, Signature, values_source
from sigmap_lib.signatures._screening import finite_column_sums, source_chunks
from sigmap_lib.signatures._statistics import check_benchmark, kernels


@dataclass(frozen=True)
class _Levels:
    """Constraint: a mapping of level name → one group label per unit."""

    def accepts(self, value: Any) -> bool:
        return (
            isinstance(value, Mapping)
            and len(value) > 0
            and all(isinstance(k, str) and k != UNIT_LEVEL for k in value)
            and all(np.ndim(v) == 1 for v in value.values())
        )

    def __str__(self) -> str:
        return (
            "a non-empty mapping of level name (not 'unit') to one group label per unit, "
            "e.g. {'document': doc_id_of_each_unit}"
        )


def group_sums(
    source: Any, levels: Sequence[np.ndarray], *, chunk_units: int = 1 << 20
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """Per-group value sums of every level and the total sums, in one streamed pass.

    Parameters
    ----------
    source : (n_units, n_models) array | sequence of per-model 1-D arrays
        Per-unit values (NLL or bits per byte).
    levels : sequence of numpy.ndarray of int, each shape (n_units,)
        Group index ``0 … n_groups − 1`` of each unit, per level.
    chunk_units : int
        Units read at a time (the sums do not depend on it).

    Returns
    -------
    sums : list of numpy.ndarray of float64, each shape (n_groups, n_models)
    total : numpy.ndarray of float64, shape (n_models,)
        ``Σ_j v_jk`` over all units (what :func:`general_quality` divides by ``d``).
    n_units : int

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import group_sums
    >>> values = np.arange(12.0).reshape(4, 3)  # (n_units, n_models)
    >>> [docs], total, d = group_sums(values, [np.array([0, 0, 1, 1])])
    >>> docs.tolist(), total.tolist(), d
    ([[3.0, 5.0, 7.0], [15.0, 17.0, 19.0]], [18.0, 22.0, 26.0], 4)
    """
    d, m, chunks, is_codes = source_chunks(source, chunk_units)
    if is_codes:
        raise SigmapInputError(
            "group means are means of the per-unit values (NLL), not of rank codes: pass "
            "the per-model NLL arrays (nll_arrays=) or a values matrix"
        )
    labs = [np.asarray(lab, dtype=np.int64) for lab in levels]
    sizes = [int(lab.max()) + 1 if lab.size else 0 for lab in labs]
    sums = [np.zeros((g, m)) for g in sizes]
    # a level that is a function of a finer level's groups (sources of documents) is summed
    # from that level's sums after the pass
    parent = [_nested_in(i, labs, sizes) for i in range(len(labs))]
    direct = [i for i, p in enumerate(parent) if p is None]
    total = np.zeros(m)
    kern = kernels()
    for start, block in chunks:
        n = block.shape[0]
        if n == 0:
            continue
        b = np.ascontiguousarray(block)
        total += finite_column_sums(b, start)
        if b.dtype.kind != "f":
            b = b.astype(np.float64)
        for i in direct:
            kern.group_add(b, labs[i][start : start + n], sums[i])
    for i, p in enumerate(parent):
        if p is not None:
            of = np.zeros(sizes[p], dtype=np.int64)
            of[labs[p]] = labs[i]
            sums[i] = (
                sp.csr_matrix(
                    (np.ones(sizes[p]), (of, np.arange(sizes[p]))), shape=(sizes[i], sizes[p])
                )
                @ sums[p]
            )
    return sums, total, d


def _nested_in(i: int, labs: list[np.ndarray], sizes: list[int]) -> int | None:
    """A finer level (more groups) whose every group lies inside one group of level ``i``
    and which is itself summed directly, or None."""
    for j in sorted(range(len(labs)), key=lambda k: -sizes[k]):
        if j == i or sizes[j] <= sizes[i] or labs[j].size != labs[i].size:
            continue
        of = np.full(sizes[j], -1, dtype=np.int64)
        of[labs[j]] = labs[i]
        if np.array_equal(of[labs[j]], labs[i]) and _nested_in(j, labs, sizes) is None:
            return j
    return None


@dataclass
class MinP:
    """Single-step min-P over levels (what :func:`minp_adjusted` returns).

    Attributes
    ----------
    level_max : list of numpy.ndarray, each shape (P + 1,)
        Per level, the maximum strength of each world (the real scores first).
    minp : numpy.ndarray, shape (P + 1,)
        ``min_ℓ #{w' : M_ℓ[w'] ≥ M_ℓ[w]} / (P + 1)`` per world ``w``.
    critical : float
        ``c* = np.quantile(minp, α, method="lower")``: a hypothesis is claimed when its
        level p-value is below it (with one level, max-T's rule ``strength > threshold``).
    """

    level_max: list[np.ndarray]
    minp: np.ndarray
    critical: float

    def p(self, level: int, strengths: Any) -> np.ndarray:
        """``#{w : M_ℓ[w] ≥ s} / (P + 1)``: the level's own max-T p-value of each strength."""
        srt = np.sort(self.level_max[level])
        s = np.asarray(strengths, dtype=np.float64)
        return (srt.size - np.searchsorted(srt, s, side="left")) / srt.size

    def adjusted(self, level: int, strengths: Any) -> np.ndarray:
        """``#{w : minp(w) ≤ p} / (P + 1)``: the adjusted p-value over all levels."""
        p = self.p(level, strengths)
        return np.searchsorted(np.sort(self.minp), p, side="right") / self.minp.size

    def claimed(self, level: int, strengths: Any) -> np.ndarray:
        """Whether each strength is claimed (``p < c*``)."""
        return self.p(level, strengths) < self.critical

    def threshold(self, level: int) -> float:
        """The strength a hypothesis of this level must exceed to be claimed."""
        vals = np.unique(self.level_max[level])
        ok = self.claimed(level, np.nextafter(vals, np.inf))
        return float(vals[ok].min())


def minp_adjusted(level_max: Sequence[Any], alpha: float = 0.05) -> MinP:
    """Single-step min-P over the union of several levels' hypotheses.

    Parameters
    ----------
    level_max : sequence of array_like, each shape (P + 1,)
        Per level, the maximum strength in each world: the real scores first, then each
        permutation (the same permutations at every level).
    alpha : float
        Family-wise error level over all levels.

    Returns
    -------
    MinP

    Examples
    --------
    One level is max-T: claims above the ``1 − α`` quantile of the worlds' maxima.

    >>> import numpy as np
    >>> from sigmap_lib.signatures import max_t_threshold, minp_adjusted
    >>> rng = np.random.default_rng(0)
    >>> M = np.concatenate([[0.95], rng.random(99)])  # real world first, 99 permutations
    >>> one = minp_adjusted([M])
    >>> one.threshold(0) == max_t_threshold(M[1:], M[0], 0.05)
    True
    >>> two = minp_adjusted([M, rng.random(100)])  # a second level costs a little
    >>> bool(two.threshold(0) >= one.threshold(0)), float(one.adjusted(0, [0.99])[0])
    (True, 0.02)
    """
    mats = [np.asarray(mx, dtype=np.float64).reshape(-1) for mx in level_max]
    n = mats[0].size
    if not mats or any(mx.size != n for mx in mats):
        raise SigmapInputError("every level needs the maximum of the same P + 1 worlds")
    out = MinP(level_max=mats, minp=np.zeros(n), critical=0.0)
    out.minp = np.min([out.p(i, mx) for i, mx in enumerate(mats)], axis=0)
    out.critical = float(np.quantile(out.minp, alpha, method="lower"))
    return out


def _labels(levels: Mapping[str, Any], d: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per level: the group ids (sorted) and each unit's group index."""
    out = {}
    for name, lab in levels.items():
        arr = np.asarray(lab).reshape(-1)
        if arr.size != d:
            raise SigmapInputError(
                f"level {name!r}: {arr.size} group labels for {d} units; give one label per "
                "unit (e.g. the document id of every unit)"
            )
        if arr.dtype.kind in "iu" and arr.size and arr.min() >= 0:
            # integer ids (document numbers): a lookup table instead of a sort
            present = np.flatnonzero(np.bincount(arr))
            index = np.zeros(int(arr.max()) + 1, dtype=np.int64)
            index[present] = np.arange(present.size)
            out[name] = (present.astype(arr.dtype), index[arr])
            continue
        # other labels (file names): hashed, in sorted order of the labels
        codes, uniques = pd.factorize(arr, sort=True)
        out[name] = (np.asarray(uniques), codes.astype(np.int64))
    return out


@dataclass(kw_only=True, repr=False, eq=False)
class CalibratedMultiResolution(CalibratedPartial):
    """The calibrated partial test of units and of the groups they sit in (documents,
    sources), with the family-wise error ``alpha`` over every unit and group of all levels
    (single-step min-P; see the module docstring).

    Parameters
    ----------
    levels : mapping of str to array_like, each shape (n_units,)
        Level name → the group label of each unit (e.g. ``{"source": …, "document": …}``),
        coarse to fine; the unit level is always tested too.
    The other parameters are :class:`CalibratedPartial`'s (``fwer`` = ``"benchmark"``).

    Examples
    --------
    Forty documents of ten units; in two of them every unit carries the signal weakly, with
    its own noise: no unit alone passes, their documents do.

    >>> import numpy as np
    >>> from sigmap_lib.signatures import CalibratedMultiResolution
    >>> rng = np.random.default_rng(3)
    >>> m, docs = 24, np.repeat(np.arange(40), 10)
    >>> g, z = rng.standard_normal(m), rng.standard_normal(m)
    >>> values = -g + rng.standard_normal((400, m))  # (n_units, n_models)
    >>> values[:20] += -0.7 * z                     # documents 0 and 1
    >>> method = CalibratedMultiResolution(levels={"document": docs}, n_permutations=99)
    >>> [sig] = method.extract(values, (g + z)[:, None], names=["bench"])
    >>> [(lv["level"], lv["groups"]) for lv in sig.extra["levels"]]
    [('document', [0, 1]), ('unit', [])]
    >>> sig.units.size  # the units of the claimed documents
    20
    """

    name: ClassVar[str] = "calibrated-multiresolution"
    counterpart: ClassVar[str | None] = None
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **CalibratedPartial._parameter_constraints,
        "levels": [None, _Levels()],
        "fwer": [Options(("benchmark",))],
        "fdr": [None],
    }

    levels: Any = None

    def _extract(self, source: Any, scores: np.ndarray, run: Pass) -> list[Signature]:
        if self.levels is None:
            raise SigmapInputError(
                f"method={self.name!r} needs levels= (level name → the group label of "
                "every unit, e.g. {'document': document_of_each_unit})"
            )
        for b, name in enumerate(run.names):
            check_benchmark(scores[:, b], name)
        values = values_source(source, run.nll_arrays)
        d = source_chunks(values, run.chunk_units)[0]
        labels = _labels(self.levels, d)
        sums, total, d = group_sums(
            values, [inv for _, inv in labels.values()], chunk_units=run.chunk_units
        )
        # one design (ĝ, residuals, permutations) for every level
        options = self.design_options(run, quality_sums=(total, d))
        design = calibrated_design(values, scores, options)
        common = {"alpha": self.alpha, "buffer_units": self.buffer_units, "design": design}
        per_level: dict[str, list[CalibratedResult]] = {}
        for (name, (ids, inv)), s in zip(labels.items(), sums):
            counts = np.bincount(inv, minlength=ids.size).astype(np.float64)
            means = s / counts[:, None]
            per_level[name] = calibrated_signatures(means, scores, options, **common)
        per_level[UNIT_LEVEL] = calibrated_signatures(values, scores, options, **common)
        return [self._combine(b, run.names[b], per_level, labels) for b in range(scores.shape[1])]

    def _combine(
        self,
        b: int,
        name: str,
        per_level: dict[str, list[CalibratedResult]],
        labels: dict[str, tuple[np.ndarray, np.ndarray]],
    ) -> Signature:
        names = list(per_level)
        cals = [per_level[lv][b].calibration for lv in names]
        worlds = [np.concatenate([[c.observed_max], c.null_max]) for c in cals]
        mp = minp_adjusted(worlds, self.alpha)
        report, claims = [], []
        for i, (lv, cal) in enumerate(zip(names, cals)):
            strength = np.abs(cal.values) if self.two_sided else cal.values
            adj = mp.adjusted(i, strength)
            keep = mp.claimed(i, strength)
            members = cal.units[keep]
            if lv == UNIT_LEVEL:
                groups = members
                claims.append((members, lv, cal.values[keep], adj[keep]))
            else:
                ids, inv = labels[lv]
                groups = ids[members]
                inside = np.flatnonzero(np.isin(inv, members))
                order = np.argsort(members)  # each unit inside: its group's claim
                at = order[np.searchsorted(members, inv[inside], sorter=order)]
                claims.append((inside, lv, cal.values[keep][at], adj[keep][at]))
            report.append(
                {
                    "level": lv,
                    "n_groups": int(cal.n_units),
                    "groups": groups.tolist(),
                    "statistics": cal.values[keep].tolist(),
                    "adjusted_p": adj[keep].tolist(),
                    "threshold": mp.threshold(i),
                    "observed_max": float(cal.observed_max),
                }
            )
        unit_cal = cals[-1]
        units, claim = _first_claims(claims[::-1])  # a unit's own claim, then the finest group's
        claimed = np.isin(unit_cal.units, report[-1]["groups"])
        unit_cal.units, unit_cal.values = unit_cal.units[claimed], unit_cal.values[claimed]
        unit_cal.adjusted_p = np.asarray(report[-1]["adjusted_p"], dtype=np.float64)
        unit_cal.threshold = report[-1]["threshold"]
        unit_cal.method = self.name
        unit_cal.reason = None if units.size else _reason(report, self.alpha, unit_cal)
        return Signature(
            benchmark=name,
            units=units,
            models_used=per_level[UNIT_LEVEL][b].models_used,
            method=self.name,
            calibration=unit_cal,
            extra={"levels": report, "claims": claim},
        )


def _first_claims(
    claims: list[tuple[np.ndarray, str, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, dict[str, list]]:
    """The units of ``claims`` (``(units, level, statistic, adjusted_p)`` each, in order of
    precedence), each once with the first claim that holds it: ``units`` and the claims'
    ``level``, ``statistic`` and ``adjusted_p`` aligned with them."""
    units = np.concatenate([c[0] for c in claims]).astype(np.int64)
    level = np.concatenate([np.full(c[0].size, c[1], dtype=object) for c in claims])
    stat = np.concatenate([np.asarray(c[2], dtype=np.float64) for c in claims])
    adj = np.concatenate([np.asarray(c[3], dtype=np.float64) for c in claims])
    _, at = np.unique(units, return_index=True)
    first = np.sort(at)
    claim = {
        "level": level[first].tolist(),
        "statistic": stat[first].tolist(),
        "adjusted_p": adj[first].tolist(),
    }
    return units[first], claim


def _reason(report: list[dict[str, Any]], alpha: float, cal: Any) -> str:
    parts = ", ".join(f"{r['level']} {r['threshold']:.4g} ({r['n_groups']})" for r in report)
    return (
        f"no unit or group above the min-P thresholds at alpha = {alpha} over all levels "
        f"(threshold (groups) per level: {parts}; m = {cal.n_models}, "
        f"P = {cal.n_permutations})"
    )

"""Signature-level overlap: Spearman of per-model signature z-scores, its permutation null (METHODS §4)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap._matrix import OverlapMatrix, spearman_overlap

# ---------------------------------------------------------------------------------------
# Signature overlap
# ---------------------------------------------------------------------------------------
NLLSource = np.ndarray | Callable[[np.ndarray], np.ndarray]


class SignedUnits(NamedTuple):
    """A signature's unit ids with each unit's direction.

    ``orientation[i]`` is +1 where better-scoring models are less perplexed on unit
    ``units[i]`` and −1 where they are more perplexed
    (:func:`sigmap_lib.signatures.unit_orientation`). A
    :class:`~sigmap_lib.signatures.Signature` carries both too, and plain unit ids count as
    all +1.
    """

    units: np.ndarray
    orientation: np.ndarray


#: Unit ids (all +1), :class:`SignedUnits`, or anything with ``units`` and ``orientation``
#: (a :class:`~sigmap_lib.signatures.Signature`).
SignatureLike = Sequence[int] | np.ndarray | SignedUnits | Any


def signed_units(value: SignatureLike) -> SignedUnits:
    """``value`` (unit ids, a :class:`SignedUnits` or a ``Signature``) as :class:`SignedUnits`.

    Examples
    --------
    >>> from sigmap_lib.overlap import SignedUnits, signed_units
    >>> signed_units([4, 9]).orientation.tolist()
    [1.0, 1.0]
    >>> signed_units(SignedUnits([4, 9], [1, -1])).orientation.tolist()
    [1.0, -1.0]
    """
    if hasattr(value, "units") and hasattr(value, "orientation"):
        units = np.asarray(value.units, dtype=np.int64).ravel()
        orient = np.asarray(value.orientation, dtype=np.float64).ravel()
        if orient.shape != units.shape:
            raise SigmapInputError(
                f"signature overlap: {units.size} units but {orient.size} orientations"
            )
        if not np.isin(orient, (-1.0, 1.0)).all():
            raise SigmapInputError("signature overlap: every orientation must be +1 or -1")
        return SignedUnits(units, orient)
    units = np.asarray(value, dtype=np.int64).ravel()
    return SignedUnits(units, np.ones(units.size))


def _read_nll(
    nll: NLLSource, units: np.ndarray | None, wanted: np.ndarray, n_models: int
) -> np.ndarray:
    """NLL ``(len(wanted), n_models)`` at the unit ids ``wanted``."""
    if callable(nll):
        out = np.asarray(nll(wanted), dtype=np.float64)
    else:
        arr = np.asarray(nll, dtype=np.float64)
        if arr.ndim != 2:
            raise SigmapInputError(
                f"signature overlap: nll must be (n_units, n_models), got shape {arr.shape}"
            )
        if units is None:
            units = np.arange(arr.shape[0])
        units = np.asarray(units, dtype=np.int64)
        if units.shape != (arr.shape[0],):
            raise SigmapInputError(
                f"signature overlap: units has shape {units.shape}, expected ({arr.shape[0]},) (one id per nll row)"
            )
        sorter = np.argsort(units, kind="stable")
        pos = np.searchsorted(units, wanted, sorter=sorter)
        pos = np.clip(pos, 0, len(units) - 1)
        rows = sorter[pos]
        bad = units[rows] != wanted
        if bad.any():
            raise SigmapInputError(
                f"signature overlap: signature units {wanted[bad][:10].tolist()} are not among the rows of nll"
            )
        out = arr[rows]
    if out.shape != (len(wanted), n_models):
        raise SigmapInputError(
            f"signature overlap: NLL at {len(wanted)} units must have shape ({len(wanted)}, {n_models}), got {out.shape}"
        )
    if not np.isfinite(out).all():
        raise SigmapInputError("signature overlap: NLL at signature units contains NaN/inf")
    return out


@dataclass(frozen=True)
class UnitBits:
    """Each model's standardised bits per byte at any corpus units: what the signature level reads.

    ``z_{k,j} = (bpb_{k,j} − bpb_mean_k) / bpb_sd_k`` with ``bpb = NLL / (n_bytes · ln 2)``
    and the per-model mean/sd of bits-per-byte over the whole corpus (computed elsewhere,
    streaming; e.g. ``RankStore``). Only the units a signature names are ever read.

    Parameters
    ----------
    nll : np.ndarray or callable
        Either ``(k, n_models)`` NLL in nats at the unit ids ``units`` (unit-major), or a
        callable ``read(unit_ids (k,)) -> (k, n_models)`` (e.g. reading the NLL stores).
    unit_nbytes : np.ndarray or callable
        Byte length of each unit: aligned with ``units`` (array form of ``nll``), or a
        full ``(n_units,)`` array indexed by unit id, or a callable ``read(unit_ids)``.
    bpb_mean, bpb_sd : np.ndarray
        ``(n_models,)`` whole-corpus bits-per-byte mean and sd per model (sd > 0).
    units : np.ndarray, optional
        ``(k,)`` unit ids of the rows of an array ``nll`` (default ``0..k-1``).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import UnitBits
    >>> nll = np.array([[2.0, 4.0], [3.0, 3.0], [4.0, 2.0]])  # 3 units x 2 models, nats
    >>> nbytes = np.full(3, 1 / np.log(2))  # so that bits per byte = nats
    >>> bits = UnitBits(nll, nbytes, bpb_mean=nll.mean(axis=0), bpb_sd=nll.std(axis=0))
    >>> bits.n_models, np.round(bits.z(np.array([0, 2])), 3).tolist()
    (2, [[-1.225, 1.225], [1.225, -1.225]])
    >>> bits.for_models([1]).z(np.array([0])).tolist()
    [[1.224744871391589]]
    >>> bool(np.allclose(UnitBits.of_matrix(nll, nbytes).z(np.arange(3)), bits.z(np.arange(3))))
    True
    """

    nll: NLLSource
    unit_nbytes: np.ndarray | Callable[[np.ndarray], np.ndarray]
    bpb_mean: np.ndarray
    bpb_sd: np.ndarray
    units: np.ndarray | None = None

    def __post_init__(self) -> None:
        mean = np.asarray(self.bpb_mean, dtype=np.float64)
        sd = np.asarray(self.bpb_sd, dtype=np.float64)
        if mean.ndim != 1 or sd.shape != mean.shape:
            raise SigmapInputError(
                f"signature overlap: bpb_mean/bpb_sd must be (n_models,), got {mean.shape} and {sd.shape}"
            )
        if not (np.isfinite(sd).all() and (sd > 0).all()):
            raise SigmapInputError(
                "signature overlap: bpb_sd must be finite and > 0 for every model"
            )
        object.__setattr__(self, "bpb_mean", mean)
        object.__setattr__(self, "bpb_sd", sd)

    @classmethod
    def of_matrix(cls, nll: np.ndarray, unit_nbytes: np.ndarray) -> UnitBits:
        """Every unit of a corpus in memory: ``nll (n_units, n_models)`` in nats and
        ``unit_nbytes (n_units,)``; the moments are the matrix's own (population sd)."""
        x = np.asarray(nll, dtype=np.float64)
        nb = np.asarray(unit_nbytes, dtype=np.float64)
        if x.ndim != 2 or nb.shape != (x.shape[0],):
            raise SigmapInputError(
                f"signature overlap: nll must be (n_units, n_models) and unit_nbytes (n_units,), got {x.shape} and {nb.shape}"
            )
        bpb = x / (nb[:, None] * math.log(2.0))
        return cls(x, nb, bpb.mean(axis=0), bpb.std(axis=0))

    @classmethod
    def from_arrays(
        cls,
        nll_arrays: Sequence[Any],
        unit_nbytes: np.ndarray,
        bpb_mean: np.ndarray,
        bpb_sd: np.ndarray,
    ) -> UnitBits:
        """Per-model NLL arrays over the units (zarr or NumPy), read by unit id
        (:func:`sigmap_lib.signatures.gather_units`); ``unit_nbytes`` ``(n_units,)``."""
        from sigmap_lib.signatures import gather_units

        arrays = list(nll_arrays)
        return cls(lambda u: gather_units(arrays, u).T, unit_nbytes, bpb_mean, bpb_sd)

    @property
    def n_models(self) -> int:
        return int(self.bpb_mean.shape[0])

    def for_models(self, models: Sequence[int] | np.ndarray) -> UnitBits:
        """The same units seen by the models ``models`` (column indices) only."""
        idx = np.asarray(models, dtype=np.int64)
        if callable(self.nll):
            read = self.nll
            nll: NLLSource = lambda u: np.asarray(read(u))[:, idx]  # noqa: E731
        else:
            nll = np.asarray(self.nll)[:, idx]
        return UnitBits(nll, self.unit_nbytes, self.bpb_mean[idx], self.bpb_sd[idx], self.units)

    def z(self, wanted: np.ndarray) -> np.ndarray:
        """``(len(wanted), n_models)`` standardised bits per byte at the sorted unique unit
        ids ``wanted``."""
        x = _read_nll(self.nll, self.units, wanted, self.n_models)
        nbytes = self._nbytes(wanted)
        bpb = x / (nbytes[:, None] * math.log(2.0))
        return (bpb - self.bpb_mean[None, :]) / self.bpb_sd[None, :]

    def _nbytes(self, wanted: np.ndarray) -> np.ndarray:
        if callable(self.unit_nbytes):
            nbytes = np.asarray(self.unit_nbytes(wanted), dtype=np.float64)
        else:
            nb_arr = np.asarray(self.unit_nbytes, dtype=np.float64)
            units = self.units
            if not callable(self.nll) and units is not None and nb_arr.shape == np.shape(units):
                u = np.asarray(units, dtype=np.int64)
                sorter = np.argsort(u, kind="stable")
                nbytes = nb_arr[sorter[np.searchsorted(u, wanted, sorter=sorter)]]
            else:
                if nb_arr.ndim != 1 or wanted.max() >= nb_arr.shape[0]:
                    raise SigmapInputError(
                        f"signature overlap: unit_nbytes (shape {nb_arr.shape}) must be aligned with units or cover unit id {int(wanted.max())}"
                    )
                nbytes = nb_arr[wanted]
        if nbytes.shape != wanted.shape or not (nbytes > 0).all():
            raise SigmapInputError(
                "signature overlap: unit_nbytes must be > 0 at every signature unit"
            )
        return nbytes


def signature_model_scores(
    signatures: Mapping[str, SignatureLike], bits: UnitBits
) -> tuple[list[str], np.ndarray]:
    """Per-model signature scores ``s_b[k] = mean_{j ∈ S_b} o_j · z_{k,j}``.

    ``z_{k,j}`` is model k's standardised bits per byte at unit j (:class:`UnitBits`).
    ``o_j`` is the unit's direction (+1: better-scoring
    models are less perplexed on it, −1: more): a two-sided signature holds units of both
    directions, and an unsigned mean would let them cancel. For a signature whose units all
    point the same way (plain unit ids count as +1) this is the plain mean of METHODS §4.
    On the zoo (32 models, 9 non-empty signatures) the unsigned mean gave a within-function
    mean overlap of 0.01 against 0.03 across functions; the oriented one 0.42 against 0.22
    (docs/RESULTS.md).

    Parameters
    ----------
    signatures : mapping benchmark -> unit ids, SignedUnits or Signature
        Global corpus unit indices of each benchmark's signature, with their directions
        (:class:`SignedUnits`, or a ``Signature``, whose ``orientation`` comes from its
        statistics). An empty signature (no unit above chance) gives a NaN column: such a
        benchmark has no signature score.
    bits : UnitBits
        The models' bits per byte at the units, and their whole-corpus moments.

    Returns
    -------
    labels : list of str
    scores : np.ndarray
        ``(n_models, B)`` float64.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import UnitBits, signature_model_scores
    >>> rng = np.random.default_rng(0)
    >>> nll = rng.gamma(4.0, 2.0, size=(6, 3))  # 6 units x 3 models, nats
    >>> nbytes = np.array([4, 5, 3, 6, 4, 5])
    >>> bpb = nll / (nbytes[:, None] * np.log(2))  # here the whole "corpus" is 6 units
    >>> bits = UnitBits(nll, nbytes, bpb_mean=bpb.mean(axis=0), bpb_sd=bpb.std(axis=0))
    >>> labels, scores = signature_model_scores({"arc": [0, 2], "gsm8k": [3, 4, 5]}, bits)
    >>> labels, scores.shape
    (['arc', 'gsm8k'], (3, 2))
    >>> np.round(scores, 3).tolist()
    [[-0.558, -0.003], [0.876, -0.32], [0.711, -0.155]]
    >>> z = (bpb - bpb.mean(axis=0)) / bpb.std(axis=0)
    >>> bool(np.allclose(scores[:, 0], z[[0, 2]].mean(axis=0)))
    True

    A unit on which better models are *more* perplexed counts with the opposite sign:

    >>> from sigmap_lib.overlap import SignedUnits
    >>> _, signed = signature_model_scores({"arc": SignedUnits([0, 2], [1, -1])}, bits)
    >>> bool(np.allclose(signed[:, 0], (z[0] - z[2]) / 2))
    True
    """
    if not isinstance(bits, UnitBits):
        raise SigmapInputError(
            f"signature overlap: bits must be a UnitBits, got {type(bits).__name__}"
        )
    if not isinstance(signatures, Mapping) or not signatures:
        raise SigmapInputError(
            "signature overlap: signatures must be a non-empty mapping benchmark -> unit ids"
        )
    labels = [str(k) for k in signatures]
    sig, orient = {}, {}
    for lab, u in zip(labels, signatures.values()):
        arr, sign = signed_units(u)
        if (arr < 0).any():
            raise SigmapInputError(
                f"signature overlap: signature of benchmark {lab!r} has negative unit ids"
            )
        sig[lab], orient[lab] = arr, sign
    m = bits.n_models
    if not any(a.size for a in sig.values()):
        return labels, np.full((m, len(labels)), np.nan)
    wanted = np.unique(np.concatenate(list(sig.values())))
    z = bits.z(wanted)
    out = np.empty((m, len(labels)))
    for b, lab in enumerate(labels):
        if sig[lab].size == 0:
            out[:, b] = np.nan
            continue
        rows = np.searchsorted(wanted, sig[lab])
        out[:, b] = (orient[lab][:, None] * z[rows]).mean(axis=0)
    return labels, out


def _overlap_from_model_scores(
    labels: Sequence[str], s: np.ndarray, no_signature: Mapping[str, str] | None = None
) -> OverlapMatrix:
    empty = {
        lab: (no_signature or {}).get(lab, "empty signature")
        for lab, col in zip(labels, s.T)
        if np.isnan(col).all()
    }
    extra = {"model_scores": s, "no_signature": empty}
    return spearman_overlap(s, labels, "signature", min_common=3, extra=extra)


def signature_overlap(
    signatures: Mapping[str, SignatureLike],
    bits: UnitBits,
    *,
    no_signature: Mapping[str, str] | None = None,
) -> OverlapMatrix:
    """Signature-level overlap: Spearman ρ across models of the signature scores.

    See :func:`signature_model_scores` for the inputs. ``overlap(a, b) =
    Spearman(s_a, s_b)`` over the models (METHODS §4). A pair where either signature is
    empty is NaN — never 0, never a fallback to an uncalibrated top-k — and the reason is
    recorded (``no_signature``: benchmark -> reason, e.g. "no signature above chance at
    m = 32, d = 2e4, α = 0.05"; default "empty signature").

    Returns
    -------
    OverlapMatrix
        ``level="signature"``; ``n_common`` = number of models; ``extra["model_scores"]``
        = the ``(n_models, B)`` signature scores (input of :func:`bootstrap_ci`);
        ``extra["no_signature"]`` = benchmark -> reason for the benchmarks without one.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import UnitBits, signature_overlap
    >>> rng = np.random.default_rng(0)
    >>> nll = rng.normal(10.0, 1.0, size=(30, 8))  # 30 units x 8 models
    >>> bits = UnitBits.of_matrix(nll, np.full(30, 4))  # the whole corpus: 30 units of 4 bytes
    >>> sigs = {"arc": [0, 1], "arc_easy": [1, 2], "gsm8k": [10, 11, 12]}
    >>> m = signature_overlap(sigs, bits)
    >>> np.round(m.values, 3).tolist()
    [[1.0, 0.667, 0.214], [0.667, 1.0, -0.071], [0.214, -0.071, 1.0]]
    >>> int(m.n_common[0, 1]), m.extra["model_scores"].shape
    (8, (8, 3))
    """
    labels, s = signature_model_scores(signatures, bits)
    return _overlap_from_model_scores(labels, s, no_signature)


def signature_overlap_null(
    extract: Callable[[np.ndarray], Mapping[str, SignatureLike]],
    scores: np.ndarray,
    bits: UnitBits,
    *,
    n_perm: int = 99,
    seed: int = 0,
    mode: Literal["joint", "independent"] = "joint",
    alternative: Literal["greater", "two-sided"] = "greater",
    observed: OverlapMatrix | None = None,
) -> OverlapMatrix:
    """Permutation null of the signature overlap, with a p-value per pair.

    Scores are shuffled across models, signatures re-extracted with ``extract`` and the
    overlap recomputed, ``n_perm`` times. ``mode="joint"`` applies one permutation of the
    models to all benchmarks (keeps the benchmarks' score correlations, breaks the link
    between scores and perplexities: the null is "the signatures of a and b overlap only
    as much as selection on unrelated-to-perplexity scores with the same between-benchmark
    correlation gives"); ``mode="independent"`` permutes each benchmark's column on its
    own (also breaks the score correlation; a weaker null).

    p-value (exact permutation test, valid at any ``n_perm``):
    ``(1 + #{null ≥ observed}) / (1 + n_perm)`` for ``alternative="greater"``, or with
    ``|·|`` on both sides for ``"two-sided"``. A permutation under which either signature
    is empty (calibrated signatures usually are, on shuffled scores) produced no overlap, so
    it never counts as one at least as large; ``extra["null_finite"]`` counts, per pair, the
    permutations that produced one. Pairs whose observed overlap is NaN get NaN.

    Parameters
    ----------
    extract : callable
        ``extract(scores (n_models, B)) -> {benchmark: unit ids}`` — the whole signature
        pipeline (screening + selection); must return the same benchmark names each time.
    scores : np.ndarray
        ``(n_models, B)`` benchmark scores, models in the order of ``bits``' columns.
    bits : UnitBits
        As in :func:`signature_overlap`; it must cover every unit ``extract`` can return
        (read the stores by unit in general: :meth:`UnitBits.from_arrays`).
    n_perm : int
        Number of permutations (>= 1).
    seed : int
    mode : {"joint", "independent"}
    alternative : {"greater", "two-sided"}
    observed : OverlapMatrix, optional
        The observed overlap; computed from ``extract(scores)`` when omitted.

    Returns
    -------
    OverlapMatrix
        The observed overlap with ``extra["p_value"]`` ``(B, B)`` (NaN diagonal),
        ``extra["null_mean"]``, ``extra["null_sd"]`` ``(B, B)``, ``extra["null"]``
        ``(n_perm, B, B)``, ``extra["n_perm"]``, ``extra["mode"]``.

    Examples
    --------
    ``arc`` and ``arc_easy`` are driven by the same unit; a toy ``extract`` keeps the two
    units most correlated with each benchmark:

    >>> import numpy as np
    >>> from sigmap_lib.overlap import UnitBits, signature_overlap_null
    >>> rng = np.random.default_rng(0)
    >>> nll = rng.normal(10.0, 1.0, size=(50, 20))  # 50 units x 20 models
    >>> scores = -nll[[0, 0, 7]].T + 0.2 * rng.normal(size=(20, 3))
    >>> def extract(y):
    ...     r = np.corrcoef(y.T, nll)[:3, 3:]  # (3 benchmarks, 50 units)
    ...     names = ["arc", "arc_easy", "gsm8k"]
    ...     return {b: np.argsort(-np.abs(r[j]))[:2] for j, b in enumerate(names)}
    >>> bits = UnitBits.of_matrix(nll, np.full(50, 4))
    >>> res = signature_overlap_null(extract, scores, bits, n_perm=19)
    >>> round(res.get("arc", "arc_easy"), 2), res.extra["null"].shape
    (0.43, (19, 3, 3))
    >>> # p = (1 + #{null >= observed}) / 20: the joint null keeps the correlated scores
    >>> float(res.extra["p_value"][0, 1])
    0.6
    >>> res = signature_overlap_null(extract, scores, bits, n_perm=19, mode="independent")
    >>> float(res.extra["p_value"][0, 1])
    0.1
    """
    if n_perm < 1:
        raise SigmapInputError(f"signature_overlap_null: n_perm must be >= 1, got {n_perm}")
    if mode not in ("joint", "independent"):
        raise SigmapInputError(
            f"signature_overlap_null: mode must be 'joint' or 'independent', got {mode!r}"
        )
    if alternative not in ("greater", "two-sided"):
        raise SigmapInputError(
            f"signature_overlap_null: alternative must be 'greater' or 'two-sided', got {alternative!r}"
        )
    y = np.asarray(scores, dtype=np.float64)
    m = bits.n_models
    if y.ndim != 2 or y.shape[0] != m:
        raise SigmapInputError(
            f"signature_overlap_null: scores must be (n_models={m}, B), got shape {y.shape}"
        )
    if observed is None:
        observed = signature_overlap(extract(y), bits)
    labels = observed.labels
    rng = np.random.default_rng(seed)
    nb = len(labels)
    null = np.empty((n_perm, nb, nb))
    for p in range(n_perm):
        if mode == "joint":
            yp = y[rng.permutation(m)]
        else:
            yp = np.column_stack([y[rng.permutation(m), j] for j in range(y.shape[1])])
        sigs = extract(yp)
        got = [str(k) for k in sigs]
        if set(got) != set(labels):
            raise SigmapInputError(
                f"signature_overlap_null: extract returned benchmarks {sorted(got)}, expected {sorted(labels)}"
            )
        null[p] = signature_overlap({k: sigs[k] for k in labels}, bits).values
    obs = observed.values
    with np.errstate(invalid="ignore"):  # NaN null (no signature) never exceeds
        if alternative == "greater":
            exceed = (null >= obs[None] - 1e-12).sum(axis=0)
        else:
            exceed = (np.abs(null) >= np.abs(obs)[None] - 1e-12).sum(axis=0)
    with np.errstate(invalid="ignore"):
        pval = (1.0 + exceed) / (1.0 + n_perm)
    pval[~np.isfinite(obs)] = np.nan
    np.fill_diagonal(pval, np.nan)
    extra = dict(observed.extra)
    finite = np.isfinite(null).sum(axis=0)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pairs: mean of nothing
        null_mean = np.nanmean(null, axis=0)
        null_sd = np.nanstd(null, axis=0, ddof=1) if n_perm > 1 else np.full((nb, nb), np.nan)
    extra.update(
        p_value=pval,
        null_mean=null_mean,
        null_finite=finite,
        null_sd=null_sd,
        null=null,
        n_perm=int(n_perm),
        mode=mode,
        alternative=alternative,
    )
    return OverlapMatrix(
        labels=labels, values=obs, n_common=observed.n_common, level=observed.level, extra=extra
    )


def signature_level(
    source: Any,
    scores: np.ndarray,
    signatures: Mapping[str, SignatureLike],
    bits: UnitBits,
    *,
    nll_arrays: Any,
    method: Any,
    no_signature: Mapping[str, str] | None = None,
    n_permutations: int = 19,
    n_bootstrap: int = 500,
    seed: int = 0,
    level: str | None = None,
) -> tuple[OverlapMatrix, dict[str, np.ndarray]]:
    """The signature level of the overlap: the observed matrix, its permutation null
    (signatures re-extracted on shuffled scores) and bootstrap intervals over models of
    the pairs where both benchmarks have a signature.

    Parameters
    ----------
    source : rank source or np.ndarray
        What :func:`sigmap_lib.signatures.extract_signatures` screens (``(n_units,
        n_models)`` values or the rank store).
    scores : np.ndarray
        ``(n_models, B)`` scores in ``signatures`` order.
    signatures : mapping benchmark -> SignedUnits or unit indices
        The stored signatures with their units' directions (empty ones give NaN pairs).
    bits : UnitBits
        The models' bits per byte at every unit (:meth:`UnitBits.from_arrays` of
        ``nll_arrays``).
    nll_arrays : sequence of arrays or np.ndarray
        Per-model NLL over the units, what the signatures are re-extracted from (read by
        unit, see :func:`sigmap_lib.signatures.gather_units`).
    method : SignatureMethod or str
        The method the signatures were extracted with, with its parameters
        (:meth:`sigmap_lib.signatures.SignatureSettings.method_object`).
    no_signature : mapping, optional
        Benchmark -> why its signature is empty.
    n_permutations, n_bootstrap, seed : int
        Permutations of the null, bootstrap resamples of the intervals.
    level : str, optional
        The claims that make each signature (``signatures`` given at that level already):
        ``"unit"`` or a group level of a multi-resolution method; the null's re-extracted
        signatures keep the same level (:meth:`sigmap_lib.signatures.Signature.at_level`).
        None: every unit of each signature.

    Returns
    -------
    observed : OverlapMatrix
        ``(B, B)`` Spearman overlap.
    extras : dict
        ``p_value``, ``null_mean`` ``(B, B)``, ``model_scores`` ``(n_models, B)`` and,
        with two or more signatures, ``ci_low``, ``ci_high`` ``(B, B)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import UnitBits, signature_level
    >>> from sigmap_lib.signatures import CalibratedMarginal
    >>> rng = np.random.default_rng(0)
    >>> values = rng.normal(10.0, 1.0, size=(40, 14))  # 40 units x 14 models
    >>> scores = -values[[0, 0, 7]].T + 0.1 * rng.normal(size=(14, 3))
    >>> bits = UnitBits.of_matrix(values, np.full(40, 4))
    >>> m, extras = signature_level(
    ...     values, scores, {"a": [0], "b": [0, 1], "c": [7]}, bits,
    ...     nll_arrays=values, method=CalibratedMarginal(n_permutations=19),
    ...     n_permutations=2, n_bootstrap=20,
    ... )
    >>> m.values.shape, sorted(extras)
    ((3, 3), ['ci_high', 'ci_low', 'model_scores', 'null_mean', 'p_value'])
    """
    from sigmap_lib.overlap._matrix import pair_intervals
    from sigmap_lib.signatures import extract_signatures

    bench = list(signatures)
    no_signature = dict(no_signature or {})

    def extract(y: np.ndarray) -> dict[str, np.ndarray]:
        out = extract_signatures(
            source, y, method=method, nll_arrays=nll_arrays, benchmark_names=bench
        )
        return {s.benchmark: s.at_level(level) for s in out}  # empty: NaN pairs, no fallback

    observed = signature_overlap(signatures, bits, no_signature=no_signature)
    null = signature_overlap_null(
        extract, scores, bits, n_perm=n_permutations, seed=seed, observed=observed
    )
    extras = {
        "p_value": null.extra["p_value"],
        "null_mean": null.extra["null_mean"],
        "model_scores": observed.extra["model_scores"],
    }
    extras |= pair_intervals(
        observed.extra["model_scores"],
        bench,
        without=list(no_signature),
        n_boot=n_bootstrap,
        seed=seed,
    )
    return observed, extras

"""Robustness of the signature-level overlap matrix (the paper's checks, METHODS §4–§5).

The main matrix is recomputed under variants of the two-stage procedure — pre-select
instead of Thrush screening, each half of the corpus, random subsets of models, BIC and
EBIC instead of AIC — and each variant is compared with the main matrix by the Spearman
correlation of their off-diagonal values.

Variants read the per-model values of the units they need into memory
(``(n_units, n_models)`` float32 for the corpus halves): meant for corpora up to a few
hundred million cells; at paper scale run them on a subsample of documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap._signature import SignedUnits, UnitBits, signature_overlap, signed_units


@dataclass
class Variant:
    """One recomputation of the signature overlap."""

    name: str
    description: str
    signatures: dict[str, SignedUnits]
    matrix: Any  # OverlapMatrix
    agreement: float
    n_pairs: int
    extra: dict[str, Any] = field(default_factory=dict)


def _read_columns(nll_arrays: Sequence[Any], lo: int, hi: int) -> np.ndarray:
    return np.stack([np.asarray(a[lo:hi], dtype=np.float32) for a in nll_arrays], axis=1)


def signature_robustness(
    nll_arrays: Sequence[Any],
    scores: np.ndarray,
    benchmark_names: Sequence[str],
    bits: UnitBits,
    *,
    main: Any,
    extract_kwargs: Mapping[str, Any],
    corpus_split: int | None = None,
    n_model_subsets: int = 3,
    subset_fraction: float = 0.75,
    criteria: Sequence[str] = ("bic", "ebic"),
    methods: Sequence[str] = (),
    main_signatures: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> list[Variant]:
    """Recompute the signature overlap under the paper's robustness variants.

    Parameters
    ----------
    nll_arrays : sequence of ``(n_units,)`` arrays (zarr or numpy), one per model
        Per-unit NLL in the score matrix's model order.
    scores : ndarray ``(n_models, B)``
        Benchmark scores (NaN = unscored), columns in ``benchmark_names`` order.
    bits : UnitBits
        The same models' bits per byte at every unit and their whole-corpus moments
        (:meth:`UnitBits.from_arrays` of ``nll_arrays`` and the rank store's moments).
    main : OverlapMatrix
        The main signature-overlap matrix the variants are compared with.
    extract_kwargs : mapping
        The main extraction's ``method`` and options (the stored
        :class:`~sigmap_lib.signatures.SignatureSettings` and the caller's options, e.g.
        ``n_permutations``, ``strata``); each variant's method takes the ones that are its
        parameters, with one change per variant.
    corpus_split : int, optional
        First unit of the second corpus half (a document boundary); default ``n_units // 2``.
    n_model_subsets, subset_fraction : random subsets of models (without replacement).
    criteria : forward-selection modes to try instead of the main one (forward-selection
        mains).
    methods : signature methods to put side by side with the main one, e.g.
        ``("calibrated", "aic", "lasso")`` (the default, the paper's AIC, the authors'
        Lasso); the main method is skipped. Default: none. The "other statistic" variant is
        the main method's ``counterpart`` (marginal vs partial max-T) or its
        :meth:`~sigmap_lib.signatures.SignatureMethod.other_statistic` (pre-select vs
        Thrush screening).
    main_signatures : mapping, optional
        The main signatures (benchmark -> units): each variant then reports
        ``extra["unit_jaccard"]``, the mean Jaccard overlap of its units with the main ones
        over the benchmarks where either is non-empty.
    seed : int

    Returns
    -------
    list[Variant]
        With each variant's signatures, matrix and agreement with ``main``.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.overlap import UnitBits, signature_overlap, signature_robustness
    >>> from sigmap_lib.signatures import extract_signatures
    >>> rng = np.random.default_rng(0)
    >>> nll = rng.normal(10.0, 1.0, size=(400, 16)).astype(np.float32)  # units x models
    >>> bits = UnitBits.of_matrix(nll, np.full(400, 4))
    >>> names = ["arc", "arc_easy", "gsm8k"]
    >>> y = -nll[[5, 5, 300]].T + 0.3 * rng.normal(size=(16, 3))
    >>> kw = {"method": "aic", "k": 10}
    >>> found = extract_signatures(nll, y, benchmark_names=names, **kw)
    >>> sigs = {s.benchmark: s for s in found}  # units with their directions
    >>> main = signature_overlap(sigs, bits)
    >>> variants = signature_robustness(
    ...     list(nll.T), y, names, bits, main=main, extract_kwargs=kw, n_model_subsets=1
    ... )
    >>> [(v.name, round(v.agreement, 2), v.n_pairs) for v in variants]  # doctest: +NORMALIZE_WHITESPACE
    [('screening=preselect', 1.0, 3), ('corpus half 1', 1.0, 3), ('corpus half 2', 1.0, 3),
     ('models subset 1', 0.5, 3), ('criterion=bic', 1.0, 3), ('criterion=ebic', 1.0, 3)]
    """
    from sigmap_lib.overlap._analysis import agreement
    from sigmap_lib.signatures import (
        ForwardSelection,
        extract_signatures,
        method_class,
        signature_method,
    )

    y = np.asarray(scores, dtype=np.float64)
    if y.ndim != 2 or y.shape[1] != len(benchmark_names):
        raise SigmapInputError(f"scores must be (n_models, {len(benchmark_names)}), got {y.shape}")
    m = y.shape[0]
    if len(nll_arrays) != m or bits.n_models != m:
        raise SigmapInputError(
            f"{len(nll_arrays)} NLL arrays and bits of {bits.n_models} models for {m} models"
        )
    d = int(nll_arrays[0].shape[0])
    split = int(corpus_split if corpus_split is not None else d // 2)
    if not 0 < split < d:
        raise SigmapInputError(f"corpus_split must be inside (0, {d}), got {split}")
    base = {k: v for k, v in extract_kwargs.items() if v is not None}
    rng = np.random.default_rng(seed)
    out: list[Variant] = []

    main_method = str(base.pop("method", "calibrated"))
    run_seed = int(base.pop("seed", 0))
    main_cls = method_class(main_method)

    def add(
        name: str, desc: str, sigs: dict[str, SignedUnits], models: np.ndarray | None = None
    ) -> None:
        """Record the variant: its overlap matrix (over ``models`` only, when given) and
        its agreement with ``main``."""
        matrix = signature_overlap(sigs, bits if models is None else bits.for_models(models))
        agree = agreement(main, matrix)
        extra: dict[str, Any] = {} if models is None else {"models": models.tolist()}
        if main_signatures is not None:
            extra["unit_jaccard"] = _mean_jaccard(main_signatures, sigs)
        out.append(Variant(name, desc, sigs, matrix, agree["rho"], agree["n_pairs"], extra))

    def run(
        values: Any,
        yy: np.ndarray,
        offset: int = 0,
        models: np.ndarray | None = None,
        method: str = main_method,
        **changes: Any,
    ) -> dict[str, SignedUnits]:
        cls = method_class(method)
        kw = cls.select_params(dict(base) | changes)
        if models is not None and kw.get("strata") is not None:
            kw["strata"] = np.asarray(kw["strata"])[models]
        if kw.get("levels") is not None:  # a multi-resolution main: the groups of these units
            n = len(values)
            kw["levels"] = {k: np.asarray(v)[offset : offset + n] for k, v in kw["levels"].items()}
        if not cls.calibrated:
            # the max-T permutations belong to a calibrated main: for forward selection
            # they would be a permutation null of the whole two-stage procedure (P passes)
            kw.pop("n_permutations", None)
        sigs = extract_signatures(
            values, yy, method=method, benchmark_names=list(benchmark_names), seed=run_seed, **kw
        )
        # empty ones too: NaN pairs
        return {s.benchmark: SignedUnits(s.units + offset, s.orientation) for s in sigs}

    all_values = _read_columns(nll_arrays, 0, d)
    # 1. the other statistic
    main_obj = signature_method(main_method, **main_cls.select_params(base))
    other = main_obj.other_statistic()
    if main_cls.counterpart is not None:
        counterpart = main_cls.counterpart
        add(
            f"method={counterpart}",
            f"{counterpart} instead of {main_method}",
            run(all_values, y, method=counterpart),
        )
    elif other is not None:
        label, changes = other
        desc = ", ".join(
            f"{k}={v} instead of {main_obj.get_params()[k]}" for k, v in changes.items()
        )
        add(label, desc, run(all_values, y, **changes))
    # 2. each half of the corpus
    for name, lo, hi in (("corpus half 1", 0, split), ("corpus half 2", split, d)):
        add(name, f"units {lo:,}–{hi:,} only", run(all_values[lo:hi], y, offset=lo))
    # 3. random subsets of models (no fewer than the method accepts)
    size = max(main_cls.min_models, 5, round(subset_fraction * m))
    if size < m:
        for i in range(n_model_subsets):
            models = np.sort(rng.choice(m, size=size, replace=False))
            sigs = run(all_values[:, models], y[models], models=models)
            add(f"models subset {i + 1}", f"{size} of {m} models", sigs, models=models)
    # 4. other stopping rules of forward selection, and the other methods side by side
    selection = issubclass(main_cls, ForwardSelection)
    for crit in criteria if selection else ():
        if crit != main_method:
            sigs = run(all_values, y, method=crit)
            add(f"criterion={crit}", f"{crit} instead of {main_method}", sigs)
    for meth in methods:
        if meth == main_method or (selection and meth in criteria):
            continue
        try:
            sigs = run(all_values, y, method=meth)
        except SigmapInputError:  # e.g. the calibrated test refuses fewer than 12 models
            continue
        add(f"method={meth}", f"{meth} instead of {main_method}", sigs)
    return out


def _mean_jaccard(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Mean Jaccard overlap of two signature sets over benchmarks where either is non-empty."""
    vals = []
    for k in a:
        x = set(signed_units(a[k]).units.tolist())
        y = set(signed_units(b.get(k, [])).units.tolist())
        if x or y:
            vals.append(len(x & y) / len(x | y))
    return float(np.mean(vals)) if vals else float("nan")


def corpus_half_split(unit_doc: Any) -> int | None:
    """The unit where the corpus is cut in two halves without splitting a document: the
    first unit of the document that holds the middle unit.

    Parameters
    ----------
    unit_doc : array-like of int
        ``(n_units,)`` document index of each unit, non-decreasing.

    Returns
    -------
    int or None
        The first unit of the second half (``corpus_split`` of
        :func:`signature_robustness`); None when the middle document starts at unit 0
        (one document: no split).

    Examples
    --------
    >>> from sigmap_lib.overlap import corpus_half_split
    >>> corpus_half_split([0, 0, 0, 1, 1, 2, 2, 2])
    3
    >>> corpus_half_split([0, 0, 0, 0]) is None
    True
    """
    doc = np.asarray(unit_doc)
    if doc.size == 0:
        return None
    half = int(np.searchsorted(doc, doc[doc.size // 2]))
    return half if half > 0 else None

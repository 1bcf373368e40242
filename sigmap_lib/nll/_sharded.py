"""The corpus as shards: which models × shards cells an aggregate uses, and the rank codes
of those shards read as one store (issue #13).

Per shard there is one rank store (the codes of the models whose NLL cell on that shard is
complete). An aggregate (screening, signatures, overlaps) reads *one* set of models over
*one* set of shards; :func:`select_coverage` chooses them, and :class:`ShardedRanks`
presents the chosen shards' codes, restricted to the chosen models, as one
:class:`~sigmap_lib.nll.RankStore` whose units are the shards' units in plan order. So the
streaming passes of :mod:`sigmap_lib.signatures` run on it unchanged, and their results are
those of the monolithic store built from the same cells.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util import ConcatArray
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll._merge import BpbMoments, merge_bpb_moments
from sigmap_lib.nll._rank_codes import decode_ranks, encode_ranks, rank_dtype
from sigmap_lib.nll._ranks import RankStore

#: Distinct model sets examined by :func:`select_coverage` before it stops refining.
MAX_CANDIDATE_SETS = 4096


@dataclass(frozen=True)
class Coverage:
    """The cells an aggregate uses: ``models`` on every one of ``shards``.

    Attributes
    ----------
    models : list of str
        Model keys, in the given model order.
    shards : list of str
        Shard keys, in plan order.
    n_units : int
        Units of the used shards.
    total_units : int
        Units of every shard of the plan.
    missing : dict
        Shard key → the models (of all models) whose cell there is not complete.
    excluded_shards : list of str
        Shards left out (some used model is missing there).
    excluded_models : list of str
        Models complete somewhere but left out (missing on a used shard).
    """

    models: list[str]
    shards: list[str]
    n_units: int
    total_units: int
    missing: dict[str, list[str]] = field(default_factory=dict)
    excluded_shards: list[str] = field(default_factory=list)
    excluded_models: list[str] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        """Share of the plan's units the aggregate uses."""
        return self.n_units / self.total_units if self.total_units else 0.0

    @property
    def cells(self) -> int:
        return len(self.models) * len(self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "shards": list(self.shards),
            "n_units": int(self.n_units),
            "total_units": int(self.total_units),
            "missing": {k: list(v) for k, v in self.missing.items()},
            "excluded_shards": list(self.excluded_shards),
            "excluded_models": list(self.excluded_models),
        }


def select_coverage(
    shards: Sequence[tuple[str, int, Sequence[str]]],
    models: Sequence[str],
    *,
    min_models: int = 3,
) -> Coverage:
    """Choose the models and shards an aggregate uses: the most model-units.

    Every used model must be complete on every used shard (rank statistics compare the
    same models on every unit). Among all model sets ``M``, the choice maximises
    ``|M| · units(S(M))`` with ``S(M)`` the shards on which all of ``M`` are complete
    (ties: more models, then more units, then the earlier set). The optimum is one of
    the intersections of the shards' complete sets, which are enumerated (up to
    :data:`MAX_CANDIDATE_SETS` distinct ones). So a new model being scored shard by
    shard, or a new shard whose cells are still running, never shrinks what the
    aggregates use until it is worth more than it costs, and nothing stalls on a
    missing cell.

    Parameters
    ----------
    shards : sequence of (key, n_units, complete model keys)
        In plan order.
    models : sequence of str
        Every model (registry order); the result keeps this order.
    min_models : int
        Fewest models a usable set has (rank correlations need a few).

    Returns
    -------
    Coverage
        Empty ``models`` / ``shards`` when no shard has ``min_models`` complete models.

    Examples
    --------
    >>> from sigmap_lib.nll import select_coverage
    >>> cov = select_coverage(
    ...     [("s0", 100, ["a", "b", "c", "d"]), ("s1", 100, ["a", "b", "c"]),
    ...      ("s2", 50, ["a", "b", "c", "d"])],
    ...     ["a", "b", "c", "d"],
    ... )
    >>> cov.models, cov.shards, cov.n_units, cov.missing
    (['a', 'b', 'c'], ['s0', 's1', 's2'], 250, {'s1': ['d']})
    """
    order = {m: i for i, m in enumerate(models)}
    keys = [str(k) for k, _, _ in shards]
    if len(set(keys)) != len(keys):
        raise SigmapInputError(f"shard keys repeat: {sorted(k for k in keys if keys.count(k) > 1)}")
    sizes = [int(n) for _, n, _ in shards]
    sets = []
    for k, _, done in shards:
        unknown = [m for m in done if m not in order]
        if unknown:
            raise SigmapInputError(
                f"shard {k}: complete models {unknown} are not in the model list"
            )
        sets.append(frozenset(done))
    total = sum(sizes)
    missing = {
        k: [m for m in models if m not in s] for k, s in zip(keys, sets) if len(s) < len(order)
    }
    # candidate model sets: the complete sets and their intersections (closure)
    cands = {s for s in sets if len(s) >= min_models}
    frontier = set(cands)
    while frontier and len(cands) < MAX_CANDIDATE_SETS:
        new = {a & b for a, b in itertools.product(frontier, cands)} - cands
        new = {s for s in new if len(s) >= min_models}
        cands |= new
        frontier = new
    best: tuple | None = None
    best_set: frozenset = frozenset()
    for c in sorted(cands, key=lambda s: sorted(order[m] for m in s)):
        units = sum(n for n, s in zip(sizes, sets) if c <= s)
        score = (len(c) * units, len(c), units)
        if best is None or score > best:
            best, best_set = score, c
    if best is None:
        return Coverage([], [], 0, total, missing, list(keys), [])
    used = [k for k, s in zip(keys, sets) if best_set <= s]
    chosen = sorted(best_set, key=order.__getitem__)
    somewhere = set().union(*sets)
    return Coverage(
        models=chosen,
        shards=used,
        n_units=sum(n for k, n in zip(keys, sizes) if k in set(used)),
        total_units=total,
        missing=missing,
        excluded_shards=[k for k in keys if k not in set(used)],
        excluded_models=[m for m in models if m in somewhere and m not in best_set],
    )


class _Restricted:
    """Row-sliceable rank codes of a store, re-ranked within a subset of its columns."""

    def __init__(self, store: RankStore, cols: np.ndarray | None, dtype: np.dtype) -> None:
        self.store = store
        self.cols = cols
        self._arr = store.array()
        self.shape = (store.n_units, store.n_models if cols is None else cols.size)
        self.dtype = dtype

    def codes(self, block: np.ndarray) -> np.ndarray:
        if self.cols is None:
            return block
        return encode_ranks(decode_ranks(block)[:, self.cols]).astype(self.dtype, copy=False)

    def __getitem__(self, rows: Any) -> np.ndarray:
        return self.codes(np.asarray(self._arr[rows]))


@dataclass(frozen=True)
class ShardedRanks(RankStore):
    """Several shards' rank stores read as one :class:`RankStore` (units in shard order).

    Build it with :meth:`from_stores`. Codes of a shard whose store holds more models
    than the chosen ones are re-ranked within the chosen models as they are read (a
    monotone map of the same values: exactly the codes a store of only those models
    holds). ``bpb_mean`` / ``bpb_sd`` are the exact merge of the shards' moments.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import ShardedRanks, build_rank_store
    >>> rng = np.random.default_rng(0)
    >>> nll = rng.random((7, 3))
    >>> a = build_rank_store(list(nll[:4].T), ["m1", "m2", "m3"], np.ones(4, int), "r0")
    >>> b = build_rank_store(list(nll[4:, :2].T), ["m1", "m2"], np.ones(3, int), "r1")
    >>> view = ShardedRanks.from_stores([a, b], ["m1", "m2"])
    >>> view.n_units, view.model_keys
    (7, ['m1', 'm2'])
    >>> whole = build_rank_store(list(nll[:, :2].T), ["m1", "m2"], np.ones(7, int), "rw")
    >>> bool((view.ranks() == whole.ranks()).all()), bool(np.allclose(view.bpb_mean, whole.bpb_mean))
    (True, True)
    """

    parts: tuple[Any, ...] = ()
    offsets: tuple[int, ...] = ()

    @classmethod
    def from_stores(
        cls,
        stores: Sequence[RankStore],
        model_keys: Sequence[str],
        *,
        chunk_units: int | None = None,
    ) -> ShardedRanks:
        """The stores (in unit order) restricted to ``model_keys`` (each store must hold them)."""
        keys = [str(k) for k in model_keys]
        if not stores:
            raise SigmapInputError("ShardedRanks needs at least one shard's rank store")
        if len(keys) < 2:
            raise SigmapInputError(f"ShardedRanks needs >= 2 models, got {keys}")
        dt = rank_dtype(len(keys))
        parts, offsets, moments = [], [0], []
        for st in stores:
            pos = {k: i for i, k in enumerate(st.model_keys)}
            absent = [k for k in keys if k not in pos]
            if absent:
                raise SigmapInputError(f"rank store {st.path} lacks models {absent}")
            cols = np.array([pos[k] for k in keys], dtype=np.int64)
            same = st.model_keys == keys
            parts.append(_Restricted(st, None if same else cols, dt))
            offsets.append(offsets[-1] + st.n_units)
            mo = st.moments()
            if mo is None:
                raise SigmapInputError(
                    f"rank store {st.path} has no bits-per-byte counts (written by an older "
                    "version): re-materialize nll_ranks for its shard"
                )
            moments.append(BpbMoments(keys, mo.count[cols], mo.total[cols], mo.m2[cols]))
        merged = merge_bpb_moments(moments)
        ident = hashlib.sha256("|".join([str(s.path) for s in stores] + keys).encode()).hexdigest()
        return cls(
            path=Path(f"<sharded:{ident[:12]}>"),
            model_keys=keys,
            n_units=offsets[-1],
            bpb_mean=merged.mean,
            bpb_sd=merged.sd,
            chunk_units=int(chunk_units or max(st.chunk_units for st in stores)),
            parts=tuple(parts),
            offsets=tuple(offsets),
        )

    @property
    def n_shards(self) -> int:
        return len(self.parts)

    def array(self) -> Any:
        """The codes of every shard as one row-indexable ``(n_units, n_models)`` array."""
        return ConcatArray(list(self.parts))

    def iter_chunks(self, chunk_units: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, codes)`` blocks of at most ``chunk_units`` units, never across shards."""
        for off, part in zip(self.offsets, self.parts):
            for s, block in part.store.iter_chunks(chunk_units):
                yield off + s, part.codes(block)

    def moments(self) -> BpbMoments:
        return BpbMoments(
            self.model_keys,
            np.full(self.n_models, self.n_units),
            self.bpb_mean * self.n_units,
            self.bpb_sd**2 * self.n_units,
        )

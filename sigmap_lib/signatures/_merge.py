"""Exact merges of per-shard screening results (issue #13).

:func:`screen` run on one shard at a time (with the corpus-wide ``k``) gives, per
benchmark, the shard's top-``k`` units, the histogram of the statistic over the shard's
units and the models used. :func:`merge_screen` combines the shards into exactly what
``screen`` gives on all units at once:

* top-``k`` of the union = top-``k`` of the per-shard top-``k`` lists (a unit outside its
  shard's top ``k`` has ``k`` stronger-or-tied units with smaller index before it, so it
  is outside the global top ``k`` too); ranked by strength, ties broken by the smaller
  **global** unit index (``unit_offset + local index``), as ``screen`` does;
* histograms add (fixed bin edges);
* permutation-null maxima merge elementwise by ``max`` (:func:`merge_null_maxima`; the
  calibrated pass has its own partial, :func:`~sigmap_lib.signatures.merge_max_t`).

A per-shard result (:class:`ScreenPartial`) is small (``B·k`` candidates and ``B`` histograms)
and serializes to JSON (:meth:`ScreenPartial.to_dict`); it keeps shard-local unit indices and
the shard's ``unit_offset``, which :meth:`ScreenPartial.rebase` changes when the plan's
global order moves (a file added before the shard's file).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures._screening import ScreenResult, screen, select_topk


@dataclass
class ScreenPartial:
    """The screening result of one shard, for every benchmark.

    Attributes
    ----------
    unit_offset : int
        Global index of the shard's first unit.
    n_units : int
        Units of the shard.
    k : int
        The corpus-wide number of candidates requested (``screen(..., k=k)``).
    statistic : str
    two_sided : bool
    hist_edges : numpy.ndarray, shape (n_bins + 1,)
    hist_counts : numpy.ndarray of int64, shape (B, n_bins)
    models_used : numpy.ndarray of bool, shape (B, n_models)
    indices : list of numpy.ndarray of int64
        Per benchmark, shard-local indices of the shard's top candidates, strongest first.
    thrush, preselect, strength : list of numpy.ndarray of float64
        Per benchmark, the candidates' statistics and ranking key.
    key : str
        The shard key (for error messages and bookkeeping).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import ScreenPartial, screen_partial
    >>> rng = np.random.default_rng(0)
    >>> part = screen_partial(rng.standard_normal((50, 5)), np.arange(5.0), k=3,
    ...                       unit_offset=100, key="s0")
    >>> part.n_units, part.unit_offset, bool(part.global_indices(0).min() >= 100)
    (50, 100, True)
    >>> ScreenPartial.from_dict(part.to_dict()) == part
    True
    """

    unit_offset: int
    n_units: int
    k: int
    statistic: str
    two_sided: bool
    hist_edges: np.ndarray
    hist_counts: np.ndarray
    models_used: np.ndarray
    indices: list[np.ndarray]
    thrush: list[np.ndarray]
    preselect: list[np.ndarray]
    strength: list[np.ndarray]
    key: str = ""

    @property
    def n_benchmarks(self) -> int:
        return len(self.indices)

    def global_indices(self, b: int) -> np.ndarray:
        """Benchmark ``b``'s candidates as global unit indices."""
        return self.indices[b] + self.unit_offset

    def subset(self, benchmarks: Sequence[int]) -> ScreenPartial:
        """The partial of some of its benchmarks (by position), in the given order."""
        b = [int(i) for i in benchmarks]
        return replace(
            self,
            hist_counts=self.hist_counts[b],
            models_used=self.models_used[b],
            indices=[self.indices[i] for i in b],
            thrush=[self.thrush[i] for i in b],
            preselect=[self.preselect[i] for i in b],
            strength=[self.strength[i] for i in b],
        )

    def rebase(self, unit_offset: int) -> ScreenPartial:
        """The same partial with another global offset (a pure function)."""
        return replace(self, unit_offset=int(unit_offset))

    @classmethod
    def from_results(
        cls, results: Sequence[ScreenResult], *, k: int, unit_offset: int = 0, key: str = ""
    ) -> ScreenPartial:
        """Wrap ``screen(shard_source, scores, k=k, ...)``'s results of one shard."""
        if not results:
            raise SigmapInputError(f"shard {key!r}: no screening results to wrap")
        r0 = results[0]
        for r in results:
            if r.k != min(k, max(r.n_units, 1)):
                raise SigmapInputError(
                    f"shard {key!r}: screened with k={r.k}, expected the corpus-wide k={k} "
                    f"(capped at the shard's {r.n_units} units); call screen(..., k={k})"
                )
            if (r.n_units, r.statistic, r.two_sided) != (r0.n_units, r0.statistic, r0.two_sided):
                raise SigmapInputError(f"shard {key!r}: results of different screening runs")
        return cls(
            unit_offset=int(unit_offset),
            n_units=int(r0.n_units),
            k=int(k),
            statistic=r0.statistic,
            two_sided=bool(r0.two_sided),
            hist_edges=np.asarray(r0.hist_edges, dtype=np.float64),
            hist_counts=np.stack([np.asarray(r.hist_counts, np.int64) for r in results]),
            models_used=np.stack([np.asarray(r.models_used, bool) for r in results]),
            indices=[np.asarray(r.indices, np.int64) for r in results],
            thrush=[np.asarray(r.thrush, np.float64) for r in results],
            preselect=[np.asarray(r.preselect, np.float64) for r in results],
            strength=[np.asarray(r.strength, np.float64) for r in results],
            key=key,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable (``json`` writes float64 exactly; NaN as ``NaN``)."""
        return {
            "key": self.key,
            "unit_offset": self.unit_offset,
            "n_units": self.n_units,
            "k": self.k,
            "statistic": self.statistic,
            "two_sided": self.two_sided,
            "hist_edges": self.hist_edges.tolist(),
            "hist_counts": self.hist_counts.tolist(),
            "models_used": self.models_used.tolist(),
            "indices": [a.tolist() for a in self.indices],
            "thrush": [a.tolist() for a in self.thrush],
            "preselect": [a.tolist() for a in self.preselect],
            "strength": [a.tolist() for a in self.strength],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScreenPartial:
        """Inverse of :meth:`to_dict`."""
        try:
            nb = len(d["indices"])
            n_bins = len(d["hist_edges"]) - 1
            return cls(
                unit_offset=int(d["unit_offset"]),
                n_units=int(d["n_units"]),
                k=int(d["k"]),
                statistic=str(d["statistic"]),
                two_sided=bool(d["two_sided"]),
                hist_edges=np.asarray(d["hist_edges"], dtype=np.float64),
                hist_counts=np.asarray(d["hist_counts"], dtype=np.int64).reshape(nb, n_bins),
                models_used=np.asarray(d["models_used"], dtype=bool).reshape(nb, -1),
                indices=[np.asarray(a, dtype=np.int64) for a in d["indices"]],
                thrush=[np.asarray(a, dtype=np.float64) for a in d["thrush"]],
                preselect=[np.asarray(a, dtype=np.float64) for a in d["preselect"]],
                strength=[np.asarray(a, dtype=np.float64) for a in d["strength"]],
                key=str(d.get("key", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SigmapInputError(f"not a screening partial: {exc!r}") from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScreenPartial):
            return NotImplemented
        scal = ("unit_offset", "n_units", "k", "statistic", "two_sided", "key")
        arrs = ("hist_edges", "hist_counts", "models_used")
        lists = ("indices", "thrush", "preselect", "strength")
        return (
            all(getattr(self, a) == getattr(other, a) for a in scal)
            and all(np.array_equal(getattr(self, a), getattr(other, a)) for a in arrs)
            and all(
                len(getattr(self, a)) == len(getattr(other, a))
                and all(
                    np.array_equal(x, y, equal_nan=True)
                    for x, y in zip(getattr(self, a), getattr(other, a))
                )
                for a in lists
            )
        )


def screen_partial(
    source: Any, scores: Any, *, k: int, unit_offset: int = 0, key: str = "", **kwargs: Any
) -> ScreenPartial:
    """Screen one shard with the corpus-wide ``k`` and wrap it as a :class:`ScreenPartial`.

    Parameters
    ----------
    source, scores
        As :func:`screen`, for the shard's units only.
    k : int
        Candidates per benchmark over the WHOLE corpus (``ceil(q · n_units_total)`` for a
        fraction ``q``); every shard keeps that many (or all its units).
    unit_offset : int
        Global index of the shard's first unit (:func:`~sigmap_lib.inputs.shard_offsets`).
    key : str
        The shard key.
    **kwargs
        Other :func:`screen` options (``two_sided``, ``statistic``, ``n_bins``,
        ``chunk_units``, ``benchmark_names``); the same for every shard.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import screen_partial
    >>> part = screen_partial(np.random.default_rng(1).standard_normal((20, 4)),
    ...                       np.arange(4.0), k=2, unit_offset=40)
    >>> part.n_benchmarks, [len(i) for i in part.indices], int(part.hist_counts.sum())
    (1, [2], 20)
    """
    if "q" in kwargs:
        raise SigmapInputError("screen_partial takes the corpus-wide k, not q")
    res = screen(source, scores, k=k, **kwargs)
    return ScreenPartial.from_results(res, k=k, unit_offset=unit_offset, key=key)


def merge_histograms(counts: Iterable[Any], edges: Iterable[Any] | None = None) -> np.ndarray:
    """Sum per-shard histograms (fixed bins), checking shapes and (optionally) edges.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import merge_histograms
    >>> merge_histograms([[1, 0, 2], [0, 3, 1]]).tolist()
    [1, 3, 3]
    """
    if edges is not None:
        e = [np.asarray(x, dtype=np.float64) for x in edges]
        if any(x.shape != e[0].shape or not np.array_equal(x, e[0]) for x in e):
            raise SigmapInputError("histograms with different bin edges cannot be added")
    cs = [np.asarray(c) for c in counts]
    if not cs:
        raise SigmapInputError("merge_histograms: no histograms")
    if any(c.shape != cs[0].shape for c in cs):
        raise SigmapInputError(
            f"histograms of different shapes cannot be added: {sorted({c.shape for c in cs})}"
        )
    return np.sum(np.stack(cs).astype(np.int64), axis=0)


def merge_null_maxima(parts: Iterable[Any]) -> np.ndarray:
    """Elementwise maximum of per-shard permutation-null maxima.

    Each part is ``(P,)`` (or ``(B, P)``): per permutation, the maximum strength over the
    shard's units; the maximum over all units is the maximum of the shard maxima. NaN is
    rejected (a shard's maxima are maxima of finite strengths or the empty-shard floor).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import merge_null_maxima
    >>> merge_null_maxima([[0.2, 0.9], [0.5, 0.1], [0.3, 0.4]]).tolist()
    [0.5, 0.9]
    """
    ps = [np.asarray(p, dtype=np.float64) for p in parts]
    if not ps:
        raise SigmapInputError("merge_null_maxima: no null maxima")
    if any(p.shape != ps[0].shape for p in ps):
        raise SigmapInputError(
            f"null maxima of different shapes cannot be merged: {sorted({p.shape for p in ps})}"
        )
    out = np.maximum.reduce(ps)
    if np.isnan(out).any():
        raise SigmapInputError("null maxima contain NaN")
    return out


def merge_screen(parts: Iterable[ScreenPartial], *, k: int | None = None) -> list[ScreenResult]:
    """Merge per-shard screening partials into the monolithic :func:`screen` result.

    Parameters
    ----------
    parts : iterable of ScreenPartial
        One per shard, same statistic, sidedness, bins, benchmarks and models; their
        global unit ranges ``[unit_offset, unit_offset + n_units)`` must be disjoint.
    k : int, optional
        Candidates to keep (default: the parts' common ``k``). Parts screened with a
        larger ``k`` serve any smaller one (a shard's top ``k`` contains its top
        ``k' <= k``), so partials kept with headroom stay valid while the corpus grows.

    Returns
    -------
    list[ScreenResult]
        Equal to ``screen(all_units, scores, k=k, ...)`` when the parts' ranges tile
        ``[0, n_units)``: the same candidate indices (global), statistics, strengths and
        histograms; ``n_units`` is the sum over the parts (the coverage).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import merge_screen, screen, screen_partial
    >>> rng = np.random.default_rng(0)
    >>> values, scores = rng.standard_normal((90, 6)), np.arange(6.0)
    >>> parts = [screen_partial(values[a:b], scores, k=4, unit_offset=a)
    ...          for a, b in [(0, 10), (10, 55), (55, 90)]]
    >>> [merged] = merge_screen(parts)
    >>> [whole] = screen(values, scores, k=4)
    >>> merged.indices.tolist() == whole.indices.tolist(), merged.n_units
    (True, 90)
    >>> bool((merged.hist_counts == whole.hist_counts).all())
    True
    """
    ps = list(parts)
    if not ps:
        raise SigmapInputError("merge_screen: no screening partials")
    p0 = ps[0]
    want = min(p.k for p in ps) if k is None else int(k)
    if k is None and any(p.k != p0.k for p in ps):
        raise SigmapInputError("merge_screen: partials of different k; pass k=")
    short = [p.key for p in ps if p.k < want]
    if short:
        raise SigmapInputError(f"merge_screen: shards {short} kept fewer than k={want} candidates")
    for p in ps:
        same = (
            p.statistic == p0.statistic
            and p.two_sided == p0.two_sided
            and p.n_benchmarks == p0.n_benchmarks
            and np.array_equal(p.hist_edges, p0.hist_edges)
            and np.array_equal(p.models_used, p0.models_used)
        )
        if not same:
            raise SigmapInputError(
                f"shard {p.key!r} was screened differently from shard {p0.key!r} (k, "
                "statistic, sidedness, bins, benchmarks or scored models differ)"
            )
    spans = sorted((p.unit_offset, p.unit_offset + p.n_units, p.key) for p in ps)
    for (_, e0, k0), (s1, _, k1) in itertools.pairwise(spans):
        if s1 < e0:
            raise SigmapInputError(f"shards {k0!r} and {k1!r} overlap in global unit numbering")
    n_units = sum(p.n_units for p in ps)
    kk = min(want, max(n_units, 1))
    counts = merge_histograms([p.hist_counts for p in ps])
    out = []
    for b in range(p0.n_benchmarks):
        idx = np.concatenate([p.global_indices(b) for p in ps]).astype(np.int64)
        st = np.concatenate([p.strength[b] for p in ps]).astype(np.float64)
        th = np.concatenate([p.thrush[b] for p in ps]).astype(np.float64)
        pr = np.concatenate([p.preselect[b] for p in ps]).astype(np.float64)
        keep = select_topk(st, idx, kk)
        order = keep[np.lexsort((idx[keep], -st[keep]))]
        out.append(
            ScreenResult(
                benchmark=b,
                indices=idx[order],
                thrush=th[order],
                preselect=pr[order],
                strength=st[order],
                hist_edges=p0.hist_edges.copy(),
                hist_counts=counts[b],
                n_units=n_units,
                models_used=p0.models_used[b].copy(),
                statistic=p0.statistic,
                two_sided=p0.two_sided,
                k=kk,
            )
        )
    return out


def corpus_k(q: float, n_units_total: int) -> int:
    """The corpus-wide ``k`` that ``screen(..., q=q)`` uses on ``n_units_total`` units.

    Examples
    --------
    >>> from sigmap_lib.signatures import corpus_k
    >>> corpus_k(0.01, 12_345)
    124
    """
    if not 0 < q <= 1:
        raise SigmapInputError(f"q must be in (0, 1], got {q}")
    return min(max(1, math.ceil(q * n_units_total)), max(n_units_total, 1))

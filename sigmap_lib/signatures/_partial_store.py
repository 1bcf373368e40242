"""Stored per-shard screening partials: what they were computed from, and when one is
still valid for a new screen (same models, rank store, settings and score columns, with
at least the candidates the screen keeps)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sigmap_lib.signatures._merge import ScreenPartial


@dataclass(frozen=True)
class PartialKey:
    """What one shard's screening partial is computed from.

    Attributes
    ----------
    shard : str
        The shard's key.
    identity : str
        Hash of the models, the shard, its rank store and the statistic's settings.
    scores : dict
        Benchmark key -> hash of its score column (with the model order).
    """

    shard: str
    identity: str
    scores: dict[str, str]

    def record(self, partial: ScreenPartial) -> dict[str, Any]:
        """The JSON form of ``partial`` stored under this key (:func:`reuse_partial` reads it)."""
        return {
            "shard": self.shard,
            "identity": self.identity,
            "benchmarks": list(self.scores),
            "scores": dict(self.scores),
            "partial": partial.to_dict(),
        }


def partial_key(
    models: Sequence[str],
    shard: str,
    ranks: str,
    scores: np.ndarray,
    benchmarks: Sequence[str],
    *,
    statistic: str,
    two_sided: bool,
) -> PartialKey:
    """The key of one shard's screening partial.

    Parameters
    ----------
    models : sequence of str
        Model keys in rank-store order (the rows of ``scores``).
    shard, ranks : str
        The shard's key and the identity of its rank store.
    scores : np.ndarray
        ``(n_models, B)`` scores of ``benchmarks``.
    benchmarks : sequence of str
        The ``B`` benchmark keys.
    statistic : str
    two_sided : bool
        The screen's settings.

    Returns
    -------
    PartialKey

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import partial_key
    >>> y = np.arange(6.0).reshape(3, 2)
    >>> a = partial_key(["m0", "m1", "m2"], "s0", "r0", y, ["x", "z"], statistic="thrush", two_sided=True)
    >>> b = partial_key(["m0", "m1", "m2"], "s0", "r0", y + [0, 1], ["x", "z"], statistic="thrush", two_sided=True)
    >>> a.identity == b.identity, a.scores["x"] == b.scores["x"], a.scores["z"] == b.scores["z"]
    (True, True, False)
    """
    identity = hashlib.sha256(
        json.dumps([list(models), shard, ranks, statistic, two_sided]).encode()
    ).hexdigest()[:16]
    hashes = {}
    for j, key in enumerate(benchmarks):
        h = hashlib.sha256("|".join(models).encode())
        h.update(np.ascontiguousarray(scores[:, j], dtype=np.float64).tobytes())
        hashes[key] = h.hexdigest()[:16]
    return PartialKey(shard, identity, hashes)


def reuse_partial(
    record: dict[str, Any], key: PartialKey, k: int, *, same_benchmarks: bool = False
) -> ScreenPartial | None:
    """The stored partial ``record`` restricted to ``key``'s benchmarks, when it is valid
    for them: same identity, same score column per benchmark, at least ``k`` candidates
    kept; else None.

    Parameters
    ----------
    record : dict
        What :meth:`PartialKey.record` stored (``{}`` when nothing is stored).
    key : PartialKey
        The key of the screen that wants it.
    k : int
        Candidates the screen keeps per benchmark.
    same_benchmarks : bool
        Also require the stored partial to hold exactly ``key``'s benchmarks.

    Returns
    -------
    ScreenPartial or None
        Benchmarks in ``key.scores`` order.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.signatures import partial_key, reuse_partial, screen_partial
    >>> rng = np.random.default_rng(0)
    >>> values, y = rng.standard_normal((20, 4)), rng.standard_normal((4, 2))
    >>> key = partial_key(list("abcd"), "s0", "r0", y, ["x", "z"], statistic="thrush", two_sided=True)
    >>> record = key.record(screen_partial(values, y, k=4))
    >>> one = partial_key(list("abcd"), "s0", "r0", y[:, 1:], ["z"], statistic="thrush", two_sided=True)
    >>> reuse_partial(record, one, k=3).n_benchmarks
    1
    >>> reuse_partial(record, one, k=3, same_benchmarks=True) is None
    True
    >>> reuse_partial(record, key, k=5) is None  # fewer candidates kept than needed
    True
    """
    if record.get("identity") != key.identity:
        return None
    stored = record.get("scores", {})
    if same_benchmarks and stored != key.scores:
        return None
    if any(stored.get(b) != h for b, h in key.scores.items()):
        return None
    part = ScreenPartial.from_dict(record["partial"])
    if part.k < k:
        return None
    return part.subset([record["benchmarks"].index(b) for b in key.scores])

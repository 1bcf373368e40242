"""Per-model bits-per-byte moments of corpus shards, and their exact merge (issue #13).

A shard's moments are, per model, the count of units, the sum of bits-per-byte and the sum
of squared deviations from the shard's mean (``M2``; the raw sum of squares is
``M2 + sum² / count``, :attr:`BpbMoments.sum_squares`). Keeping ``M2`` rather than the
raw sum of squares avoids the cancellation of ``E[x²] − E[x]²``; two shards merge by Chan
et al.'s (1979) update, the update :func:`~sigmap_lib.nll.build_rank_store` applies chunk
by chunk, so the merged mean / sd equal the monolithic ones to float64 rounding. Merging
is a pure function over any order and grouping of shards; a model missing from a shard
(its cell not computed yet) simply has fewer units (``count``), which is its coverage.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll._arrays import check_model_arrays, open_model_array
from sigmap_lib.nll._moments import BpbMoments, block_moments, chan_merge


def bpb_moments(
    nll_arrays: Sequence[Any], model_keys: Sequence[str], unit_nbytes: Any
) -> BpbMoments:
    """Bits-per-byte moments of every model over one shard's units.

    Parameters
    ----------
    nll_arrays : sequence of length n_models
        Per-model NLL ``(n_units,)`` in nats on the shard (numpy / zarr arrays or paths).
    model_keys : sequence of str
        One key per array.
    unit_nbytes : array_like of int, shape (n_units,)
        Attributed bytes per unit (> 0), e.g. ``ShardStore.unit_nbytes``.

    Returns
    -------
    BpbMoments
        Bits-per-byte ``NLL / (n_bytes · ln 2)`` in float64, as in the rank store.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import bpb_moments
    >>> ln2 = np.log(2.0)
    >>> m = bpb_moments([np.array([1.0, 3.0]) * ln2], ["m1"], [1, 1])  # 1 and 3 bits
    >>> m.count.tolist(), np.round(m.mean, 12).tolist(), np.round(m.sd, 12).tolist()
    ([2], [2.0], [1.0])
    """
    keys = [str(k) for k in model_keys]
    arrays, d = check_model_arrays(nll_arrays, keys)
    if isinstance(unit_nbytes, (str, os.PathLike)):
        unit_nbytes = open_model_array(unit_nbytes)
    nb = np.asarray(unit_nbytes, dtype=np.float64)
    if nb.shape != (d,):
        raise SigmapInputError(f"unit_nbytes must have shape ({d},), got {nb.shape}")
    if not (nb > 0).all():
        bad = int(np.argmax(~(nb > 0)))
        raise SigmapInputError(f"unit_nbytes must be > 0; unit {bad} has {nb[bad]}")
    scale = 1.0 / (nb * math.log(2.0))
    m = len(arrays)
    total, m2 = np.zeros(m), np.zeros(m)
    for j, (key, arr) in enumerate(zip(keys, arrays)):
        bpb = np.asarray(arr[:], dtype=np.float64) * scale
        if np.isnan(bpb).any():
            raise SigmapInputError(
                f"model {key}: NLL is NaN at unit {int(np.argmax(np.isnan(bpb)))}"
            )
        if d:
            total[j] = bpb.sum()
            m2[j] = block_moments(bpb)[1]
    return BpbMoments(keys, np.full(m, d, dtype=np.int64), total, m2)


def merge_bpb_moments(parts: Iterable[BpbMoments]) -> BpbMoments:
    """Merge per-shard moments over disjoint units (a pure function, any order).

    Models are the union of the parts' models (in first-seen order); a model absent from a
    part contributes nothing there. Chan's update on ``(count, mean, M2)``::

        n = n_a + n_b,  δ = mean_b − mean_a,  M2 = M2_a + M2_b + δ² n_a n_b / n

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import bpb_moments, merge_bpb_moments
    >>> ln2 = np.log(2.0)
    >>> a = bpb_moments([np.array([1.0, 3.0]) * ln2], ["m1"], [1, 1])
    >>> b = bpb_moments([np.array([5.0]) * ln2, np.array([2.0]) * ln2], ["m1", "m2"], [1])
    >>> ab = merge_bpb_moments([a, b])
    >>> ab.model_keys, ab.count.tolist(), np.round(ab.mean, 12).tolist()  # m1: 1, 3, 5 bits
    (['m1', 'm2'], [3, 1], [3.0, 2.0])
    >>> np.allclose(ab.sd[0], np.std([1.0, 3.0, 5.0]))
    True
    """
    keys: list[str] = []
    acc: dict[str, tuple[int, float, float]] = {}
    for part in parts:
        for j, key in enumerate(part.model_keys):
            nb, tb, mb2 = int(part.count[j]), float(part.total[j]), float(part.m2[j])
            if key not in acc:
                keys.append(key)
                acc[key] = (nb, tb, mb2)
                continue
            na, ta, ma2 = acc[key]
            n = na + nb
            if na == 0 or nb == 0:
                acc[key] = (n, ta + tb, ma2 + mb2)
                continue
            m2 = chan_merge(na, ta / na, ma2, nb, tb / nb, mb2)[2]
            acc[key] = (n, ta + tb, m2)
    if not keys:
        raise SigmapInputError("merge_bpb_moments: no moments to merge")
    return BpbMoments(
        keys,
        np.array([acc[k][0] for k in keys], dtype=np.int64),
        np.array([acc[k][1] for k in keys], dtype=np.float64),
        np.array([acc[k][2] for k in keys], dtype=np.float64),
    )

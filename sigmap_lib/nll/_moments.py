"""Running moments: count, mean and ``M2`` (sum of squared deviations from the mean),
and their exact pairwise merge (Chan, Golub & LeVeque 1979).

One update serves every stream of moments in :mod:`sigmap_lib.nll`: the rank store merges
each chunk of units into its per-model bits-per-byte moments (:class:`RunningMoments`),
and :func:`~sigmap_lib.nll.merge_bpb_moments` merges per-shard :class:`BpbMoments`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError


def chan_merge(
    count_a: int, mean_a: Any, m2_a: Any, count_b: int, mean_b: Any, m2_b: Any
) -> tuple[int, Any, Any]:
    """Merge two sets of moments over disjoint data (``n_a + n_b > 0``).

    ``n = n_a + n_b``, ``δ = mean_b − mean_a``, ``mean = mean_a + δ · n_b / n``,
    ``M2 = M2_a + M2_b + δ² · n_a n_b / n``; the means and ``M2`` are floats or arrays
    (element-wise), the counts Python ints.
    """
    n = count_a + count_b
    delta = mean_b - mean_a
    return n, mean_a + delta * (count_b / n), m2_a + m2_b + delta * delta * (count_a * count_b / n)


def block_moments(block: np.ndarray) -> tuple[Any, Any]:
    """Mean and ``M2`` of the rows of ``block`` (per column; a scalar pair for 1-D)."""
    mean = block.mean(axis=0)
    return mean, ((block - mean) ** 2).sum(axis=0)


class RunningMoments:
    """Per-column mean and M2 over rows, merged chunk by chunk (Chan et al. 1979)."""

    def __init__(self, n_cols: int) -> None:
        self.n = 0
        self.mean = np.zeros(n_cols, dtype=np.float64)
        self.m2 = np.zeros(n_cols, dtype=np.float64)

    def update(self, block: np.ndarray, scale: np.ndarray | None = None) -> None:
        """Merge the rows of ``block`` (times ``scale[:, None]`` when given, in float64)."""
        nb_ = block.shape[0]
        if nb_ == 0:
            return
        if scale is None:
            bmean, bm2 = block_moments(block.astype(np.float64, copy=False))
        else:
            bmean = np.empty(block.shape[1])
            bm2 = np.empty(block.shape[1])
            from sigmap_lib.nll import _kernels

            _kernels.scaled_moments(block, np.asarray(scale, np.float64), bmean, bm2)
        self.n, self.mean, self.m2 = chan_merge(self.n, self.mean, self.m2, nb_, bmean, bm2)

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(self.m2 / self.n) if self.n else np.full_like(self.m2, np.nan)


@dataclass
class BpbMoments:
    """Per-model bits-per-byte moments over some units (a shard, or merged shards).

    Attributes
    ----------
    model_keys : list of str
    count : numpy.ndarray of int64, shape (n_models,)
        Units seen per model.
    total : numpy.ndarray of float64, shape (n_models,)
        Sum of bits-per-byte.
    m2 : numpy.ndarray of float64, shape (n_models,)
        Sum of squared deviations from the mean.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import BpbMoments
    >>> m = BpbMoments(["a"], np.array([4]), np.array([6.0]), np.array([5.0]))
    >>> m.mean.tolist(), m.sd.tolist(), m.sum_squares.tolist()
    ([1.5], [1.118033988749895], [14.0])
    >>> BpbMoments.from_dict(m.to_dict()) == m
    True
    """

    model_keys: list[str]
    count: np.ndarray
    total: np.ndarray
    m2: np.ndarray

    def __post_init__(self) -> None:
        self.model_keys = [str(k) for k in self.model_keys]
        self.count = np.asarray(self.count, dtype=np.int64).reshape(-1)
        self.total = np.asarray(self.total, dtype=np.float64).reshape(-1)
        self.m2 = np.asarray(self.m2, dtype=np.float64).reshape(-1)
        m = len(self.model_keys)
        if len(set(self.model_keys)) != m:
            raise SigmapInputError(f"duplicate model keys in bpb moments: {self.model_keys}")
        if not self.count.shape == self.total.shape == self.m2.shape == (m,):
            raise SigmapInputError(
                f"bpb moments of {m} models need count/total/m2 of shape ({m},), got "
                f"{self.count.shape}/{self.total.shape}/{self.m2.shape}"
            )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, BpbMoments)
            and self.model_keys == other.model_keys
            and np.array_equal(self.count, other.count)
            and np.array_equal(self.total, other.total)
            and np.array_equal(self.m2, other.m2)
        )

    @property
    def mean(self) -> np.ndarray:
        """``(n_models,)`` mean bits-per-byte (NaN where ``count == 0``)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.total / self.count, np.nan)

    @property
    def sd(self) -> np.ndarray:
        """``(n_models,)`` population (``ddof=0``) sd, as ``RankStore.bpb_sd``."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, np.sqrt(self.m2 / self.count), np.nan)

    @property
    def sum_squares(self) -> np.ndarray:
        """``(n_models,)`` raw sum of squared bits-per-byte."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.m2 + np.where(self.count > 0, self.total**2 / self.count, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable (floats are written exactly by ``json``)."""
        return {
            "model_keys": list(self.model_keys),
            "count": self.count.tolist(),
            "total": self.total.tolist(),
            "m2": self.m2.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BpbMoments:
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(d["model_keys"], d["count"], d["total"], d["m2"])
        except KeyError as exc:
            raise SigmapInputError(f"bpb moments dict lacks {exc}") from exc

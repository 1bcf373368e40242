"""The false-discovery mode of the calibrated test: a permutation null pooled across units
(significance analysis of microarrays; Tusher, Tibshirani and Chu 2001; Storey and
Tibshirani 2003) behind a max-T gate.

For a threshold ``t`` the number of real statistics at least as strong is ``R(t)``; the
number a world without signal would give is estimated from the same streaming pass: every
unit's statistic under every permutation ``p`` of the scores (Freedman–Lane within blocks
of similar ``ĝ``, the same permutations as the max-T null), ``V̂(t) = (1/P) Σ_p #{j :
|T*_jp| ≥ t}`` — the pass keeps the histogram of all ``d × P`` of them (4,096 bins; the
count at ``t`` takes the whole bin that holds ``t``, so ``V̂`` is never smaller than its
exact value). The claims are the ``k*`` strongest units with ``k* = max{k : V̂(s_k) / k ≤
q}`` (``s_k`` the ``k``-th strongest real statistic: Benjamini–Hochberg's step-up with the
pooled permutation p-values, ``π₀ = 1``). With more than the buffered strongest units
passing, the count of real statistics comes from their histogram (the bins wholly above
``t``: never larger than the exact count) and a second pass collects the units.

The gate: the whole family is tested first by max-T at level ``q`` (the observed maximum
above the ``1 − q`` quantile of the permutation maxima); no claim without it. On a
complete null every claim is false, so the false-discovery rate is the probability of any
claim, which the gate holds at ``q`` whatever the dependence between units: the same
behaviour as the family-wise test. With signal, the units' statistics are strongly
dependent (they share the scores and load on the same quality), and the pooled estimate is
then an average over worlds that keep that dependence (the permutations move the scores,
not the units); its control of the rate is measured on worlds with planted signal
(``sigmap bench multires``, ``docs/RESULTS.md``).
"""

from __future__ import annotations

import numpy as np

from sigmap_lib.errors import SigmapInputError


def fdr_threshold(
    null_hist: np.ndarray,
    n_permutations: int,
    strengths: np.ndarray,
    observed_hist: np.ndarray | None,
    *,
    q: float,
    lo: float,
    n_units: int,
) -> float:
    """The strength a unit must exceed to be claimed at false-discovery rate ``q``.

    Parameters
    ----------
    null_hist : numpy.ndarray of int, shape (n_null_bins,)
        Histogram of every unit's strength under every permutation (equal bins over
        ``[lo, 1]``).
    n_permutations : int
        ``P``.
    strengths : numpy.ndarray, shape (K,)
        The ``K`` strongest real strengths (exact), any order.
    observed_hist : numpy.ndarray of int, shape (n_bins,), or None
        Histogram of every unit's real strength over ``[lo, 1]``; used when all ``K`` pass
        and more units than ``K`` exist.
    q : float
        False-discovery rate.
    lo : float
        0 (two-sided strengths) or −1.
    n_units : int
        ``d``.

    Returns
    -------
    float
        ``t``: the claims are the units with strength ``> t`` (``inf``: none).

    Examples
    --------
    Ten permutations of 100 units whose null strengths are uniform on [0, 1); three real
    strengths far out and the rest null-like:

    >>> import numpy as np
    >>> from sigmap_lib.signatures import fdr_threshold
    >>> rng = np.random.default_rng(0)
    >>> null = np.histogram(rng.random(1000), bins=4096, range=(0, 1))[0]
    >>> real = np.concatenate([[0.9999, 0.99995, 0.99999], rng.random(97)])
    >>> t = fdr_threshold(null, 10, real, None, q=0.1, lo=0.0, n_units=100)
    >>> int((real > t).sum())
    3
    """
    if not 0.0 < q < 1.0:
        raise SigmapInputError(f"fdr must be in (0, 1), got {q}")
    nb = null_hist.size
    scale = nb / (1.0 - lo)
    tail0 = np.cumsum(null_hist[::-1])[::-1]  # tail0[i] = null values in bins >= i

    def v_hat(t: np.ndarray) -> np.ndarray:
        i = np.clip(((t - lo) * scale).astype(np.int64), 0, nb - 1)
        return tail0[i] / float(n_permutations)

    s = np.sort(np.asarray(strengths, dtype=np.float64))[::-1]
    if s.size == 0:
        return float("inf")
    # R(s_k): real strengths >= s_k (ties counted together)
    r = np.searchsorted(-s, -s, side="right").astype(np.float64)
    ok = v_hat(s) <= q * r
    t = float("inf")
    if ok.any():
        k = int(np.flatnonzero(ok).max())
        t = float(np.nextafter(s[k], -np.inf))
    if (
        observed_hist is not None
        and ok.size
        and ok[-1]
        and n_units > s.size
        and observed_hist.sum() > s.size
    ):
        # all buffered units pass: continue down the histogram of the real strengths
        nbo = observed_hist.size
        edges = lo + np.arange(nbo) * (1.0 - lo) / nbo
        tail = np.cumsum(observed_hist[::-1])[::-1]  # real values in bins >= i
        below = edges < s[-1]
        passing = below & (v_hat(edges) <= q * tail) & (tail > 0)
        if passing.any():
            t = float(np.nextafter(edges[np.flatnonzero(passing).min()], -np.inf))
    return t

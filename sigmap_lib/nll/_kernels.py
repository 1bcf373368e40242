"""Numba kernels of :mod:`sigmap_lib.nll` and :mod:`sigmap_lib.signatures`.

Imported lazily (importing numba costs ~0.5 s); every kernel is a module-level function so
numba's on-disk cache works for the kernels that call each other.

Layout trick shared by all kernels: ``U`` units (``BLOCK_UNITS``) are copied into a
model-major buffer ``t (m, U)`` and every model pair is compared for all ``U`` units at
once (SIMD lanes run across units, not across the ``m`` models of one unit, so no
horizontal reductions). ``U`` units' compares of one pair are two vector compares.

* ranking: ``code_k = (m − 1) + Σ_{l≠k} sign(p_k − p_l)`` (= ``2·#less + #equal``), the
  ``m(m−1)/2`` pairs counted once each, into int16 lanes;
* Thrush fused with ranking: ``Σ_k c_k · code_k`` per benchmark on the block's counts
  (the codes never leave L1);
* pre-select: ``S_b = Σ_{k<l} sign(y_k − y_l)·sign(p_k − p_l)`` accumulated per pair for
  all benchmarks at once (float32 lanes: exact, ``|S| ≤ m(m−1)/2``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

#: units per SIMD block (lanes of one block are compared together); 256 measured fastest
#: for m = 32 (128: −19 %, 384: −20 %)
BLOCK_UNITS = 256
# prange work items per call (each allocates its block buffers once); a constant, because
# numba cannot cache functions that call ``get_num_threads``
MAX_CHUNKS = 64


@nb.njit(boundscheck=False, nogil=True, cache=True)
def load_block(v, u0, w, t):  # pragma: no cover - compiled
    """``t[k, i] = v[u0 + i, k]`` for ``i < w`` (lanes ``i >= w`` keep stale values).

    Reads along the contiguous axis of ``v`` (unit-major or model-major blocks alike) and
    returns the number of NaN values loaded (0 for integer inputs).
    """
    m = t.shape[0]
    nan = 0
    if v.strides[0] < v.strides[1]:  # model-major: a model's units are contiguous
        for k in range(m):
            tk = t[k]
            for i in range(w):
                x = v[u0 + i, k]
                tk[i] = x
                nan += np.int32(x != x)
    else:
        for i in range(w):
            for k in range(m):
                x = v[u0 + i, k]
                t[k, i] = x
                nan += np.int32(x != x)
    return nan


@nb.njit(boundscheck=False, nogil=True, cache=True)
def hist_add(h, x, lo, scale):  # pragma: no cover - compiled
    """Add ``x`` to the fixed-width histogram row ``h`` (bins of width ``1/scale`` from ``lo``)."""
    nbins = h.shape[0]
    i = int((x - lo) * scale)
    if i < 0:
        i = 0
    elif i >= nbins:
        i = nbins - 1
    h[i] += 1


@nb.njit(boundscheck=False, nogil=True, cache=True)
def count_block(t, cnt):  # pragma: no cover - compiled
    """Doubled zero-based average-rank codes of every lane of ``t (m, U)`` into ``cnt``.

    ``code_k = (m − 1) + Σ_{l≠k} sign(p_k − p_l)`` (= ``2·#less + #equal``), each pair
    counted once (``sign_lk = −sign_kl``). ``cnt`` is int16 (codes ≤ 2m − 2 ≤ 254): half the
    bytes of int32 per lane, which is what the pair loop is bound by (stores); measured
    1.9× the int32 version at 256 lanes.
    """
    m, u = t.shape
    for k in range(m):
        ck = cnt[k]
        for i in range(u):
            ck[i] = m - 1
    for k in range(m):
        tk = t[k]
        ck = cnt[k]
        for l in range(k + 1, m):  # noqa: E741
            tl = t[l]
            cl = cnt[l]
            for i in range(u):
                s = np.int16(tk[i] > tl[i]) - np.int16(tk[i] < tl[i])
                ck[i] += s
                cl[i] -= s


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def encode_blocked(v, out, u):  # pragma: no cover - compiled
    """Codes of every row of ``v (n, m)`` (any layout) into ``out (n, m)``.

    Returns the number of NaN values read (their rows' codes are meaningless).
    """
    n, m = v.shape
    nblk = (n + u - 1) // u
    nchunk = min(nblk, MAX_CHUNKS)
    nan = 0
    for c in nb.prange(nchunk):
        t = np.zeros((m, u), v.dtype)
        cnt = np.zeros((m, u), np.int16)
        for blk in range(c * nblk // nchunk, (c + 1) * nblk // nchunk):
            u0 = blk * u
            w = min(u, n - u0)
            nan += load_block(v, u0, w, t)
            count_block(t, cnt)
            for i in range(w):
                for k in range(m):
                    out[u0 + i, k] = cnt[k, i]
    return nan


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def scaled_moments(v, scale, mean, m2):  # pragma: no cover - compiled
    """Per column ``k`` of ``v (n, m)``: mean and sum of squared deviations of
    ``v[:, k] * scale`` (float64, two passes, no temporaries) into ``mean``, ``m2``."""
    n, m = v.shape
    for k in nb.prange(m):
        s = 0.0
        for i in range(n):
            s += np.float64(v[i, k]) * scale[i]
        mu = s / n
        q = 0.0
        for i in range(n):
            e = np.float64(v[i, k]) * scale[i] - mu
            q += e * e
        mean[k] = mu
        m2[k] = q


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def encode_rowwise(v, out):  # pragma: no cover - compiled
    """Large ``m`` (uint16 codes): one unit at a time, ``m²`` compares."""
    d, m = v.shape
    for u in nb.prange(d):
        for k in range(m):
            pk = v[u, k]
            s = 0
            for l in range(m):  # noqa: E741
                pl = v[u, l]
                s += 2 * np.int32(pl < pk) + np.int32(pl == pk)
            out[u, k] = s - 1


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def rank_thrush(v, cneg, den, out, u, lo, hi, hist, nan, codes):  # pragma: no cover
    """Fused ranking + Thrush: ``out[j, b] = (Σ_k cneg[k, b] · code_jk) / den[b]``.

    ``v (n, m)`` values (any layout, float or integer), ``cneg (m, B)`` int32 (``−c``),
    ``den (B,)`` float64, ``out (n, B)`` float64 (the integer sum divided in float64,
    bit-identical to ``raw / den`` in numpy).

    Side outputs of the same pass (per prange work item ``c < MAX_CHUNKS``):
    ``hist (MAX_CHUNKS, B, n_bins)`` int64 histograms of ``out`` over ``[lo, hi]`` (skipped
    when ``n_bins == 0``), ``nan (MAX_CHUNKS,)`` counts of NaN values read, and the rank
    codes ``codes (n, m)`` uint8 (skipped when ``codes`` has no rows).
    """
    n, m = v.shape
    nbm = cneg.shape[1]
    nbins = hist.shape[2]
    scale = nbins / (hi - lo) if nbins > 0 else 0.0
    want_codes = codes.shape[0] == n
    nblk = (n + u - 1) // u
    nchunk = min(nblk, MAX_CHUNKS)
    for c in nb.prange(nchunk):
        t = np.zeros((m, u), v.dtype)
        cnt = np.zeros((m, u), np.int16)
        acc = np.zeros(u, np.int32)
        for blk in range(c * nblk // nchunk, (c + 1) * nblk // nchunk):
            u0 = blk * u
            w = min(u, n - u0)
            nan[c] += load_block(v, u0, w, t)
            count_block(t, cnt)
            if want_codes:
                for i in range(w):
                    for k in range(m):
                        codes[u0 + i, k] = cnt[k, i]
            for b in range(nbm):
                for i in range(u):
                    acc[i] = 0
                for k in range(m):
                    ck = cnt[k]
                    cb = cneg[k, b]
                    for i in range(u):
                        acc[i] += cb * ck[i]
                db = den[b]
                for i in range(w):
                    out[u0 + i, b] = np.float64(acc[i]) / db
                if nbins > 0:
                    hb = hist[c, b]
                    for i in range(w):
                        hist_add(hb, out[u0 + i, b], lo, scale)


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def pair_sign_sum(v, ys, z, out, u, lo, hi, hist, nan):  # pragma: no cover - compiled
    """Pre-select ``out[j, b] = ½ + S_jb / (2 z_b)`` with
    ``S_jb = Σ_{k<l} ys[p(k,l), b] · sign(v[j,k] − v[j,l])`` (float32 sums: exact).

    ``v (n, m)`` values or rank codes (any layout); ``ys (P, B)`` float32 pair signs of the
    scores in ``np.triu_indices(m, 1)`` order, ``z (B,)`` float64 pairs with different scores.
    ``hist`` and ``nan`` as in :func:`rank_thrush`.
    """
    n, m = v.shape
    nbm = ys.shape[1]
    nbins = hist.shape[2]
    scale = nbins / (hi - lo) if nbins > 0 else 0.0
    nblk = (n + u - 1) // u
    nchunk = min(nblk, MAX_CHUNKS)
    for c in nb.prange(nchunk):
        t = np.zeros((m, u), v.dtype)
        sg = np.zeros(u, np.float32)
        acc = np.zeros((nbm, u), np.float32)
        for blk in range(c * nblk // nchunk, (c + 1) * nblk // nchunk):
            u0 = blk * u
            w = min(u, n - u0)
            nan[c] += load_block(v, u0, w, t)
            for b in range(nbm):
                ab = acc[b]
                for i in range(u):
                    ab[i] = 0.0
            p = 0
            for k in range(m):
                tk = t[k]
                for l in range(k + 1, m):  # noqa: E741
                    tl = t[l]
                    for i in range(u):
                        sg[i] = np.float32(tk[i] > tl[i]) - np.float32(tk[i] < tl[i])
                    for b in range(nbm):
                        yv = ys[p, b]
                        if yv != 0.0:
                            ab = acc[b]
                            for i in range(u):
                                ab[i] += yv * sg[i]
                    p += 1
            for b in range(nbm):
                zb = 2.0 * z[b]
                for i in range(w):
                    out[u0 + i, b] = 0.5 + np.float64(acc[b, i]) / zb
                if nbins > 0:
                    hb = hist[c, b]
                    for i in range(w):
                        hist_add(hb, out[u0 + i, b], lo, scale)


@nb.njit(boundscheck=False, nogil=True, cache=True)
def histogram(x, lo, hi, counts):  # pragma: no cover - compiled
    """Fixed-width histogram of every column of ``x (n, B)`` into ``counts (B, n_bins)``."""
    n, nb_ = x.shape
    scale = counts.shape[1] / (hi - lo)
    for j in range(n):
        for b in range(nb_):
            hist_add(counts[b], x[j, b], lo, scale)


@nb.njit(boundscheck=False, nogil=True, cache=True)
def strength_value(x, kind):  # pragma: no cover - compiled
    """:func:`sigmap_lib.signatures.strength_of` of one value (same float operations).

    kind 0: thrush one-sided, 1: thrush two-sided, 2: pre-select one-sided, 3: two-sided.
    """
    if kind == 0:
        return x
    if kind == 1:
        return abs(x)
    if kind == 2:
        return (0.5 - x) * 2.0
    return abs(x - 0.5) * 2.0


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def select_candidates(stat, kind, t_strict, t_weak, buf, nsel):  # pragma: no cover
    """Units whose strength is ``> t_strict[b]`` and ``>= t_weak[b]``, per benchmark.

    The rows are split into ``nsel.shape[0]`` consecutive parts ``[r0, r1)`` scanned in
    parallel; part ``c`` writes its hits for benchmark ``b`` (increasing) to
    ``buf[b, r0 : r0 + nsel[c, b]]``.
    """
    n, nbm = stat.shape
    nparts = nsel.shape[0]
    for c in nb.prange(nparts):
        r0 = c * n // nparts
        r1 = (c + 1) * n // nparts
        for b in range(nbm):
            nsel[c, b] = 0
        for j in range(r0, r1):
            for b in range(nbm):
                st = strength_value(stat[j, b], kind)
                if st > t_strict[b] and st >= t_weak[b]:
                    buf[b, r0 + nsel[c, b]] = j
                    nsel[c, b] += 1


# ----------------------------------------------------------------------------------------
# max-T permutation pass of the calibrated signatures (sigmap_lib.signatures._calibration)


@nb.njit(boundscheck=False, nogil=True, cache=True)
def cast_codes(codes, r0, r1, x32, x64, sq):  # pragma: no cover - compiled
    """Rows ``[r0, r1)`` of integer ``codes (n, m)`` into ``x32[: r1 − r0]`` (float32, only
    when ``x32`` has rows), ``x64`` (float64) and ``sq[i] = Σ_k code²`` (float64, exact)."""
    m = codes.shape[1]
    want32 = x32.shape[0] > 0
    for i in range(r0, r1):
        s = 0.0
        for k in range(m):
            c = np.float64(codes[i, k])
            x64[i - r0, k] = c
            s += c * c
        if want32:
            for k in range(m):
                x32[i - r0, k] = np.float32(codes[i, k])
        sq[i - r0] = s


@nb.njit(boundscheck=False, nogil=True, cache=True)
def scaled_colmax(prod, inv, colmax, two_sided):  # pragma: no cover - compiled
    """``colmax[c] = max(colmax[c], max_i f(prod[i, c] · inv[i]))`` with ``f = |·|`` when
    ``two_sided`` else the identity; ``prod (n, C)`` float32 or float64, ``inv (n,)`` and
    ``colmax (C,)`` float64 (the running maxima of the permutation columns)."""
    n, nc = prod.shape
    for i in range(n):
        s = inv[i]
        if two_sided:
            for c in range(nc):
                colmax[c] = max(colmax[c], abs(np.float64(prod[i, c]) * s))
        else:
            for c in range(nc):
                colmax[c] = max(colmax[c], np.float64(prod[i, c]) * s)


@nb.njit(boundscheck=False, nogil=True, cache=True)
def group_add(block, lab, out):  # pragma: no cover - compiled
    """``out[lab[i], :] += block[i, :]`` for every row ``i`` of ``block (n, m)`` (any float
    dtype), accumulated in ``out (G, m)`` float64: the per-group sums of a multi-resolution
    level, one read of the block."""
    n, m = block.shape
    for i in range(n):
        g = lab[i]
        for j in range(m):
            out[g, j] += block[i, j]


@nb.njit(boundscheck=False, nogil=True, cache=True)
def scaled_colmax_hist(prod, inv, colmax, two_sided, den, col_set, hist, lo):  # pragma: no cover
    """:func:`scaled_colmax`, and the histogram of every permuted statistic: the value
    ``v = f(prod[i, c] · inv[i]) / den[c]`` of unit ``i`` under column ``c`` is counted in
    ``hist[col_set[c], bin]``, ``hist (S, n_bins)`` int64 with equal bins over ``[lo, 1]``
    (values past either end in the end bins). ``colmax`` holds the undivided maxima, as
    :func:`scaled_colmax` does."""
    n, nc = prod.shape
    nbins = hist.shape[1]
    scale = nbins / (1.0 - lo)
    for i in range(n):
        s = inv[i]
        for c in range(nc):
            v = np.float64(prod[i, c]) * s
            if two_sided:
                v = abs(v)
            if v > colmax[c]:
                colmax[c] = v
            b = int((v / den[c] - lo) * scale)
            if b >= nbins:
                b = nbins - 1
            elif b < 0:
                b = 0
            hist[col_set[c], b] += 1


@nb.njit(boundscheck=False, nogil=True, cache=True)
def partial_scale(
    o, sq, offset, normalize, den, kind, inv, stat, r0, obsmax, hist, lo, hi
):  # pragma: no cover
    """Per-unit scaling of the observed columns of one block of the max-T pass.

    ``o (n, B)`` float64 products of the block's codes with the ``B = stat.shape[1]``
    unit-norm score columns; ``sq (n,)`` ``Σ_k code²``; ``offset = m(m − 1)²`` (so
    ``sq − offset = ‖code − mean‖²``). With ``normalize``: ``inv[i] = 1 / ‖code_i − mean‖``
    (0 for a constant unit), else ``inv[i] = 1``; ``stat[r0 + i, b] = (o[i, b] · inv[i]) / den[b]``
    (the marginal Thrush: integer products divided by ``den``, bit-identical to
    :func:`rank_thrush`).

    Side outputs: ``obsmax[b]`` running maximum and ``hist (B, n_bins)`` int64 running
    histogram over ``[lo, hi]`` of the strength ``strength_value(stat, kind)``.
    """
    n = o.shape[0]
    nobs = stat.shape[1]
    nbins = hist.shape[1]
    scale = nbins / (hi - lo)
    for i in range(n):
        if normalize:
            base = sq[i] - offset
            inv[i] = 1.0 / np.sqrt(base) if base > 0.0 else 0.0
        else:
            inv[i] = 1.0
        s = inv[i]
        for b in range(nobs):
            x = (o[i, b] * s) / den[b]
            stat[r0 + i, b] = x
            st = strength_value(x, kind)
            obsmax[b] = max(obsmax[b], st)
            hist_add(hist[b], st, lo, scale)


@nb.njit(parallel=True, boundscheck=False, nogil=True, cache=True)
def residualize_rows(x, q, out):  # pragma: no cover - compiled
    """``out[i] = x[i] − q (qᵀ x[i])`` in float64 for every row of ``x (n, m)`` (any float
    dtype) and the orthonormal ``q (m, k)``; a row whose residual is below ``1e-9`` of its
    centred norm (plus ``1e-13`` of its norm: rounding) is set to exactly 0."""
    n, m = x.shape
    kq = q.shape[1]
    for i in nb.prange(n):
        c = np.zeros(kq)
        s = 0.0
        s2 = 0.0
        for j in range(m):
            v = np.float64(x[i, j])
            s += v
            s2 += v * v
            for t in range(kq):
                c[t] += q[j, t] * v
        nr = 0.0
        for j in range(m):
            v = np.float64(x[i, j])
            for t in range(kq):
                v -= q[j, t] * c[t]
            out[i, j] = v
            nr += v * v
        nc = s2 - s * s / m
        if nr <= 1e-18 * max(nc, 0.0) + 1e-26 * s2:
            for j in range(m):
                out[i, j] = 0.0

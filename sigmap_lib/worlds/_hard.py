"""Hard worlds for the signature test: every unit loads strongly, unevenly and nonlinearly on
the models' general quality, as with real LLMs (better models are better on nearly all text).

Each call draws a fresh world; :data:`HARD_SCENARIOS` names the ways the scores can depend on
quality without any unit carrying benchmark-specific signal (the null worlds), and
``planted_rho`` adds units whose partial correlation with the scores given quality is known
(the power worlds). ``sigmap bench recovery`` and the signature tests draw from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sigmap_lib.errors import SigmapInputError

HARD_SCENARIOS = (
    "independent",
    "linear",
    "logistic",
    "convex",
    "curved",
    "t3",
    "accuracy",
    "families",
    "reallike",
    "hinge",
    "step",
    "threshold",
    "shrinking",
)
#: Scenarios whose units are drawn as real LLMs' documents are (:func:`hard_world`):
#: near-collinear with quality, several factors, kinks, noise that shrinks with quality.
REALLIKE_SCENARIOS = ("reallike", "hinge", "step", "threshold", "shrinking")


@dataclass
class HardWorld:
    """One drawn world.

    Attributes
    ----------
    values : numpy.ndarray of float32, shape (n_units, n_models)
        Per-unit log-perplexities (unit-major, as :func:`sigmap_lib.signatures.extract_signatures`
        reads them).
    scores : numpy.ndarray of float64, shape (n_models, n_benchmarks)
    quality : numpy.ndarray, shape (n_models,)
        The true general quality ``g``.
    strata : numpy.ndarray of int, shape (n_models,), or None
        The model families (``"families"`` only).
    planted : list of numpy.ndarray
        Per benchmark, the units planted to track its scores beyond quality (empty in a null
        world).
    loadings : numpy.ndarray, shape (n_units,)
        Each unit's correlation with quality before the nonlinearity (0.3–0.9).
    """

    values: np.ndarray
    scores: np.ndarray
    quality: np.ndarray
    strata: np.ndarray | None
    planted: list[np.ndarray]
    loadings: np.ndarray


def _standardize(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / x.std()


def _scores(
    scenario: str, g: np.ndarray, rng: np.random.Generator, offset: np.ndarray
) -> np.ndarray:
    """Scores of one benchmark that depend on quality (and family offsets) only."""
    m = g.size
    if scenario == "independent":
        return rng.standard_normal(m)
    if scenario == "logistic":
        return 1.0 / (1.0 + np.exp(-2.5 * g)) + 0.1 * rng.standard_normal(m)
    if scenario == "convex":
        return np.exp(1.2 * g) + 0.5 * rng.standard_normal(m)
    if scenario == "t3":
        return g + 0.5 * rng.standard_t(3, m) / np.sqrt(3.0)
    if scenario == "accuracy":
        p = 1.0 / (1.0 + np.exp(-(g + 0.5 * rng.standard_normal(m))))
        return rng.binomial(20, p) / 20.0
    if scenario == "hinge":  # emergent: flat (at chance) below a quality threshold
        return 2.0 * np.maximum(g - 0.25, 0.0) + 0.2 * rng.standard_normal(m)
    if scenario == "threshold":  # a sharp logistic
        return 1.0 / (1.0 + np.exp(-6.0 * (g - 0.3))) + 0.1 * rng.standard_normal(m)
    if scenario == "step":  # quintiles of quality, noise 3x larger in the weakest fifth
        q = np.searchsorted(np.quantile(g, [0.2, 0.4, 0.6, 0.8]), g)
        return 0.5 * q + 0.25 * (3.0 - 0.5 * q) / 3.0 * rng.standard_normal(m)
    if scenario == "shrinking":  # noise that shrinks as quality grows
        return g + 0.5 * np.exp(-0.5 * g) * rng.standard_normal(m)
    return g + 0.5 * rng.standard_normal(m) + offset


def hard_world(
    scenario: str,
    n_models: int,
    n_units: int,
    rng: np.random.Generator,
    *,
    n_benchmarks: int = 1,
    planted_rho: float | None = None,
    n_planted: int = 5,
    n_families: int = 4,
) -> HardWorld:
    """Draw one world in which units load strongly, unevenly and nonlinearly on quality.

    Units: ``v_j = μ_j − λ_j·h_j(g) + √(1 − λ_j²)·ε_j`` with loadings ``λ_j ~ U(0.3, 0.9)``,
    a per-unit curvature ``h_j(g) ∝ g + c_j(g² − 1)``, ``c_j ~ U(−0.3, 0.3)``, and unit means
    ``μ_j ~ U(2, 6)``. ``"curved"``: ``c_j ~ U(−0.5, 0.5)`` and heteroscedastic noise
    ``sd ∝ exp(δ_j g)``, ``δ_j ~ U(−0.5, 0.5)``; ``"t3"``: t(3) unit noise.
    Real-like units (:data:`REALLIKE_SCENARIOS`): loadings ``λ_j ~ U(0.9, 0.995)`` (real
    documents correlate with quality at −0.999), a kink of their own
    ``k_j·tanh(3(g − a_j))``, ``k_j ~ U(−0.4, 0.4)``, and noise made of three shared model
    factors (24 %, 18 %, 10 % of it, as in the real matrix once quality is removed) plus
    unit noise, spreading ``exp(−0.4 g)`` (more among weak models). Scores there:
    ``"reallike"`` ``g + 0.5 ε``; ``"hinge"`` ``2·max(g − 0.25, 0) + 0.2 ε`` (emergent);
    ``"threshold"`` ``σ(6(g − 0.3)) + 0.1 ε``; ``"step"`` the quintile of ``g`` (0–4) / 2 with
    noise 3× larger in the weakest fifth; ``"shrinking"`` ``g + 0.5·exp(−0.5 g)·ε``.
    Scores (per benchmark, higher = better): ``"independent"`` N(0, 1) noise; ``"linear"``,
    ``"curved"`` ``g + 0.5 ε``; ``"logistic"`` ``σ(2.5 g) + 0.1 ε``; ``"convex"``
    ``exp(1.2 g) + 0.5 ε``; ``"t3"`` ``g + 0.5·t3``; ``"accuracy"`` the share correct of 20
    2PL-like items at ``g + 0.5 ε`` (ties); ``"families"``: ``n_families`` families with a
    standard-normal offset each, in the scores and (scaled by U(0.5, 1.5)) in 30 % of the units.
    With ``planted_rho`` the scores are ``g + z_b`` (``z_b`` standardized noise, plus the
    scenario's family offsets) and the first ``n_planted`` units of benchmark ``b`` get
    ``ε_j = −ρ·z_b + √(1 − ρ²)·ε'_j``: partial correlation ``−ρ`` with the scores given ``g``
    (positive in the signature's sign convention: better models less perplexed).

    Parameters
    ----------
    scenario : one of :data:`HARD_SCENARIOS`
    n_models, n_units : int
    rng : numpy.random.Generator
    n_benchmarks : int
    planted_rho : float in (0, 1), optional
    n_planted : int
    n_families : int

    Returns
    -------
    HardWorld

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.worlds import hard_world
    >>> w = hard_world("linear", 32, 2000, np.random.default_rng(0))
    >>> w.values.shape, w.scores.shape, w.planted[0].size
    ((2000, 32), (32, 1), 0)
    >>> r = [np.corrcoef(w.values[j], w.quality)[0, 1] for j in range(2000)]
    >>> bool(np.median(r) < -0.4)  # better models are less perplexed on nearly every unit
    True
    """
    if scenario not in HARD_SCENARIOS:
        raise SigmapInputError(f"scenario must be one of {HARD_SCENARIOS}, got {scenario!r}")
    if planted_rho is not None and not 0.0 < planted_rho < 1.0:
        raise SigmapInputError(f"planted_rho must be in (0, 1), got {planted_rho}")
    m, d = int(n_models), int(n_units)
    g = rng.standard_normal(m)
    reallike = scenario in REALLIKE_SCENARIOS
    lam = rng.uniform(0.9, 0.995, d) if reallike else rng.uniform(0.3, 0.9, d)
    curved = scenario == "curved"
    c = rng.uniform(-0.5, 0.5, d) if curved else rng.uniform(-0.3, 0.3, d)
    # (d, m) arrays are updated in place (at most three alive at d = 1e7), each step the
    # same floating-point operation as the formula it computes
    h = c[:, None] * (g[None, :] ** 2 - 1.0)
    h /= np.sqrt(2.0)
    h += g[None, :]
    if reallike:
        # a kink of its own per unit: a sharp tanh step at a random quality
        kink = rng.uniform(-0.4, 0.4, d)[:, None]
        at = rng.uniform(-1.0, 1.0, d)[:, None]
        step = g[None, :] - at
        step *= 3.0
        np.tanh(step, out=step)
        step *= kink
        h += step
        del step
    mean, sd = h.mean(axis=1, keepdims=True), h.std(axis=1, keepdims=True)
    h -= mean
    h /= sd
    if scenario == "t3":
        eps = rng.standard_t(3, (d, m)) / np.sqrt(3.0)
    else:
        eps = rng.standard_normal((d, m))
    if curved:
        eps *= np.exp(rng.uniform(-0.5, 0.5, d)[:, None] * g[None, :])
    if reallike:
        # three more model factors shared by the units (the real matrix, after removing
        # quality: 24 %, 18 % and 10 % of the residual variance), and unit noise that
        # spreads more among weak models (2.2x between the weakest and strongest fifth)
        f = rng.standard_normal((3, m))
        a = rng.standard_normal((d, 3)) * np.sqrt(np.array([0.24, 0.18, 0.10]))
        eps *= np.sqrt(0.48)
        eps += a @ f
        eps *= np.exp(-0.4 * g)[None, :]
    strata = None
    offset = np.zeros(m)
    hit, unit_offset = None, None  # the families' offsets of 30 % of the units
    if scenario == "families":
        strata = rng.integers(0, n_families, m)
        fam = rng.standard_normal(n_families)
        offset = fam[strata]
        hit = rng.random(d) < 0.3
        unit_offset = rng.uniform(0.5, 1.5, int(hit.sum()))[:, None] * offset[None, :]
    y = np.empty((m, n_benchmarks))
    planted: list[np.ndarray] = []
    for b in range(n_benchmarks):
        if planted_rho is None:
            y[:, b] = _scores(scenario, g, rng, offset)
            planted.append(np.zeros(0, dtype=np.int64))
            continue
        z = _standardize(rng.standard_normal(m))
        y[:, b] = g + z + offset
        units = np.arange(b * n_planted, (b + 1) * n_planted, dtype=np.int64)
        if units[-1] >= d:
            raise SigmapInputError(f"{n_benchmarks} × {n_planted} planted units need d >= that")
        e2 = rng.standard_normal((units.size, m))
        eps[units] = -planted_rho * z[None, :] + np.sqrt(1.0 - planted_rho**2) * e2
        planted.append(units)
    # v = μ − λ·h + √(1 − λ²)·ε (+ the family offsets), in h's memory
    mu = rng.uniform(2.0, 6.0, d)[:, None]
    h *= lam[:, None]
    np.subtract(mu, h, out=h)
    eps *= np.sqrt(1.0 - lam[:, None] ** 2)
    h += eps
    del eps
    if hit is not None:
        h[hit] += unit_offset
    return HardWorld(
        values=h.astype(np.float32),
        scores=y,
        quality=g,
        strata=strata,
        planted=planted,
        loadings=lam,
    )


@dataclass
class ClusteredWorld:
    """A :func:`hard_world` whose units sit in documents and documents in sources.

    Attributes
    ----------
    world : HardWorld
        The units (``world.values``, ``(n_units, n_models)``) and scores; in a power world
        ``world.planted[b]`` holds every unit of benchmark ``b``'s planted documents.
    documents : numpy.ndarray of int64, shape (n_units,)
        The document of each unit (documents are contiguous runs of units).
    sources : numpy.ndarray of int64, shape (n_units,)
        The source of each unit (a random source per document).
    planted_documents : list of numpy.ndarray
        Per benchmark, its planted documents (empty in a null world).
    """

    world: HardWorld
    documents: np.ndarray
    sources: np.ndarray
    planted_documents: list[np.ndarray]


def clustered_world(
    scenario: str,
    n_models: int,
    n_documents: int,
    units_per_document: int,
    rng: np.random.Generator,
    *,
    n_sources: int = 10,
    planted_rho: float | None = None,
    planted_documents: int = 1,
    document_effect: float = 0.3,
) -> ClusteredWorld:
    """Draw a :func:`hard_world` of ``n_documents × units_per_document`` units grouped into
    documents and sources, with signal planted in whole documents.

    On top of the hard world's units, the units of a document share what real documents
    share: a document × model effect (sd ``document_effect`` of the unit noise's, so that a
    document's mean does not average it away) and a kink of the document's own in quality,
    ``k·tanh(3(g − a))`` with ``k ~ U(−0.3, 0.3)`` (so a document's mean is not a
    polynomial of quality either). With ``planted_rho``, every unit of the first
    ``planted_documents`` documents carries partial correlation ``planted_rho`` with the
    scores given quality, each with its own independent noise (:func:`hard_world`'s
    planting): a planted document's mean carries more than any of its units.

    Parameters
    ----------
    scenario : one of :data:`HARD_SCENARIOS` but ``"families"``
    n_models, n_documents, units_per_document : int
    rng : numpy.random.Generator
    n_sources : int
    planted_rho : float in (0, 1), optional
    planted_documents : int
    document_effect : float

    Returns
    -------
    ClusteredWorld

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.worlds import clustered_world
    >>> cw = clustered_world("linear", 32, 50, 20, np.random.default_rng(0), planted_rho=0.6)
    >>> cw.world.values.shape, cw.documents[:3].tolist(), cw.planted_documents[0].tolist()
    ((1000, 32), [0, 0, 0], [0])
    >>> cw.world.planted[0].tolist() == list(range(20))
    True
    """
    if scenario == "families":
        raise SigmapInputError("clustered_world draws no families; use hard_world for them")
    n_docs, per = int(n_documents), int(units_per_document)
    d = n_docs * per
    planted = int(planted_documents) * per if planted_rho is not None else 5
    if planted > d:
        raise SigmapInputError(f"{planted_documents} planted documents need n_documents >= that")
    w = hard_world(scenario, n_models, d, rng, planted_rho=planted_rho, n_planted=planted)
    docs = np.repeat(np.arange(n_docs, dtype=np.int64), per)
    g = w.quality
    effect = document_effect * rng.standard_normal((n_docs, g.size))
    kink = rng.uniform(-0.3, 0.3, n_docs)[:, None] * np.tanh(
        3.0 * (g[None, :] - rng.uniform(-1.0, 1.0, n_docs)[:, None])
    )
    # values + √(1 − λ²)·effect[doc] + kink[doc], with one (d, m) float64 array
    out = np.repeat(effect, per, axis=0)
    out *= np.sqrt(1.0 - w.loadings**2)[:, None]
    out += w.values
    out.reshape(n_docs, per, g.size)[...] += kink[:, None, :]
    w.values = out.astype(np.float32)
    source_of = rng.integers(0, int(n_sources), n_docs)
    pdocs = [np.unique(docs[u]) for u in w.planted]
    return ClusteredWorld(world=w, documents=docs, sources=source_of[docs], planted_documents=pdocs)

"""Findings on 89 real LLMs (``shared/data/realmodels``): signatures by method, a real-data
null, the performance level against the signature level, and the 39 models shared with
ObsScaling on its benchmarks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.inputs import ModelMatrix, read_perplexity_correlations
from sigmap_lib.overlap import (
    OverlapMatrix,
    UnitBits,
    group_test,
    performance_overlap,
    signature_overlap,
)
from sigmap_lib.signatures import extract_signatures, method_class

#: ObsScaling's base-model table (``shared/data/leaderboard``) and its benchmark columns
OBSCALING_FILE = "obscaling_base_llm_benchmark_eval.csv"
OBSCALING_BENCHMARKS = (
    "MMLU",
    "ARC-C",
    "HellaSwag",
    "Winograd",
    "TruthfulQA",
    "GSM8K",
    "XWinograd",
    "HumanEval",
)


def _wilson(k: int, n: int) -> list[float]:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return [float(lo), float(hi)]


def null_scores(
    kind: str, scores: np.ndarray, ghat: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Scores with no document-specific signal, shape ``(m, B)`` like ``scores``.

    ``"permuted"``: each benchmark's real scores permuted across the models (no link to the
    models at all); ``"quality"``: each benchmark's least-squares line on general quality
    ``ĝ`` plus Gaussian noise of its residual spread (scores that track quality as the real
    ones do, and nothing else).

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.studies import null_scores
    >>> rng = np.random.default_rng(0)
    >>> g = np.linspace(-1.0, 1.0, 50)
    >>> y = np.column_stack([2.0 * g + 0.1 * rng.standard_normal(50), rng.standard_normal(50)])
    >>> q = null_scores("quality", y, g, rng)
    >>> q.shape, bool(np.corrcoef(q[:, 0], g)[0, 1] > 0.95)
    ((50, 2), True)
    >>> sorted(null_scores("permuted", y, g, rng)[:, 1]) == sorted(y[:, 1])
    True
    """
    m, nb = scores.shape
    if kind == "permuted":
        return np.column_stack([scores[rng.permutation(m), b] for b in range(nb)])
    if kind == "quality":
        x = np.column_stack([np.ones(m), ghat])
        coef, *_ = np.linalg.lstsq(x, scores, rcond=None)
        fit = x @ coef
        sd = (scores - fit).std(axis=0, ddof=2)
        return fit + sd * rng.standard_normal((m, nb))
    raise ValueError(f"null kind {kind!r}: 'permuted' or 'quality'")


def real_data_null(
    mm: ModelMatrix,
    kind: str,
    *,
    runs: int,
    method: str = "calibrated",
    n_permutations: int = 199,
    seed: int = 0,
) -> dict[str, Any]:
    """How often ``method`` claims documents when the scores carry no document signal.

    Every run draws fresh null scores for all benchmarks (:func:`null_scores`) and extracts
    their signatures in one call. Returns the share of (run, benchmark) signatures that are
    non-empty with its Wilson 95 % interval, the share of runs where any benchmark has one,
    the per-benchmark shares and the mean number of documents claimed.

    Examples
    --------
    24 models, 150 documents that all follow general quality, one error-rate benchmark:

    >>> import numpy as np
    >>> from sigmap_lib.inputs import ModelMatrix
    >>> from sigmap_lib.studies import real_data_null
    >>> rng = np.random.default_rng(0)
    >>> g = rng.standard_normal(24)
    >>> mm = ModelMatrix(
    ...     values=1.0 - 0.1 * g + 0.02 * rng.standard_normal((150, 24)),
    ...     unit_ids=[f"d{j}" for j in range(150)], models=[f"org/m{k}" for k in range(24)],
    ...     families=np.array(["f"] * 24), benchmarks=["arc_easy"],
    ...     errors=(0.5 - 0.1 * g + 0.05 * rng.standard_normal(24))[:, None])
    >>> r = real_data_null(mm, "quality", runs=4, n_permutations=39)
    >>> r["signatures"], 0.0 <= r["nonempty_share"] <= 1.0, len(r["nonempty_wilson95"])
    (4, True, 2)
    """
    rng = np.random.default_rng([seed, len(kind), runs])
    y = mm.scores()
    ghat = mm.general_quality()
    nb = y.shape[1]
    hits = np.zeros(nb, dtype=np.int64)
    any_hit = 0
    n_docs = 0
    kw: dict[str, Any] = {"method": method}
    if method_class(method).calibrated:
        kw["n_permutations"] = n_permutations
    for run in range(runs):
        ys = null_scores(kind, y, ghat, rng)
        sigs = extract_signatures(mm.values, ys, seed=seed * 1_000_003 + run, **kw)
        nonempty = np.array([s.units.size > 0 for s in sigs])
        hits += nonempty
        any_hit += bool(nonempty.any())
        n_docs += sum(int(s.units.size) for s in sigs)
    total = int(hits.sum())
    return {
        "null": kind,
        "method": method,
        "runs": runs,
        "signatures": runs * nb,
        "nonempty_share": total / (runs * nb),
        "nonempty_wilson95": _wilson(total, runs * nb),
        "any_benchmark_share": any_hit / runs,
        "any_benchmark_wilson95": _wilson(any_hit, runs),
        "per_benchmark": {b: int(h) / runs for b, h in zip(mm.benchmarks, hits)},
        "documents_per_signature": n_docs / (runs * nb),
    }


def _signature_level(sigs: Mapping[str, Any], values: np.ndarray) -> OverlapMatrix | None:
    """The signature level on a bits-per-byte matrix (units × models): bits per byte are
    used as they are (``unit_nbytes = 1/ln 2`` turns the NLL formula into the identity).
    None when no benchmark has a signature."""
    found = {b: s for b, s in sigs.items() if not s.empty}
    if not found:
        return None
    d = values.shape[0]
    no_sig = {b: s.calibration.reason or "empty signature" for b, s in sigs.items() if s.empty}
    bits = UnitBits.of_matrix(values, np.full(d, 1.0 / np.log(2.0)))
    return signature_overlap(found, bits, no_signature=no_sig)


def _pairs(a: OverlapMatrix, b: OverlapMatrix | None) -> dict[str, Any]:
    """The off-diagonal pairs defined at both levels and their Spearman correlation."""
    from scipy.stats import spearmanr

    rows = []
    labels = () if b is None else b.labels
    for i, x in enumerate(labels):
        for j in range(i + 1, len(labels)):
            y_ = labels[j]
            ia, ja = a.labels.index(x), a.labels.index(y_)
            sv = float(b.values[i, j])  # type: ignore[union-attr]
            if np.isfinite(sv):
                rows.append(
                    {"a": x, "b": y_, "performance": float(a.values[ia, ja]), "signature": sv}
                )
    rho = (
        float(spearmanr([r["performance"] for r in rows], [r["signature"] for r in rows])[0])
        if len(rows) >= 3
        else float("nan")
    )
    return {"pairs": rows, "spearman_performance_vs_signature": rho, "n_pairs": len(rows)}


def _levels(
    mm: ModelMatrix, y: np.ndarray, names: list[str], n_permutations: int, seed: int
) -> dict[str, Any]:
    perf = performance_overlap((tuple(names), y), min_common=10)
    sigs = dict(
        zip(names, extract_signatures(mm.values, y, n_permutations=n_permutations, seed=seed))
    )
    sig = _signature_level(sigs, mm.values)
    return {
        "models": int(y.shape[0]),
        "signature_documents": {b: int(s.units.size) for b, s in sigs.items()},
        "performance": {"labels": list(perf.labels), "values": perf.values.round(4).tolist()},
        "signature": None
        if sig is None
        else {"labels": list(sig.labels), "values": np.round(sig.values, 4).tolist()},
        "comparison": _pairs(perf, sig),
        "_sig": sig,
        "_perf": perf,
    }


def _obscaling(
    mm: ModelMatrix, data: Path, n_permutations: int, seed: int
) -> dict[str, Any] | None:
    import polars as pl

    path = data / "leaderboard" / OBSCALING_FILE
    if not path.exists():
        return None
    table = pl.read_csv(path)
    ids = table["Model"].to_list()
    shared = [m for m in mm.models if m in ids]
    idx = np.array([mm.models.index(m) for m in shared])
    rows = np.array([ids.index(m) for m in shared])
    obs = table.select(OBSCALING_BENCHMARKS).to_numpy()[rows].astype(np.float64)
    sub = ModelMatrix(
        values=mm.values[:, idx],
        unit_ids=mm.unit_ids,
        models=shared,
        families=mm.families[idx],
        benchmarks=mm.benchmarks,
        errors=mm.errors[idx],
    )
    y = np.column_stack([sub.scores(), obs])
    names = [*mm.benchmarks, *OBSCALING_BENCHMARKS]
    out = _levels(sub, y, names, n_permutations, seed)
    out["shared_models"] = len(shared)
    return out


def real_model_findings(
    data: str | Path,
    *,
    null_runs: int = 500,
    baseline_null_runs: int = 100,
    n_permutations: int = 999,
    null_permutations: int = 199,
    seed: int = 0,
) -> dict[str, Any]:
    r"""Findings on the 89 real models: what each signature method claims, how often the
    default claims something on real-data nulls, the performance level against the
    signature level (9 benchmarks; and 39 models × 17 benchmarks with ObsScaling's), and
    whether the lambada variants overlap more at the signature level than other pairs.

    Parameters
    ----------
    data : path
        ``shared/data``.
    null_runs : int
        Fresh null score draws per null kind for the calibrated default (each run: all 9
        benchmarks in one call).
    baseline_null_runs : int
        The same for AIC, BIC and Lasso (they claim documents in nearly every run).
    n_permutations, null_permutations : int
        ``P`` of the calibrated tests on the real scores and on the nulls.
    seed : int

    Returns
    -------
    dict
        ``signatures`` (:func:`real_model_signatures`), ``nulls`` (list of
        :func:`real_data_null` results), ``levels`` (performance and signature matrices and
        their comparison), ``lambada`` (:func:`~sigmap_lib.overlap.group_test` of the
        lambada variants against the other pairs at both levels), ``obscaling`` (the same
        levels on the shared models, or None without the file).

    Examples
    --------
    A small layout in perplexity-correlations' format (no ObsScaling file):

    >>> import numpy as np
    >>> from pathlib import Path
    >>> from sigmap_lib.studies import real_model_findings
    >>> rng = np.random.default_rng(0)
    >>> g = rng.standard_normal(24)
    >>> bpb = 1.0 - 0.1 * g + 0.02 * rng.standard_normal((120, 24))
    >>> cols = [f"\"('f{k % 3}', 'org/m{k}')\"" for k in range(24)]
    >>> rows = lambda names, x: [f"{n}," + ",".join(map(str, r)) for n, r in zip(names, x)]
    >>> Path("data/realmodels").mkdir(parents=True)
    >>> _ = Path("data/realmodels/perplexity_correlations_synthetic_bpb_id.csv").write_text(
    ...     "\n".join(["id," + ",".join(cols), *rows([f"d{j}" for j in range(120)], bpb)]))
    >>> err = [0.5 - 0.1 * g, 0.6 - 0.1 * g + 0.01 * rng.standard_normal(24),
    ...        np.exp(3.0 - 0.5 * g)]
    >>> _ = Path("data/realmodels/perplexity_correlations_error.csv").write_text("\n".join(
    ...     ["benchmark," + ",".join(cols), *rows(["arc_easy", "piqa", "lambada"], err)]))
    >>> r = real_model_findings("data", null_runs=2, baseline_null_runs=1, n_permutations=39)
    >>> [n["method"] for n in r["nulls"]], r["obscaling"]
    (['calibrated', 'calibrated', 'aic', 'bic', 'lasso'], None)
    >>> r["levels"]["performance"]["labels"]
    ['arc_easy', 'piqa', 'lambada']
    """
    from sigmap_lib.studies._realmodels import real_model_signatures

    data = Path(data)
    mm = read_perplexity_correlations(data / "realmodels")
    sig_table = real_model_signatures(data, n_permutations=n_permutations, seed=seed)
    nulls = [
        real_data_null(mm, k, runs=null_runs, n_permutations=null_permutations, seed=seed)
        for k in ("permuted", "quality")
    ]
    for method in ("aic", "bic", "lasso"):
        nulls.append(
            real_data_null(mm, "quality", runs=baseline_null_runs, method=method, seed=seed)
        )
    levels = _levels(mm, mm.scores(), list(mm.benchmarks), n_permutations, seed)
    group = {b: ("lambada" if b.startswith("lambada") else b) for b in mm.benchmarks}
    lambada = {
        level: group_test(levels[f"_{key}"], group, by="group")
        for level, key in (("performance", "perf"), ("signature", "sig"))
        if levels[f"_{key}"] is not None
    }
    obs = _obscaling(mm, data, n_permutations, seed)
    for d in (levels, obs):
        if d is not None:
            d.pop("_sig")
            d.pop("_perf")
    return {
        "signatures": sig_table,
        "nulls": nulls,
        "levels": levels,
        "lambada": {k: {kk: vv for kk, vv in v.items()} for k, v in lambada.items()},
        "obscaling": obs,
    }

"""Scoring models from their answers to a sparse benchmark: θ with its standard error,
the reconstructed full benchmark score with a prediction interval, and the grand score.

Two kinds of fit score the same way:

- a sigmap :class:`~sigmap_lib.metabench.MetabenchFit` (its refit item parameters, θ
  method and reconstruction: GAM on θ, percent correct and linear predictor as chosen by
  CV);
- metabench's **published** fits (``shared/data/metabench_irt`` layout): R mirt's refit
  parameters (the ``*_fit350`` columns), the fit's θ method (MAP or EAPsum, as
  ``reconstruct.R``), and a GAM of the full score on R's θ of the fit's training LLMs
  (metabench's ``score ~ s(θ)``; the published files hold no linear-predictor weights).

**Prediction intervals** are empirical and local in θ: the residuals (true full score −
reconstruction) of models that were *not* used to fit the reconstruction (a sigmap fit's
validation and test models; a published fit's test LLMs) are sorted by their distance in θ
to the new model, and the interval is the reconstruction plus the ``(1 ± level)/2``
quantiles of the residuals of the ``k`` nearest (``k = max(30, n/5)``, all when fewer). Those
models' θ came from every item; a model that answered only some items also carries θ's
own uncertainty, so its interval is simulated: θ drawn from N(θ̂, SE²) through the
reconstruction plus a residual of the k nearest held-out models. The
grand score is the mean of the scored benchmarks' reconstructions; its interval uses the
residuals of the grand mean over the models held out for every one of those benchmarks.

Scores and interval ends are **bounded to each benchmark's score range** (published fits:
0–100 points; a sigmap fit: [0, 1] or [0, 100] as its training scores lie, see
:func:`score_range_of`); the grand score and its interval to the mean of those ranges.
Clipping a simulated draw or an interval end at the range never moves it away from a
true score inside the range, so coverage is unchanged or higher.

A benchmark with fewer than :data:`MIN_ANSWERED_SHARE` of its items answered gets a
warning: θ then leans on the prior, and the held-out coverage measured at that share
(:data:`COVERAGE_AT_MIN_SHARE`, docs/METABENCH_VALIDATION.md §5) no longer applies.
Coverage on held-out LLMs is measured in docs/METABENCH_VALIDATION.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import estimate_theta

#: Below this share of a benchmark's items answered, scoring warns (θ leans on the prior).
MIN_ANSWERED_SHARE = 0.25
#: 90 % interval coverage of held-out real LLMs answering MIN_ANSWERED_SHARE of each
#: version-B benchmark's items (lowest and highest benchmark; docs/METABENCH_VALIDATION.md §5,
#: ``sigmap metabench validate``).
COVERAGE_AT_MIN_SHARE = (0.882, 0.955)


#: Columns of ``<stem>_items.parquet`` holding R's reduced-test refit (see r_refit_params).
R_REFIT_COLUMNS = ["a1_fit350", "d_fit350", "g_fit350", "u_fit350"]


def r_refit_params(items: Any) -> Any:
    """R's reduced-test refit parameters (``a1, d, g, u``) from an ``_items`` table.

    The data README labels ``a1, d, g, u`` as the refit and ``*_fit350`` as the pool fit,
    but for all seven stored fits the marginal log-likelihood of the ``*_fit350`` set on
    the reduced matrix equals R's reported refit ``mirt_logLik`` (``fits_summary.csv``) to
    four decimals, and the stored θ are exactly those parameters' θ (MAP to 1e-5); the
    other set matches neither (docs/METABENCH_VALIDATION.md §2). The columns are used
    by that evidence (:func:`sigmap_lib.studies.compare_fit`).

    Examples
    --------
    >>> import pandas as pd
    >>> from sigmap_lib.metabench import r_refit_params
    >>> items = pd.DataFrame(  # two rows of a metabench_irt/<stem>_items.parquet table
    ...     {"a1": [1.2, 0.7], "d": [0.3, -1.0], "g": [0.0, 0.0], "u": [1.0, 1.0],
    ...      "a1_fit350": [1.5, 0.9], "d_fit350": [0.4, -1.2], "g_fit350": [0.0, 0.0],
    ...      "u_fit350": [1.0, 1.0]},
    ...     index=pd.Index(["arc/17", "arc/42"], name="item_key"),
    ... )
    >>> r_refit_params(items)  # the *_fit350 columns, renamed
               a1    d    g    u
    item_key
    arc/17    1.5  0.4  0.0  1.0
    arc/42    0.9 -1.2  0.0  1.0
    """
    return items[R_REFIT_COLUMNS].set_axis(["a1", "d", "g", "u"], axis=1)


def score_range_of(scores: Any) -> tuple[float, float] | None:
    """The score range a benchmark's scores live in, from the scores seen in training:
    ``(0, 1)`` when they all lie in [0, 1], ``(0, 100)`` when in [0, 100], else ``None``
    (unbounded).

    Examples
    --------
    >>> from sigmap_lib.metabench import score_range_of
    >>> score_range_of([0.2, 0.9]), score_range_of([12.0, 87.5]), score_range_of([-3.0, 2.0])
    ((0.0, 1.0), (0.0, 100.0), None)
    """
    v = np.asarray(scores, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0 or v.min() < 0:
        return None
    if v.max() <= 1:
        return (0.0, 1.0)
    if v.max() <= 100:
        return (0.0, 100.0)
    return None


def _clip(x: Any, rng: tuple[float, float] | None) -> Any:
    return x if rng is None else np.clip(x, rng[0], rng[1])


def low_answers_warning(benchmark: str, answered: int, total: int) -> str:
    """The warning for a benchmark with fewer than :data:`MIN_ANSWERED_SHARE` of its items
    answered.

    Examples
    --------
    >>> from sigmap_lib.metabench import low_answers_warning
    >>> low_answers_warning("arc", 5, 100).split(";")[0]
    'arc: only 5 of 100 items answered (5 %, below 25 %)'
    """
    share = f"{100 * MIN_ANSWERED_SHARE:.0f} %"
    measured = (
        f" (with {share} answered, 90 % intervals covered "
        f"{COVERAGE_AT_MIN_SHARE[0]:.3f}–{COVERAGE_AT_MIN_SHARE[1]:.3f} of held-out LLMs)"
        if None not in COVERAGE_AT_MIN_SHARE
        else ""
    )
    return (
        f"{benchmark}: only {answered} of {total} items answered "
        f"({100 * answered / total:.0f} %, below {share}); θ leans on the prior and the "
        f"interval is not validated there{measured}; answer more of its items"
    )


def local_interval(
    theta: np.ndarray,
    resid_theta: np.ndarray,
    resid: np.ndarray,
    *,
    level: float = 0.9,
    k: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets ``(lo, hi)`` of a prediction interval at each ``theta`` from held-out residuals.

    Parameters
    ----------
    theta : np.ndarray, shape (n,)
        Abilities of the models to score.
    resid_theta, resid : np.ndarray, shape (r,)
        Abilities and residuals (truth − reconstruction) of held-out models.
    level : float
        Coverage of the interval, in (0, 1).
    k : int, optional
        Neighbours in θ used per model; default ``max(30, r // 5)`` (all when ``r`` is
        smaller).

    Returns
    -------
    lo, hi : np.ndarray, shape (n,)
        Add to the reconstruction: ``[score + lo, score + hi]``.

    Examples
    --------
    Residuals that grow with θ give wider intervals at high θ:

    >>> import numpy as np
    >>> from sigmap_lib.metabench import local_interval
    >>> rng = np.random.default_rng(0)
    >>> t = rng.normal(size=2000)
    >>> r = rng.normal(size=2000) * (1 + (t > 0))
    >>> lo, hi = local_interval(np.array([-1.5, 1.5]), t, r, level=0.9)
    >>> np.round(hi - lo, 1).tolist()
    [3.5, 6.4]
    """
    if not 0 < level < 1:
        raise SigmapInputError(
            f"interval level must be in (0, 1), got {level}: pass e.g. --level 0.9"
        )
    rt = np.asarray(resid_theta, dtype=float)
    rr = np.asarray(resid, dtype=float)
    ok = np.isfinite(rt) & np.isfinite(rr)
    rt, rr = rt[ok], rr[ok]
    if rt.size < 5:
        raise SigmapInputError(f"prediction intervals need >= 5 held-out residuals, have {rt.size}")
    k = min(rt.size, k or max(30, rt.size // 5))
    th = np.atleast_1d(np.asarray(theta, dtype=float))
    lo = np.full(th.shape, np.nan)
    hi = np.full(th.shape, np.nan)
    q = [(1 - level) / 2, (1 + level) / 2]
    for i, t in enumerate(th):
        if not np.isfinite(t):
            continue
        near = np.argpartition(np.abs(rt - t), k - 1)[:k]
        lo[i], hi[i] = np.quantile(rr[near], q)
    return lo, hi


@dataclass
class BenchmarkScorer:
    """Everything needed to score one benchmark from answers to its items.

    Attributes
    ----------
    benchmark : str
    params : pd.DataFrame
        Item parameters (``a1, d, g, u``), index = item ids in the fit's order.
    theta_method : str
        ``MAP``, ``EAP`` or ``EAPsum``.
    reconstruct : callable
        ``reconstruct(theta (n,), answers (n, p) with NaN = unanswered) -> scores (n,)``.
    resid_theta, resid : np.ndarray
        Held-out models' θ and residuals (truth − reconstruction), for the intervals.
    resid_models : list of str
        Those models' ids (to pair residuals across benchmarks for the grand score).
    score_range : (lo, hi) or None
        The benchmark's score range; scores and interval ends are clipped to it.
    """

    benchmark: str
    params: pd.DataFrame
    theta_method: str
    reconstruct: Callable[[np.ndarray, np.ndarray], np.ndarray]
    resid_theta: np.ndarray
    resid: np.ndarray
    resid_models: list[str] = field(default_factory=list)
    score_range: tuple[float, float] | None = None
    draws: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    rows: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def score(self, answers: pd.DataFrame, *, level: float = 0.9) -> pd.DataFrame:
        """θ, its SE, the reconstructed score and its interval for each row of ``answers``.

        ``answers``: models × item ids (0/1, NaN = not answered); columns the fit does not
        know are an error, items the model did not answer are left out of θ.
        """
        unknown = [c for c in answers.columns if c not in self.params.index]
        if unknown:
            raise SigmapInputError(
                f"{self.benchmark}: {len(unknown)} answered item(s) are not items of the fit, "
                f"e.g. {unknown[:5]}"
            )
        x = answers.reindex(columns=self.params.index).astype(float)
        n_items = x.notna().sum(axis=1)
        empty = n_items.index[n_items == 0].tolist()
        if empty:
            raise SigmapInputError(
                f"{self.benchmark}: model(s) {empty[:5]} answered no item of the fit"
            )
        # θ from the answered items only: one estimate per pattern of answered items (EAPsum's
        # sum-score distribution is then that of the answered items, as for a shorter test)
        est = pd.DataFrame(index=x.index, columns=["theta", "se"], dtype=float)
        pattern = x.notna()
        for _, rows in pattern.groupby(list(pattern.columns), sort=False).groups.items():
            cols = pattern.columns[pattern.loc[rows[0]].to_numpy()]
            sub = estimate_theta(
                self.params.loc[cols],
                x.loc[rows, cols],
                self.theta_method,
                benchmark=self.benchmark,
            )
            est.loc[rows, ["theta", "se"]] = sub[["theta", "se"]].to_numpy()
        theta = est["theta"].to_numpy(float)
        xs = x.to_numpy()
        score = np.asarray(self.reconstruct(theta, xs), dtype=float)
        lo, hi = local_interval(theta, self.resid_theta, self.resid, level=level)
        lo, hi = score + lo, score + hi
        partial = np.flatnonzero(n_items.to_numpy() < len(self.params))
        self.draws = {}  # model -> simulated scores, for partially answered models
        self.rows = {m: xs[i] for i, m in enumerate(x.index)}  # for the grand's simulation
        for i in partial:  # fewer items than the calibration models answered: add θ's noise
            vals = self.simulate(theta[i], float(est["se"].iloc[i]), xs[i])
            lo[i], hi[i] = np.quantile(vals, [(1 - level) / 2, (1 + level) / 2])
            self.draws[x.index[i]] = vals
        return pd.DataFrame(
            {
                "theta": theta,
                "theta_se": est["se"].to_numpy(float),
                "score": _clip(score, self.score_range),
                "score_lo": _clip(lo, self.score_range),
                "score_hi": _clip(hi, self.score_range),
                "items": n_items.to_numpy(),
                "items_total": len(self.params),
            },
            index=x.index,
        )

    def simulate(
        self, theta: float, se: float, x: np.ndarray | None = None, n: int = 2000
    ) -> np.ndarray:
        """``n`` simulated full scores of a model with ability estimate ``theta`` (SE ``se``):
        θ drawn from N(θ̂, se²) through the reconstruction, plus a residual of one of the k
        nearest held-out models (whose θ came from every item), clipped to the score
        range; seed 0. ``se = 0``: the residual part only (a model that answered every
        item)."""
        rng = np.random.default_rng(0)
        draws = rng.normal(theta, se, n) if np.isfinite(se) and se > 0 else np.full(n, theta)
        xx = (
            np.full((n, len(self.params)), np.nan)
            if x is None
            else np.repeat(x[None, :], n, axis=0)
        )
        preds = np.asarray(self.reconstruct(draws, xx), dtype=float)
        ok = np.isfinite(self.resid_theta) & np.isfinite(self.resid)
        rt, rr = self.resid_theta[ok], self.resid[ok]
        k = min(rt.size, max(30, rt.size // 5))
        near = rr[np.argpartition(np.abs(rt - theta), k - 1)[:k]]
        return _clip(preds + rng.choice(near, n), self.score_range)


@dataclass
class MetabenchScorer:
    """A fit's per-benchmark scorers (see the module docstring for the intervals).

    Attributes
    ----------
    benchmarks : dict
        Benchmark -> :class:`BenchmarkScorer`.
    source : dict
        What the fit is (``{"kind": "fit", "path": ...}`` or ``{"kind": "published",
        "version": "B", "fits": [...]}``).
    """

    benchmarks: dict[str, BenchmarkScorer]
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def items(self) -> dict[str, list[str]]:
        """Benchmark -> the fit's item ids."""
        return {bm: [str(i) for i in s.params.index] for bm, s in self.benchmarks.items()}

    @classmethod
    def from_fit(cls, fit: Any, path: str | Path | None = None) -> MetabenchScorer:
        """Scorer of a sigmap :class:`~sigmap_lib.metabench.MetabenchFit`.

        Examples
        --------
        >>> from sigmap_lib.metabench import (
        ...     TINY_SETTINGS, MetabenchScorer, fit_metabench, simulate_benchmarks,
        ... )
        >>> responses, scores, truth = simulate_benchmarks(200, {"arc": 30, "gsm8k": 40}, seed=0)
        >>> fit = fit_metabench(responses, scores, **TINY_SETTINGS)
        >>> scorer = MetabenchScorer.from_fit(fit)
        >>> sorted(scorer.benchmarks), len(scorer.items["arc"]) == len(fit.selected["arc"])
        (['arc', 'gsm8k'], True)
        """
        out = {}
        for bm, f in fit.benchmarks.items():
            held = f.thetas[f.thetas["role"].isin(["val", "test"])]
            out[bm] = BenchmarkScorer(
                benchmark=bm,
                params=f.params,
                theta_method=f.theta_method,
                reconstruct=f.predict_scores,
                resid_theta=held["theta"].to_numpy(float),
                resid=(held["score"] - held["score_pred"]).to_numpy(float),
                resid_models=[str(m) for m in held.index],
                score_range=score_range_of(f.thetas["score"]),
            )
        return cls(out, {"kind": "fit", "path": None if path is None else str(path)})

    @classmethod
    def from_published(
        cls,
        params_dir: str | Path,
        version: str,
        *,
        benchmarks: tuple[str, ...] | None = None,
        exclude: Any = (),
    ) -> MetabenchScorer:
        """Scorer of metabench's published fits of ``version`` (``"A"`` or ``"B"``).

        ``params_dir`` is a folder in the layout of ``shared/data/metabench_irt``:
        ``<bm>_<main|secondary>_<2PL|3PL|4PL>_{items,thetas}.parquet`` and
        ``fits_summary.csv``. Benchmarks without a stored fit are left out (and named by
        :attr:`source`'s ``missing``). ``exclude``: LLM ids left out of the GAM's training
        set (to score them as held-out models in a validation).

        Examples
        --------
        >>> from sigmap_lib.metabench import MetabenchScorer
        >>> from sigmap_lib.studies import write_example_data
        >>> root = write_example_data("data")  # a tiny stand-in for shared/data
        >>> s = MetabenchScorer.from_published(root / "metabench_irt", "B")
        >>> list(s.benchmarks), s.benchmarks["arc"].theta_method, s.source["missing"][:2]
        (['arc'], 'MAP', ['gsm8k', 'hellaswag'])
        """
        from sigmap_lib.irt import fit_gam
        from sigmap_lib.metabench._tasks import PUBLISHED_BENCHMARKS, VERSIONS

        if version not in VERSIONS:
            raise SigmapInputError(f"metabench version must be 'A' or 'B', got {version!r}")
        word = VERSIONS[version]
        root = Path(params_dir)
        summary_path = root / "fits_summary.csv"
        if not summary_path.exists():
            raise SigmapInputError(
                f"{summary_path} is missing: not a metabench_irt folder (pass --params DIR, the "
                "metabench_irt folder of shared/data, or set SIGMAP_SHARED_DATA)"
            )
        summary = pd.read_csv(summary_path)
        out, fits, missing = {}, [], []
        for bm in benchmarks or PUBLISHED_BENCHMARKS:
            stems = sorted(root.glob(f"{bm}_{word}_*PL_items.parquet"))
            if not stems:
                missing.append(bm)
                continue
            stem = stems[0].name.removesuffix("_items.parquet")
            model = stem.rsplit("_", 1)[1]
            items = pd.read_parquet(stems[0]).set_index("item_key")
            row = summary[
                (summary["benchmark"] == bm)
                & (summary["version"] == word)
                & (summary["irt_model"] == model)
            ]
            method = str(row["theta_method"].iloc[0]) if len(row) else "MAP"
            th = pd.read_parquet(root / f"{stem}_thetas.parquet")
            train = th[
                (th["split"] == "train") & th["score_full"].notna() & ~th["llm"].isin(list(exclude))
            ]
            if len(train) < 20:
                raise SigmapInputError(f"{stem}: only {len(train)} training LLMs with full scores")
            gam = fit_gam(train["theta"].to_numpy(), train["score_full"].to_numpy())
            held = th[(th["split"] == "test") & th["score_full"].notna()]
            if len(held) < 5:  # no test LLMs stored: 5-fold CV residuals of the training LLMs
                held = train
                folds = np.arange(len(train)) % 5
                pred = np.empty(len(train))
                for f in range(5):
                    g = fit_gam(
                        train["theta"].to_numpy()[folds != f],
                        train["score_full"].to_numpy()[folds != f],
                    )
                    pred[folds == f] = g.predict(train["theta"].to_numpy()[folds == f])
            else:
                pred = gam.predict(held["theta"].to_numpy())
            out[bm] = BenchmarkScorer(
                benchmark=bm,
                params=r_refit_params(items),
                theta_method=method,
                reconstruct=lambda theta, x, g=gam: g.predict(theta),
                resid_theta=held["theta"].to_numpy(float),
                resid=held["score_full"].to_numpy(float) - pred,
                resid_models=held["llm"].astype(str).tolist(),
                score_range=(0.0, 100.0),  # leaderboard percentages
            )
            fits.append(stem)
        if not out:
            raise SigmapInputError(f"{root}: no published fit of version {version} ({word})")
        return cls(out, {"kind": "published", "version": version, "fits": fits, "missing": missing})

    def score(
        self, answers: Mapping[str, Mapping[str, Mapping[str, int]]], *, level: float = 0.9
    ) -> list[dict[str, Any]]:
        """Score models from their answers.

        Parameters
        ----------
        answers : mapping
            ``model -> benchmark -> {item id: 0/1}`` (:attr:`LogAnswers.answers`).
        level : float
            Coverage of the prediction intervals.

        Returns
        -------
        list of dict
            Per model: ``{"model", "benchmarks": {bm: {"theta", "theta_se", "score",
            "score_interval": [lo, hi], "score_range", "items", "items_total"}}, "grand":
            {"score", "score_interval", "benchmarks", "reason"}, "warnings": [...]}``. The
            grand score is ``None`` for a model that was not scored on every benchmark of
            the fit, with the ``reason`` saying which are missing; ``warnings`` name each
            benchmark with fewer than :data:`MIN_ANSWERED_SHARE` of its items answered.

        Examples
        --------
        >>> import numpy as np
        >>> from sigmap_lib.metabench import MetabenchScorer
        >>> from sigmap_lib.studies import write_example_data
        >>> s = MetabenchScorer.from_published(write_example_data("data") / "metabench_irt", "B")
        >>> items = s.items["arc"]
        >>> out = s.score({"strong": {"arc": {i: 1 for i in items}},
        ...                "weak": {"arc": {i: 0 for i in items[:6]}}})
        >>> [(r["model"], r["benchmarks"]["arc"]["items"]) for r in out]
        [('strong', 8), ('weak', 6)]
        >>> [round(r["benchmarks"]["arc"]["theta"], 2) for r in out]
        [1.88, -0.9]
        >>> lo, hi = out[0]["benchmarks"]["arc"]["score_interval"]
        >>> bool(lo < out[0]["benchmarks"]["arc"]["score"] < hi)
        True
        """
        per_bm: dict[str, pd.DataFrame] = {}
        for bm, scorer in self.benchmarks.items():
            rows = {m: a[bm] for m, a in answers.items() if bm in a}
            if rows:
                frame = pd.DataFrame.from_dict(rows, orient="index", dtype=float)
                per_bm[bm] = scorer.score(frame, level=level)
        unknown = sorted({b for a in answers.values() for b in a} - set(self.benchmarks))
        if unknown:
            raise SigmapInputError(f"answers for benchmark(s) {unknown} that the fit does not have")
        grand_resid = self._grand_residuals()
        q = [(1 - level) / 2, (1 + level) / 2]
        out = []
        for model in answers:
            bms = {bm: df.loc[model] for bm, df in per_bm.items() if model in df.index}
            res: dict[str, Any] = {"model": model, "benchmarks": {}, "warnings": []}
            for bm, r in bms.items():
                rng = self.benchmarks[bm].score_range
                n, total = int(r["items"]), int(r["items_total"])
                res["benchmarks"][bm] = {
                    "theta": float(r["theta"]),
                    "theta_se": float(r["theta_se"]),
                    "score": float(r["score"]),
                    "score_interval": [float(r["score_lo"]), float(r["score_hi"])],
                    "score_range": None if rng is None else [float(rng[0]), float(rng[1])],
                    "items": n,
                    "items_total": total,
                }
                if n < MIN_ANSWERED_SHARE * total:
                    res["warnings"].append(low_answers_warning(bm, n, total))
            missing = sorted(set(self.benchmarks) - set(bms))
            if not missing and grand_resid is not None:
                g = float(np.mean([float(r["score"]) for r in bms.values()]))
                partial = [bm for bm, r in bms.items() if r["items"] < r["items_total"]]
                if partial:  # simulate: each benchmark's draws (θ noise where partial), averaged
                    sims = [
                        self.benchmarks[bm].draws[model]
                        if bm in partial
                        else self.benchmarks[bm].simulate(
                            float(r["theta"]), 0.0, self.benchmarks[bm].rows[model]
                        )
                        for bm, r in bms.items()
                    ]
                    lo, hi = np.quantile(np.mean(sims, axis=0), q)
                else:
                    lo, hi = g + np.quantile(grand_resid, q)
                rng = self._grand_range(bms)
                res["grand"] = {
                    "score": float(_clip(g, rng)),
                    "score_interval": [float(_clip(lo, rng)), float(_clip(hi, rng))],
                    "score_range": None if rng is None else [float(rng[0]), float(rng[1])],
                    "benchmarks": sorted(bms),
                    "reason": None,
                }
            else:
                if missing:
                    reason = (
                        f"not scored on {', '.join(missing)} (no answers to their items); the "
                        f"grand score is the mean over all {len(self.benchmarks)} benchmarks "
                        "of the fit"
                    )
                else:
                    reason = (
                        "fewer than 5 held-out models were scored on every benchmark of the "
                        "fit: no grand interval can be calibrated"
                    )
                res["grand"] = {
                    "score": None,
                    "score_interval": None,
                    "score_range": None,
                    "benchmarks": sorted(bms),
                    "reason": reason,
                }
            out.append(res)
        return out

    def _grand_range(self, bms: Mapping[str, Any]) -> tuple[float, float] | None:
        """The grand score's range: the mean of the scored benchmarks' ranges."""
        ranges = [self.benchmarks[bm].score_range for bm in bms]
        if not ranges or any(r is None for r in ranges):
            return None
        return (float(np.mean([r[0] for r in ranges])), float(np.mean([r[1] for r in ranges])))

    def _grand_residuals(self) -> np.ndarray | None:
        """Residuals of the grand mean over models held out for every benchmark (>= 5)."""
        frames = [
            pd.Series(s.resid, index=s.resid_models).groupby(level=0).first()
            for s in self.benchmarks.values()
        ]
        both = pd.concat(frames, axis=1, join="inner").dropna()
        return both.mean(axis=1).to_numpy() if len(both) >= 5 else None

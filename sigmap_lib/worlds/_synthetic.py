"""A synthetic world with planted benchmark signatures (truth known by construction).

Generative model (all draws from ``numpy.random.default_rng(seed)``):

* **Models** ``i = 1..m`` in 4 families; general quality ``g_i ~ N(0, 1)``; ability on
  function ``f``: ``A_if = ρ·g_i + √(1−ρ²)·s_if`` with ``s ~ N(0, 1)``, ``ρ = 0.5``;
  a multiple-choice skill ``mc_i ~ N(0, 1)``.
* **Benchmarks** ``b``: function ``f_b = b mod F``; family (3 publishers) and format
  (multiple_choice / cloze / generation) cycle independently of the function. Latent
  ``θ_ib = λ·A_{i,f_b} + κ·F[family_i, family_b] + μ·mc_i·1{format = mc} + σ_b·ε`` (then
  standardized), with ``λ = 1``, ``κ = 0.25`` (a model-family × benchmark-family effect
  ``F ~ N(0, 1)``), ``μ = 0.25``, ``σ_b = 0.2``. Items follow a 2PL: ``P(correct) = σ(a_j(θ_ib − b_j))``,
  ``a_j ~ U(0.8, 2)``, ``b_j ~ N(0, 1)``; responses are Bernoulli draws and the score is
  ``100 ×`` the mean response over the benchmark's items.
* **Corpus** of ``d`` units (one lowercase ASCII word each, space separated, documents of
  500 words). Every unit's NLL moves with general quality:
  ``x_ij = base_j − α_j·g_i + σ_n·ε_ij`` (``base ~ 3 + Gamma(2, 1)``, ``α ~ U(0, 0.4)``,
  ``σ_n = 1``); ``planted_per_function`` units per function instead follow the ability:
  ``x_ij = base_j − β·A_{i,f} + σ_p·ε_ij`` (``β = 1``, ``σ_p = 0.3``). NLL (nats)
  ``= softplus(x)`` (positive, rank-preserving), float32.

Written in the world-folder format of ``docs/FORMATS.md`` (``corpus/``, ``models.yaml``
with ``nll_source`` ``.npy`` files, ``scores.csv``, ``catalog.yaml``, ``items/``,
``responses/``, ``truth.json``) atomically (temporary folder, then rename).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_dir
from sigmap_lib.errors import SigmapInputError

FUNCTION_NAMES = ("math", "coding", "knowledge", "reasoning", "language", "commonsense")
MODEL_FAMILIES = ("alpha", "beta", "gamma", "delta")
BENCH_FAMILIES = ("ai2", "eleuther", "openai")
FORMATS = ("multiple_choice", "cloze", "generation")
DOC_WORDS = 500
RHO, LAMBDA, KAPPA, MU, SIGMA_B = 0.5, 1.0, 0.25, 0.25, 0.2
# units load strongly and unevenly on general quality, as with real LLMs: loadings
# U(0.31, 2.06) against unit noise 1 give unit-quality correlations of 0.3-0.9
ALPHA_MIN, ALPHA_MAX, SIGMA_N, BETA, SIGMA_P = 0.31, 2.06, 1.0, 1.0, 0.3

_CONS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"


@dataclass
class SyntheticWorld:
    """Handle on a written synthetic world.

    Attributes
    ----------
    root : Path
    model_ids : list[str]
    benchmarks : list[str]
    functions : list[str]
    benchmark_function : dict[str, str]
    planted : dict[str, numpy.ndarray]
        Planted unit indices per function.
    scores : numpy.ndarray, shape (n_models, n_benchmarks)
    n_units : int
    nll_paths : list[Path]
        One ``.npy`` (float32, ``(n_units,)``) per model, in ``model_ids`` order.
    truth : dict
        Contents of ``truth.json``.
    """

    root: Path
    model_ids: list[str]
    benchmarks: list[str]
    functions: list[str]
    benchmark_function: dict[str, str]
    planted: dict[str, np.ndarray]
    scores: np.ndarray
    n_units: int
    nll_paths: list[Path]
    truth: dict[str, Any]

    def nll_arrays(self) -> list[np.ndarray]:
        """Memory-mapped per-model NLL arrays."""
        return [np.load(p, mmap_mode="r") for p in self.nll_paths]

    @property
    def all_planted(self) -> np.ndarray:
        return np.unique(np.concatenate(list(self.planted.values())))

    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> SyntheticWorld:
        """Re-open a world written by :func:`make_synthetic_world`."""
        r = Path(root)
        tpath = r / "truth.json"
        if not tpath.exists():
            raise SigmapInputError(f"{r} is not a synthetic world (missing truth.json)")
        truth = json.loads(tpath.read_text())
        if truth.get("world") != "synthetic":
            raise SigmapInputError(f"{tpath}: not a synthetic world ({truth.get('world')!r})")
        import polars as pl

        df = pl.read_csv(r / "scores.csv")
        ids = list(truth["model_ids"])
        benches = list(truth["benchmarks"])
        df = df.filter(pl.col("model").is_in(ids))
        order = {k: i for i, k in enumerate(df["model"].to_list())}
        scores = df.select(benches).to_numpy()[[order[i] for i in ids]].astype(np.float64)
        return cls(
            root=r,
            model_ids=ids,
            benchmarks=benches,
            functions=list(truth["functions"]),
            benchmark_function=dict(truth["benchmark_function"]),
            planted={f: np.asarray(v, dtype=np.int64) for f, v in truth["planted_units"].items()},
            scores=scores,
            n_units=int(truth["n_units"]),
            nll_paths=[r / p for p in truth["nll_sources"]],
            truth=truth,
        )


def _words(
    rng: np.random.Generator, n: int, syllables: tuple[int, int], prefix: str = ""
) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        k = int(rng.integers(syllables[0], syllables[1] + 1))
        w = prefix + "".join(rng.choice(list(_CONS)) + rng.choice(list(_VOWELS)) for _ in range(k))
        out.add(w)
    return sorted(out)


def make_synthetic_world(
    out_dir: str | os.PathLike[str],
    *,
    n_models: int = 32,
    n_units: int = 20000,
    n_functions: int = 4,
    n_benchmarks: int = 8,
    planted_per_function: int = 5,
    n_items: int = 100,
    n_respondents: int = 300,
    seed: int = 0,
    overwrite: bool = True,
) -> SyntheticWorld:
    """Write a deterministic synthetic world with planted signatures.

    Parameters
    ----------
    out_dir : path
        World folder to create (replaced when ``overwrite``).
    n_models, n_units, n_functions, n_benchmarks : int
        ``m``, ``d``, ``F`` (<= 6 named functions, more get generic names), ``B``.
    planted_per_function : int
        Units per function whose NLL is driven by that function's ability.
    n_items : int
        Items per benchmark (>= 60 recommended for IRT).
    n_respondents : int
        Extra simulated LLMs that only answer items (appended to ``responses/``; no NLL,
        not in the registry): metabench's IRT needs hundreds of respondents.
    seed : int

    Returns
    -------
    SyntheticWorld

    Examples
    --------
    >>> from sigmap_lib.worlds import make_synthetic_world
    >>> world = make_synthetic_world(
    ...     "world", n_models=8, n_units=600, n_functions=2, n_benchmarks=2,
    ...     planted_per_function=3, n_items=10, n_respondents=0,
    ... )
    >>> world.benchmarks, world.benchmark_function["coding_ai2_01"]
    (['math_ai2_00', 'coding_ai2_01'], 'coding')
    >>> world.scores.shape, world.n_units, world.model_ids[0]  # (n_models, n_benchmarks)
    ((8, 2), 600, 'synthetic/alpha-00')
    >>> {f: units.tolist() for f, units in world.planted.items()}
    {'math': [71, 357, 485], 'coding': [157, 212, 372]}
    >>> world.nll_arrays()[0].shape, sorted(p.name for p in world.root.iterdir())
    ((600,), ['catalog.yaml', 'corpus', 'items', 'models.yaml', 'nll', 'responses',
              'scores.csv', 'settings.yaml', 'truth.json'])
    """
    import polars as pl
    import yaml

    if n_models < 4:
        raise SigmapInputError(f"n_models must be >= 4, got {n_models}")
    if n_functions < 1 or n_benchmarks < 1:
        raise SigmapInputError("n_functions and n_benchmarks must be >= 1")
    if n_items < 2:
        raise SigmapInputError(f"n_items must be >= 2, got {n_items}")
    if planted_per_function * n_functions > n_units:
        raise SigmapInputError(
            f"{planted_per_function} planted units x {n_functions} functions exceed n_units={n_units}"
        )
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise SigmapInputError(f"{out} exists and overwrite=False")
    rng = np.random.default_rng(seed)
    m, d, nf, nb = n_models, n_units, n_functions, n_benchmarks
    functions = [
        FUNCTION_NAMES[f] if f < len(FUNCTION_NAMES) else f"function{f}" for f in range(nf)
    ]

    # ---- models and abilities ---------------------------------------------------------
    fam_idx = np.arange(m) % len(MODEL_FAMILIES)
    model_ids = [f"synthetic/{MODEL_FAMILIES[fam_idx[i]]}-{i:02d}" for i in range(m)]
    g = rng.standard_normal(m)
    s = rng.standard_normal((m, nf))
    ability = RHO * g[:, None] + np.sqrt(1 - RHO**2) * s
    mc_skill = rng.standard_normal(m)
    fam_effect = rng.standard_normal((len(MODEL_FAMILIES), len(BENCH_FAMILIES)))

    # ---- benchmarks -----------------------------------------------------------------
    bench_f = np.arange(nb) % nf
    bench_fam = (np.arange(nb) // nf) % len(BENCH_FAMILIES)
    bench_fmt = (np.arange(nb) + np.arange(nb) // nf) % len(FORMATS)
    names = [f"{functions[bench_f[b]]}_{BENCH_FAMILIES[bench_fam[b]]}_{b:02d}" for b in range(nb)]
    theta = np.empty((m, nb))
    for b in range(nb):
        t = (
            LAMBDA * ability[:, bench_f[b]]
            + KAPPA * fam_effect[fam_idx, bench_fam[b]]
            + MU * mc_skill * (FORMATS[bench_fmt[b]] == "multiple_choice")
            + SIGMA_B * rng.standard_normal(m)
        )
        theta[:, b] = (t - t.mean()) / t.std()
    disc = rng.uniform(0.8, 2.0, (nb, n_items))
    diff = rng.standard_normal((nb, n_items))
    responses = np.empty((nb, m, n_items), dtype=np.int8)
    for b in range(nb):
        p = 1.0 / (1.0 + np.exp(-disc[b] * (theta[:, b : b + 1] - diff[b])))
        responses[b] = (rng.random((m, n_items)) < p).astype(np.int8)
    scores = 100.0 * responses.mean(axis=2).T  # (m, nb)

    # ---- extra respondents: item responses only (metabench needs hundreds of LLMs) -------
    # Drawn from the same ability model with their own random stream, so adding them
    # changes nothing else in the world. They have no NLL and are not in the registry.
    rr = np.random.default_rng([seed, 7919])
    n_r = int(n_respondents)
    resp_ids = [f"respondent/{MODEL_FAMILIES[i % len(MODEL_FAMILIES)]}-{i:04d}" for i in range(n_r)]
    r_fam = np.arange(n_r) % len(MODEL_FAMILIES)
    r_ability = RHO * rr.standard_normal(n_r)[:, None] + np.sqrt(1 - RHO**2) * rr.standard_normal(
        (n_r, nf)
    )
    r_mc = rr.standard_normal(n_r)
    r_responses = np.empty((nb, n_r, n_items), dtype=np.int8)
    for b in range(nb):
        t = (
            LAMBDA * r_ability[:, bench_f[b]]
            + KAPPA * fam_effect[r_fam, bench_fam[b]]
            + MU * r_mc * (FORMATS[bench_fmt[b]] == "multiple_choice")
            + SIGMA_B * rr.standard_normal(n_r)
        )
        t = (t - t.mean()) / t.std() if n_r > 1 else t
        p = 1.0 / (1.0 + np.exp(-disc[b] * (t[:, None] - diff[b])))
        r_responses[b] = (rr.random((n_r, n_items)) < p).astype(np.int8)

    # ---- corpus and NLL -----------------------------------------------------------------
    general_vocab = _words(rng, 800, (1, 3))
    func_vocab = {f: _words(rng, 40, (2, 3), prefix=f[:2]) for f in functions}
    planted_pos = rng.choice(d, size=nf * planted_per_function, replace=False)
    planted = {
        functions[f]: np.sort(
            planted_pos[f * planted_per_function : (f + 1) * planted_per_function]
        )
        for f in range(nf)
    }
    unit_func = np.full(d, -1, dtype=np.int64)
    for f in range(nf):
        unit_func[planted[functions[f]]] = f
    words = np.asarray(general_vocab, dtype=object)[rng.integers(0, len(general_vocab), d)]
    for f in range(nf):
        fv = np.asarray(func_vocab[functions[f]], dtype=object)
        words[planted[functions[f]]] = fv[rng.integers(0, len(fv), planted_per_function)]
    base = 3.0 + rng.gamma(2.0, 1.0, d)
    alpha = rng.uniform(ALPHA_MIN, ALPHA_MAX, d)
    x = base[None, :] - alpha[None, :] * g[:, None] + SIGMA_N * rng.standard_normal((m, d))
    for f in range(nf):
        pu = planted[functions[f]]
        x[:, pu] = (
            base[pu][None, :]
            - BETA * ability[:, f : f + 1]
            + SIGMA_P * rng.standard_normal((m, pu.size))
        )
    nll = np.logaddexp(0.0, x).astype(np.float32)

    # ---- items -----------------------------------------------------------------------
    stems = {
        "multiple_choice": ["which", "option", "is", "correct"],
        "cloze": ["complete", "the", "passage"],
        "generation": ["write", "the", "answer"],
    }
    items: dict[str, list[str]] = {}
    for b in range(nb):
        fv = func_vocab[functions[bench_f[b]]]
        texts = []
        for _ in range(n_items):
            n_f, n_g = int(rng.integers(5, 9)), int(rng.integers(3, 6))
            body = [fv[i] for i in rng.integers(0, len(fv), n_f)] + [
                general_vocab[i] for i in rng.integers(0, len(general_vocab), n_g)
            ]
            rng.shuffle(body)
            texts.append(" ".join([*stems[FORMATS[bench_fmt[b]]], *body]))
        items[names[b]] = texts

    # ---- write (atomically) -------------------------------------------------------------
    with atomic_dir(out) as tmp:
        for sub in ("corpus", "nll", "items", "responses"):
            (tmp / sub).mkdir(parents=True)
        n_docs = (d + DOC_WORDS - 1) // DOC_WORDS
        # one JSONL file (a shard never spans files: many tiny files would be many shards)
        with open(tmp / "corpus" / "docs.jsonl", "w", encoding="utf-8") as fh:
            for k in range(n_docs):
                chunk = words[k * DOC_WORDS : (k + 1) * DOC_WORDS]
                text = " ".join(chunk) + "\n"
                fh.write(json.dumps({"id": f"doc_{k:06d}.txt", "text": text}) + "\n")
        nll_rel = []
        entries = []
        for i in range(m):
            rel = f"nll/model_{i:03d}.npy"
            np.save(tmp / rel, nll[i])
            nll_rel.append(rel)
            entries.append(
                {
                    "id": model_ids[i],
                    "family": MODEL_FAMILIES[fam_idx[i]],
                    "n_params": int(1e8 * 2 ** (1 + g[i])),
                    "dtype": "float32",
                    "nll_source": rel,
                }
            )
        (tmp / "models.yaml").write_text(yaml.safe_dump({"models": entries}, sort_keys=False))
        catalog = {
            names[b]: {
                "family": BENCH_FAMILIES[bench_fam[b]],
                "format": FORMATS[bench_fmt[b]],
                "function": functions[bench_f[b]],
                "score_range": [0, 100],
                "items": f"items/{names[b]}.parquet",
                "responses": f"responses/{names[b]}.parquet",
            }
            for b in range(nb)
        }
        (tmp / "catalog.yaml").write_text(yaml.safe_dump({"benchmarks": catalog}, sort_keys=False))
        # recommended settings for short benchmarks: with ~100 items per benchmark the
        # paper's λ = 0.005 per item would keep almost every item (the full score is an
        # exact function of all of them), so the penalty is scaled up.
        (tmp / "settings.yaml").write_text(
            yaml.safe_dump(
                {"metabench": {"lam": 0.05, "n_quant": min(50, n_items)}}, sort_keys=False
            )
        )
        pl.DataFrame({"model": model_ids, **{names[b]: scores[:, b] for b in range(nb)}}).write_csv(
            tmp / "scores.csv"
        )
        for b in range(nb):
            ids = [f"{names[b]}-q{j:03d}" for j in range(n_items)]
            pl.DataFrame({"item_id": ids, "text": items[names[b]]}).write_parquet(
                tmp / "items" / f"{names[b]}.parquet"
            )
            all_resp = np.concatenate([responses[b], r_responses[b]], axis=0)
            pl.DataFrame(
                {"model": model_ids + resp_ids, **{ids[j]: all_resp[:, j] for j in range(n_items)}},
                schema={"model": pl.String, **{i: pl.Int8 for i in ids}},
            ).write_parquet(tmp / "responses" / f"{names[b]}.parquet")
        truth = {
            "world": "synthetic",
            "seed": seed,
            "n_units": d,
            "model_ids": model_ids,
            "benchmarks": names,
            "functions": functions,
            "nll_sources": nll_rel,
            "planted_units": {f: v.tolist() for f, v in planted.items()},
            "benchmark_function": {names[b]: functions[bench_f[b]] for b in range(nb)},
            "benchmark_loadings": {
                names[b]: {
                    "function": functions[bench_f[b]],
                    "lambda_function": LAMBDA,
                    "family": BENCH_FAMILIES[bench_fam[b]],
                    "kappa_family": KAPPA,
                    "format": FORMATS[bench_fmt[b]],
                    "mu_mc_skill": MU if FORMATS[bench_fmt[b]] == "multiple_choice" else 0.0,
                    "noise_sd": SIGMA_B,
                }
                for b in range(nb)
            },
            "unit_model": {
                "rho_general": RHO,
                "alpha_min_general": ALPHA_MIN,
                "alpha_max_general": ALPHA_MAX,
                "sigma_noise": SIGMA_N,
                "beta_planted": BETA,
                "sigma_planted": SIGMA_P,
                "nll": "softplus(x)",
            },
            "general_quality": dict(zip(model_ids, g.tolist())),
            "abilities": {
                model_ids[i]: dict(zip(functions, ability[i].tolist())) for i in range(m)
            },
            "theta": {names[b]: theta[:, b].tolist() for b in range(nb)},
            "item_parameters": {
                names[b]: {"a": disc[b].tolist(), "b": diff[b].tolist()} for b in range(nb)
            },
        }
        (tmp / "truth.json").write_text(json.dumps(truth, indent=1))
    return SyntheticWorld.load(out)


def planted_recovery(
    world: SyntheticWorld, signatures: Mapping[str, Any] | Sequence[Any]
) -> dict[str, Any]:
    """Recall / precision of the planted units among the signatures' units.

    Parameters
    ----------
    world : SyntheticWorld
    signatures : mapping benchmark -> unit indices (or objects with ``.units``), or a
        sequence of objects with ``.benchmark`` and ``.units``.

    Returns
    -------
    dict
        ``per_benchmark``: for each benchmark ``recall`` = |S ∩ P_f| / |P_f| (P_f = planted
        units of its function), ``precision`` = |S ∩ P_f| / |S| (NaN when S is empty),
        ``precision_any_planted`` (S ∩ any function's planted units), ``hit`` (any of P_f
        selected), ``n_selected``; and the means ``recall``, ``precision`` (micro:
        Σ|S ∩ P_f| / Σ|S|), ``hit_rate``, ``mean_n_selected``.

    Examples
    --------
    Extract the signatures of a small synthetic world and score them against the truth:

    >>> from sigmap_lib.signatures import extract_signatures
    >>> from sigmap_lib.worlds import make_synthetic_world, planted_recovery
    >>> world = make_synthetic_world(
    ...     "world", n_models=16, n_units=500, n_functions=2, n_benchmarks=2,
    ...     planted_per_function=3, n_items=20, n_respondents=0,
    ... )
    >>> sigs = extract_signatures(
    ...     world.nll_arrays(), world.scores, benchmark_names=world.benchmarks, k=10,
    ...     criterion="bic",
    ... )
    >>> [(s.benchmark, s.units.tolist()) for s in sigs]
    [('math_ai2_00', [289, 177, 488]), ('coding_ai2_01', [0, 256])]
    >>> world.planted["math"].tolist(), world.planted["coding"].tolist()
    ([289, 371, 437], [0, 243, 344])
    >>> rec = planted_recovery(world, sigs)
    >>> round(rec["recall"], 3), round(rec["precision"], 3), rec["hit_rate"]
    (0.333, 0.4, 1.0)

    A mapping ``benchmark -> unit indices`` works too:

    >>> rec = planted_recovery(world, {"math_ai2_00": [289, 371, 5]})
    >>> rec["per_benchmark"]["math_ai2_00"]
    {'function': 'math', 'n_selected': 3, 'true_positives': 2, 'recall': 0.666...,
     'precision': 0.666..., 'precision_any_planted': 0.666..., 'hit': True}
    """
    if isinstance(signatures, Mapping):
        items = list(signatures.items())
    else:
        items = [(sig.benchmark, sig) for sig in signatures]
    all_planted = set(world.all_planted.tolist())
    per: dict[str, Any] = {}
    tp_total = sel_total = 0
    for name, sig in items:
        if name not in world.benchmark_function:
            raise SigmapInputError(f"benchmark {name!r} is not in this synthetic world")
        units = getattr(sig, "units", sig)
        sel = {int(u) for u in np.asarray(units).reshape(-1)}
        pf = set(world.planted[world.benchmark_function[name]].tolist())
        tp = len(sel & pf)
        per[name] = {
            "function": world.benchmark_function[name],
            "n_selected": len(sel),
            "true_positives": tp,
            "recall": tp / len(pf) if pf else float("nan"),
            "precision": tp / len(sel) if sel else float("nan"),
            "precision_any_planted": len(sel & all_planted) / len(sel) if sel else float("nan"),
            "hit": tp > 0,
        }
        tp_total += tp
        sel_total += len(sel)
    n = max(len(per), 1)
    return {
        "per_benchmark": per,
        "recall": sum(v["recall"] for v in per.values()) / n,
        "precision": tp_total / sel_total if sel_total else float("nan"),
        "hit_rate": sum(v["hit"] for v in per.values()) / n,
        "mean_n_selected": sel_total / n,
    }

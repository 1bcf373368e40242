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
from sigmap_lib._util._files import read_folder_json
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
    root, model_ids, benchmarks, functions
        The world folder and its models, benchmarks and latent functions.
    benchmark_function : dict[str, str]
        The function each benchmark measures.
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
        tpath, truth = read_folder_json(r, "truth.json", "synthetic world")
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
    functions = [
        FUNCTION_NAMES[f] if f < len(FUNCTION_NAMES) else f"function{f}" for f in range(n_functions)
    ]
    models = _draw_models(rng, n_models, n_functions)
    benches = _draw_benchmarks(rng, models, functions, n_benchmarks, n_items)
    respondents = _draw_respondents(seed, models, benches, n_respondents, n_functions)
    corpus = _draw_corpus(rng, models, functions, n_units, planted_per_function)
    items = _draw_items(rng, benches, corpus.func_vocab, corpus.general_vocab, n_items)
    with atomic_dir(out, keep_unchanged=True) as tmp:  # unchanged files keep their mtimes
        _write_inputs(tmp, models, benches, respondents, corpus, items)
        truth = _truth(seed, models, benches, corpus, n_units)
        (tmp / "truth.json").write_text(json.dumps(truth, indent=1))
    return SyntheticWorld.load(out)


@dataclass(frozen=True)
class _Models:
    """The registry models: ids, families, general quality ``g`` ``(m,)``, abilities
    ``(m, F)``, multiple-choice skill ``(m,)`` and family effects ``(4, 3)``."""

    ids: list[str]
    family: np.ndarray
    g: np.ndarray
    ability: np.ndarray
    mc_skill: np.ndarray
    family_effect: np.ndarray


@dataclass(frozen=True)
class _Benchmarks:
    """The benchmarks: names, function / family / format indices ``(B,)``, latents
    ``(m, B)``, 2PL item parameters ``(B, n_items)``, responses ``(B, m, n_items)`` and
    scores ``(m, B)``."""

    names: list[str]
    functions: list[str]
    function: np.ndarray
    family: np.ndarray
    format: np.ndarray
    theta: np.ndarray
    disc: np.ndarray
    diff: np.ndarray
    responses: np.ndarray
    scores: np.ndarray


@dataclass(frozen=True)
class _Respondents:
    """Extra LLMs that only answer items: ids and responses ``(B, n_r, n_items)``."""

    ids: list[str]
    responses: np.ndarray


@dataclass(frozen=True)
class _Corpus:
    """The corpus words ``(d,)``, the planted units per function, the vocabularies and the
    NLL ``(m, d)``."""

    words: np.ndarray
    planted: dict[str, np.ndarray]
    general_vocab: list[str]
    func_vocab: dict[str, list[str]]
    nll: np.ndarray


def _latent(
    kinds: tuple[np.ndarray, np.ndarray, np.ndarray],
    b: int,
    ability: np.ndarray,
    family: np.ndarray,
    mc_skill: np.ndarray,
    family_effect: np.ndarray,
    noise: np.ndarray,
) -> np.ndarray:
    """Benchmark ``b``'s unstandardized latent ``(n,)`` of respondents with these traits;
    ``kinds``: each benchmark's function, family and format index."""
    function, bench_family, fmt = kinds
    return (
        LAMBDA * ability[:, function[b]]
        + KAPPA * family_effect[family, bench_family[b]]
        + MU * mc_skill * (FORMATS[fmt[b]] == "multiple_choice")
        + SIGMA_B * noise
    )


def _draw_models(rng: np.random.Generator, m: int, nf: int) -> _Models:
    fam_idx = np.arange(m) % len(MODEL_FAMILIES)
    ids = [f"synthetic/{MODEL_FAMILIES[fam_idx[i]]}-{i:02d}" for i in range(m)]
    g = rng.standard_normal(m)
    s = rng.standard_normal((m, nf))
    ability = RHO * g[:, None] + np.sqrt(1 - RHO**2) * s
    mc_skill = rng.standard_normal(m)
    fam_effect = rng.standard_normal((len(MODEL_FAMILIES), len(BENCH_FAMILIES)))
    return _Models(ids, fam_idx, g, ability, mc_skill, fam_effect)


def _draw_benchmarks(
    rng: np.random.Generator, models: _Models, functions: list[str], nb: int, n_items: int
) -> _Benchmarks:
    nf, m = len(functions), len(models.ids)
    bench_f = np.arange(nb) % nf
    bench_fam = (np.arange(nb) // nf) % len(BENCH_FAMILIES)
    bench_fmt = (np.arange(nb) + np.arange(nb) // nf) % len(FORMATS)
    names = [f"{functions[bench_f[b]]}_{BENCH_FAMILIES[bench_fam[b]]}_{b:02d}" for b in range(nb)]
    kinds = (bench_f, bench_fam, bench_fmt)
    theta = np.empty((m, nb))
    for b in range(nb):
        t = _latent(
            kinds,
            b,
            models.ability,
            models.family,
            models.mc_skill,
            models.family_effect,
            rng.standard_normal(m),
        )
        theta[:, b] = (t - t.mean()) / t.std()
    disc = rng.uniform(0.8, 2.0, (nb, n_items))
    diff = rng.standard_normal((nb, n_items))
    responses = np.empty((nb, m, n_items), dtype=np.int8)
    for b in range(nb):
        p = 1.0 / (1.0 + np.exp(-disc[b] * (theta[:, b : b + 1] - diff[b])))
        responses[b] = (rng.random((m, n_items)) < p).astype(np.int8)
    scores = 100.0 * responses.mean(axis=2).T  # (m, nb)
    return _Benchmarks(
        names, functions, bench_f, bench_fam, bench_fmt, theta, disc, diff, responses, scores
    )


def _draw_respondents(
    seed: int, models: _Models, benches: _Benchmarks, n_respondents: int, nf: int
) -> _Respondents:
    """Item responses only (metabench needs hundreds of LLMs), drawn from the same ability
    model with their own random stream, so adding them changes nothing else in the
    world. They have no NLL and are not in the registry."""
    rr = np.random.default_rng([seed, 7919])
    n_r, (nb, n_items) = int(n_respondents), benches.disc.shape
    ids = [f"respondent/{MODEL_FAMILIES[i % len(MODEL_FAMILIES)]}-{i:04d}" for i in range(n_r)]
    r_fam = np.arange(n_r) % len(MODEL_FAMILIES)
    r_ability = RHO * rr.standard_normal(n_r)[:, None] + np.sqrt(1 - RHO**2) * rr.standard_normal(
        (n_r, nf)
    )
    r_mc = rr.standard_normal(n_r)
    responses = np.empty((nb, n_r, n_items), dtype=np.int8)
    for b in range(nb):
        kinds = (benches.function, benches.family, benches.format)
        noise = rr.standard_normal(n_r)
        t = _latent(kinds, b, r_ability, r_fam, r_mc, models.family_effect, noise)
        t = (t - t.mean()) / t.std() if n_r > 1 else t
        p = 1.0 / (1.0 + np.exp(-benches.disc[b] * (t[:, None] - benches.diff[b])))
        responses[b] = (rr.random((n_r, n_items)) < p).astype(np.int8)
    return _Respondents(ids, responses)


def _draw_corpus(
    rng: np.random.Generator, models: _Models, functions: list[str], d: int, per_function: int
) -> _Corpus:
    nf, m = len(functions), len(models.ids)
    general_vocab = _words(rng, 800, (1, 3))
    func_vocab = {f: _words(rng, 40, (2, 3), prefix=f[:2]) for f in functions}
    planted_pos = rng.choice(d, size=nf * per_function, replace=False)
    planted = {
        functions[f]: np.sort(planted_pos[f * per_function : (f + 1) * per_function])
        for f in range(nf)
    }
    words = np.asarray(general_vocab, dtype=object)[rng.integers(0, len(general_vocab), d)]
    for f in range(nf):
        fv = np.asarray(func_vocab[functions[f]], dtype=object)
        words[planted[functions[f]]] = fv[rng.integers(0, len(fv), per_function)]
    base = 3.0 + rng.gamma(2.0, 1.0, d)
    alpha = rng.uniform(ALPHA_MIN, ALPHA_MAX, d)
    x = base[None, :] - alpha[None, :] * models.g[:, None] + SIGMA_N * rng.standard_normal((m, d))
    for f in range(nf):
        pu = planted[functions[f]]
        x[:, pu] = (
            base[pu][None, :]
            - BETA * models.ability[:, f : f + 1]
            + SIGMA_P * rng.standard_normal((m, pu.size))
        )
    nll = np.logaddexp(0.0, x).astype(np.float32)
    return _Corpus(words, planted, general_vocab, func_vocab, nll)


def _draw_items(
    rng: np.random.Generator,
    benches: _Benchmarks,
    func_vocab: dict[str, list[str]],
    general_vocab: list[str],
    n_items: int,
) -> dict[str, list[str]]:
    """Question texts per benchmark: a stem of its format and words of its function."""
    stems = {
        "multiple_choice": ["which", "option", "is", "correct"],
        "cloze": ["complete", "the", "passage"],
        "generation": ["write", "the", "answer"],
    }
    items: dict[str, list[str]] = {}
    for b, name in enumerate(benches.names):
        fv = func_vocab[benches.functions[benches.function[b]]]
        texts = []
        for _ in range(n_items):
            n_f, n_g = int(rng.integers(5, 9)), int(rng.integers(3, 6))
            body = [fv[i] for i in rng.integers(0, len(fv), n_f)] + [
                general_vocab[i] for i in rng.integers(0, len(general_vocab), n_g)
            ]
            rng.shuffle(body)
            texts.append(" ".join([*stems[FORMATS[benches.format[b]]], *body]))
        items[name] = texts
    return items


def _write_inputs(
    tmp: Path,
    models: _Models,
    benches: _Benchmarks,
    respondents: _Respondents,
    corpus: _Corpus,
    items: dict[str, list[str]],
) -> None:
    """The world's input files in the format of ``docs/FORMATS.md`` (all but truth.json)."""
    import polars as pl
    import yaml

    for sub in ("corpus", "nll", "items", "responses"):
        (tmp / sub).mkdir(parents=True)
    d, words = len(corpus.words), corpus.words
    n_docs = (d + DOC_WORDS - 1) // DOC_WORDS
    # one JSONL file (a shard never spans files: many tiny files would be many shards)
    with open(tmp / "corpus" / "docs.jsonl", "w", encoding="utf-8") as fh:
        for k in range(n_docs):
            chunk = words[k * DOC_WORDS : (k + 1) * DOC_WORDS]
            text = " ".join(chunk) + "\n"
            fh.write(json.dumps({"id": f"doc_{k:06d}.txt", "text": text}) + "\n")
    entries = []
    for i, model_id in enumerate(models.ids):
        rel = _nll_source(i)
        np.save(tmp / rel, corpus.nll[i])
        entries.append(
            {
                "id": model_id,
                "family": MODEL_FAMILIES[models.family[i]],
                "n_params": int(1e8 * 2 ** (1 + models.g[i])),
                "dtype": "float32",
                "nll_source": rel,
            }
        )
    (tmp / "models.yaml").write_text(yaml.safe_dump({"models": entries}, sort_keys=False))
    names, n_items = benches.names, benches.disc.shape[1]
    catalog = {
        name: {
            "family": BENCH_FAMILIES[benches.family[b]],
            "format": FORMATS[benches.format[b]],
            "function": benches.functions[benches.function[b]],
            "score_range": [0, 100],
            "items": f"items/{name}.parquet",
            "responses": f"responses/{name}.parquet",
        }
        for b, name in enumerate(names)
    }
    (tmp / "catalog.yaml").write_text(yaml.safe_dump({"benchmarks": catalog}, sort_keys=False))
    # recommended settings for short benchmarks: with ~100 items per benchmark the
    # paper's λ = 0.005 per item would keep almost every item (the full score is an
    # exact function of all of them), so the penalty is scaled up.
    (tmp / "settings.yaml").write_text(
        yaml.safe_dump({"metabench": {"lam": 0.05, "n_quant": min(50, n_items)}}, sort_keys=False)
    )
    scores = benches.scores
    pl.DataFrame({"model": models.ids, **{n: scores[:, b] for b, n in enumerate(names)}}).write_csv(
        tmp / "scores.csv"
    )
    for b, name in enumerate(names):
        ids = [f"{name}-q{j:03d}" for j in range(n_items)]
        pl.DataFrame({"item_id": ids, "text": items[name]}).write_parquet(
            tmp / "items" / f"{name}.parquet"
        )
        all_resp = np.concatenate([benches.responses[b], respondents.responses[b]], axis=0)
        pl.DataFrame(
            {
                "model": models.ids + respondents.ids,
                **{ids[j]: all_resp[:, j] for j in range(n_items)},
            },
            schema={"model": pl.String, **{i: pl.Int8 for i in ids}},
        ).write_parquet(tmp / "responses" / f"{name}.parquet")


def _nll_source(i: int) -> str:
    """The world-relative path of model ``i``'s NLL."""
    return f"nll/model_{i:03d}.npy"


def _truth(
    seed: int, models: _Models, benches: _Benchmarks, corpus: _Corpus, d: int
) -> dict[str, Any]:
    """``truth.json``: everything the world was drawn from."""
    names, functions = benches.names, benches.functions

    def function(b: int) -> str:
        return functions[benches.function[b]]

    return {
        "world": "synthetic",
        "seed": seed,
        "n_units": d,
        "model_ids": models.ids,
        "benchmarks": names,
        "functions": functions,
        "nll_sources": [_nll_source(i) for i in range(len(models.ids))],
        "planted_units": {f: v.tolist() for f, v in corpus.planted.items()},
        "benchmark_function": {name: function(b) for b, name in enumerate(names)},
        "benchmark_loadings": {
            name: {
                "function": function(b),
                "lambda_function": LAMBDA,
                "family": BENCH_FAMILIES[benches.family[b]],
                "kappa_family": KAPPA,
                "format": FORMATS[benches.format[b]],
                "mu_mc_skill": MU if FORMATS[benches.format[b]] == "multiple_choice" else 0.0,
                "noise_sd": SIGMA_B,
            }
            for b, name in enumerate(names)
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
        "general_quality": dict(zip(models.ids, models.g.tolist())),
        "abilities": {
            mid: dict(zip(functions, models.ability[i].tolist()))
            for i, mid in enumerate(models.ids)
        },
        "theta": {name: benches.theta[:, b].tolist() for b, name in enumerate(names)},
        "item_parameters": {
            name: {"a": benches.disc[b].tolist(), "b": benches.diff[b].tolist()}
            for b, name in enumerate(names)
        },
    }


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
    ...     method="bic",
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

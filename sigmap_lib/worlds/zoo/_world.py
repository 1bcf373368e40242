"""The zoo world: the demo's default — tiny real transformers trained locally on real
text, real loglikelihood benchmarks, truth known by construction.

``build_zoo_world(out_dir)`` runs the four stages below and writes a world folder in
the format of ``docs/FORMATS.md``; each stage is also public so a pipeline can cache and
report them separately:

1. :func:`build_texts` — the corpus and training text (:class:`ZooTexts`): Python
   standard-library code, its docstrings and the installed packages' READMEs, plus
   generated arithmetic, sequence-copying and key-value-record text. Split by document
   into ``train`` / ``corpus`` / ``bench`` (held-out).
2. :func:`train_tokenizers` — two BPE tokenizers trained on the training text: a
   byte-level one (vocab 512) for the GPT-2 models and a SentencePiece-style
   ("metaspace", byte fallback, vocab 1024) one for the Llama models, so the corpus
   units really are aligned across tokenizers.
3. :func:`train_zoo_models` — :data:`ZOO_MODELS`: 8 training runs of tiny causal LMs
   (GPT-2 and Llama configs, ~0.14-0.26M parameters, 400 or 800 steps) in a
   fractional factorial design: each run leans on some of the five domains (three times
   their share of the others), and every domain's lean, the architecture and the budget
   vary independently of each other across the runs. Each run gives four registry
   models, a budget ladder: its weights after 5, 15 and 40 % of its steps
   (``zoo/<name>-step<s>``) and its final weights, so the 32 models differ first by
   general quality (training budget), as real LLMs do, and then by skills (data mix)
   and architecture / tokenizer. Cached per run by a spec hash. Each run also saves
   intermediate checkpoints (default 5, evenly spaced, plus its three early registry
   models; quick: 19, every 5 % of its steps).
4. :func:`evaluate_zoo_benchmarks` — the 16 benchmarks of :func:`build_zoo_benchmarks`
   (100 items each), scored by loglikelihood, item by item (cached per model), for the
   registry models and the other checkpoints. :func:`build_zoo_world` starts one pool of
   worker processes for stages 3 and 4, before stage 1, so the workers' imports overlap
   the text building and the evaluation starts on warm workers. Those checkpoints are
   extra real respondents for item-level methods (metabench needs >= 50 per benchmark;
   72 in all): their rows follow the registry models' in ``responses/<b>.parquet``
   (``zoo/<name>@step<s>``) and ``truth.json`` lists them; they are not registry models
   (not in ``models.yaml`` / ``scores.csv``). ``settings.yaml`` holds metabench
   settings suited to this small world (:func:`metabench_settings`), the semantic
   level's question sample and the signature test's strata (:func:`zoo_settings`).

Everything is deterministic given the seed and the machine's Python installation; model
training is deterministic on a given machine and thread count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_file, atomic_write_text
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo._benchmarks import ZooBenchmark, build_zoo_benchmarks
from sigmap_lib.worlds.zoo._models import (
    MIXTURES,
    QUICK_MODELS,
    SIZES,
    TOKENIZERS,
    ZOO_VERSION,
    Progress,
    ZooModelSpec,
    build_texts,
    checkpoint_id,
    default_workers,
    model_specs,
    no_progress,
    run_jobs,
    sha_of,
    train_tokenizers,
    train_zoo_models,
    worker_pool,
)
from sigmap_lib.worlds.zoo._scoring import (
    RequestBatches,
    batch_requests,
    benchmark_requests,
    context_length,
    encode_requests,
    score_benchmarks,
)
from sigmap_lib.worlds.zoo._text import DOMAINS, ZooTexts


@dataclass
class ZooWorld:
    """A built zoo world (what :func:`build_zoo_world` returns).

    Attributes
    ----------
    root : Path
        The world folder.
    models : list[dict]
        The ``models.yaml`` entries (``id``, ``path`` (absolute), ``family``, ``n_params``,
        ``dtype``) plus ``run`` (the training run's name), ``mixture``, ``steps`` (the
        run's), ``step`` (the weights' step: ``steps`` for a final model), ``size``,
        ``tokenizer``.
    benchmarks : list[str]
        Benchmark names, catalog order.
    scores : np.ndarray, shape (n_models, n_benchmarks)
        Mean item responses, in [0, 1].
    responses : dict[str, np.ndarray]
        Benchmark -> int8 ``(n_models, n_items)``.
    timings : dict[str, float]
        Seconds per stage.
    trained, reused : list[str]
        Training runs trained now / taken from the cache.
    checkpoints : list[dict]
        Intermediate checkpoints that are not registry models (extra respondents): ``id``
        (``zoo/<name>@step<s>``), ``model``, ``name``, ``step``, ``steps``,
        ``tokens_seen``, ``path``.
    checkpoint_responses : dict[str, np.ndarray]
        Benchmark -> int8 ``(n_checkpoints, n_items)``, rows in ``checkpoints`` order.
    settings : dict
        The recommended pipeline settings written to ``settings.yaml``.
    """

    root: Path
    models: list[dict[str, Any]]
    benchmarks: list[str]
    scores: np.ndarray
    responses: dict[str, np.ndarray]
    timings: dict[str, float] = field(default_factory=dict)
    trained: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_responses: dict[str, np.ndarray] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def _write_world_text(path: Path, text: str) -> None:
    """A world file, left untouched (mtime too) when its content is unchanged: a rebuilt
    world that did not change shows no change to what watches its files."""
    atomic_write_text(path, text, keep_unchanged=True)


def _write_parquet(df: Any, path: Path) -> None:
    with atomic_file(path, keep_unchanged=True) as tmp:
        df.write_parquet(tmp)


def _cached_eval(
    folder: str, benchmarks: Sequence[ZooBenchmark], key: str
) -> dict[str, np.ndarray] | None:
    """The cached responses of a model folder when their key matches, else None."""
    cache = Path(folder) / "zoo_eval.npz"
    if not cache.exists():
        return None
    try:
        with np.load(cache) as z:
            if str(z["key"]) == key and all(b.name in z for b in benchmarks):
                return {b.name: z[b.name].astype(np.int8) for b in benchmarks}
    except (OSError, ValueError, KeyError):
        return None
    return None


#: Version of the respondents' scoring arithmetic, part of every cached evaluation's key
#: and raised whenever that arithmetic changes, even only by rounding (a near tie can flip
#: a response): a cached response always equals what this code computes.
EVAL_VERSION = 2

#: This process's batched benchmark requests, per (tokenizer file, items, batch size,
#: context length) hash: every respondent with the same tokenizer shares them.
_BATCHES: dict[str, RequestBatches] = {}


def _request_batches(
    folder: str,
    model: Any,
    tokenizer: Any,
    benchmarks: Sequence[ZooBenchmark],
    items_key: str,
    batch_size: int,
) -> RequestBatches:
    """:func:`batch_requests` of the benchmarks' requests encoded with the tokenizer saved
    in ``folder``, computed once per process and tokenizer."""
    tok_hash = hashlib.sha256((Path(folder) / "tokenizer.json").read_bytes()).hexdigest()
    max_length = context_length(model)
    key = sha_of([tok_hash, items_key, batch_size, max_length])
    if key not in _BATCHES:
        if len(_BATCHES) >= 4:  # a world has two tokenizers; never grow without bound
            _BATCHES.clear()
        encoded = encode_requests(tokenizer, benchmark_requests(benchmarks))
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        _BATCHES[key] = batch_requests(
            encoded, pad_id=pad, max_length=max_length, batch_size=batch_size
        )
    return _BATCHES[key]


def _evaluate_one(
    folder: str,
    benchmarks: Sequence[ZooBenchmark],
    key: str,
    threads: int,
    batch_size: int,
    items_key: str,
) -> dict[str, np.ndarray]:
    """Score one saved model on every benchmark; cached in ``<folder>/zoo_eval.npz``."""
    import torch

    from sigmap_lib.nll import load_model

    cached = _cached_eval(folder, benchmarks, key)
    if cached is not None:
        return cached
    cache = Path(folder) / "zoo_eval.npz"
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        model, tok = load_model(folder, device="cpu", dtype="float32")
        batches = _request_batches(folder, model, tok, benchmarks, items_key, batch_size)
        got = score_benchmarks(model, tok, benchmarks, batch_size=batch_size, batches=batches)
    finally:
        torch.set_num_threads(old)
    with atomic_file(cache, suffix=".tmp.npz") as tmp:
        np.savez(tmp, key=np.array(key), **got)
    return got


def evaluate_zoo_benchmarks(
    benchmarks: Sequence[ZooBenchmark],
    models: dict[str, dict[str, Any]],
    *,
    workers: int | None = None,
    threads: int | None = None,
    batch_size: int = 64,
    progress: Progress | None = None,
    pool: Executor | None = None,
) -> dict[str, np.ndarray]:
    """Stage 4: item-level responses of every model on every benchmark.

    ``models`` maps a respondent name to a dict with at least ``key`` and ``path`` (a
    saved model folder): the entries of :func:`train_zoo_models` and, when wanted, their
    checkpoints (see :func:`build_zoo_world`). Each model is loaded from its saved folder (``sigmap_lib.nll.load_model``,
    CPU, float32) and scored with :func:`score_benchmarks`. Results are cached
    in the model folder (``zoo_eval.npz``) under a key of the model key and the items.

    Parameters
    ----------
    workers, threads : int, optional
        Parallel processes and torch threads each (defaults as in
        :func:`train_zoo_models`).
    pool : Executor, optional
        A started :func:`worker_pool` to score on (default: a new one when needed).

    Returns
    -------
    dict[str, np.ndarray]
        Benchmark name -> int8 ``(n_models, n_items)``, models in ``models`` order.
    """
    progress = progress or no_progress
    cpu = os.cpu_count() or 1
    workers = max(1, workers or default_workers())
    threads = threads or max(1, cpu // workers)
    items_key = sha_of(
        [
            ZOO_VERSION,
            EVAL_VERSION,
            [(b.name, b.metric, [dataclasses.asdict(i) for i in b.items]) for b in benchmarks],
        ]
    )
    got: dict[str, dict[str, np.ndarray]] = {}
    jobs = []
    for name, meta in models.items():
        key = sha_of([meta["key"], items_key])
        cached = _cached_eval(meta["path"], benchmarks, key)
        if cached is not None:
            got[name] = cached
        else:
            jobs.append(
                (name, (meta["path"], list(benchmarks), key, threads, batch_size, items_key))
            )
    progress("evaluate", len(got), len(models), f"{len(got)} cached, scoring {len(jobs)} models")

    def _done(name: str, res: dict[str, np.ndarray]) -> None:
        got[name] = res
        mean = np.mean([r.mean() for r in res.values()])
        progress("evaluate", len(got), len(models), f"{name}: mean item score {mean:.3f}")

    run_jobs(_evaluate_one, jobs, workers, _done, pool=pool)
    return {b.name: np.stack([got[n][b.name] for n in models]).astype(np.int8) for b in benchmarks}


# ----------------------------------------------------------------------- world


def write_world(
    root: str | Path,
    texts: ZooTexts,
    benchmarks: Sequence[ZooBenchmark],
    models: dict[str, dict[str, Any]],
    specs: Sequence[ZooModelSpec],
    responses: dict[str, np.ndarray],
    *,
    members: Sequence[dict[str, Any]] | None = None,
    extra_truth: dict[str, Any] | None = None,
    checkpoints: Sequence[dict[str, Any]] = (),
    checkpoint_responses: dict[str, np.ndarray] | None = None,
    settings: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Write the world folder (``docs/FORMATS.md``): corpus, models.yaml, catalog.yaml,
    scores.csv, items/, responses/, truth.json, settings.yaml. Returns the models.yaml
    entries.

    ``members`` are the registry models (:func:`registry_members`; default: every run's
    final model only), in the row order of ``responses`` (benchmark -> int8
    ``(n_members, n_items)``).

    ``checkpoints`` (dicts with ``id``, ``model`` (model id), ``name``, ``step``,
    ``steps``, ``tokens_seen``) are extra respondents: their rows
    (``checkpoint_responses``, benchmark -> int8 ``(n_checkpoints, n_items)``, same
    order) follow the models' rows in ``responses/<b>.parquet`` and they are listed in
    ``truth.json``; they are not in ``models.yaml`` or ``scores.csv``. ``settings`` is
    written to ``settings.yaml`` when given."""
    import yaml

    root = Path(root)
    if members is None:
        members = registry_members(specs, models, early=False)
    domain_of, source_of = _write_corpus(root, texts)
    entries = _registry_entries(members, models)
    _write_world_text(root / "models.yaml", yaml.safe_dump({"models": entries}, sort_keys=False))
    _write_world_text(
        root / "catalog.yaml",
        yaml.safe_dump({"benchmarks": _catalog(benchmarks)}, sort_keys=False),
    )
    _write_benchmark_tables(
        root,
        benchmarks,
        [mb["id"] for mb in members],
        responses,
        [c["id"] for c in checkpoints],
        checkpoint_responses or {},
    )
    truth = {
        "world": "zoo",
        "seed": texts.seed,
        "domains": list(DOMAINS),
        "corpus_domains": domain_of,
        "corpus_sources": source_of,
        "corpus_stats": _corpus_stats(texts),
        "text_stats": texts.stats,
        "models": _models_truth(members, models),
        "benchmarks": _benchmarks_truth(benchmarks),
        "checkpoints": _checkpoints_truth(checkpoints),
        "records_population": len(texts.facts),
        **(extra_truth or {}),
    }
    _write_world_text(root / "truth.json", json.dumps(truth, indent=1))
    if settings is not None:
        _write_world_text(root / "settings.yaml", yaml.safe_dump(settings, sort_keys=False))
    return entries


def _write_corpus(root: Path, texts: ZooTexts) -> tuple[dict[str, str], dict[str, str]]:
    """Write ``corpus/zoo.jsonl``: every corpus-split document, shuffled, with neutral
    ids (``doc-00000``, ...); the domain and source of each are returned for the truth.

    Returns
    -------
    domain_of, source_of : dict[str, str]
        Document id -> domain / source.
    """
    docs = [d for dom in DOMAINS for d in texts.docs["corpus"][dom]]
    perm = np.random.default_rng([texts.seed, 9]).permutation(len(docs))
    lines: list[str] = []
    domain_of: dict[str, str] = {}
    source_of: dict[str, str] = {}
    for j, i in enumerate(perm):
        d = docs[int(i)]
        did = f"doc-{j:05d}"
        lines.append(json.dumps({"id": did, "text": d.text}, ensure_ascii=False))
        domain_of[did] = d.domain
        source_of[did] = d.source
    _write_world_text(root / "corpus" / "zoo.jsonl", "\n".join(lines) + "\n")
    return domain_of, source_of


def _registry_entries(
    members: Sequence[dict[str, Any]], models: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The ``models.yaml`` entries of the registry members (paths relative to the world)."""
    return [
        {
            "id": mb["id"],
            "path": mb["rel_path"],
            "family": mb["spec"].arch,
            "n_params": int(models[mb["spec"].name]["n_params"]),
            "dtype": "float32",
        }
        for mb in members
    ]


def _recipe(b: ZooBenchmark) -> dict[str, str]:
    """The recipe of a benchmark, as its catalog entry and its truth both begin."""
    return {"family": b.family, "format": b.format, "function": b.function}


def _catalog(benchmarks: Sequence[ZooBenchmark]) -> dict[str, dict[str, Any]]:
    """The ``catalog.yaml`` entry of every benchmark."""
    return {
        b.name: {
            **_recipe(b),
            "score_range": [0, 1],
            "items": f"items/{b.name}.parquet",
            "responses": f"responses/{b.name}.parquet",
            "description": f"{b.family} recipe on held-out {b.domain} text, metric {b.metric}"
            + (f" (>= {b.threshold} nats/byte)" if b.threshold is not None else "")
            + f", {len(b.items)} items",
        }
        for b in benchmarks
    }


def _checked(r: np.ndarray | None, rows: int, b: ZooBenchmark, what: str) -> np.ndarray:
    """``r`` when it has shape ``(rows, n_items of b)``, else a :class:`SigmapInputError`."""
    if r is None or r.shape != (rows, len(b.items)):
        raise SigmapInputError(
            f"zoo world: {what} of {b.name} have shape {None if r is None else r.shape}, "
            f"expected ({rows}, {len(b.items)})"
        )
    return r


def _write_benchmark_tables(
    root: Path,
    benchmarks: Sequence[ZooBenchmark],
    model_ids: Sequence[str],
    responses: dict[str, np.ndarray],
    ckpt_ids: Sequence[str],
    checkpoint_responses: dict[str, np.ndarray],
) -> None:
    """Write ``items/<b>.parquet``, ``responses/<b>.parquet`` (registry models' rows,
    then the checkpoints') and ``scores.csv`` (registry models' mean item responses)."""
    import polars as pl

    score_cols: dict[str, Any] = {"model": list(model_ids)}
    for b in benchmarks:
        r = _checked(responses.get(b.name), len(model_ids), b, "responses")
        score_cols[b.name] = r.mean(axis=1).astype(float)
        if ckpt_ids:
            rc = _checked(
                checkpoint_responses.get(b.name), len(ckpt_ids), b, "checkpoint responses"
            )
            r = np.concatenate([r, rc], axis=0)
        _write_parquet(_items_frame(b), root / "items" / f"{b.name}.parquet")
        resp = pl.DataFrame(
            {
                "model": [*model_ids, *ckpt_ids],
                **{it.item_id: r[:, j] for j, it in enumerate(b.items)},
            },
            schema={"model": pl.String, **{it.item_id: pl.Int8 for it in b.items}},
        )
        _write_parquet(resp, root / "responses" / f"{b.name}.parquet")
    with atomic_file(root / "scores.csv", keep_unchanged=True) as tmp:
        pl.DataFrame(score_cols).write_csv(tmp)


def _items_frame(b: ZooBenchmark) -> Any:
    """The items table of one benchmark (``item_id``, ``text``, ``context``, ``choices``,
    ``gold``), a polars DataFrame."""
    import polars as pl

    return pl.DataFrame(
        {
            "item_id": [i.item_id for i in b.items],
            "text": [i.text for i in b.items],
            "context": [i.context for i in b.items],
            "choices": [i.choices for i in b.items],
            "gold": [i.gold for i in b.items],
        },
        schema={
            "item_id": pl.String,
            "text": pl.String,
            "context": pl.String,
            "choices": pl.List(pl.String),
            "gold": pl.Int64,
        },
    )


def _corpus_stats(texts: ZooTexts) -> dict[str, dict[str, int]]:
    """Per domain: corpus documents, characters and units of the default segmentation
    (:func:`sigmap_lib.inputs.segment_units`)."""
    from sigmap_lib.inputs import segment_units

    return {
        d: {
            "docs": len(texts.docs["corpus"][d]),
            "chars": sum(len(x.text) for x in texts.docs["corpus"][d]),
            "units": int(sum(len(segment_units(x.text)) for x in texts.docs["corpus"][d])),
        }
        for d in DOMAINS
    }


def _models_truth(
    members: Sequence[dict[str, Any]], models: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``truth.json``'s ``models``: per registry model its run's recipe and its budget
    (``steps`` of the weights, ``fraction`` of the run, ``tokens_seen``)."""
    out: dict[str, dict[str, Any]] = {}
    for mb in members:
        s, run = mb["spec"], models[mb["spec"].name]
        out[mb["id"]] = {
            "name": s.name,
            "arch": s.arch,
            "tokenizer": "-".join(map(str, TOKENIZERS[s.arch])),
            "size": s.size,
            "d_model": SIZES[s.size][0],
            "n_layer": SIZES[s.size][1],
            "n_head": SIZES[s.size][2],
            "n_params": int(run["n_params"]),
            "mixture_name": s.mixture,
            "mixture": MIXTURES[s.mixture],
            "mixture_chars": run.get("mixture_chars"),
            "steps": mb["step"],
            "run_steps": s.steps,
            "fraction": mb["step"] / s.steps,
            "tokens_seen": mb["step"] * s.batch_size * s.seq_len,
            # the run's last logged training loss (of the final weights)
            "final_loss": run["train"]["final_loss"] if mb["final"] else None,
        }
    return out


def _benchmarks_truth(benchmarks: Sequence[ZooBenchmark]) -> dict[str, dict[str, Any]]:
    """``truth.json``'s ``benchmarks``: recipe, domain, metric and chance level of each."""
    return {
        b.name: {
            **_recipe(b),
            "domain": b.domain,
            "metric": b.metric,
            "n_items": len(b.items),
            "threshold_nats_per_byte": b.threshold,
            "chance": (
                None if b.metric in ("greedy", "ll_threshold") else 1.0 / len(b.items[0].choices)
            ),
        }
        for b in benchmarks
    }


def _checkpoints_truth(checkpoints: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``truth.json``'s ``checkpoints``: the run and budget of each extra respondent."""
    return {
        c["id"]: {
            "model": c["model"],
            "name": c["name"],
            "step": c["step"],
            "fraction": c["step"] / c["steps"],
            "tokens_seen": c["tokens_seen"],
        }
        for c in checkpoints
    }


def registry_members(
    specs: Sequence[ZooModelSpec], models: dict[str, dict[str, Any]], *, early: bool = True
) -> list[dict[str, Any]]:
    """The registry models of the trained runs, in registry order: per run its final
    weights, then (``early``) its weights after each step of ``spec.early``.

    Parameters
    ----------
    specs
        The runs.
    models
        :func:`train_zoo_models`'s result (``key``, ``path``, ``checkpoints`` per run).
    early
        Whether the early weights are members.

    Returns
    -------
    list[dict]
        ``id``, ``spec``, ``step`` (``spec.steps`` for the final weights), ``final``,
        ``key`` (the cache key of the weights), ``path`` (absolute folder) and
        ``rel_path`` (relative to the world folder).

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import model_specs
    >>> from sigmap_lib.worlds.zoo._world import registry_members
    >>> spec = model_specs(2, quick=True)[0]
    >>> spec.steps, spec.early
    (200, (10, 30, 80))
    >>> ckpts = {s: {"key": f"k{s}", "path": f"/w/c/step{s}"} for s in spec.early}
    >>> runs = {spec.name: {"key": "k", "path": "/w/models/gpt2-code-s", "checkpoints": ckpts}}
    >>> [(m["id"], m["step"]) for m in registry_members([spec], runs)]
    [('zoo/gpt2-code-s', 200), ('zoo/gpt2-code-s-step10', 10), ('zoo/gpt2-code-s-step30', 30), ('zoo/gpt2-code-s-step80', 80)]
    """
    out: list[dict[str, Any]] = []
    for s in specs:
        m = models[s.name]
        out.append(
            {
                "id": s.model_id,
                "spec": s,
                "step": s.steps,
                "final": True,
                "key": m["key"],
                "path": m["path"],
                "rel_path": f"models/{s.name}",
            }
        )
        for e in s.early if early else ():
            c = m["checkpoints"][e]
            out.append(
                {
                    "id": s.early_id(e),
                    "spec": s,
                    "step": e,
                    "final": False,
                    "key": c["key"],
                    "path": c["path"],
                    "rel_path": f"models/{s.name}/checkpoints/step{e}",
                }
            )
    return out


def metabench_settings(n_items: int) -> dict[str, Any]:
    """Recommended metabench settings for a zoo world (``settings.yaml``).

    The zoo has 72 respondents (32 registry models + 40 checkpoints) and 100 items per
    benchmark, far fewer than metabench's defaults assume (thousands of models, hundreds
    of items). The binding constraint is the joint fit: >= 50 training models after
    every benchmark's outliers (its lowest scorers, ties included) are dropped, so the
    test split is kept at 10 % (~7 models); a 6-df GAM needs only 24 training points, a
    40-point θ grid (at most the item count) suits ~100 items, 100 pool subsets suffice
    (benchmarks have fewer items than the pool size, so none are drawn), items need
    sd > 0.2 (>= ~5 % correct or wrong: with the default 0.01 an item answered right by
    one or two models can have no variance among the training models of the refit,
    which the IRT fit rejects), and the per-item penalty is scaled up as for the
    synthetic world (λ = 0.005 would keep almost every item of a short benchmark). The
    selection searches the IRT model and θ method that cross-validated best on the pool
    (``top_k`` 1) at 3 information thresholds on both grid types: 6 candidate item sets
    per benchmark instead of 20.
    """
    return {
        "metabench": {
            "top_k": 1,
            "n_tau": 3,
            "lam": 0.05,
            "n_quant": min(40, n_items),
            "gam_df": 6,
            "test_frac": 0.1,
            "n_subsets": 100,
            "sd_min": 0.2,
        }
    }


#: Questions per benchmark the semantic level embeds on a zoo world (of 100): the
#: level compares mean question embeddings, and embedding all 1,600 of the zoo's
#: questions was the demo's costliest step after the zoo itself (~75 CPU-s).
ZOO_SEMANTIC_QUESTIONS = 50


def zoo_settings(n_items: int) -> dict[str, Any]:
    """The zoo world's ``settings.yaml``: :func:`metabench_settings`, the semantic level's
    question sample (:data:`ZOO_SEMANTIC_QUESTIONS`) and the signature test's strata: the
    registry family (the architecture, each with its own tokenizer), because a unit's
    perplexity depends on how the tokenizer splits it, so the two families differ on
    whole classes of units (code's indentation, numbers) whatever the skills.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo._world import zoo_settings
    >>> sorted(zoo_settings(100)), zoo_settings(100)["semantic"], zoo_settings(100)["signatures"]
    (['metabench', 'semantic', 'signatures'], {'max_questions': 50}, {'strata': 'family'})
    """
    return metabench_settings(n_items) | {
        "semantic": {"max_questions": ZOO_SEMANTIC_QUESTIONS},
        "signatures": {"strata": "family"},
    }


def build_zoo_world(
    out_dir: str | Path,
    *,
    n_models: int = 8,
    seed: int = 0,
    progress: Progress | None = None,
    quick: bool = False,
    workers: int | None = None,
    n_items: int | None = None,
    n_checkpoints: int | None = None,
) -> ZooWorld:
    """Build (or refresh from cache) the whole zoo world in ``out_dir``.

    Parameters
    ----------
    out_dir : path
        The world folder (created). Models live in ``out_dir/models/<name>`` and are
        reused across calls when their spec, tokenizer and training text are unchanged.
    n_models : int
        How many of the roster's training runs (2..8; quick: 2..3); each gives its final
        model and its three early models (:class:`ZooModelSpec`), 32 registry models in
        all (quick: 12).
    seed : int
        Seeds text selection, generation, splits, items and model initialisation.
    progress : callable, optional
        ``progress(stage, done, total, message)``; stages ``texts``, ``tokenizers``,
        ``train_models``, ``benchmarks``, ``evaluate``, ``write``.
    quick : bool
        A small world (3 small runs of 160-200 steps, 12 registry models, 24 items per
        benchmark) for tests.
    workers : int, optional
        Parallel processes for training and scoring (default :func:`default_workers`).
    n_items : int, optional
        Items per benchmark (default 100; quick 24).
    n_checkpoints : int, optional
        Intermediate checkpoints per run besides its early registry models (default 5,
        after 1/6, 2/6, ... of the steps, none of them an early model's, so the 8 runs
        give 32 registry models + 40 checkpoints = 72 respondents: metabench's joint fit
        needs >= 50 training models once the common test set (10 %) and each
        benchmark's outliers are set aside; quick: 19, every 5 %, one of them each early
        model's, so the 3 runs give 12 + 48 = 60). Each answers every item like the
        registry models; their rows follow the registry models' rows in
        ``responses/<b>.parquet`` as ``zoo/<name>@step<s>``, and
        ``truth.json`` lists them. They are not registry models (not in ``models.yaml`` /
        ``scores.csv``). 0 disables them.

    Returns
    -------
    ZooWorld

    Examples
    --------
    The smallest world: 2 quick runs (8 registry models), 4 items per benchmark, no other
    checkpoints. Training the two runs takes about 40 s of CPU, so the build itself is not
    run as a doctest:

    >>> from sigmap_lib.worlds.zoo import build_zoo_world, model_specs
    >>> kw = dict(n_models=2, quick=True, n_items=4, n_checkpoints=0)
    >>> [s.name for s in model_specs(kw["n_models"], quick=True)]  # the runs it trains
    ['gpt2-code-s', 'llama-prose-xs']
    >>> world = build_zoo_world("zoo", **kw)  # doctest: +SKIP
    >>> [m["id"] for m in world.models][:4], world.scores.shape  # doctest: +SKIP
    (['zoo/gpt2-code-s', 'zoo/gpt2-code-s-step10', 'zoo/gpt2-code-s-step30', 'zoo/gpt2-code-s-step80'], (8, 16))
    >>> world.responses["nextline_code"].shape, world.trained  # doctest: +SKIP
    ((8, 4), ['gpt2-code-s', 'llama-prose-xs'])
    >>> sorted(p.name for p in world.root.iterdir())  # doctest: +SKIP
    ['catalog.yaml', 'corpus', 'items', 'models', 'models.yaml', 'responses', 'scores.csv',
     'settings.yaml', 'tokenizers', 'truth.json']

    A second call finds the trained models in ``zoo/models`` and reuses them (~2 s):

    >>> build_zoo_world("zoo", **kw).reused  # doctest: +SKIP
    ['gpt2-code-s', 'llama-prose-xs']
    """
    progress = progress or no_progress
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    if quick and n_models > len(QUICK_MODELS):
        n_models = len(QUICK_MODELS)
    timings: dict[str, float] = {}

    specs = model_specs(n_models, quick=quick, seed=seed)
    workers = max(1, workers or default_workers())
    # a build that will train starts its workers now: their imports overlap the texts
    untrained = any(not (root / "models" / s.name / "zoo_spec.json").exists() for s in specs)
    with worker_pool(workers) if untrained else contextlib.nullcontext() as pool:
        t = time.perf_counter()
        progress("texts", 0, 1, "collecting and generating text")
        texts = build_texts(seed=seed, quick=quick)
        timings["texts"] = time.perf_counter() - t
        progress(
            "texts", 1, 1, f"{sum(len(v) for v in texts.docs['corpus'].values())} corpus documents"
        )

        t = time.perf_counter()
        progress("tokenizers", 0, 1, "training tokenizers")
        toks = train_tokenizers(
            texts, root / "tokenizers", chars_per_domain=60_000 if quick else 300_000
        )
        timings["tokenizers"] = time.perf_counter() - t
        progress("tokenizers", 1, 1, ", ".join(p.name for p in toks.values()))

        t = time.perf_counter()
        progress("benchmarks", 0, 1, "building benchmark items")
        benchmarks = build_zoo_benchmarks(
            texts, n_items=n_items or (24 if quick else 100), seed=seed
        )
        timings["benchmarks"] = time.perf_counter() - t
        progress("benchmarks", 1, 1, f"{len(benchmarks)} benchmarks")

        if n_checkpoints is None:
            n_checkpoints = 19 if quick else 5
        t = time.perf_counter()
        models = train_zoo_models(
            texts,
            toks,
            specs,
            root / "models",
            workers=workers,
            progress=progress,
            n_checkpoints=n_checkpoints,
            pool=pool,
        )
        timings["train_models"] = time.perf_counter() - t
        members = registry_members(specs, models)
        checkpoints = [
            {
                "id": checkpoint_id(s, step),
                "model": s.model_id,
                "name": s.name,
                "step": step,
                "steps": s.steps,
                "tokens_seen": step * s.batch_size * s.seq_len,
                **models[s.name]["checkpoints"][step],
            }
            for s in specs
            for step in sorted(models[s.name]["checkpoints"])
            if step not in s.early
        ]

        t = time.perf_counter()
        respondents = {**{mb["id"]: mb for mb in members}, **{c["id"]: c for c in checkpoints}}
        both = evaluate_zoo_benchmarks(
            benchmarks, respondents, workers=workers, progress=progress, pool=pool
        )
        n = len(members)
        responses = {b: r[:n] for b, r in both.items()}
        ckpt_responses = {b: r[n:] for b, r in both.items()}
        timings["evaluate"] = time.perf_counter() - t

    t = time.perf_counter()
    progress("write", 0, 1, f"writing {root}")
    settings = zoo_settings(min(len(b.items) for b in benchmarks))
    entries = write_world(
        root,
        texts,
        benchmarks,
        models,
        specs,
        responses,
        members=members,
        checkpoints=checkpoints,
        checkpoint_responses=ckpt_responses,
        settings=settings,
    )
    timings["write"] = time.perf_counter() - t
    progress("write", 1, 1, "done")

    for e, mb in zip(entries, members):
        s = mb["spec"]
        e["path"] = str((root / e["path"]).resolve())
        e.update(run=s.name, mixture=s.mixture, steps=s.steps, step=mb["step"])
        e.update(size=s.size, tokenizer=s.arch)
    names = [b.name for b in benchmarks]
    scores = np.stack([responses[b].mean(axis=1) for b in names], axis=1)
    return ZooWorld(
        root=root,
        models=entries,
        benchmarks=names,
        scores=scores,
        responses=responses,
        timings=timings,
        trained=[n for n, m in models.items() if not m["reused"]],
        reused=[n for n, m in models.items() if m["reused"]],
        checkpoints=checkpoints,
        checkpoint_responses=ckpt_responses,
        settings=settings,
    )

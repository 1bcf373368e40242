"""The zoo's models: specifications, tokenizers and (cached) training of tiny real transformers."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib._util._atomic import atomic_dir, atomic_write_text
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo._text import DOMAINS, ZooTexts, build_zoo_texts

#: Bump to invalidate every cached model / evaluation (recipe changes).
ZOO_VERSION = 3

#: Progress callback: ``progress(stage, done, total, message)``.
Progress = Callable[[str, int, int, str], None]

#: Training-token shares per domain (code, prose, arithmetic, recall, records) of the
#: quick zoo's runs: each leans towards one domain (0.36) and sees every domain (0.16
#: each), so the runs differ in skills while every run learns every benchmark's format (a
#: domain left out of training pins a benchmark at chance for that run, which no budget
#: changes). The full zoo's mixtures (:data:`LEAN_LETTERS`) are added below.
MIXTURES: dict[str, dict[str, float]] = {
    name: {d: (0.36 if d == lean else 0.16) for d in DOMAINS}
    for name, lean in (
        ("code", "code"),
        ("prose", "prose"),
        ("arith", "arithmetic"),
        ("recall", "recall"),
        ("records", "records"),
    )
} | {"balanced": dict.fromkeys(DOMAINS, 0.2)}

#: The letter of each domain in the full zoo's mixture names (``k``: records, the
#: knowledge domain).
LEAN_LETTERS: dict[str, str] = {
    "c": "code",
    "p": "prose",
    "a": "arithmetic",
    "r": "recall",
    "k": "records",
}

#: How much more of a leaned-on domain a full-zoo run sees than of the others.
LEAN_WEIGHT = 3.0


def lean_mixture(leans: str) -> dict[str, float]:
    """Training shares of a full-zoo run leaning on the domains whose letters
    (:data:`LEAN_LETTERS`) are in ``leans``: weight :data:`LEAN_WEIGHT` for those, 1 for
    the others, normalized.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo._models import lean_mixture
    >>> {d: round(v, 3) for d, v in lean_mixture("ar").items()}
    {'code': 0.111, 'prose': 0.111, 'arithmetic': 0.333, 'recall': 0.333, 'records': 0.111}
    """
    unknown = set(leans) - set(LEAN_LETTERS)
    if unknown:
        raise SigmapInputError(f"zoo world: unknown lean letters {sorted(unknown)} in {leans!r}")
    leaned = {LEAN_LETTERS[x] for x in leans}
    w = {d: (LEAN_WEIGHT if d in leaned else 1.0) for d in DOMAINS}
    return {d: v / sum(w.values()) for d, v in w.items()}


#: Sizes per architecture: (d_model, n_layer, n_head).
SIZES: dict[str, tuple[int, int, int]] = {
    "xs": (48, 2, 2),
    "s": (64, 2, 2),
    "m": (96, 3, 4),
    "l": (144, 4, 4),
}

#: Tokenizer of each architecture: (style, vocab size).
TOKENIZERS: dict[str, tuple[str, int]] = {"gpt2": ("byte_level", 512), "llama": ("metaspace", 1024)}


#: Registry models per training run besides its final weights: the weights after these
#: twentieths of its steps (5 %, 15 % and 40 %), so each run gives a budget ladder of
#: four models, from barely trained to fully trained. They lie on the grid of
#: :func:`checkpoint_steps` with 19 checkpoints (every 5 %, the quick zoo's); the full
#: zoo adds them to a grid of 15.
EARLY_TWENTIETHS: tuple[int, ...] = (1, 3, 8)


#: Config fields of the zoo's models beyond the sizes, per architecture. GPT-2's GELU is
#: the same tanh approximation as its default ``gelu_new``, computed by one torch kernel
#: instead of a chain of Python-level tensor operations (measured: a quarter of a small
#: model's training step and of its benchmark evaluation).
_ARCH_CONFIG: dict[str, dict[str, Any]] = {"gpt2": {"activation_function": "gelu_pytorch_tanh"}}


@dataclass(frozen=True)
class ZooModelSpec:
    """Recipe of one zoo training run.

    The run's final weights are the registry model ``zoo/<name>``; the weights after each
    step of ``early`` are registry models too (``zoo/<name>-step<s>``): the same
    architecture, data and tokenizer with a fraction of the training, so the zoo's models
    differ by training budget (a general-quality axis) as well as by size and data mix.

    Attributes
    ----------
    name : str
        ``<arch>-<mixture>-<size>``; the final model's id is ``zoo/<name>``.
    arch : str
        ``gpt2`` or ``llama``.
    mixture : str
        Key of :data:`MIXTURES`.
    size : str
        Key of :data:`SIZES`.
    steps : int
        Optimiser steps (``batch_size * seq_len`` tokens each).
    early : tuple[int, ...]
        Steps (``0 < s < steps``) whose weights are also registry models.
    """

    name: str
    arch: str
    mixture: str
    size: str
    steps: int
    batch_size: int = 8
    seq_len: int = 128
    lr: float = 3e-3
    seed: int = 0
    early: tuple[int, ...] = ()

    @property
    def model_id(self) -> str:
        """Raw id of the final model, used in ``models.yaml`` and ``scores.csv``."""
        return f"zoo/{self.name}"

    def early_id(self, step: int) -> str:
        """Raw id of the registry model holding the weights after ``step`` steps."""
        return f"zoo/{self.name}-step{step}"

    def training(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~sigmap_lib.worlds.train_causal_lm` this run
        trains with (``steps``, ``batch_size``, ``seq_len``, ``lr``, ``seed``)."""
        return {k: getattr(self, k) for k in ("steps", "batch_size", "seq_len", "lr", "seed")}


def _spec(arch: str, mixture: str, size: str, steps: int, seed: int) -> ZooModelSpec:
    early = tuple(round(steps * k / 20) for k in EARLY_TWENTIETHS)
    return ZooModelSpec(
        f"{arch}-{mixture}-{size}", arch, mixture, size, steps, seed=seed, early=early
    )


#: The full zoo: 8 training runs (arch, mixture, size, steps), a 2^(7-4) fractional
#: factorial design over seven two-level factors: a lean towards each of the five domains
#: (code c, prose p, arithmetic a, recall r, records k; the mixture's name lists the
#: domains leaned on, :func:`lean_mixture`), the architecture with its tokenizer, and the
#: training budget (400 or 800 steps). Each factor is balanced (4 runs each way) and
#: orthogonal to every other, so each domain's skill varies across runs independently of
#: the other domains', the architecture and the budget: what the signature test needs to
#: tell the skills apart. Each run gives 4 registry models (its weights after 5, 15, 40
#: and 100 % of its steps): 32 registry models that differ first by training budget
#: (general quality), then by data mix (skills) and architecture / tokenizer.
ZOO_MODELS: tuple[tuple[str, str, str, int], ...] = (
    ("llama", "rk", "s", 400),
    ("gpt2", "ar", "s", 800),
    ("gpt2", "pk", "s", 800),
    ("llama", "pa", "s", 400),
    ("llama", "c", "s", 800),
    ("gpt2", "cak", "s", 400),
    ("gpt2", "cpr", "s", 400),
    ("llama", "cpark", "s", 800),
)

MIXTURES |= {mix: lean_mixture(mix) for _, mix, _, _ in ZOO_MODELS}

#: The quick zoo (tests): three small runs of few steps, each with the same budget ladder.
QUICK_MODELS: tuple[tuple[str, str, str, int], ...] = (
    ("gpt2", "code", "s", 200),
    ("llama", "prose", "xs", 160),
    ("gpt2", "arith", "xs", 160),
)


def model_specs(n_models: int = 8, *, quick: bool = False, seed: int = 0) -> list[ZooModelSpec]:
    """The zoo roster: the first ``n_models`` training runs of :data:`ZOO_MODELS` (or the
    quick zoo).

    Runs alternate architectures when ``n_models`` is smaller than the roster, so a
    small zoo still has both. ``n_models`` above the roster length is an error. Each run
    gives ``1 + len(spec.early)`` registry models.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import model_specs
    >>> [s.name for s in model_specs(4)]
    ['gpt2-ar-s', 'llama-rk-s', 'gpt2-pk-s', 'llama-pa-s']
    >>> spec = model_specs(2, quick=True)[1]
    >>> spec.model_id, spec.steps, spec.batch_size * spec.seq_len  # tokens per step
    ('zoo/llama-prose-xs', 160, 1024)
    >>> spec.early, spec.early_id(24)  # the weights after 8, 24 and 64 steps are models too
    ((8, 24, 64), 'zoo/llama-prose-xs-step24')
    """
    roster = QUICK_MODELS if quick else ZOO_MODELS
    if not 2 <= n_models <= len(roster):
        raise SigmapInputError(
            f"zoo world: n_models={n_models} must be between 2 and {len(roster)} "
            f"({'quick' if quick else 'full'} roster)"
        )
    gpt = [r for r in roster if r[0] == "gpt2"]
    lla = [r for r in roster if r[0] == "llama"]
    picked: list[tuple[str, str, str, int]] = []
    for i in range(max(len(gpt), len(lla))):
        picked.extend(x[i] for x in (gpt, lla) if i < len(x))
    return [_spec(*r, seed=seed) for r in picked[:n_models]]


# ------------------------------------------------------------------- utilities


def no_progress(stage: str, done: int, total: int, message: str) -> None:
    return None


def sha_of(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def default_workers() -> int:
    """Parallel worker processes for training / scoring: one per core, at most 4.

    Each worker runs torch with ``cpu_count // workers`` threads (1 on a 2-core laptop):
    several single-threaded processes keep the cores busy without the thread-pool
    spin-waits that make multi-threaded torch crawl on a loaded machine (measured
    here: 2 threads at load 12 trained 20x slower than 1).
    """
    return max(1, min(4, os.cpu_count() or 1))


def _warm_up() -> None:
    """A worker's imports before its first job: torch, transformers' two model classes and
    the zoo's training and loading code (several seconds of a fresh process)."""
    import torch  # noqa: F401
    from transformers import GPT2LMHeadModel, LlamaForCausalLM  # noqa: F401

    from sigmap_lib.nll import load_model  # noqa: F401
    from sigmap_lib.worlds._tiny import train_causal_lm  # noqa: F401


def _ready() -> None:
    return None


@contextmanager
def worker_pool(workers: int) -> Iterator[Executor | None]:
    """A spawn-context pool of ``workers`` processes for :func:`run_jobs`, started at once:
    each worker does its imports (:func:`_warm_up`) while the caller prepares the jobs.
    None when ``workers <= 1`` (the jobs run in this process). A script using it at import
    time needs an ``if __name__ == "__main__"`` guard, as always with spawn."""
    if workers <= 1:
        yield None
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_warm_up) as ex:
        for _ in range(workers):  # one submission starts one more worker
            ex.submit(_ready)
        yield ex


def run_jobs(
    fn: Callable[..., Any],
    jobs: Sequence[tuple[Any, tuple[Any, ...]]],
    workers: int,
    on_done: Callable[[Any, Any], None],
    *,
    pool: Executor | None = None,
) -> None:
    """Run ``fn(*args)`` for every ``(tag, args)``; ``on_done(tag, result)`` as each ends.

    On ``pool`` (:func:`worker_pool`) when given; else in this process when
    ``workers == 1`` (or one job), else in a new :func:`worker_pool`.
    """
    if pool is None and (workers <= 1 or len(jobs) <= 1):
        for tag, args in jobs:
            on_done(tag, fn(*args))
        return
    from concurrent.futures import as_completed

    with contextlib.nullcontext(pool) if pool is not None else worker_pool(workers) as ex:
        assert ex is not None
        futs = {ex.submit(fn, *args): tag for tag, args in jobs}
        for fut in as_completed(futs):
            on_done(futs[fut], fut.result())


# ---------------------------------------------------------------------- stages


def build_texts(*, seed: int = 0, quick: bool = False) -> ZooTexts:
    """Stage 1: the zoo text, split by document (see :class:`ZooTexts`).

    The full world's corpus holds 440 documents (code 125, prose 125, arithmetic 75,
    recall 65, records 50; ~46k units, ~190k characters); ``quick`` one about half the
    size.
    Code and prose come from the running interpreter's standard library and installed
    packages (so their texts differ between machines); arithmetic, recall and records
    are generated from ``seed``.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import build_texts
    >>> texts = build_texts(quick=True)  # about a second
    >>> list(texts.docs)  # the splits
    ['train', 'corpus', 'bench']
    >>> {domain: len(docs) for domain, docs in texts.docs["corpus"].items()}
    {'code': 60, 'prose': 60, 'arithmetic': 30, 'recall': 25, 'records': 25}
    >>> texts.texts("corpus", "arithmetic")[0].splitlines()[0]  # generated: same everywhere
    '168 - 83 = 85'
    >>> texts.texts("corpus", "recall")[0].splitlines()[0]
    'copy: kin nar ker ga | kin nar ker ga'
    """
    if quick:
        return build_zoo_texts(
            seed=seed,
            n_corpus={"code": 60, "prose": 60, "arithmetic": 30, "recall": 25, "records": 25},
            n_bench=dict.fromkeys(DOMAINS, 40),
            train_chars=100_000,
        )
    return build_zoo_texts(
        seed=seed,
        n_corpus={"code": 125, "prose": 125, "arithmetic": 75, "recall": 65, "records": 50},
        n_bench=dict.fromkeys(DOMAINS, 250),
        train_chars=1_500_000,
    )


def train_tokenizers(
    texts: ZooTexts, out_dir: str | Path, *, chars_per_domain: int = 300_000
) -> dict[str, Path]:
    """Stage 2: train (or reuse) one tokenizer per architecture, saved under ``out_dir``.

    Trained on the first ``chars_per_domain`` characters of each domain's training text.
    A tokenizer folder is reused when its recorded spec hash matches.

    Returns
    -------
    dict[str, Path]
        ``{"gpt2": <dir>, "llama": <dir>}``.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import build_texts, train_tokenizers
    >>> texts = build_texts(quick=True)
    >>> toks = train_tokenizers(texts, "tokenizers", chars_per_domain=5000)
    >>> {arch: folder.name for arch, folder in toks.items()}  # <arch>-<style>-<vocab>
    {'gpt2': 'gpt2-byte_level-512', 'llama': 'llama-metaspace-1024'}
    >>> sorted(p.name for p in toks["gpt2"].iterdir())
    ['tokenizer.json', 'tokenizer_config.json', 'zoo_spec.json']
    """
    from sigmap_lib.worlds._tiny import train_bpe_tokenizer

    sample: list[str] = []
    for d in DOMAINS:
        size = 0
        for t in texts.texts("train", d):
            if size >= chars_per_domain:
                break
            sample.append(t)
            size += len(t)
    key = sha_of([ZOO_VERSION, sorted(TOKENIZERS.items()), sha_of(sample)])
    out: dict[str, Path] = {}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for arch, (style, vocab) in TOKENIZERS.items():
        folder = Path(out_dir) / f"{arch}-{style}-{vocab}"
        meta = _read_json(folder / "zoo_spec.json")
        if meta is None or meta.get("key") != key or not (folder / "tokenizer.json").exists():
            with atomic_dir(folder) as tmp:
                train_bpe_tokenizer(sample, tmp, vocab_size=vocab, min_frequency=2, style=style)  # type: ignore[arg-type]
                (tmp / "zoo_spec.json").write_text(json.dumps({"key": key}), encoding="utf-8")
        out[arch] = folder
    return out


def _training_texts(
    texts: ZooTexts, spec: ZooModelSpec, *, chars_per_token: float = 2.6
) -> tuple[list[str], dict[str, int]]:
    """Documents drawn per the spec's mixture: enough characters for every step.

    Each domain gets ``share * steps * batch * seq_len * chars_per_token * 1.25``
    characters (documents cycled in a seeded order when the domain runs short), so the
    share of training tokens per domain follows the mixture.
    """
    mixture = MIXTURES[spec.mixture]
    need = spec.steps * spec.batch_size * spec.seq_len * chars_per_token * 1.25
    rng = np.random.default_rng([spec.seed, 7, int(sha_of(spec.name)[:8], 16)])
    chosen: list[str] = []
    chars: dict[str, int] = {}
    for d in DOMAINS:
        want = mixture[d] * need
        pool = texts.texts("train", d)
        got = 0
        if want <= 0 or not pool:
            chars[d] = 0
            continue
        order = rng.permutation(len(pool))
        k = 0
        while got < want:
            t = pool[int(order[k % len(pool)])]
            chosen.append(t)
            got += len(t)
            k += 1
        chars[d] = got
    perm = rng.permutation(len(chosen))
    return [chosen[i] for i in perm], chars


def checkpoint_steps(steps: int, n_checkpoints: int) -> list[int]:
    """Training steps at which a model's intermediate checkpoints are taken.

    ``n_checkpoints`` evenly spaced points strictly inside the run: after
    ``round(steps * k / (n_checkpoints + 1))`` steps, ``k = 1..n_checkpoints`` (3 -> 25 %,
    50 %, 75 %); duplicates and the end points 0 and ``steps`` are dropped.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import checkpoint_steps
    >>> checkpoint_steps(100, 3)
    [25, 50, 75]
    >>> checkpoint_steps(40, 4)  # after 20, 40, 60 and 80 % of the steps
    [8, 16, 24, 32]
    >>> checkpoint_steps(600, 19)[:4]  # the zoo's 19: every 5 %
    [30, 60, 90, 120]
    >>> checkpoint_steps(3, 9)  # duplicates and the end points are dropped
    [1, 2]
    """
    if n_checkpoints < 0:
        raise SigmapInputError(f"zoo world: n_checkpoints={n_checkpoints} must be >= 0")
    got = {round(steps * k / (n_checkpoints + 1)) for k in range(1, n_checkpoints + 1)}
    return sorted(s for s in got if 0 < s < steps)


def _train_one(
    spec_dict: dict[str, Any],
    tok_dir: str,
    train: list[str],
    out_dir: str,
    key: str,
    threads: int,
    ckpt_steps: Sequence[int] = (),
) -> dict[str, Any]:
    """Build, train and save one model (runs in this or a worker process).

    The weights after each of ``ckpt_steps`` optimiser steps are copied during training
    (a forward pre-hook on the model sees step ``s``'s batch before update ``s + 1``, so
    the training run itself is untouched) and saved as full model folders under
    ``<out_dir>/checkpoints/step<s>``.
    """
    from transformers import AutoTokenizer

    from sigmap_lib.worlds._tiny import build_causal_lm, save_model, train_causal_lm

    spec = ZooModelSpec(**spec_dict)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    d_model, n_layer, n_head = SIZES[spec.size]
    model = build_causal_lm(
        spec.arch,  # type: ignore[arg-type]
        len(tok),
        d_model=d_model,
        n_layer=n_layer,
        n_head=n_head,
        n_ctx=spec.seq_len,
        seed=spec.seed + 1000 * int(sha_of(spec.name)[:4], 16),
        **_ARCH_CONFIG.get(spec.arch, {}),
    )
    want = set(ckpt_steps)
    calls = [0]
    snaps: dict[int, dict[str, Any]] = {}

    def _snapshot(module: Any, args: Any) -> None:
        if module.training:
            if calls[0] in want:
                snaps[calls[0]] = {k: v.detach().clone() for k, v in module.state_dict().items()}
            calls[0] += 1

    hook = model.register_forward_pre_hook(_snapshot)
    try:
        stats = train_causal_lm(model, tok, train, **spec.training(), threads=max(1, threads))
    finally:
        hook.remove()
    if calls[0] != spec.steps or set(snaps) != want:
        raise RuntimeError(
            f"zoo model {spec.name}: saw {calls[0]} training steps and checkpoints "
            f"{sorted(snaps)}, expected {spec.steps} and {sorted(want)}"
        )
    n_params = int(sum(p.numel() for p in model.parameters()))
    out = save_model(model, tok, out_dir)
    for step in sorted(snaps):  # the final model is saved; reuse its module for the rest
        model.load_state_dict(snaps.pop(step))
        save_model(model, tok, out / "checkpoints" / f"step{step}")
    meta = {
        "key": key,
        "spec": spec_dict,
        "n_params": n_params,
        "train": stats,
        "checkpoints": sorted(want),
    }
    atomic_write_text(out / "zoo_spec.json", json.dumps(meta, indent=1))
    return meta


def train_zoo_models(
    texts: ZooTexts,
    tokenizers: dict[str, Path],
    specs: Sequence[ZooModelSpec],
    out_dir: str | Path,
    *,
    workers: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    n_checkpoints: int = 0,
    pool: Executor | None = None,
) -> dict[str, dict[str, Any]]:
    """Stage 3: train (or reuse) every zoo model; each saved under ``out_dir/<name>``.

    A model is reused when ``<name>/zoo_spec.json`` records the same key: a hash of the
    spec, the tokenizer files, the training text and :data:`ZOO_VERSION`, and holds the
    wanted checkpoints (else it is retrained: training is deterministic, so the final
    weights are the same).

    Parameters
    ----------
    workers : int, optional
        Models trained at once (separate processes when > 1; default
        :func:`default_workers`).
    threads : int, optional
        Torch threads per worker (default: CPU count // workers).

    n_checkpoints : int
        Intermediate checkpoints saved per run (:func:`checkpoint_steps`), each in
        ``<name>/checkpoints/step<s>``; the steps of ``spec.early`` are saved there too.
    pool : Executor, optional
        A started :func:`worker_pool` to train on (default: a new one when needed).

    Returns
    -------
    dict[str, dict]
        Per model name: ``key``, ``spec``, ``n_params``, ``train`` (loss, tokens/s,
        seconds), ``mixture_chars``, ``reused`` (bool), ``path``, ``checkpoints``
        (``{step: {"key", "path"}}``).
    """
    progress = progress or no_progress
    out_root = Path(out_dir)
    out_root.mkdir(parents=True, exist_ok=True)
    cpu = os.cpu_count() or 1
    workers = max(1, workers or default_workers())
    threads = threads or max(1, cpu // workers)
    text_fp = texts.fingerprint(("train",))
    tok_fp = {
        a: hashlib.sha256((p / "tokenizer.json").read_bytes()).hexdigest()
        for a, p in tokenizers.items()
    }
    results: dict[str, dict[str, Any]] = {}
    todo: list[tuple[ZooModelSpec, list[str], dict[str, int], str]] = []
    for spec in specs:
        if spec.mixture not in MIXTURES or spec.size not in SIZES or spec.arch not in TOKENIZERS:
            raise SigmapInputError(f"zoo model {spec.name}: unknown arch/mixture/size in {spec}")
        if not all(0 < e < spec.steps for e in spec.early):
            raise SigmapInputError(
                f"zoo model {spec.name}: early steps {spec.early} must lie in (0, {spec.steps})"
            )
        key = sha_of([ZOO_VERSION, dataclasses.asdict(spec), tok_fp[spec.arch], text_fp])
        folder = out_root / spec.name
        meta = _read_json(folder / "zoo_spec.json")
        train, chars = _training_texts(texts, spec)
        steps = sorted(set(checkpoint_steps(spec.steps, n_checkpoints)) | set(spec.early))
        if (
            meta is not None
            and meta.get("key") == key
            and any(folder.glob("*.safetensors"))
            and set(steps) <= set(meta.get("checkpoints", []))
            and all(any((folder / "checkpoints" / f"step{s}").glob("*.safetensors")) for s in steps)
        ):
            results[spec.name] = {
                **meta,
                "mixture_chars": chars,
                "reused": True,
                "path": str(folder),
                "checkpoints": _checkpoint_entries(key, folder, steps),
            }
            continue
        todo.append((spec, train, chars, key, steps))
    done = len(results)
    progress("train_models", done, len(specs), f"{done} cached, {len(todo)} to train")

    def _finish(spec: ZooModelSpec, chars: dict[str, int], meta: dict[str, Any]) -> None:
        nonlocal done
        results[spec.name] = {
            **meta,
            "mixture_chars": chars,
            "reused": False,
            "path": str(out_root / spec.name),
            "checkpoints": _checkpoint_entries(
                meta["key"], out_root / spec.name, meta["checkpoints"]
            ),
        }
        done += 1
        st = meta["train"]
        progress(
            "train_models",
            done,
            len(specs),
            f"{spec.name}: {meta['n_params']:,} params, {st['seconds']:.0f} s, "
            f"loss {st['initial_loss']:.2f} -> {st['final_loss']:.2f}",
        )

    # longest jobs first, so parallel workers finish together
    todo.sort(key=lambda t: -t[0].steps * SIZES[t[0].size][0] ** 2 * SIZES[t[0].size][1])
    if todo:
        progress("train_models", done, len(specs), "training " + ", ".join(t[0].name for t in todo))
    run_jobs(
        _train_one,
        [
            (
                (spec, chars),
                (
                    dataclasses.asdict(spec),
                    str(tokenizers[spec.arch]),
                    train,
                    str(out_root / spec.name),
                    key,
                    threads,
                    steps,
                ),
            )
            for spec, train, chars, key, steps in todo
        ],
        workers,
        lambda tag, meta: _finish(tag[0], tag[1], meta),
        pool=pool,
    )
    return {s.name: results[s.name] for s in specs}


def _checkpoint_entries(key: str, folder: Path, steps: Sequence[int]) -> dict[int, dict[str, str]]:
    """``{step: {"key", "path"}}`` of a model's checkpoints (key: model key + step)."""
    return {
        int(s): {
            "key": sha_of([key, "checkpoint", int(s)]),
            "path": str(folder / "checkpoints" / f"step{s}"),
        }
        for s in steps
    }


def checkpoint_id(spec: ZooModelSpec, step: int) -> str:
    """Respondent id of a checkpoint: ``zoo/<name>@step<step>``."""
    return f"{spec.model_id}@step{step}"

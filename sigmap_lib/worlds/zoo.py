"""The zoo world: the demo's default — tiny real transformers trained locally on real
text, real loglikelihood benchmarks, truth known by construction.

``build_zoo_world(out_dir)`` runs the four stages below and writes a world folder in
the format of ``docs/FORMATS.md``; each stage is also public so a pipeline can cache and
report them separately:

1. :func:`build_texts` — the corpus and training text (:mod:`.zoo_text`): Python
   standard-library code, its docstrings and the installed packages' READMEs, plus
   generated arithmetic, sequence-copying and key-value-record text. Split by document
   into ``train`` / ``corpus`` / ``bench`` (held-out).
2. :func:`train_tokenizers` — two BPE tokenizers trained on the training text: a
   byte-level one (vocab 512) for the GPT-2 models and a SentencePiece-style
   ("metaspace", byte fallback, vocab 1024) one for the Llama models, so the corpus
   units really are aligned across tokenizers.
3. :func:`train_zoo_models` — :data:`ZOO_MODELS`: 16 tiny causal LMs (GPT-2 and Llama
   configs, ~0.15-2M parameters) with different domain mixtures and training lengths, so
   abilities vary along several axes. Cached per model by a spec hash. Each model also
   saves intermediate checkpoints (default 4: after 20/40/60/80 % of its steps).
4. :func:`evaluate_zoo_benchmarks` — the 16 benchmarks of :mod:`.zoo_bench`, scored by
   loglikelihood, item by item (cached per model), for the final models and their
   checkpoints. The checkpoints are extra real respondents for item-level methods
   (metabench's IRT needs >= 55 respondents): their rows follow the final models' in
   ``responses/<b>.parquet`` (``zoo/<name>@step<s>``) and ``truth.json`` lists them;
   they are not registry models (not in ``models.yaml`` / ``scores.csv``).
   ``settings.yaml`` holds metabench settings suited to this small world
   (:func:`metabench_settings`).

Everything is deterministic given the seed and the machine's Python installation; model
training is deterministic on a given machine and thread count.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo_bench import ZooBenchmark, build_zoo_benchmarks, score_benchmarks
from sigmap_lib.worlds.zoo_text import DOMAINS, ZooTexts, build_zoo_texts

__all__ = [
    "MIXTURES",
    "ZOO_MODELS",
    "ZooModelSpec",
    "ZooWorld",
    "build_texts",
    "build_zoo_benchmarks",
    "build_zoo_world",
    "checkpoint_id",
    "checkpoint_steps",
    "default_workers",
    "evaluate_zoo_benchmarks",
    "metabench_settings",
    "model_specs",
    "train_tokenizers",
    "train_zoo_models",
    "write_world",
]

#: Bump to invalidate every cached model / evaluation (recipe changes).
ZOO_VERSION = 1

#: Progress callback: ``progress(stage, done, total, message)``.
Progress = Callable[[str, int, int, str], None]

#: Training-token shares per domain (code, prose, arithmetic, recall, records).
MIXTURES: dict[str, dict[str, float]] = {
    "code": {"code": 0.6, "prose": 0.1, "arithmetic": 0.1, "recall": 0.1, "records": 0.1},
    "prose": {"code": 0.1, "prose": 0.6, "arithmetic": 0.1, "recall": 0.1, "records": 0.1},
    "arith": {"code": 0.1, "prose": 0.1, "arithmetic": 0.6, "recall": 0.1, "records": 0.1},
    "recall": {"code": 0.1, "prose": 0.1, "arithmetic": 0.1, "recall": 0.6, "records": 0.1},
    "records": {"code": 0.1, "prose": 0.1, "arithmetic": 0.1, "recall": 0.1, "records": 0.6},
    "balanced": dict.fromkeys(DOMAINS, 0.2),
    "natural": {"code": 0.5, "prose": 0.5, "arithmetic": 0.0, "recall": 0.0, "records": 0.0},
    "synthetic": {
        "code": 0.0,
        "prose": 0.0,
        "arithmetic": 1 / 3,
        "recall": 1 / 3,
        "records": 1 / 3,
    },
}

#: Sizes per architecture: (d_model, n_layer, n_head).
SIZES: dict[str, tuple[int, int, int]] = {"s": (64, 2, 2), "m": (96, 3, 4), "l": (144, 4, 4)}

#: Tokenizer of each architecture: (style, vocab size).
TOKENIZERS: dict[str, tuple[str, int]] = {"gpt2": ("byte_level", 512), "llama": ("metaspace", 1024)}


@dataclass(frozen=True)
class ZooModelSpec:
    """Recipe of one zoo model.

    Attributes
    ----------
    name : str
        ``<arch>-<mixture>-<size>``; the model id is ``zoo/<name>``.
    arch : str
        ``gpt2`` or ``llama``.
    mixture : str
        Key of :data:`MIXTURES`.
    size : str
        Key of :data:`SIZES`.
    steps : int
        Optimiser steps (``batch_size * seq_len`` tokens each).
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

    @property
    def model_id(self) -> str:
        """Raw model id used in ``models.yaml`` and ``scores.csv``."""
        return f"zoo/{self.name}"


def _spec(arch: str, mixture: str, size: str, steps: int, seed: int) -> ZooModelSpec:
    return ZooModelSpec(f"{arch}-{mixture}-{size}", arch, mixture, size, steps, seed=seed)


#: The full zoo: (arch, mixture, size, steps).
ZOO_MODELS: tuple[tuple[str, str, str, int], ...] = (
    ("gpt2", "code", "s", 600),
    ("gpt2", "prose", "s", 600),
    ("gpt2", "arith", "s", 600),
    ("gpt2", "recall", "s", 500),
    ("gpt2", "records", "m", 400),
    ("gpt2", "balanced", "m", 350),
    ("gpt2", "natural", "l", 250),
    ("gpt2", "balanced", "l", 250),
    ("llama", "code", "m", 400),
    ("llama", "prose", "m", 400),
    ("llama", "arith", "m", 350),
    ("llama", "recall", "m", 350),
    ("llama", "records", "s", 600),
    ("llama", "synthetic", "s", 600),
    ("llama", "balanced", "s", 250),
    ("llama", "balanced", "l", 250),
)

#: The quick zoo (tests): six small models, few steps.
QUICK_MODELS: tuple[tuple[str, str, str, int], ...] = (
    ("gpt2", "code", "s", 40),
    ("gpt2", "arith", "s", 40),
    ("gpt2", "balanced", "s", 20),
    ("llama", "prose", "s", 40),
    ("llama", "recall", "s", 40),
    ("llama", "balanced", "s", 20),
)


def model_specs(n_models: int = 16, *, quick: bool = False, seed: int = 0) -> list[ZooModelSpec]:
    """The zoo roster: the first ``n_models`` of :data:`ZOO_MODELS` (or the quick zoo).

    Models alternate architectures when ``n_models`` is smaller than the roster, so a
    small zoo still has both. ``n_models`` above the roster length is an error.
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


@dataclass
class ZooWorld:
    """A built zoo world (what :func:`build_zoo_world` returns).

    Attributes
    ----------
    root : Path
        The world folder.
    models : list[dict]
        The ``models.yaml`` entries (``id``, ``path`` (absolute), ``family``, ``n_params``,
        ``dtype``) plus ``mixture``, ``steps``, ``size``, ``tokenizer``.
    benchmarks : list[str]
        Benchmark names, catalog order.
    scores : np.ndarray, shape (n_models, n_benchmarks)
        Mean item responses, in [0, 1].
    responses : dict[str, np.ndarray]
        Benchmark -> int8 ``(n_models, n_items)``.
    timings : dict[str, float]
        Seconds per stage.
    trained, reused : list[str]
        Model names trained now / taken from the cache.
    checkpoints : list[dict]
        Intermediate checkpoints (extra respondents): ``id``
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


# ------------------------------------------------------------------- utilities


def _noop(stage: str, done: int, total: int, message: str) -> None:
    return None


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_write_parquet(df: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        df.write_parquet(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sha(obj: Any) -> str:
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


def _run_jobs(
    fn: Callable[..., Any],
    jobs: Sequence[tuple[Any, tuple[Any, ...]]],
    workers: int,
    on_done: Callable[[Any, Any], None],
) -> None:
    """Run ``fn(*args)`` for every ``(tag, args)``; ``on_done(tag, result)`` as each ends.

    In this process when ``workers == 1`` (or one job), else in a spawn-context process
    pool (a script calling this at import time needs an ``if __name__ == "__main__"``
    guard, as always with spawn).
    """
    if workers <= 1 or len(jobs) <= 1:
        for tag, args in jobs:
            on_done(tag, fn(*args))
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        futs = {ex.submit(fn, *args): tag for tag, args in jobs}
        for fut in as_completed(futs):
            on_done(futs[fut], fut.result())


# ---------------------------------------------------------------------- stages


def build_texts(*, seed: int = 0, quick: bool = False) -> ZooTexts:
    """Stage 1: the zoo text, split by document (see :mod:`.zoo_text`).

    The full world's corpus holds 1,750 documents (code 500, prose 500, arithmetic 300,
    recall 250, records 200; ~170k units, ~690k characters); ``quick`` a tenth-size one.
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
        n_corpus={"code": 500, "prose": 500, "arithmetic": 300, "recall": 250, "records": 200},
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
    """
    from sigmap_lib.worlds.tiny import train_bpe_tokenizer

    sample: list[str] = []
    for d in DOMAINS:
        size = 0
        for t in texts.texts("train", d):
            if size >= chars_per_domain:
                break
            sample.append(t)
            size += len(t)
    key = _sha([ZOO_VERSION, sorted(TOKENIZERS.items()), _sha(sample)])
    out: dict[str, Path] = {}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for arch, (style, vocab) in TOKENIZERS.items():
        folder = Path(out_dir) / f"{arch}-{style}-{vocab}"
        meta = _read_json(folder / "zoo_spec.json")
        if meta is None or meta.get("key") != key or not (folder / "tokenizer.json").exists():
            tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=Path(out_dir)))
            try:
                train_bpe_tokenizer(sample, tmp, vocab_size=vocab, min_frequency=2, style=style)  # type: ignore[arg-type]
                (tmp / "zoo_spec.json").write_text(json.dumps({"key": key}), encoding="utf-8")
                if folder.exists():
                    shutil.rmtree(folder)
                tmp.rename(folder)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
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
    rng = np.random.default_rng([spec.seed, 7, int(_sha(spec.name)[:8], 16)])
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

    from sigmap_lib.worlds.tiny import build_causal_lm, save_model, train_causal_lm

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
        seed=spec.seed + 1000 * int(_sha(spec.name)[:4], 16),
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
        stats = train_causal_lm(
            model,
            tok,
            train,
            steps=spec.steps,
            batch_size=spec.batch_size,
            seq_len=spec.seq_len,
            lr=spec.lr,
            seed=spec.seed,
            threads=max(1, threads),
        )
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
    _atomic_write_text(out / "zoo_spec.json", json.dumps(meta, indent=1))
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
        Intermediate checkpoints saved per model (:func:`checkpoint_steps`), each in
        ``<name>/checkpoints/step<s>``.

    Returns
    -------
    dict[str, dict]
        Per model name: ``key``, ``spec``, ``n_params``, ``train`` (loss, tokens/s,
        seconds), ``mixture_chars``, ``reused`` (bool), ``path``, ``checkpoints``
        (``{step: {"key", "path"}}``).
    """
    progress = progress or _noop
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
        key = _sha([ZOO_VERSION, dataclasses.asdict(spec), tok_fp[spec.arch], text_fp])
        folder = out_root / spec.name
        meta = _read_json(folder / "zoo_spec.json")
        train, chars = _training_texts(texts, spec)
        steps = checkpoint_steps(spec.steps, n_checkpoints)
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
    _run_jobs(
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
    )
    return {s.name: results[s.name] for s in specs}


def _checkpoint_entries(key: str, folder: Path, steps: Sequence[int]) -> dict[int, dict[str, str]]:
    """``{step: {"key", "path"}}`` of a model's checkpoints (key: model key + step)."""
    return {
        int(s): {
            "key": _sha([key, "checkpoint", int(s)]),
            "path": str(folder / "checkpoints" / f"step{s}"),
        }
        for s in steps
    }


def checkpoint_id(spec: ZooModelSpec, step: int) -> str:
    """Respondent id of a checkpoint: ``zoo/<name>@step<step>``."""
    return f"{spec.model_id}@step{step}"


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


def _evaluate_one(
    folder: str, benchmarks: Sequence[ZooBenchmark], key: str, threads: int, batch_size: int
) -> dict[str, np.ndarray]:
    """Score one saved model on every benchmark; cached in ``<folder>/zoo_eval.npz``."""
    import torch

    from sigmap_lib.perplexity import load_model

    cached = _cached_eval(folder, benchmarks, key)
    if cached is not None:
        return cached
    cache = Path(folder) / "zoo_eval.npz"
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        model, tok = load_model(folder, device="cpu", dtype="float32")
        got = score_benchmarks(model, tok, benchmarks, batch_size=batch_size)
    finally:
        torch.set_num_threads(old)
    fd, tmp = tempfile.mkstemp(prefix=".zoo_eval.", suffix=".npz", dir=folder)
    os.close(fd)
    np.savez(tmp, key=np.array(key), **got)
    os.replace(tmp, cache)
    return got


def evaluate_zoo_benchmarks(
    benchmarks: Sequence[ZooBenchmark],
    models: dict[str, dict[str, Any]],
    *,
    workers: int | None = None,
    threads: int | None = None,
    batch_size: int = 64,
    progress: Progress | None = None,
) -> dict[str, np.ndarray]:
    """Stage 4: item-level responses of every model on every benchmark.

    ``models`` maps a respondent name to a dict with at least ``key`` and ``path`` (a
    saved model folder): the entries of :func:`train_zoo_models` and, when wanted, their
    checkpoints (see :func:`build_zoo_world`). Each model is loaded from its saved folder (``sigmap_lib.perplexity.load_model``,
    CPU, float32) and scored with :func:`.zoo_bench.score_benchmarks`. Results are cached
    in the model folder (``zoo_eval.npz``) under a key of the model key and the items.

    Parameters
    ----------
    workers, threads : int, optional
        Parallel processes and torch threads each (defaults as in
        :func:`train_zoo_models`).

    Returns
    -------
    dict[str, np.ndarray]
        Benchmark name -> int8 ``(n_models, n_items)``, models in ``models`` order.
    """
    progress = progress or _noop
    cpu = os.cpu_count() or 1
    workers = max(1, workers or default_workers())
    threads = threads or max(1, cpu // workers)
    items_key = _sha(
        [
            ZOO_VERSION,
            [(b.name, b.metric, [dataclasses.asdict(i) for i in b.items]) for b in benchmarks],
        ]
    )
    got: dict[str, dict[str, np.ndarray]] = {}
    jobs = []
    for name, meta in models.items():
        key = _sha([meta["key"], items_key])
        cached = _cached_eval(meta["path"], benchmarks, key)
        if cached is not None:
            got[name] = cached
        else:
            jobs.append((name, (meta["path"], list(benchmarks), key, threads, batch_size)))
    progress("evaluate", len(got), len(models), f"{len(got)} cached, scoring {len(jobs)} models")

    def _done(name: str, res: dict[str, np.ndarray]) -> None:
        got[name] = res
        mean = np.mean([r.mean() for r in res.values()])
        progress("evaluate", len(got), len(models), f"{name}: mean item score {mean:.3f}")

    _run_jobs(_evaluate_one, jobs, workers, _done)
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
    extra_truth: dict[str, Any] | None = None,
    checkpoints: Sequence[dict[str, Any]] = (),
    checkpoint_responses: dict[str, np.ndarray] | None = None,
    settings: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Write the world folder (``docs/FORMATS.md``): corpus, models.yaml, catalog.yaml,
    scores.csv, items/, responses/, truth.json, settings.yaml. Returns the models.yaml
    entries.

    ``checkpoints`` (dicts with ``id``, ``model`` (model id), ``name``, ``step``) are
    extra respondents: their rows (``checkpoint_responses``, same order) follow the
    models' rows in ``responses/<b>.parquet`` and they are listed in ``truth.json``;
    they are not in ``models.yaml`` or ``scores.csv``. ``settings`` is written to
    ``settings.yaml`` when given."""
    import polars as pl
    import yaml

    root = Path(root)
    # corpus: every corpus-split document, shuffled, neutral ids (domain only in truth)
    docs = [d for dom in DOMAINS for d in texts.docs["corpus"][dom]]
    perm = np.random.default_rng([texts.seed, 9]).permutation(len(docs))
    lines, domain_of, source_of = [], {}, {}
    for j, i in enumerate(perm):
        d = docs[int(i)]
        did = f"doc-{j:05d}"
        lines.append(json.dumps({"id": did, "text": d.text}, ensure_ascii=False))
        domain_of[did] = d.domain
        source_of[did] = d.source
    _atomic_write_text(root / "corpus" / "zoo.jsonl", "\n".join(lines) + "\n")

    entries = []
    for s in specs:
        m = models[s.name]
        entries.append(
            {
                "id": s.model_id,
                "path": f"models/{s.name}",
                "family": s.arch,
                "n_params": int(m["n_params"]),
                "dtype": "float32",
            }
        )
    _atomic_write_text(root / "models.yaml", yaml.safe_dump({"models": entries}, sort_keys=False))

    catalog = {}
    for b in benchmarks:
        catalog[b.name] = {
            "family": b.family,
            "format": b.format,
            "function": b.function,
            "score_range": [0, 1],
            "items": f"items/{b.name}.parquet",
            "responses": f"responses/{b.name}.parquet",
            "description": f"{b.family} recipe on held-out {b.domain} text, metric {b.metric}"
            + (f" (>= {b.threshold} nats/byte)" if b.threshold is not None else "")
            + f", {len(b.items)} items",
        }
    _atomic_write_text(
        root / "catalog.yaml", yaml.safe_dump({"benchmarks": catalog}, sort_keys=False)
    )

    model_ids = [s.model_id for s in specs]
    ckpt_ids = [c["id"] for c in checkpoints]
    score_cols: dict[str, Any] = {"model": model_ids}
    for b in benchmarks:
        r = responses[b.name]
        if r.shape != (len(specs), len(b.items)):
            raise SigmapInputError(
                f"zoo world: responses of {b.name} have shape {r.shape}, expected "
                f"({len(specs)}, {len(b.items)})"
            )
        score_cols[b.name] = r.mean(axis=1).astype(float)
        if ckpt_ids:
            rc = (checkpoint_responses or {}).get(b.name)
            if rc is None or rc.shape != (len(ckpt_ids), len(b.items)):
                raise SigmapInputError(
                    f"zoo world: checkpoint responses of {b.name} have shape "
                    f"{None if rc is None else rc.shape}, expected ({len(ckpt_ids)}, {len(b.items)})"
                )
            r = np.concatenate([r, rc], axis=0)
        items = pl.DataFrame(
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
        _atomic_write_parquet(items, root / "items" / f"{b.name}.parquet")
        resp = pl.DataFrame(
            {
                "model": model_ids + ckpt_ids,
                **{it.item_id: r[:, j] for j, it in enumerate(b.items)},
            },
            schema={"model": pl.String, **{it.item_id: pl.Int8 for it in b.items}},
        )
        _atomic_write_parquet(resp, root / "responses" / f"{b.name}.parquet")
    scores_df = pl.DataFrame(score_cols)
    fd, tmp = tempfile.mkstemp(prefix=".scores.", suffix=".csv", dir=root)
    os.close(fd)
    scores_df.write_csv(tmp)
    os.replace(tmp, root / "scores.csv")

    from sigmap_lib.corpus import segment_units

    corpus_stats = {
        d: {
            "docs": len(texts.docs["corpus"][d]),
            "chars": sum(len(x.text) for x in texts.docs["corpus"][d]),
            # units of the default segmentation (sigmap_lib.corpus.segment_units)
            "units": int(sum(len(segment_units(x.text)) for x in texts.docs["corpus"][d])),
        }
        for d in DOMAINS
    }
    truth = {
        "world": "zoo",
        "seed": texts.seed,
        "domains": list(DOMAINS),
        "corpus_domains": domain_of,
        "corpus_sources": source_of,
        "corpus_stats": corpus_stats,
        "text_stats": texts.stats,
        "models": {
            s.model_id: {
                "name": s.name,
                "arch": s.arch,
                "tokenizer": "-".join(map(str, TOKENIZERS[s.arch])),
                "size": s.size,
                "d_model": SIZES[s.size][0],
                "n_layer": SIZES[s.size][1],
                "n_head": SIZES[s.size][2],
                "n_params": int(models[s.name]["n_params"]),
                "mixture_name": s.mixture,
                "mixture": MIXTURES[s.mixture],
                "mixture_chars": models[s.name].get("mixture_chars"),
                "steps": s.steps,
                "tokens_seen": s.steps * s.batch_size * s.seq_len,
                "final_loss": models[s.name]["train"]["final_loss"],
            }
            for s in specs
        },
        "benchmarks": {
            b.name: {
                "family": b.family,
                "format": b.format,
                "function": b.function,
                "domain": b.domain,
                "metric": b.metric,
                "n_items": len(b.items),
                "threshold_nats_per_byte": b.threshold,
                "chance": (
                    None
                    if b.metric in ("greedy", "ll_threshold")
                    else 1.0 / len(b.items[0].choices)
                ),
            }
            for b in benchmarks
        },
        "checkpoints": {
            c["id"]: {
                "model": c["model"],
                "name": c["name"],
                "step": c["step"],
                "fraction": c["step"] / c["steps"],
                "tokens_seen": c["tokens_seen"],
            }
            for c in checkpoints
        },
        "records_population": len(texts.facts),
        **(extra_truth or {}),
    }
    _atomic_write_text(root / "truth.json", json.dumps(truth, indent=1))
    if settings is not None:
        _atomic_write_text(root / "settings.yaml", yaml.safe_dump(settings, sort_keys=False))
    return entries


def metabench_settings(n_items: int) -> dict[str, Any]:
    """Recommended metabench settings for a zoo world (``settings.yaml``).

    The zoo has 80 respondents (16 models + 64 checkpoints) and 100 items per
    benchmark, far fewer than metabench's defaults assume (thousands of models, hundreds
    of items). The binding constraint is the joint fit: >= 50 training models after
    every benchmark's outliers (its lowest scorers, ties included) are dropped, so the
    test split is kept at 10 % (8 models); a 6-df GAM needs only 24 training points, a
    40-point θ grid (at most the item count) suits ~100 items, 100 pool subsets suffice
    (benchmarks have fewer items than the pool size, so none are drawn), items need
    sd > 0.2 (>= ~5 % correct or wrong: with the default 0.01 an item answered right by
    one or two models can have no variance among the training models of the refit,
    which the IRT fit rejects), and the per-item penalty is scaled up as for the
    synthetic world (λ = 0.005 would keep almost every item of a short benchmark).
    """
    return {
        "metabench": {
            "lam": 0.05,
            "n_quant": min(40, n_items),
            "gam_df": 6,
            "test_frac": 0.1,
            "n_subsets": 100,
            "sd_min": 0.2,
        }
    }


def build_zoo_world(
    out_dir: str | Path,
    *,
    n_models: int = 16,
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
        How many of the roster's models (2..16; quick: 2..6).
    seed : int
        Seeds text selection, generation, splits, items and model initialisation.
    progress : callable, optional
        ``progress(stage, done, total, message)``; stages ``texts``, ``tokenizers``,
        ``train_models``, ``benchmarks``, ``evaluate``, ``write``.
    quick : bool
        A small world (6 small models, 20-40 steps, 24 items per benchmark) for tests.
    workers : int, optional
        Parallel processes for training and scoring (default :func:`default_workers`).
    n_items : int, optional
        Items per benchmark (default 100; quick 24).
    n_checkpoints : int, optional
        Intermediate checkpoints per model (default 4: after 20, 40, 60 and 80 % of the
        steps, so the 16 models give 80 respondents; quick 9, so the 6 quick models give
        60). Each answers every
        item like the final models; their rows follow the models' rows in
        ``responses/<b>.parquet`` as ``zoo/<name>@step<s>``, and ``truth.json`` lists
        them. They are not registry models (not in ``models.yaml`` / ``scores.csv``).
        0 disables them.

    Returns
    -------
    ZooWorld
    """
    progress = progress or _noop
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    if quick and n_models > len(QUICK_MODELS):
        n_models = len(QUICK_MODELS)
    timings: dict[str, float] = {}

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

    if n_checkpoints is None:
        n_checkpoints = 9 if quick else 4
    t = time.perf_counter()
    specs = model_specs(n_models, quick=quick, seed=seed)
    models = train_zoo_models(
        texts,
        toks,
        specs,
        root / "models",
        workers=workers,
        progress=progress,
        n_checkpoints=n_checkpoints,
    )
    timings["train_models"] = time.perf_counter() - t
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
    ]

    t = time.perf_counter()
    progress("benchmarks", 0, 1, "building benchmark items")
    benchmarks = build_zoo_benchmarks(texts, n_items=n_items or (24 if quick else 100), seed=seed)
    timings["benchmarks"] = time.perf_counter() - t
    progress("benchmarks", 1, 1, f"{len(benchmarks)} benchmarks")

    t = time.perf_counter()
    respondents = {**models, **{c["id"]: c for c in checkpoints}}
    both = evaluate_zoo_benchmarks(benchmarks, respondents, workers=workers, progress=progress)
    n = len(models)
    responses = {b: r[:n] for b, r in both.items()}
    ckpt_responses = {b: r[n:] for b, r in both.items()}
    timings["evaluate"] = time.perf_counter() - t

    t = time.perf_counter()
    progress("write", 0, 1, f"writing {root}")
    settings = metabench_settings(min(len(b.items) for b in benchmarks))
    entries = write_world(
        root,
        texts,
        benchmarks,
        models,
        specs,
        responses,
        checkpoints=checkpoints,
        checkpoint_responses=ckpt_responses,
        settings=settings,
    )
    timings["write"] = time.perf_counter() - t
    progress("write", 1, 1, "done")

    for e, s in zip(entries, specs):
        e["path"] = str((root / e["path"]).resolve())
        e.update(mixture=s.mixture, steps=s.steps, size=s.size, tokenizer=s.arch)
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

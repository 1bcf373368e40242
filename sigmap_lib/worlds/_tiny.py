"""Tiny real Hugging Face causal LMs, built and trained locally (no downloads).

A "tiny world" gives the pipeline real models with real tokenizers so that every code
path (tokenization, offsets, batching, sliding windows, safetensors loading) is
exercised offline in seconds. Typical use::

    tok = train_bpe_tokenizer(texts, vocab_size=512)
    model = build_causal_lm("gpt2", len(tok), d_model=64, n_layer=2, seed=0)
    stats = train_causal_lm(model, tok, texts, steps=200)
    save_model(model, tok, "models/tiny-gpt2")

Heavy imports (torch, transformers, tokenizers) happen inside the functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from sigmap_lib.errors import SigmapInputError

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerFast


#: Special tokens of every tokenizer trained here (ids 0..3 in this order).
SPECIAL_TOKENS: dict[str, str] = {
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "pad_token": "<pad>",
}


_WORDS = (
    "the a of and to in is was for on with as by at from that this it be are or an "
    "model data text corpus token unit window stride batch shard store value signal "
    "benchmark score rank noise perplexity river stone cloud garden lantern harbor "
    "café naïve façade über straße señor 東京 数据 模型 привет мир"
).split()
_PUNCT = [".", ",", ";", "!", "?", ":", "—", "(", ")"]
_EMOJI = ["😀", "🚀", "👍🏽", "🇫🇷", "❤️"]
_SEPS = [" "] * 12 + ["  ", "\n", "\t", "   \n\n  ", ""]


def random_text(rng: np.random.Generator | int, n_words: int) -> str:
    """Random sentence-like text for tests and tiny worlds.

    Mostly words (ASCII and non-ASCII: Latin accents, CJK, Cyrillic), with punctuation,
    digit runs, emoji (incl. skin-tone modifiers, flags and variation selectors) and
    irregular whitespace (double spaces, tabs, newlines, long runs).

    ``rng`` is a generator (advanced in place) or an int seed.

    Examples
    --------
    >>> from sigmap_lib.worlds import random_text
    >>> random_text(2, 6)
    'is ? café  straße as from'
    >>> random_text(2, 6) == random_text(2, 6)  # an int seed is reproducible
    True
    """
    g = np.random.default_rng(rng) if isinstance(rng, int) else rng
    out: list[str] = []
    for _ in range(n_words):
        r = g.random()
        if r < 0.75:
            out.append(_WORDS[g.integers(len(_WORDS))])
        elif r < 0.85:
            out.append(_PUNCT[g.integers(len(_PUNCT))])
        elif r < 0.92:
            out.append(str(int(g.integers(0, 100000))))
        else:
            out.append(_EMOJI[g.integers(len(_EMOJI))])
        out.append(_SEPS[g.integers(len(_SEPS))])
    return "".join(out).strip()


def sample_texts(
    n: int = 400, seed: int = 0, *, min_words: int = 10, max_words: int = 60
) -> list[str]:
    """``n`` :func:`random_text` documents with ``min_words..max_words`` words (seeded).

    Examples
    --------
    >>> from sigmap_lib.worlds import sample_texts
    >>> sample_texts(3, seed=0, min_words=3, max_words=5)
    ['score of 81327 signal 👍🏽', 'model\\tgarden  in\\tto model', 'was score  🚀']
    >>> len(sample_texts(50, seed=0))
    50
    """
    g = np.random.default_rng(seed)
    return [random_text(g, int(g.integers(min_words, max_words + 1))) for _ in range(n)]


def train_bpe_tokenizer(
    texts: Iterable[str],
    out_dir: str | Path | None = None,
    *,
    vocab_size: int = 512,
    min_frequency: int = 2,
    style: Literal["byte_level", "metaspace"] = "byte_level",
) -> PreTrainedTokenizerFast:
    """Train a BPE tokenizer on ``texts`` with the ``tokenizers`` library.

    Parameters
    ----------
    texts
        Training texts (any iterable of str; consumed once).
    out_dir
        When given, the tokenizer is saved there with ``save_pretrained``.
    vocab_size
        Target vocabulary size including the 4 special tokens (and, for
        ``byte_level``, the 256 byte symbols, so it must be > 260). ``metaspace``
        always keeps its 256 ``<0xNN>`` tokens and every character seen in the texts,
        so its vocabulary can come out larger than the target.
    min_frequency
        Minimum pair frequency for a merge.
    style
        ``"byte_level"`` (GPT-2 style: byte-level pre-tokenizer, every string
        representable, tokens may cover part of a UTF-8 character) or ``"metaspace"``
        (Llama/SentencePiece style: spaces become ``▁``, BPE with byte fallback
        ``<0xNN>`` tokens for unseen characters).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        With ``unk/bos/eos/pad`` tokens ``<unk> <s> </s> <pad>`` (ids 0..3). The
        tokenizer adds no special tokens itself; callers prepend BOS explicitly.

    Examples
    --------
    >>> from sigmap_lib.worlds import sample_texts, train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> len(tok), tok.bos_token, tok.bos_token_id, tok.pad_token_id
    (300, '<s>', 1, 3)
    >>> ids = tok("the café")["input_ids"]  # no BOS added
    >>> tok.decode(ids)
    'the café'
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = list(SPECIAL_TOKENS.values())
    if style == "byte_level":
        if vocab_size <= 256 + len(specials):
            raise SigmapInputError(
                f"train_bpe_tokenizer: vocab_size={vocab_size} too small for a byte-level "
                f"BPE (needs > {256 + len(specials)})"
            )
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    elif style == "metaspace":
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Sequence(
            [
                decoders.Replace("▁", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        )
        byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=specials + byte_tokens,
            show_progress=False,
        )
    else:
        raise SigmapInputError(f"train_bpe_tokenizer: unknown style {style!r}")

    tok.train_from_iterator((t for t in texts), trainer=trainer)
    if tok.get_vocab_size() <= len(specials):
        raise SigmapInputError("train_bpe_tokenizer: no training text was given")
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        hf_tok.save_pretrained(str(out))
    return hf_tok


def build_causal_lm(
    arch: Literal["gpt2", "llama"],
    vocab_size: int,
    *,
    d_model: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    n_ctx: int = 128,
    seed: int = 0,
    **config_overrides: Any,
) -> PreTrainedModel:
    """A randomly initialised causal LM (deterministic per ``seed``).

    Parameters
    ----------
    arch
        ``"gpt2"`` (learned absolute positions, GELU MLP, LayerNorm) or ``"llama"``
        (RoPE, SwiGLU MLP, RMSNorm, grouped-query attention possible via
        ``num_key_value_heads`` in ``config_overrides``).
    vocab_size
        Vocabulary size (``len(tokenizer)``).
    d_model, n_layer, n_head, n_ctx
        Width, depth, attention heads and context length (max positions).
    seed
        Seed of the initialisation; the global torch RNG state is left untouched.
    **config_overrides
        Extra fields for the transformers config (e.g. ``intermediate_size``).

    Returns
    -------
    transformers.PreTrainedModel
        In float32, eval mode. Special-token ids follow :data:`SPECIAL_TOKENS`
        (bos=1, eos=2, pad=3).

    Examples
    --------
    >>> from sigmap_lib.worlds import build_causal_lm
    >>> model = build_causal_lm("gpt2", 300, d_model=16, n_layer=1, n_head=2, n_ctx=32, seed=0)
    >>> type(model).__name__, model.config.n_positions, model.training
    ('GPT2LMHeadModel', 32, False)
    >>> sum(p.numel() for p in model.parameters())
    8624
    >>> llama = build_causal_lm("llama", 300, d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> type(llama).__name__, llama.config.max_position_embeddings
    ('LlamaForCausalLM', 32)
    """
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

    if vocab_size <= 0 or d_model <= 0 or n_layer <= 0 or n_head <= 0 or n_ctx <= 0:
        raise SigmapInputError(
            f"build_causal_lm: sizes must be positive (vocab_size={vocab_size}, "
            f"d_model={d_model}, n_layer={n_layer}, n_head={n_head}, n_ctx={n_ctx})"
        )
    if d_model % n_head:
        raise SigmapInputError(
            f"build_causal_lm: d_model={d_model} not divisible by n_head={n_head}"
        )
    ids = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}
    if arch == "gpt2":
        cfg_kw: dict[str, Any] = dict(
            vocab_size=vocab_size,
            n_embd=d_model,
            n_layer=n_layer,
            n_head=n_head,
            n_positions=n_ctx,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **ids,
        )
        cfg_kw.update(config_overrides)
        config = GPT2Config(**cfg_kw)
    elif arch == "llama":
        cfg_kw = dict(
            vocab_size=vocab_size,
            hidden_size=d_model,
            intermediate_size=4 * d_model,
            num_hidden_layers=n_layer,
            num_attention_heads=n_head,
            num_key_value_heads=n_head,
            max_position_embeddings=n_ctx,
            tie_word_embeddings=False,
            **ids,
        )
        cfg_kw.update(config_overrides)
        config = LlamaConfig(**cfg_kw)
    else:
        raise SigmapInputError(
            f"build_causal_lm: unknown arch {arch!r} (expected 'gpt2' or 'llama')"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.eval()
    return model


def _token_stream(tokenizer: Any, texts: Sequence[str]) -> np.ndarray:
    """Concatenate ``[bos] + tokens + [eos]`` of every text into one int64 stream."""
    enc = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    parts: list[np.ndarray] = []
    for ids in enc:
        seq = list(ids)
        if bos is not None:
            seq = [bos, *seq]
        if eos is not None:
            seq = [*seq, eos]
        parts.append(np.asarray(seq, dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def train_causal_lm(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    steps: int,
    batch_size: int = 16,
    seq_len: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int | None = None,
    warmup_frac: float = 0.05,
) -> dict[str, float]:
    """Train ``model`` in place on ``texts`` (next-token prediction).

    The documents are tokenized, joined as ``<s> doc </s> <s> doc </s> ...`` and packed
    into blocks of ``seq_len`` tokens; each step draws ``batch_size`` random blocks
    (seeded). AdamW (weight decay 0.01, betas 0.9/0.95, grad-clip 1.0) with a linear
    warm-up over ``warmup_frac`` of the steps then cosine decay to 10% of ``lr``.

    Parameters
    ----------
    steps
        Optimiser steps (> 0).
    seq_len
        Block length; must not exceed the model's context.
    threads
        ``torch.set_num_threads`` during training (restored afterwards); ``None`` keeps it.

    Returns
    -------
    dict
        ``tokens_seen`` (int), ``final_loss`` (mean loss of the last ``max(1, steps//10)``
        steps, nats/token), ``initial_loss`` (loss of the first step), ``tokens_per_s``,
        ``seconds``. The model is left in eval mode on its original device.

    Examples
    --------
    >>> from sigmap_lib.worlds import (
    ...     build_causal_lm, sample_texts, train_bpe_tokenizer, train_causal_lm
    ... )
    >>> texts = sample_texts(50, seed=0)
    >>> tok = train_bpe_tokenizer(texts, vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> stats = train_causal_lm(
    ...     model, tok, texts, steps=10, batch_size=4, seq_len=32, seed=0, threads=1
    ... )
    >>> stats["tokens_seen"]  # steps * batch_size * seq_len
    1280
    >>> stats["final_loss"] < stats["initial_loss"], model.training
    (True, False)
    """
    import torch

    if steps <= 0 or batch_size <= 0 or seq_len <= 1:
        raise SigmapInputError(
            f"train_causal_lm: steps={steps}, batch_size={batch_size}, seq_len={seq_len} must be "
            "positive (seq_len >= 2)"
        )
    n_ctx = _model_context(model)
    if n_ctx is not None and seq_len > n_ctx:
        raise SigmapInputError(
            f"train_causal_lm: seq_len={seq_len} exceeds the model context {n_ctx}"
        )
    stream = _token_stream(tokenizer, texts)
    n_blocks = len(stream) // seq_len
    if n_blocks == 0:
        raise SigmapInputError(
            f"train_causal_lm: the texts give {len(stream)} tokens, fewer than one block of {seq_len}"
        )
    blocks = torch.from_numpy(stream[: n_blocks * seq_len].reshape(n_blocks, seq_len).copy())
    device = next(model.parameters()).device
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    gen = torch.Generator().manual_seed(seed)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (
            no_decay if p.ndim < 2 or "norm" in name.lower() or name.endswith("bias") else decay
        ).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )
    warmup = max(1, round(warmup_frac * steps))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        frac = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    losses: list[float] = []
    model.train()
    t0 = time.perf_counter()
    try:
        for _ in range(steps):
            idx = torch.randint(0, n_blocks, (batch_size,), generator=gen)
            batch = blocks[idx].to(device)
            out = model(input_ids=batch, labels=batch)
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(out.loss.detach()))
    finally:
        model.eval()
        if threads is not None:
            torch.set_num_threads(old_threads)
    seconds = time.perf_counter() - t0
    tail = max(1, steps // 10)
    tokens = steps * batch_size * seq_len
    return {
        "tokens_seen": int(tokens),
        "initial_loss": losses[0],
        "final_loss": float(np.mean(losses[-tail:])),
        "tokens_per_s": tokens / seconds if seconds > 0 else float("inf"),
        "seconds": seconds,
    }


def _model_context(model: Any) -> int | None:
    cfg = model.config
    for attr in ("n_positions", "max_position_embeddings"):
        val = getattr(cfg, attr, None)
        if isinstance(val, int) and val > 0:
            return val
    return None


def save_model(model: Any, tokenizer: Any, out_dir: str | Path) -> Path:
    """Save model (safetensors) and tokenizer with ``save_pretrained``; returns the folder.

    Written to a temporary sibling folder (``.<name>.tmp-*``) first and renamed into
    place, so a half-written model folder never appears under ``out_dir``. An existing
    ``out_dir`` is replaced.

    Examples
    --------
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, save_model, train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> path = save_model(model, tok, "models/tiny-gpt2")
    >>> path.as_posix(), sorted(p.name for p in path.iterdir())
    ('models/tiny-gpt2', ['config.json', 'generation_config.json', 'model.safetensors',
                          'tokenizer.json', 'tokenizer_config.json'])
    """
    from sigmap_lib._util._atomic import atomic_dir

    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
    return out

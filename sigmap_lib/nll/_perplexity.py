"""Per-unit NLL of a causal LM (loaded by :mod:`._loading`) on corpus documents (METHODS §1).

For each document the model's token NLLs (natural log, nats) are computed and
**apportioned** to the model-independent corpus units (:func:`sigmap_lib.inputs.segment_units`)
in proportion to the UTF-8 bytes each token shares with each unit's *attributed* span
(the unit plus the whitespace before it, see :func:`sigmap_lib.inputs.unit_byte_spans`).
Hence per document ``sum(unit NLL) == sum(token NLL)``, and unit values are comparable
across tokenizers.

Conventions
-----------
* **First token.** A document is scored as ``[BOS] + tokens`` (BOS = the tokenizer's
  ``bos_token_id``, else its ``eos_token_id`` — the usual document separator), so every
  real token is predicted and scored. Tokenizers with neither cannot score the first
  token; it then gets NLL 0 (documented limitation, logged in ``stats``).
  Special tokens are never added by the tokenizer itself (``add_special_tokens=False``),
  and special-token strings inside the text (``</s>``, ``<|endoftext|>``) are tokenized as
  ordinary text (``split_special_tokens=True``): corpus text is data, not control.
* **Token byte spans** come from the fast tokenizer's offset mapping (characters),
  converted to UTF-8 bytes. Byte-level BPE tokens that hold part of a multi-byte
  character report the whole character; each such token's NLL is spread over that
  character's bytes (all in one unit), so nothing is lost or double-counted. A token
  with an empty span (e.g. a SentencePiece dummy-prefix ``▁``) goes to the unit at its
  position (the following unit).
* **Long documents** (more than ``max_length`` tokens incl. BOS) use a sliding window:
  windows start at ``0, stride, 2·stride, …`` and have ``max_length`` tokens; each
  window scores only the tokens no earlier window scored, so every token is scored once
  with at least ``max_length − stride`` tokens of left context (equivalently token
  ``t`` is scored in window ``k = max(0, ceil((t + 1 − max_length) / stride))``).
  Windows never cross documents.
* **Batching.** All windows of the given texts are sorted by length (longest first) and
  packed into right-padded batches of at most ``batch_tokens`` token slots; the padding
  fraction is reported in ``stats``.
* **Bounded memory.** The full ``tokens × vocab`` logits of a batch are never built: the
  model body runs to its last hidden states, the scored positions are gathered, and the
  LM head + log-softmax run on slices of ``logits_chunk`` positions (default: about
  32 MiB of float32 logits per slice on CPU, 1 GiB on CUDA), so only ``chunk × vocab``
  logits exist at a time. This needs ``model.base_model`` (the body) and
  ``model.get_output_embeddings()`` (the head) with ``model(x).logits ==
  head(body(x).last_hidden_state)``; that is checked once per model on a short probe
  (and models with logit soft-capping or scaling in the causal-LM wrapper are excluded
  by their config). Models that fail it fall back to the full-logits forward pass
  (``stats["full_logits_batches"]`` counts those batches).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import char_to_byte_offsets, segment_units, unit_byte_spans
from sigmap_lib.nll._loading import model_context_length

if TYPE_CHECKING:  # pragma: no cover
    from sigmap_lib.inputs import CorpusStore
    from sigmap_lib.nll._store import NLLStore


def _prefix_id(tokenizer: Any) -> int | None:
    for attr in ("bos_token_id", "eos_token_id"):
        v = getattr(tokenizer, attr, None)
        if v is not None:
            return int(v)
    return None


def _windows(n: int, max_length: int, stride: int) -> list[tuple[int, int, int]]:
    """``(begin, end, first_target)`` windows over a sequence of ``n`` token positions.

    Position 0 is never a target (it has no left context)."""
    if n <= max_length:
        return [(0, n, 1)] if n > 1 else []
    out = []
    prev_end = 1
    begin = 0
    while True:
        end = min(begin + max_length, n)
        if end > prev_end:
            out.append((begin, end, prev_end))
        prev_end = end
        if end == n:
            return out
        begin += stride


#: Config attributes of causal-LM wrappers that transform the head's output (soft-capping,
#: scaling): such models are scored through the full-logits path.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling",
                     "output_logit_scale", "dim_model_base")  # fmt: skip
#: Bytes of float32 logits per LM-head slice when ``logits_chunk`` is not given.
_CHUNK_BYTES = {"cpu": 32 << 20, "cuda": 1 << 30}
_SPLIT_OK: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SPLIT_LOCK = threading.Lock()


def _last_hidden(out: Any) -> Any:
    h = getattr(out, "last_hidden_state", None)
    return out[0] if h is None else h


def _split_lm_head(model: Any) -> tuple[Any, Any] | None:
    """``(body, head)`` of a causal LM whose logits are ``head(body(x).last_hidden_state)``,
    else ``None``. Verified once per model (cached) on a 2 × 8 probe batch with padding."""
    import torch

    body = getattr(model, "base_model", None)
    try:
        head = model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        head = None
    if not isinstance(body, torch.nn.Module) or body is model:
        return None
    if not isinstance(head, torch.nn.Module):
        return None
    with _SPLIT_LOCK:
        ok = _SPLIT_OK.get(model)
    if ok is None:
        ok = _probe_split(model, body, head)
        with _SPLIT_LOCK:
            _SPLIT_OK[model] = ok
    return (body, head) if ok else None


def _probe_split(model: Any, body: Any, head: Any) -> bool:
    import torch

    cfg = getattr(model, "config", None)
    for attr in _LOGIT_TRANSFORMS:
        v = getattr(cfg, attr, None)
        if v is not None and not (attr == "logits_scaling" and v == 1):
            return False
    try:
        device = next(model.parameters()).device
        vocab = int(getattr(cfg, "vocab_size", 0) or getattr(head, "out_features", 0))
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (2, 8), generator=gen).to(device)
        mask = torch.ones_like(ids)
        mask[1, 5:] = 0
        with torch.inference_mode():
            ref = model(input_ids=ids, attention_mask=mask, use_cache=False).logits.float()
            got = head(_last_hidden(body(input_ids=ids, attention_mask=mask, use_cache=False)))
            got = got.float()
        if got.shape != ref.shape:
            return False
        tol = 1e-3 * max(1.0, float(ref.abs().max()))
        return bool((got - ref).abs().max() <= tol)
    except Exception:  # any failure means: use the plain forward pass
        return False


def _chunk_positions(logits_chunk: int | None, vocab: int, device: Any) -> int:
    if logits_chunk is not None:
        return int(logits_chunk)
    budget = _CHUNK_BYTES["cuda" if str(device).startswith("cuda") else "cpu"]
    return max(16, budget // (4 * max(1, vocab)))


def token_nll(
    model: Any,
    sequences: Sequence[np.ndarray],
    *,
    max_length: int,
    stride: int,
    batch_tokens: int = 8192,
    pad_id: int = 0,
    max_padding: float = 0.05,
    stats: dict[str, Any] | None = None,
    logits_chunk: int | None = None,
    sync_per_batch: bool = False,
) -> list[np.ndarray]:
    """NLL (nats) of every position ``1..n-1`` of every token sequence.

    Parameters
    ----------
    sequences
        Token id arrays (int), each already including its prefix (BOS) token.
    max_length, stride
        Sliding-window size and step (see the module docstring), ``max_length >= 2`` and
        ``0 < stride < max_length``.
    batch_tokens
        Maximum token slots (rows × padded length) per forward pass.
    max_padding
        A batch stops growing when adding the next (shorter) window would make its
        padding fraction exceed this bound (so overall padding stays ≤ ``max_padding``).
    stats
        If given, updated with ``tokens`` (scored), ``slots``, ``real_slots``,
        ``forward_seconds``, ``windows``, ``batches``, ``full_logits_batches`` (batches
        scored through the full-logits fallback) and ``max_batch_slots`` (the largest
        batch, rows × padded length).
    logits_chunk
        Scored positions per LM-head slice (the model body runs once per batch; only
        ``logits_chunk × vocab`` logits exist at a time). ``None``: about 32 MiB of
        float32 logits per slice on CPU / MPS, 1 GiB on CUDA. ``0``: the full-logits
        path (``model(...).logits`` of the whole batch; also the fallback for models
        whose head cannot be split off, see the module docstring).
    sync_per_batch
        Copy each batch's NLL to the host as soon as it is computed (a device
        synchronisation per batch). Default: the NLL stay on the device until the call's
        end and move in one copy, so an accelerator never waits for the host between
        batches; the values are identical either way.

    Returns
    -------
    list of np.ndarray
        ``out[i]`` has shape ``(len(sequences[i]) - 1,)`` float64: NLL of token ``j+1``
        given its left context.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.nll import token_nll
    >>> from sigmap_lib.worlds import build_causal_lm
    >>> model = build_causal_lm("gpt2", 300, d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> seqs = [np.array([1, 50, 60, 70]), np.array([1, 80])]  # each starts with BOS (id 1)
    >>> stats = {}
    >>> out = token_nll(model, seqs, max_length=3, stride=1, stats=stats)
    >>> [o.shape for o in out], stats["windows"]  # the 4-token sequence needs 2 windows
    ([(3,), (1,)], 3)
    >>> bool(np.allclose(out[0], np.log(300), atol=0.3))  # untrained: about uniform
    True
    """
    import torch

    if max_length < 2:
        raise SigmapInputError(f"max_length={max_length} must be >= 2")
    if not 0 < stride <= max_length - 1:
        raise SigmapInputError(f"stride={stride} must be in [1, max_length-1={max_length - 1}]")
    out = [np.zeros(max(len(s) - 1, 0), dtype=np.float64) for s in sequences]
    wins: list[tuple[int, int, int, int]] = []  # (doc, begin, end, first_target)
    for i, s in enumerate(sequences):
        wins.extend((i, b, e, t) for b, e, t in _windows(len(s), max_length, stride))
    wins.sort(key=lambda w: w[2] - w[1], reverse=True)
    if logits_chunk is not None and logits_chunk < 0:
        raise SigmapInputError(f"logits_chunk={logits_chunk} must be >= 0 (0: full logits)")
    device = next(model.parameters()).device
    split = _split_lm_head(model) if logits_chunk != 0 else None
    if split is not None:
        vocab = getattr(split[1], "out_features", None) or model.config.vocab_size
        chunk = _chunk_positions(logits_chunk, int(vocab), device)
    slots = real = scored = n_batches = n_full = max_slots = 0
    t_fwd = 0.0
    pos = 0
    pending: list[tuple[Any, list[tuple[int, int, int, int]]]] = []  # device NLL, its windows
    with torch.inference_mode():
        while pos < len(wins):
            width = wins[pos][2] - wins[pos][1]
            rows = max(1, batch_tokens // width)
            # grow the batch (windows sorted longest first) while the slot budget and the
            # padding bound allow
            stop, filled = pos + 1, width
            while stop < min(pos + rows, len(wins)):
                w = wins[stop][2] - wins[stop][1]
                if 1.0 - (filled + w) / ((stop - pos + 1) * width) > max_padding:
                    break
                filled += w
                stop += 1
            batch = wins[pos:stop]
            pos = stop
            ids = np.full((len(batch), width), pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            sel_r: list[np.ndarray] = []
            sel_c: list[np.ndarray] = []
            tgt: list[np.ndarray] = []
            for r, (d, b, e, t) in enumerate(batch):
                seq = sequences[d]
                ids[r, : e - b] = seq[b:e]
                mask[r, : e - b] = 1
                cols = np.arange(t - b - 1, e - b - 1)  # logits predicting positions t..e-1
                sel_r.append(np.full(len(cols), r))
                sel_c.append(cols)
                tgt.append(np.asarray(seq[t:e], dtype=np.int64))
            rr = torch.from_numpy(np.concatenate(sel_r)).to(device)
            cc = torch.from_numpy(np.concatenate(sel_c)).to(device)
            yy = torch.from_numpy(np.concatenate(tgt)).to(device)
            t0 = time.perf_counter()
            inputs = {
                "input_ids": torch.from_numpy(ids).to(device),
                "attention_mask": torch.from_numpy(mask).to(device),
                "use_cache": False,
            }
            nll_parts = []
            if split is not None:
                body, head = split
                hidden = _last_hidden(body(**inputs))
                picked = hidden[rr, cc]  # (scored positions, d_model)
                del hidden
                for k in range(0, len(rr), chunk):
                    lg = head(picked[k : k + chunk]).float()
                    nll_parts.append(
                        torch.nn.functional.cross_entropy(lg, yy[k : k + chunk], reduction="none")
                    )
                    del lg
                del picked
            else:
                logits = model(**inputs).logits
                chunk = 4096
                for k in range(0, len(rr), chunk):
                    lg = logits[rr[k : k + chunk], cc[k : k + chunk]].float()
                    nll_parts.append(
                        torch.nn.functional.cross_entropy(lg, yy[k : k + chunk], reduction="none")
                    )
                del logits
                n_full += 1
            part = torch.cat(nll_parts)
            if sync_per_batch:
                _scatter(out, batch, part.double().cpu().numpy())
            else:
                pending.append((part, batch))
            t_fwd += time.perf_counter() - t0
            slots += ids.size
            max_slots = max(max_slots, ids.size)
            real += int(mask.sum())
            scored += len(rr)
            n_batches += 1
        if pending:  # one copy to the host for the whole call
            t0 = time.perf_counter()
            host = torch.cat([p for p, _ in pending]).double().cpu().numpy()
            t_fwd += time.perf_counter() - t0
            k = 0
            for p, batch in pending:
                _scatter(out, batch, host[k : k + len(p)])
                k += len(p)
    if stats is not None:
        stats["tokens"] = stats.get("tokens", 0) + scored
        stats["slots"] = stats.get("slots", 0) + slots
        stats["real_slots"] = stats.get("real_slots", 0) + real
        stats["forward_seconds"] = stats.get("forward_seconds", 0.0) + t_fwd
        stats["windows"] = stats.get("windows", 0) + len(wins)
        stats["batches"] = stats.get("batches", 0) + n_batches
        stats["full_logits_batches"] = stats.get("full_logits_batches", 0) + n_full
        stats["max_batch_slots"] = max(stats.get("max_batch_slots", 0), max_slots)
    return out


def _scatter(
    out: list[np.ndarray], batch: list[tuple[int, int, int, int]], nll: np.ndarray
) -> None:
    """Write a batch's NLL (its windows' scored positions, in order) into ``out``."""
    k = 0
    for d, _b, e, t in batch:
        out[d][t - 1 : e - 1] = nll[k : k + e - t]
        k += e - t


def apportion_token_nll(
    token_spans: np.ndarray, token_nlls: np.ndarray, attributed_spans: np.ndarray
) -> np.ndarray:
    """Spread each token's NLL over the units its bytes overlap, ∝ overlapping bytes.

    Parameters
    ----------
    token_spans
        ``(n_tokens, 2)`` int byte ``[start, end)`` of each token (overlaps allowed;
        clipped to the document). Empty spans go wholly to the unit containing ``start``.
    token_nlls
        ``(n_tokens,)`` NLL of each token.
    attributed_spans
        ``(n_units, 2)`` spans tiling ``[0, n_bytes)`` (:func:`unit_byte_spans`).

    Returns
    -------
    np.ndarray
        ``(n_units,)`` float64 with ``sum == token_nlls.sum()`` (up to rounding).

    Examples
    --------
    ``"ab cd"`` has units ``ab`` and ``cd``; the token ``"b c"`` straddles both, so its
    NLL 3.0 is split 1 : 2 by bytes (the space belongs to ``cd``):

    >>> import numpy as np
    >>> from sigmap_lib.inputs import unit_byte_spans
    >>> from sigmap_lib.nll import apportion_token_nll
    >>> spans = unit_byte_spans("ab cd")
    >>> spans.tolist()
    [[0, 2], [2, 5]]
    >>> tokens = np.array([[0, 1], [1, 4], [4, 5]])  # "a", "b c", "d"
    >>> apportion_token_nll(tokens, np.array([1.0, 3.0, 0.5]), spans).tolist()
    [2.0, 2.5]
    """
    n_units = len(attributed_spans)
    if n_units == 0:
        if len(token_nlls) and np.any(token_nlls != 0):
            raise SigmapInputError("apportion_token_nll: tokens but no units")
        return np.zeros(0, dtype=np.float64)
    n_bytes = int(attributed_spans[-1, 1])
    spans = np.clip(np.asarray(token_spans, dtype=np.int64), 0, n_bytes)
    nll = np.asarray(token_nlls, dtype=np.float64)
    s, e = spans[:, 0], np.maximum(spans[:, 1], spans[:, 0])
    length = e - s
    out = np.zeros(n_units, dtype=np.float64)
    empty = length == 0
    if empty.any():
        unit_of = np.searchsorted(attributed_spans[:, 1], s[empty], side="right")
        np.add.at(out, np.minimum(unit_of, n_units - 1), nll[empty])
    full = ~empty
    if full.any():
        dens = nll[full] / length[full]
        diff = np.zeros(n_bytes + 1, dtype=np.float64)
        np.add.at(diff, s[full], dens)
        np.add.at(diff, e[full], -dens)
        per_byte = np.cumsum(diff[:n_bytes])
        out += np.add.reduceat(per_byte, attributed_spans[:, 0])
    return out


def document_unit_nll(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_length: int | None = None,
    stride: int | None = None,
    batch_tokens: int = 8192,
    pattern: str | None = None,
    stats: dict[str, Any] | None = None,
    logits_chunk: int | None = None,
) -> list[np.ndarray]:
    """Per-unit NLL (nats) of each text, aligned with ``segment_units(text, pattern)``.

    Parameters
    ----------
    model, tokenizer
        From :func:`load_model` (any HF causal LM + fast tokenizer).
    texts
        Documents (each scored independently; documents never see each other).
    max_length
        Window length in tokens (incl. the BOS prefix); default
        :func:`model_context_length`.
    stride
        Window step for documents longer than ``max_length``; default ``max_length // 2``.
    batch_tokens
        Token slots per forward pass (memory: the model body's activations of
        ``batch_tokens`` slots; logits only ``logits_chunk × vocab`` at a time).
    pattern
        Unit pattern (default: the corpus default).
    stats
        Optional dict updated with ``tokens``, ``slots``, ``real_slots``,
        ``padding_fraction``, ``forward_seconds``, ``align_seconds``, ``windows``,
        ``batches``, ``full_logits_batches``, ``max_batch_slots`` (a maximum),
        ``unscored_first_tokens``.
    logits_chunk
        Positions per LM-head slice, see :func:`token_nll` (``0``: full logits).

    Returns
    -------
    list of np.ndarray
        ``out[i]`` shape ``(n_units_i,)`` float64, ``out[i].sum()`` equals the summed
        token NLL of document ``i``.

    Examples
    --------
    >>> from sigmap_lib.inputs import segment_units
    >>> from sigmap_lib.nll import document_unit_nll
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> texts = ["the river stone", "a cloud, 42!"]
    >>> out = document_unit_nll(model, tok, texts)
    >>> [u.shape for u in out], [len(segment_units(t)) for t in texts]
    ([(3,), (5,)], [3, 5])
    >>> bool(all((u > 0).all() for u in out))
    True
    """
    if not getattr(tokenizer, "is_fast", False):
        raise SigmapInputError("document_unit_nll: a fast tokenizer (with offsets) is required")
    L = model_context_length(model, tokenizer) if max_length is None else int(max_length)
    if max_length is not None and L > model_context_length(model):
        raise SigmapInputError(
            f"max_length={L} exceeds the model's context {model_context_length(model)} "
            f"({getattr(model.config, 'name_or_path', '') or type(model).__name__})"
        )
    S = max(1, L // 2) if stride is None else int(stride)
    texts = list(texts)
    if not texts:
        return []
    t0 = time.perf_counter()
    enc = tokenizer(
        texts,
        add_special_tokens=False,
        return_offsets_mapping=True,
        split_special_tokens=True,
        verbose=False,
    )
    prefix = _prefix_id(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (prefix or 0)
    seqs: list[np.ndarray] = []
    for ids in enc["input_ids"]:
        arr = np.asarray(ids, dtype=np.int64)
        seqs.append(np.concatenate([[prefix], arr]) if prefix is not None else arr)
    t_tok = time.perf_counter() - t0
    local: dict[str, Any] = {}
    nlls = token_nll(model, seqs, max_length=L, stride=S, batch_tokens=batch_tokens,
                     pad_id=int(pad_id), stats=local, logits_chunk=logits_chunk)  # fmt: skip
    t1 = time.perf_counter()
    out: list[np.ndarray] = []
    for text, offsets, tok_nll in zip(texts, enc["offset_mapping"], nlls):
        units = segment_units(text, pattern)
        attr = unit_byte_spans(text, units=units)
        off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
        if not text.isascii():
            off = char_to_byte_offsets(text)[off]
        if prefix is None and len(off):
            tok_nll = np.concatenate([[0.0], tok_nll])
        if len(units) == 0:
            if len(off):
                raise SigmapInputError(
                    f"document_unit_nll: text {text[:40]!r} has tokens but no units"
                )
            out.append(np.zeros(0, dtype=np.float64))
            continue
        out.append(apportion_token_nll(off, tok_nll, attr))
    t_align = time.perf_counter() - t1 + t_tok
    if stats is not None:
        for k, v in local.items():
            stats[k] = max(stats.get(k, 0), v) if k == "max_batch_slots" else stats.get(k, 0) + v
        stats["align_seconds"] = stats.get("align_seconds", 0.0) + t_align
        stats["unscored_first_tokens"] = stats.get("unscored_first_tokens", 0) + (
            len(texts) if prefix is None else 0
        )
        slots = stats.get("slots", 0)
        stats["padding_fraction"] = 1.0 - stats.get("real_slots", 0) / slots if slots else 0.0
    return out


def score_corpus(
    model: Any,
    tokenizer: Any,
    corpus_store: CorpusStore,
    nll_store: NLLStore | str | Path,
    *,
    max_length: int | None = None,
    stride: int | None = None,
    batch_tokens: int = 8192,
    progress: Callable[[dict[str, Any]], None] | None = None,
    fail_after_shards: int | None = None,
    verify: bool = True,
    logits_chunk: int | None = None,
) -> dict[str, Any]:
    """Score every pending shard of ``corpus_store`` into ``nll_store`` (resumable).

    Shards already committed with a valid checksum are skipped (``NLLStore.verify`` runs
    first unless ``verify=False``, so corrupted shards are re-scored); each scored shard is
    committed atomically.

    Parameters
    ----------
    nll_store
        An open :class:`sigmap_lib.nll.NLLStore` or a path (created/opened for this corpus).
    progress
        Called after each committed shard with a dict (shard, shards_done, units, tokens,
        tokens_per_s).
    fail_after_shards
        Testing hook: raise ``RuntimeError`` after this many shards were committed in this
        call (simulates an interrupted run).
    logits_chunk
        Positions per LM-head slice, see :func:`token_nll` (``0``: full logits).

    Returns
    -------
    dict
        ``tokens`` and ``tokens_per_s`` (this call), ``units``, ``total_nll`` and
        ``bits_per_byte`` (whole corpus, read back from the store), ``padding_fraction``,
        ``slots`` / ``real_slots`` (token slots processed, total / non-padding), ``windows``,
        ``max_batch_slots`` (largest batch), ``full_logits_batches`` (fallback batches),
        ``device``, ``dtype``, ``shards_done`` (this call), ``shards_skipped``,
        ``seconds``, ``forward_seconds``, ``align_seconds``, ``store_seconds``.

    Examples
    --------
    A 4-document corpus in 3 shards, scored by a tiny untrained model; a second call
    finds every shard committed and scores nothing:

    >>> from sigmap_lib.inputs import Document, build_corpus_store
    >>> from sigmap_lib.nll import NLLStore, score_corpus
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> docs = [Document(f"d{i}", "inline", t) for i, t in enumerate(sample_texts(4, seed=1))]
    >>> corpus = build_corpus_store(docs, "corpus", shard_units=40)
    >>> res = score_corpus(model, tok, corpus, "nll/tiny")
    >>> res["units"], res["shards_done"], res["shards_skipped"], res["device"]
    (189, 3, 0, 'cpu')
    >>> again = score_corpus(model, tok, corpus, "nll/tiny")
    >>> again["shards_done"], again["shards_skipped"]
    (0, 3)
    >>> NLLStore.open("nll/tiny").read().shape  # per-unit NLL, nats
    (189,)
    """
    from sigmap_lib.nll._store import NLLStore, corpus_chunk_units

    if not isinstance(nll_store, NLLStore):
        nll_store = NLLStore.create_or_open(
            nll_store, corpus_store.n_units, corpus_store.shard_bounds, corpus_store.fingerprint,
            chunk_units=corpus_chunk_units(corpus_store),
        )  # fmt: skip
    if (
        nll_store.n_units != corpus_store.n_units
        or nll_store.corpus_fingerprint != corpus_store.fingerprint
    ):
        raise SigmapInputError(
            f"NLL store {nll_store.path}: built for another corpus (fingerprint/unit count differ)"
        )
    shards = corpus_store.shards
    if verify:
        nll_store.verify()
    pending = nll_store.pending_shards()
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    t_store = 0.0
    done = 0
    for si in pending:
        sh = shards[si]
        texts = corpus_store.documents(sh.doc_start, sh.doc_end)
        per_doc = document_unit_nll(
            model, tokenizer, texts, max_length=max_length, stride=stride,
            batch_tokens=batch_tokens, pattern=corpus_store.pattern, stats=stats,
            logits_chunk=logits_chunk,
        )  # fmt: skip
        values = np.concatenate(per_doc) if per_doc else np.zeros(0)
        if len(values) != sh.n_units:
            raise SigmapInputError(
                f"corpus store {corpus_store.path}: shard {si} has {sh.n_units} units but scoring "
                f"gave {len(values)} (unit pattern mismatch?)"
            )
        ts = time.perf_counter()
        nll_store.write_shard(si, values)
        t_store += time.perf_counter() - ts
        done += 1
        if progress is not None:
            el = time.perf_counter() - t0
            progress(
                {"shard": si, "shards_done": done, "shards_pending": len(pending) - done,
                 "units": sh.n_units, "tokens": stats.get("tokens", 0),
                 "tokens_per_s": stats.get("tokens", 0) / el if el > 0 else 0.0}
            )  # fmt: skip
        if fail_after_shards is not None and done >= fail_after_shards and done < len(pending):
            raise RuntimeError(f"score_corpus: injected failure after {done} shards")
    seconds = time.perf_counter() - t0
    total = (
        float(np.sum(nll_store.read(), dtype=np.float64)) if nll_store.is_complete() else math.nan
    )
    n_bytes = corpus_store.n_bytes
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    return {
        "tokens": int(stats.get("tokens", 0)),
        "tokens_per_s": stats.get("tokens", 0) / seconds if seconds > 0 and done else 0.0,
        "units": corpus_store.n_units,
        "bytes": n_bytes,
        "total_nll": total,
        "bits_per_byte": total / (n_bytes * math.log(2)) if n_bytes else math.nan,
        "padding_fraction": float(stats.get("padding_fraction", 0.0)),
        "slots": int(stats.get("slots", 0)),
        "real_slots": int(stats.get("real_slots", 0)),
        "windows": int(stats.get("windows", 0)),
        "max_batch_slots": int(stats.get("max_batch_slots", 0)),
        "full_logits_batches": int(stats.get("full_logits_batches", 0)),
        "device": str(next(model.parameters()).device),
        "dtype": dtype,
        "shards_done": done,
        "shards_skipped": len(shards) - len(pending),
        "seconds": seconds,
        "forward_seconds": float(stats.get("forward_seconds", 0.0)),
        "align_seconds": float(stats.get("align_seconds", 0.0)),
        "store_seconds": t_store,
    }

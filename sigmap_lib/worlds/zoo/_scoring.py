"""Loglikelihood scoring of the zoo benchmarks the way lm-evaluation-harness does it.

Metrics (per item, 0/1): ``acc`` = the highest total loglikelihood choice is the gold
one; ``acc_norm`` = the same after dividing each choice's loglikelihood by its length
in UTF-8 bytes; ``greedy`` = the gold continuation is the greedy decode;
``ll_threshold`` = the gold continuation's loglikelihood per byte reaches the
benchmark's threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.worlds.zoo._benchmarks import ZooBenchmark


def _encode_pair(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-evaluation-harness's split: encode ``context + continuation`` and take the
    tokens after the context's own encoding as the continuation (trailing context
    whitespace moved to the continuation first). BOS (else EOS) is prepended to the context."""
    n_sp = len(context) - len(context.rstrip(" "))
    if n_sp:
        continuation = context[-n_sp:] + continuation
        context = context[:-n_sp]
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    prefix = [] if bos is None else [int(bos)]
    if not context:
        cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
        return prefix, [int(t) for t in cont]
    whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx) :]
    if whole[: len(ctx)] != ctx or not cont:
        cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
    return prefix + [int(t) for t in ctx], [int(t) for t in cont]


def encode_requests(
    tokenizer: Any, requests: Sequence[tuple[str, str]]
) -> list[tuple[list[int], list[int]]]:
    """Token ids of each ``(context, continuation)`` request, split as lm-eval does.

    The encoding depends only on the tokenizer, so models sharing one tokenizer can
    share it (:func:`loglikelihoods`' ``encoded``).

    Returns
    -------
    list[tuple[list[int], list[int]]]
        Per request: the context ids (BOS, else EOS, first) and the continuation ids.

    Examples
    --------
    >>> from sigmap_lib.worlds import sample_texts, train_bpe_tokenizer
    >>> from sigmap_lib.worlds.zoo import encode_requests
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> (ctx, cont), = encode_requests(tok, [("the river ", "stone")])
    >>> ctx[0] == tok.bos_token_id, tok.decode(ctx[1:]), tok.decode(cont)
    (True, 'the river', ' stone')
    """
    return [_encode_pair(tokenizer, c, x) for c, x in requests]


@dataclass(frozen=True)
class _Batch:
    """One batch of :func:`loglikelihoods`: its contexts (left-padded) and, per
    continuation, the context it extends (``gidx``) and its tokens (right-padded)."""

    ids: Any  # (n_contexts, lc) int64
    mask: Any  # (n_contexts, lc) int64
    pos: Any  # (n_contexts, lc) int64
    gidx: Any  # (n, ) int64: each continuation's context row
    cids: Any  # (n, lt) int64
    cmask: Any  # (n, lt) bool
    cattn: Any  # (n, lc + lt) int64: the continuation pass's attention mask
    cpos: Any  # (n, lt) int64
    rows: np.ndarray  # (n,) the continuations' request indices


@dataclass(frozen=True)
class RequestBatches:
    """The batched forward passes of :func:`loglikelihoods` over encoded requests.

    They depend only on the token ids, the pad id, the batch size and the longest
    sequence, so models sharing one tokenizer and context length share them
    (:func:`batch_requests`).
    """

    n_requests: int
    max_length: int
    batches: tuple[_Batch, ...]


def context_length(model: Any) -> int:
    """The longest sequence ``model`` takes: its config's ``n_positions`` (GPT-2) or
    ``max_position_embeddings`` (Llama), else 1024."""
    cfg = model.config
    return int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", 1024))


def batch_requests(
    encoded: Sequence[tuple[list[int], list[int]]],
    *,
    pad_id: int,
    max_length: int,
    batch_size: int = 64,
) -> RequestBatches:
    """Group and pad encoded requests into :func:`loglikelihoods`' forward passes.

    Requests with the same context share one pass over it. Batches hold contexts whose
    longest continuations have about the same length (within a factor of two), longest
    contexts first, so little of either pass is padding; a context with more than
    ``batch_size`` continuations is split over several batches. Contexts longer than
    ``max_length`` minus their longest continuation lose tokens from the left.

    Parameters
    ----------
    encoded : sequence of (context ids, continuation ids)
        :func:`encode_requests`' output.
    pad_id : int
        Token id written in the padding (masked out).
    max_length : int
        Longest sequence fed to the model.
    batch_size : int
        About how many continuations per forward pass.

    Returns
    -------
    RequestBatches

    Raises
    ------
    SigmapInputError
        When a continuation is empty or does not fit in ``max_length``, or a context is
        empty.

    Examples
    --------
    >>> from sigmap_lib.worlds.zoo import batch_requests
    >>> encoded = [([1, 5, 6], [7]), ([1, 5, 6], [8, 9]), ([1, 2], [3])]
    >>> plan = batch_requests(encoded, pad_id=0, max_length=16, batch_size=2)
    >>> [b.rows.tolist() for b in plan.batches]  # short continuations first
    [[2], [0, 1]]
    >>> plan.batches[1].ids.tolist()  # requests 0 and 1 share one pass over their context
    [[1, 5, 6]]
    >>> plan.batches[1].cids.tolist()  # their continuations, right-padded
    [[7, 0], [8, 9]]
    """
    import torch

    groups: dict[tuple[int, ...], list[int]] = {}
    for ri, (ctx, cnt) in enumerate(encoded):
        if not cnt:
            raise SigmapInputError(f"loglikelihoods: request {ri} has an empty continuation")
        if len(cnt) >= max_length:
            raise SigmapInputError(
                f"loglikelihoods: request {ri}'s continuation has {len(cnt)} tokens; it must be "
                f"shorter than max_length={max_length}"
            )
        if not ctx:
            raise SigmapInputError(
                f"loglikelihoods: request {ri} has an empty context and the tokenizer has no "
                "BOS/EOS token to start from"
            )
        groups.setdefault(tuple(ctx), []).append(ri)
    step = max(1, batch_size)
    glist: list[tuple[list[int], list[int]]] = []
    for key, members in groups.items():
        longest = max(len(encoded[i][1]) for i in members)
        ctx = list(key)[-(max_length - longest) :]  # the whole group's longest fits
        members = sorted(members, key=lambda i: len(encoded[i][1]))
        for lo in range(0, len(members), step):
            glist.append((ctx, members[lo : lo + step]))
    # continuation-length classes (1, 2, 3-4, 5-8, ...), longest contexts first in each
    glist.sort(
        key=lambda g: (max(len(encoded[i][1]) for i in g[1]).bit_length(), -len(g[0]), g[1][0])
    )
    grouped: list[list[tuple[list[int], list[int]]]] = []
    n_rows = 0
    for g in glist:
        if not grouped or n_rows + len(g[1]) > batch_size:
            grouped.append([])
            n_rows = 0
        grouped[-1].append(g)
        n_rows += len(g[1])
    batches = []
    for batch in grouped:
        lc = max(len(ctx) for ctx, _ in batch)
        ids = np.full((len(batch), lc), pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), lc), dtype=np.int64)
        for r, (ctx, _) in enumerate(batch):
            ids[r, lc - len(ctx) :] = ctx
            mask[r, lc - len(ctx) :] = 1
        members = [(gi, ri) for gi, (_, mem) in enumerate(batch) for ri in mem]
        gidx = np.array([gi for gi, _ in members], dtype=np.int64)
        rows = np.array([ri for _, ri in members], dtype=np.int64)
        lt = max(len(encoded[ri][1]) for ri in rows)
        cids = np.full((len(members), lt), pad_id, dtype=np.int64)
        cmask = np.zeros((len(members), lt), dtype=bool)
        for r, ri in enumerate(rows):
            cnt = encoded[ri][1]
            cids[r, : len(cnt)] = cnt
            cmask[r, : len(cnt)] = True
        ctx_len = mask.sum(-1)[gidx]
        batches.append(
            _Batch(
                ids=torch.from_numpy(ids),
                mask=torch.from_numpy(mask),
                pos=torch.from_numpy(np.maximum(mask.cumsum(-1) - 1, 0)),
                gidx=torch.from_numpy(gidx),
                cids=torch.from_numpy(cids),
                cmask=torch.from_numpy(cmask),
                cattn=torch.from_numpy(
                    np.concatenate([mask[gidx], cmask], axis=1).astype(np.int64)
                ),
                cpos=torch.from_numpy(
                    np.minimum(ctx_len[:, None] + np.arange(lt)[None, :], max_length - 1)
                ),
                rows=rows,
            )
        )
    return RequestBatches(len(encoded), int(max_length), tuple(batches))


def loglikelihoods(
    model: Any,
    tokenizer: Any,
    requests: Sequence[tuple[str, str]],
    *,
    batch_size: int = 64,
    max_length: int | None = None,
    encoded: Sequence[tuple[list[int], list[int]]] | None = None,
    batches: RequestBatches | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Loglikelihood of each continuation given its context (lm-eval ``loglikelihood``).

    Requests with the same context share one forward pass over it: contexts are run in
    left-padded batches with the key/value cache kept, the cache is gathered once per
    continuation, and the continuations are run on top of it (right-padded); see
    :func:`batch_requests` for how the batches are formed.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer (BOS, else EOS, is prepended to every context).
    requests : sequence of (context, continuation)
    batch_size : int
        About how many continuations per forward pass.
    max_length : int, optional
        Longest sequence fed to the model (default: the model's context). Longer
        contexts lose tokens from the left so that the longest continuation of the
        same context fits; continuations are always kept whole.
    encoded : sequence, optional
        :func:`encode_requests` of ``requests`` with this tokenizer (computed when
        omitted).
    batches : RequestBatches, optional
        :func:`batch_requests` of ``encoded`` (computed when omitted): models that share
        a tokenizer and context length share it.

    Returns
    -------
    ll : np.ndarray, shape (n_requests,), float64
        Sum of the continuation tokens' log-probabilities (natural log).
    greedy : np.ndarray, shape (n_requests,), bool
        Whether every continuation token is the argmax of its prediction.

    Raises
    ------
    SigmapInputError
        When a continuation is empty or does not fit in ``max_length``, or ``encoded``
        or ``batches`` do not match the requests or the model.

    Examples
    --------
    >>> import numpy as np
    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> from sigmap_lib.worlds.zoo import loglikelihoods
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> requests = [("the river", " stone"), ("the river", " cloud"), ("a", " b")]
    >>> ll, greedy = loglikelihoods(model, tok, requests)  # both "the river" share a pass
    >>> np.round(ll, 1).tolist(), greedy.tolist()  # nats; an untrained model
    ([-17.3, -28.6, -5.8], [False, False, False])
    """
    import torch

    if max_length is None:
        max_length = context_length(model)
    if batches is None:
        if encoded is None:
            encoded = encode_requests(tokenizer, requests)
        elif len(encoded) != len(requests):
            raise SigmapInputError(
                f"loglikelihoods: {len(encoded)} encoded requests for {len(requests)} requests"
            )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        batches = batch_requests(encoded, pad_id=pad, max_length=max_length, batch_size=batch_size)
    elif batches.n_requests != len(requests) or batches.max_length != max_length:
        raise SigmapInputError(
            f"loglikelihoods: batches of {batches.n_requests} requests up to "
            f"{batches.max_length} tokens for {len(requests)} requests up to {max_length}"
        )
    ll = np.zeros(len(requests), dtype=np.float64)
    greedy = np.zeros(len(requests), dtype=bool)
    device = next(model.parameters()).device
    with torch.inference_mode():
        for b in batches.batches:
            out = model(
                input_ids=b.ids.to(device),
                attention_mask=b.mask.to(device),
                position_ids=b.pos.to(device),
                use_cache=True,
                logits_to_keep=1,  # only the last context position predicts a choice
            )
            first = out.logits[:, -1].float()  # (n_contexts, V): predicts token 0
            cache = out.cache
            gidx, cids = b.gidx.to(device), b.cids.to(device)
            cache.batch_select_indices(gidx)
            rest = (
                model(
                    input_ids=cids,
                    attention_mask=b.cattn.to(device),
                    position_ids=b.cpos.to(device),
                    cache=cache,
                    use_cache=True,
                )
                .logits[:, :-1]
                .float()
            )  # (n, lt - 1, V): position j predicts token j + 1
            # log p(token) = its logit - logsumexp of the logits; greedy = its logit is the max
            tok_lp = torch.cat(
                [
                    (first[gidx, cids[:, 0]] - torch.logsumexp(first, -1)[gidx])[:, None],
                    rest.gather(2, cids[:, 1:, None])[:, :, 0] - torch.logsumexp(rest, -1),
                ],
                dim=1,
            )
            best = torch.cat([first.argmax(-1)[gidx, None], rest.argmax(-1)], dim=1)
            real = b.cmask.to(device)
            ll[b.rows] = torch.where(real, tok_lp, 0.0).sum(dim=1).double().cpu().numpy()
            greedy[b.rows] = ((best == cids) | ~real).all(dim=1).cpu().numpy()
    return ll, greedy


def benchmark_requests(benchmarks: Sequence[ZooBenchmark]) -> list[tuple[str, str]]:
    """Every ``(context, choice)`` request of ``benchmarks``: items in order, each item's
    choices in order (what :func:`score_benchmarks` scores)."""
    return [(it.context, c) for b in benchmarks for it in b.items for c in it.choices]


def score_benchmarks(
    model: Any,
    tokenizer: Any,
    benchmarks: Sequence[ZooBenchmark],
    *,
    batch_size: int = 64,
    encoded: Sequence[tuple[list[int], list[int]]] | None = None,
    batches: RequestBatches | None = None,
) -> dict[str, np.ndarray]:
    """Item-level 0/1 responses of one model on every benchmark.

    All requests of all benchmarks (:func:`benchmark_requests`) go through
    :func:`loglikelihoods` in one batched pass; ``encoded`` is their
    :func:`encode_requests` with this tokenizer and ``batches`` their
    :func:`batch_requests`, when already computed. Returns
    ``{benchmark name: int8 array (n_items,)}`` following each benchmark's metric
    (``acc``, ``acc_norm``, ``greedy`` or ``ll_threshold``).

    Examples
    --------
    A two-item benchmark built inline, answered by a tiny untrained model:

    >>> from sigmap_lib.worlds import build_causal_lm, sample_texts, train_bpe_tokenizer
    >>> from sigmap_lib.worlds.zoo import ZooBenchmark, ZooItem, score_benchmarks
    >>> tok = train_bpe_tokenizer(sample_texts(50, seed=0), vocab_size=300)
    >>> model = build_causal_lm("gpt2", len(tok), d_model=16, n_layer=1, n_head=2, n_ctx=32)
    >>> items = [
    ...     ZooItem("demo-0", "the river", [" stone", " cloud"], 0, "the river ___"),
    ...     ZooItem("demo-1", "a model", [" score", " rank"], 1, "a model ___"),
    ... ]
    >>> bench = ZooBenchmark("demo", "pickword", "multiple_choice", "acc", "prose", "language",
    ...                      items=items)
    >>> score_benchmarks(model, tok, [bench])  # 1 = the gold choice is the most likely
    {'demo': array([1, 0], dtype=int8)}
    """
    requests = benchmark_requests(benchmarks)
    where: list[tuple[int, int, int]] = []  # (bench, item, first request)
    start = 0
    for bi, b in enumerate(benchmarks):
        for ii, it in enumerate(b.items):
            where.append((bi, ii, start))
            start += len(it.choices)
    ll, greedy = loglikelihoods(
        model, tokenizer, requests, batch_size=batch_size, encoded=encoded, batches=batches
    )
    out = {b.name: np.zeros(len(b.items), dtype=np.int8) for b in benchmarks}
    for bi, ii, start in where:
        b = benchmarks[bi]
        it = b.items[ii]
        sl = slice(start, start + len(it.choices))
        if b.metric == "greedy":
            ok = bool(greedy[start])
        elif b.metric == "ll_threshold":
            if b.threshold is None:
                raise SigmapInputError(f"benchmark {b.name}: metric ll_threshold needs a threshold")
            gold = it.choices[it.gold]
            ok = ll[start + it.gold] / max(1, len(gold.encode("utf-8"))) >= b.threshold
        elif b.metric == "acc_norm":
            nbytes = np.array([max(1, len(c.encode("utf-8"))) for c in it.choices], dtype=float)
            ok = int(np.argmax(ll[sl] / nbytes)) == it.gold
        else:
            ok = int(np.argmax(ll[sl])) == it.gold
        out[b.name][ii] = int(ok)
    return out

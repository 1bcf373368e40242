"""Helpers shared by the library tests (import them: ``from tests.lib.helpers import ...``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sigmap_lib.errors import SigmapInputError


def input_error(call: Callable[[], object], *fragments: str) -> str:
    """Run ``call``, which must raise :class:`SigmapInputError` whose message contains
    every one of ``fragments``; return the message (for further checks)."""
    with pytest.raises(SigmapInputError) as exc:
        call()
    msg = str(exc.value)
    for f in fragments:
        assert f in msg, msg
    return msg


def train_tiny_lm(
    arch: str, *, vocab_size: int, style: str, n_ctx: int, seed: int, n_head: int = 2, **model_kw
) -> tuple[object, object]:
    """``(model, tokenizer)``: a two-layer causal LM (``d_model=32``) with a BPE tokenizer of
    ``vocab_size``, trained 15 steps on 200 sample texts; built offline in about a second."""
    from sigmap_lib import worlds

    texts = worlds.sample_texts(200, seed=0)
    tok = worlds.train_bpe_tokenizer(texts, vocab_size=vocab_size, style=style)
    model = worlds.build_causal_lm(
        arch, len(tok), d_model=32, n_layer=2, n_head=n_head, n_ctx=n_ctx, seed=seed, **model_kw
    )
    worlds.train_causal_lm(
        model, tok, texts, steps=15, batch_size=8, seq_len=48, seed=seed, threads=1
    )
    return model, tok

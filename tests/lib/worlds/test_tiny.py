"""Tiny real HF models: tokenizers, deterministic init, training, save/load round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sigmap_lib import worlds
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import load_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return worlds.sample_texts(200, seed=3)


@pytest.mark.parametrize("style", ["byte_level", "metaspace"])
def test_tokenizer_specials_and_roundtrip(texts: list[str], style: str, tmp_path) -> None:
    tok = worlds.train_bpe_tokenizer(texts, tmp_path / "tok", vocab_size=380, style=style)
    assert (tok.unk_token_id, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (0, 1, 2, 3)
    assert 300 < len(tok) <= 380
    sample = "naïve café 😀 über  spaces\tand 12345 東京"
    ids = tok(sample, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == sample
    assert (tmp_path / "tok" / "tokenizer.json").exists()


def test_tokenizer_rejects_tiny_vocab(texts: list[str]) -> None:
    with pytest.raises(SigmapInputError, match="vocab_size"):
        worlds.train_bpe_tokenizer(texts, vocab_size=100)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_build_is_deterministic_per_seed(arch: str) -> None:
    state = torch.random.get_rng_state()
    a = worlds.build_causal_lm(arch, 300, d_model=32, seed=7)
    b = worlds.build_causal_lm(arch, 300, d_model=32, seed=7)
    c = worlds.build_causal_lm(arch, 300, d_model=32, seed=8)
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG untouched
    pa = dict(a.named_parameters())
    pb = dict(b.named_parameters())
    pc = dict(c.named_parameters())
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert any(not torch.equal(pa[k], pc[k]) for k in pa)
    assert a.config.vocab_size == 300


def test_build_rejects_bad_sizes() -> None:
    with pytest.raises(SigmapInputError, match="divisible"):
        worlds.build_causal_lm("gpt2", 300, d_model=30, n_head=4)
    with pytest.raises(SigmapInputError, match="unknown arch"):
        worlds.build_causal_lm("bert", 300)  # type: ignore[arg-type]


def test_training_lowers_loss(texts: list[str]) -> None:
    tok = worlds.train_bpe_tokenizer(texts, vocab_size=380)
    model = worlds.build_causal_lm("gpt2", len(tok), d_model=32, n_ctx=64)
    stats = worlds.train_causal_lm(model, tok, texts, steps=40, batch_size=8, seq_len=48, seed=1)
    assert stats["tokens_seen"] == 40 * 8 * 48
    # random init is ~ln(380) = 5.9 nats; 40 steps of AdamW must learn the unigram statistics
    assert stats["initial_loss"] > 5.0
    assert stats["final_loss"] < stats["initial_loss"] - 1.0
    assert stats["tokens_per_s"] > 0 and not model.training


def test_train_rejects_too_long_blocks(texts: list[str]) -> None:
    tok = worlds.train_bpe_tokenizer(texts, vocab_size=380)
    model = worlds.build_causal_lm("gpt2", len(tok), d_model=32, n_ctx=32)
    with pytest.raises(SigmapInputError, match="exceeds the model context"):
        worlds.train_causal_lm(model, tok, texts, steps=1, seq_len=64)


@pytest.mark.parametrize("arch,style", [("gpt2", "byte_level"), ("llama", "metaspace")])
def test_save_then_load_gives_same_logits(
    texts: list[str], arch: str, style: str, tmp_path
) -> None:
    tok = worlds.train_bpe_tokenizer(texts, vocab_size=380, style=style)
    model = worlds.build_causal_lm(arch, len(tok), d_model=32, n_ctx=64, seed=3)
    worlds.train_causal_lm(model, tok, texts, steps=3, batch_size=4, seq_len=32)
    out = worlds.save_model(model, tok, tmp_path / "m")
    assert (out / "model.safetensors").exists()
    assert not list(out.parent.glob(".m.tmp-*"))  # temp folder renamed away
    loaded, ltok = load_model(out, device="cpu")
    ids = torch.tensor([[1, *tok("the river café 😀", add_special_tokens=False)["input_ids"]]])
    assert ltok("the river café 😀", add_special_tokens=False)["input_ids"] == ids[0, 1:].tolist()
    with torch.no_grad():
        a = model(input_ids=ids).logits
        b = loaded(input_ids=ids).logits
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-6)
    assert loaded.dtype == torch.float32

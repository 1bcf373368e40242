"""Bounded-memory scoring: the LM head applied to slices of positions (chunked log-softmax
and gather) gives the NLLs of the full-logits forward pass, on GPT-2 and Llama models, for
any chunk size; models whose head cannot be split off fall back to the full logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import document_unit_nll, load_model, token_nll
from sigmap_lib.nll._perplexity import _split_lm_head
from sigmap_lib.worlds import build_causal_lm, sample_texts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _random_model(arch: str, seed: int, **overrides):
    # a large init range: peaked, far-from-uniform distributions (a harder comparison)
    return build_causal_lm(
        arch, 397, d_model=32, n_layer=2, n_head=2, n_ctx=48, seed=seed,
        initializer_range=0.4, **overrides,
    )  # fmt: skip


def _sequences(rng: np.random.Generator, vocab: int, n: int, max_len: int) -> list[np.ndarray]:
    return [
        np.concatenate([[1], rng.integers(4, vocab, int(rng.integers(2, max_len)))])
        for _ in range(n)
    ]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_chunked_equals_full_logits_random_chunks(arch: str) -> None:
    rng = np.random.default_rng(17 if arch == "gpt2" else 18)
    model = _random_model(arch, seed=int(rng.integers(1000))).eval()
    assert _split_lm_head(model) is not None
    seqs = _sequences(rng, 397, 12, 110)  # longer than the context: sliding windows too
    kw = {"max_length": 48, "stride": 20, "batch_tokens": 160}
    st_full: dict = {}
    ref = token_nll(model, seqs, logits_chunk=0, stats=st_full, **kw)
    assert st_full["full_logits_batches"] == st_full["batches"] > 1
    assert np.concatenate(ref).std() > 0.5  # not a near-uniform model
    for chunk in [1, 2, *rng.integers(3, 400, 4).tolist(), None]:
        st: dict = {}
        got = token_nll(model, seqs, logits_chunk=chunk, stats=st, **kw)
        assert st["full_logits_batches"] == 0 and st["batches"] == st_full["batches"]
        assert st["max_batch_slots"] <= 160
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"chunk={chunk}")


def test_chunked_equals_plain_forward_on_trained_models(tiny_models: list[Path]) -> None:
    """Trained GPT-2 / Llama through document_unit_nll with tiny chunks vs the plain
    forward pass with labels (per-document totals)."""
    texts = sample_texts(6, seed=5)
    for path in tiny_models:
        model, tok = load_model(path, device="cpu")
        a = document_unit_nll(model, tok, texts, logits_chunk=3, batch_tokens=256)
        b = document_unit_nll(model, tok, texts, logits_chunk=0, batch_tokens=256)
        for text, ua, ub in zip(texts, a, b, strict=True):
            np.testing.assert_allclose(ua, ub, rtol=1e-5, atol=1e-6)
            ids = [tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]
            if len(ids) <= 64:
                x = torch.tensor([ids])
                with torch.no_grad():
                    plain = float(model(input_ids=x, labels=x).loss) * (len(ids) - 1)
                assert ua.sum() == pytest.approx(plain, rel=1e-5)


def test_head_that_cannot_be_split_falls_back_to_full_logits() -> None:
    """A wrapper that transforms the head's output (here: doubles the logits) fails the
    probe; the full-logits path scores it, so the transform is honoured."""
    model = _random_model("gpt2", seed=3).eval()
    plain = model.forward

    def doubled(*args, **kwargs):
        out = plain(*args, **kwargs)
        out.logits = out.logits * 2.0
        return out

    model.forward = doubled
    assert _split_lm_head(model) is None
    seqs = _sequences(np.random.default_rng(0), 397, 4, 40)
    st: dict = {}
    got = token_nll(model, seqs, max_length=48, stride=20, stats=st)
    ref = token_nll(model, seqs, max_length=48, stride=20, logits_chunk=0)
    assert st["full_logits_batches"] == st["batches"] >= 1
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_array_equal(a, b)
    x = torch.tensor(seqs[0][None])
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=x).logits[0, :-1], -1)
    expect = -lp[torch.arange(len(seqs[0]) - 1), x[0, 1:]].double().numpy()
    np.testing.assert_allclose(got[0], expect, rtol=1e-5, atol=1e-5)


def test_logit_softcapping_config_uses_full_logits() -> None:
    model = _random_model("llama", seed=4).eval()
    model.config.final_logit_softcapping = 30.0  # as Gemma 2 (the wrapper caps the logits)
    assert _split_lm_head(model) is None
    assert _split_lm_head(_random_model("llama", seed=4).eval()) is not None


def test_gguf_model_head_is_split(tiny_gguf, tmp_path: Path) -> None:
    path, _original, _tok = tiny_gguf
    model, tok = load_model(path, device="cpu", gguf_cache=tmp_path / "cache")
    assert _split_lm_head(model) is not None
    texts = sample_texts(3, seed=2)
    a = document_unit_nll(model, tok, texts, logits_chunk=5)
    b = document_unit_nll(model, tok, texts, logits_chunk=0)
    for ua, ub in zip(a, b, strict=True):
        np.testing.assert_allclose(ua, ub, rtol=1e-5, atol=1e-6)


def test_negative_logits_chunk_is_refused() -> None:
    model = _random_model("gpt2", seed=0)
    with pytest.raises(SigmapInputError, match="logits_chunk"):
        token_nll(model, [np.array([1, 5, 6])], max_length=8, stride=4, logits_chunk=-1)

"""Shared fixtures for the library tests: tiny real causal LMs built offline."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's torch work on one intra-op thread: tiny models gain nothing from
    more, and on a shared CPU extra threads oversubscribe the cores (measured 5x slower).
    Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two tiny trained causal LMs saved with ``save_pretrained`` (safetensors).

    ``[0]`` GPT-2 (learned positions) + byte-level BPE (vocab 400), context 64.
    ``[1]`` Llama (RoPE, SwiGLU) + SentencePiece-style Metaspace BPE with byte fallback
    (vocab 420), context 96.
    Both load through ``sigmap_lib.nll.load_model``. Built in ~2 s.
    """
    from sigmap_lib.worlds import save_model
    from tests.lib.helpers import train_tiny_lm

    root = tmp_path_factory.mktemp("tiny_models")
    paths = []
    specs = [
        ("tiny-gpt2", "gpt2", "byte_level", 400, 64, 0),
        ("tiny-llama", "llama", "metaspace", 420, 96, 1),
    ]
    for name, arch, style, vocab, n_ctx, seed in specs:
        model, tok = train_tiny_lm(arch, vocab_size=vocab, style=style, n_ctx=n_ctx, seed=seed)
        paths.append(save_model(model, tok, root / name))
    return paths

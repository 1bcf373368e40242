"""Tests of sigmap_lib.overlap: caching by content hash, normalisation, the real encoder."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.overlap import default_encoder_path, embed_texts, encoder_id, mean_embedding


class CountingEncoder:
    """Deterministic fake encoder: vector from the text's hash; counts encoded texts."""

    sigmap_id = "counting-fake-v1"

    def __init__(self, dim: int = 16) -> None:
        self.dim = dim
        self.n_texts = 0
        self.n_calls = 0

    def encode(self, texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False):
        self.n_calls += 1
        self.n_texts += len(texts)
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            out.append(np.random.default_rng(seed).standard_normal(self.dim) * 3.0)
        return np.array(out, dtype=np.float32)


def test_embed_dedupes_and_normalizes() -> None:
    enc = CountingEncoder()
    texts = ["a", "b", "a", "c", "b"]
    v = embed_texts(texts, encoder=enc)
    assert v.shape == (5, 16) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)
    assert enc.n_texts == 3
    np.testing.assert_array_equal(v[0], v[2])
    ref = enc.encode(["c"])[0]
    np.testing.assert_allclose(v[3], ref / np.linalg.norm(ref), rtol=1e-6)


def test_cache_hit_does_not_recompute(tmp_path) -> None:
    enc = CountingEncoder()
    v1 = embed_texts(["x", "y", "z"], encoder=enc, cache_dir=tmp_path, chunk_size=2)
    assert enc.n_texts == 3 and enc.n_calls == 2  # two chunks -> two shards
    enc2 = CountingEncoder()
    v2 = embed_texts(["z", "x", "new"], encoder=enc2, cache_dir=tmp_path)
    assert enc2.n_texts == 1  # only "new"
    np.testing.assert_array_equal(v2[0], v1[2])
    np.testing.assert_array_equal(v2[1], v1[0])
    # a different encoder id never reads another encoder's vectors
    other = CountingEncoder()
    other.sigmap_id = "other"
    embed_texts(["x"], encoder=other, cache_dir=tmp_path)
    assert other.n_texts == 1
    assert not list(tmp_path.rglob("*.tmp*"))  # atomic writes leave no temporaries


def test_cache_is_bounded(tmp_path) -> None:
    enc = CountingEncoder(dim=64)
    for k in range(6):
        embed_texts(
            [f"t{k}-{i}" for i in range(50)],
            encoder=enc,
            cache_dir=tmp_path,
            max_cache_bytes=30_000,
        )
    total = sum(p.stat().st_size for p in tmp_path.rglob("shard-*.npz"))
    one = max(p.stat().st_size for p in tmp_path.rglob("shard-*.npz"))
    assert total <= 30_000 + one
    n_before = enc.n_texts
    embed_texts(
        [f"t0-{i}" for i in range(50)], encoder=enc, cache_dir=tmp_path, max_cache_bytes=30_000
    )
    assert enc.n_texts == n_before + 50  # the oldest shard was evicted -> recomputed


def test_validation() -> None:
    with pytest.raises(SigmapInputError, match="not one string"):
        embed_texts("abc", encoder=CountingEncoder())
    with pytest.raises(SigmapInputError, match="not str"):
        embed_texts(["a", 3], encoder=CountingEncoder())
    with pytest.raises(SigmapInputError):
        mean_embedding(np.zeros((0, 3)))
    assert encoder_id(CountingEncoder()) == "counting-fake-v1"


def test_real_minilm_offline(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = default_encoder_path()
    assert (path / "model.safetensors").exists()
    from sigmap_lib.overlap import load_encoder

    enc = load_encoder()
    v = embed_texts(
        [
            "What is the capital of France?",
            "Which city is France's capital?",
            "def f(x): return x + 1",
        ],
        encoder=enc,
        cache_dir=tmp_path,
    )
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3  # paraphrases are closer than code

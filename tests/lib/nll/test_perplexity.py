"""Per-unit NLL from real tiny HF models: invariants against independent computations."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.inputs import Document, build_corpus_store, segment_units, unit_byte_spans
from sigmap_lib.nll import (
    NLLStore,
    apportion_token_nll,
    document_unit_nll,
    load_model,
    model_context_length,
    score_corpus,
    token_nll,
)
from sigmap_lib.worlds import random_text, sample_texts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def loaded(tiny_models: list[Path]) -> list[tuple]:
    return [load_model(p, device="cpu") for p in tiny_models]


def _plain_total_nll(model, tok, text: str) -> float:
    """Independent reference: one forward pass with labels=input_ids, no windowing."""
    ids = torch.tensor([[tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]])
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss
    return float(loss) * (ids.shape[1] - 1)


def _edge_docs() -> list[str]:
    return [
        "x",
        "😀",
        "👍🏽🇫🇷❤️",
        "a" + " " * 40 + "b",
        "  leading and trailing whitespace \n\n\t ",
        "naïve café — über straße; 東京の数据!",
        "12345,67890.5",
        "tab\tseparated\tfields\nand\r\nwindows lines",
    ]


def test_load_model_returns_eval_cpu_fp32(loaded) -> None:
    for model, tok in loaded:
        assert not model.training
        assert next(model.parameters()).dtype == torch.float32
        assert next(model.parameters()).device.type == "cpu"
        assert tok.is_fast


@pytest.mark.parametrize("which", [0, 1])
def test_unit_sum_equals_plain_forward_pass(loaded, which: int) -> None:
    model, tok = loaded[which]
    ctx = model_context_length(model, tok)
    rng = np.random.default_rng(10 + which)
    docs = _edge_docs() + [random_text(rng, int(rng.integers(1, 40))) for _ in range(30)]
    docs = [d for d in docs if len(tok(d, add_special_tokens=False)["input_ids"]) + 1 <= ctx]
    assert len(docs) >= 25
    out = document_unit_nll(model, tok, docs, batch_tokens=512)
    for doc, u in zip(docs, out):
        assert u.shape == (len(segment_units(doc)),)
        assert np.all(np.isfinite(u)) and np.all(u >= 0)
        ref = _plain_total_nll(model, tok, doc)
        assert math.isclose(u.sum(), ref, rel_tol=1e-4), (doc, u.sum(), ref)


def _brute_force_token_nll(model, ids: list[int], max_length: int, stride: int) -> np.ndarray:
    """Token t (t >= 1) scored with left context from window k = max(0, ceil((t+1-L)/s))."""
    out = []
    for t in range(1, len(ids)):
        k = max(0, -(-(t + 1 - max_length) // stride))
        start = k * stride
        x = torch.tensor([ids[start:t]])  # the context; its last logits predict ids[t]
        assert x.shape[1] < max_length
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=x).logits[0, -1].float(), -1)
        out.append(-float(logp[ids[t]]))
    return np.array(out)


@pytest.mark.parametrize(
    "which,max_length,stride",
    [(0, 64, 32), (0, 24, 23), (1, 32, 7)],
)
def test_long_documents_sliding_window_vs_brute_force(
    loaded, which: int, max_length: int, stride: int
) -> None:
    model, tok = loaded[which]
    L = max_length
    assert L <= model_context_length(model, tok)
    rng = np.random.default_rng(stride)
    docs = [random_text(rng, int(0.8 * L)), random_text(rng, L // 3), "short doc"]
    seqs = [
        np.array([tok.bos_token_id, *tok(d, add_special_tokens=False)["input_ids"]]) for d in docs
    ]
    assert len(seqs[0]) > 1.5 * L  # really longer than the window: >= 3 windows
    st: dict = {}
    got = token_nll(model, seqs, max_length=L, stride=stride, batch_tokens=3 * L, stats=st)
    assert st["tokens"] == sum(len(s) - 1 for s in seqs)
    for s, g in zip(seqs[:2], got[:2]):
        ref = _brute_force_token_nll(model, s.tolist(), L, stride)
        np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-5)
    units = document_unit_nll(model, tok, docs, max_length=L, stride=stride)
    for u, g in zip(units, got):
        assert math.isclose(u.sum(), g.sum(), rel_tol=1e-6)


def test_gpt2_long_document_default_window_does_not_overflow(loaded) -> None:
    model, tok = loaded[0]  # learned positions: > 64 tokens at once would fail
    doc = random_text(np.random.default_rng(1), 300)
    (u,) = document_unit_nll(model, tok, [doc])
    assert u.shape == (len(segment_units(doc)),) and np.all(np.isfinite(u))


def _brute_force_apportion(text: str, offsets, nlls) -> np.ndarray:
    """Byte-by-byte loop: each token spreads its NLL evenly over its bytes."""
    raw = text.encode()
    byte_of_char = [len(text[:i].encode()) for i in range(len(text) + 1)]
    per_byte = np.zeros(len(raw))
    for (cs, ce), v in zip(offsets, nlls):
        bs, be = byte_of_char[cs], byte_of_char[ce]
        if be == bs:
            per_byte[min(bs, len(raw) - 1)] += v
            continue
        for b in range(bs, be):
            per_byte[b] += v / (be - bs)
    units = segment_units(text)
    owner = np.empty(len(raw), dtype=int)
    prev = 0
    for i, (_, e) in enumerate(units):
        owner[prev:e] = i
        prev = e
    owner[prev:] = len(units) - 1
    out = np.zeros(len(units))
    np.add.at(out, owner, per_byte)
    return out


@pytest.mark.parametrize("which", [0, 1])
def test_unit_values_match_bytewise_apportioning(loaded, which: int) -> None:
    model, tok = loaded[which]
    docs = [*_edge_docs(), *sample_texts(5, seed=4)]
    out = document_unit_nll(model, tok, docs)
    encs = [tok(d, add_special_tokens=False, return_offsets_mapping=True) for d in docs]
    seqs = [np.array([tok.bos_token_id, *e["input_ids"]]) for e in encs]
    L = model_context_length(model, tok)
    # same sequences and window settings -> the same batches as document_unit_nll used
    tns = token_nll(model, seqs, max_length=L, stride=L // 2)
    for doc, u, enc, tn in zip(docs, out, encs, tns):
        ref = _brute_force_apportion(doc, enc["offset_mapping"], tn)
        np.testing.assert_allclose(u, ref, rtol=1e-9, atol=1e-9)


def test_emoji_split_into_byte_tokens_stays_in_its_unit() -> None:
    text = "ab 😀"  # bytes: a b ' ' F0 9F 98 80 ; units: 'ab' [0,2), '😀' [3,7)
    attr = unit_byte_spans(text)
    assert attr.tolist() == [[0, 2], [2, 7]]
    # byte-level tokens: 'ab', ' ' + first two bytes of the emoji, last two bytes
    spans = np.array([[0, 2], [2, 7], [3, 7]])  # partial-character tokens report the char
    got = apportion_token_nll(spans, np.array([1.0, 2.0, 4.0]), attr)
    np.testing.assert_allclose(got, [1.0, 6.0])
    # a token straddling two units is split by bytes: 'b 😀' bytes 1..7 -> 1 byte to unit 0
    got = apportion_token_nll(np.array([[0, 1], [1, 7]]), np.array([1.0, 6.0]), attr)
    np.testing.assert_allclose(got, [2.0, 5.0])
    # an empty span goes to the unit at its position
    got = apportion_token_nll(np.array([[2, 2], [0, 7]]), np.array([3.0, 7.0]), attr)
    np.testing.assert_allclose(got, [2.0, 3.0 + 5.0])


def test_batching_does_not_change_results_and_padding_is_low(loaded) -> None:
    model, tok = loaded[1]
    docs = sample_texts(80, seed=9, min_words=5, max_words=50)
    st: dict = {}
    a = document_unit_nll(model, tok, docs, batch_tokens=4096, stats=st)
    b = document_unit_nll(model, tok, docs, batch_tokens=400)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    assert st["padding_fraction"] < 0.10
    n_tok = sum(len(tok(d, add_special_tokens=False)["input_ids"]) for d in docs)
    assert st["tokens"] == n_tok  # every real token scored exactly once (BOS prefix)


def test_document_unit_nll_rejects_slow_tokenizer(loaded) -> None:
    model, _ = loaded[0]

    class Slow:
        is_fast = False

    with pytest.raises(SigmapInputError, match="fast tokenizer"):
        document_unit_nll(model, Slow(), ["x"])


def test_load_model_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(SigmapInputError, match=r"no-such-model.*does not exist"):
        load_model(missing)
    with pytest.raises(SigmapInputError, match="does not exist"):
        load_model("./definitely/not/here")


def test_load_model_refuses_pickle_weights(tiny_models: list[Path], tmp_path: Path) -> None:
    model, tok = load_model(tiny_models[0], device="cpu")
    out = tmp_path / "pickled-model"
    model.save_pretrained(out, safe_serialization=False)
    tok.save_pretrained(out)
    for f in out.glob("*.safetensors"):  # make sure only pickle weights remain
        f.unlink()
    assert not list(out.glob("*.safetensors"))
    with pytest.raises(SigmapInputError, match=r"pickled-model.*no \*\.safetensors"):
        load_model(out)


def test_load_model_not_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(SigmapInputError, match=r"empty-dir.*config\.json"):
        load_model(tmp_path / "empty-dir")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(SigmapInputError, match="not a directory"):
        load_model(tmp_path / "file.txt")


def _corpus(tmp_path: Path, shard_units: int = 90):
    texts = sample_texts(24, seed=21, min_words=5, max_words=70)
    docs = [Document(f"d{i}", "mem", t) for i, t in enumerate(texts)]
    return build_corpus_store(docs, tmp_path / "corpus", shard_units=shard_units)


def test_score_corpus_resume_matches_uninterrupted_run(loaded, tmp_path: Path) -> None:
    model, tok = loaded[0]
    cs = _corpus(tmp_path)
    n_shards = len(cs.shards)
    assert n_shards >= 5
    full = score_corpus(model, tok, cs, tmp_path / "nll_full", batch_tokens=1024)
    assert full["shards_done"] == n_shards and full["shards_skipped"] == 0
    with pytest.raises(RuntimeError, match="injected failure after 2 shards"):
        score_corpus(
            model, tok, cs, tmp_path / "nll_resume", batch_tokens=1024, fail_after_shards=2
        )
    partial = NLLStore.open(tmp_path / "nll_resume")
    assert partial.committed_shards() == [0, 1] and not partial.is_complete()
    seen: list[dict] = []
    again = score_corpus(
        model, tok, cs, tmp_path / "nll_resume", batch_tokens=1024, progress=seen.append
    )
    assert again["shards_done"] == n_shards - 2 and again["shards_skipped"] == 2
    assert [p["shard"] for p in seen] == list(range(2, n_shards))
    a = NLLStore.open(tmp_path / "nll_full").read()
    b = NLLStore.open(tmp_path / "nll_resume").read()
    np.testing.assert_array_equal(a, b)
    assert a.shape == (cs.n_units,) and np.all(np.isfinite(a))
    # stats: whole-corpus totals and bits per byte
    assert math.isclose(full["total_nll"], float(a.astype(np.float64).sum()), rel_tol=1e-6)
    assert math.isclose(again["total_nll"], full["total_nll"], rel_tol=1e-9)
    assert math.isclose(full["bits_per_byte"], full["total_nll"] / (cs.n_bytes * math.log(2)))
    assert full["units"] == cs.n_units and full["tokens"] > 0 and full["tokens_per_s"] > 0
    assert full["device"] == "cpu" and full["dtype"] == "float32"
    # per document, stored units sum to the plain forward-pass NLL
    ranges = cs.doc_unit_ranges
    for d, text in enumerate(cs.documents(0, 5)):
        lo, hi = ranges[d]
        ref = _plain_total_nll(model, tok, text) if len(tok(text)["input_ids"]) < 60 else None
        if ref is not None:
            assert math.isclose(float(a[lo:hi].astype(np.float64).sum()), ref, rel_tol=1e-4)
    # a finished partition is a no-op
    noop = score_corpus(model, tok, cs, tmp_path / "nll_full")
    assert noop["shards_done"] == 0 and noop["shards_skipped"] == n_shards and noop["tokens"] == 0


def test_score_corpus_rescores_corrupted_shard(loaded, tmp_path: Path) -> None:
    model, tok = loaded[1]
    cs = _corpus(tmp_path, shard_units=60)
    store = NLLStore.create_or_open(
        tmp_path / "nll", cs.n_units, cs.shard_bounds, cs.fingerprint, chunk_units=64
    )
    score_corpus(model, tok, cs, store)
    before = store.read().copy()
    chunk_file = tmp_path / "nll" / "c" / "1"
    assert chunk_file.exists()
    chunk_file.write_bytes(chunk_file.read_bytes()[:10])  # truncate
    again = score_corpus(model, tok, cs, tmp_path / "nll")
    assert again["shards_done"] >= 1
    np.testing.assert_allclose(NLLStore.open(tmp_path / "nll").read(), before, rtol=1e-6)


def test_score_corpus_refuses_store_of_other_corpus(loaded, tmp_path: Path) -> None:
    model, tok = loaded[0]
    cs = _corpus(tmp_path)
    other = build_corpus_store([Document("z", "mem", "other text")], tmp_path / "c2")
    NLLStore.create_or_open(tmp_path / "nll", other.n_units, other.shard_bounds, other.fingerprint)
    with pytest.raises(SigmapInputError, match="another corpus"):
        score_corpus(model, tok, cs, tmp_path / "nll")


def test_special_token_strings_in_text_are_plain_text(loaded) -> None:
    model, tok = loaded[0]
    doc = "end </s> and <s> begin <pad>"
    st: dict = {}
    (u,) = document_unit_nll(model, tok, [doc], stats=st)
    ids = tok(doc, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert not {tok.bos_token_id, tok.eos_token_id, tok.pad_token_id} & set(ids)
    assert st["tokens"] == len(ids)
    ref = _plain_total_nll_ids(model, [tok.bos_token_id, *ids])
    assert math.isclose(u.sum(), ref, rel_tol=1e-4)


def _plain_total_nll_ids(model, ids: list[int]) -> float:
    x = torch.tensor([ids])
    with torch.no_grad():
        return float(model(input_ids=x, labels=x).loss) * (len(ids) - 1)


def test_bench_main_runs_small(tmp_path: Path) -> None:
    from sigmap_lib.perf.perplexity import main

    r = main(["--tokens", "1500", "--d-model", "32", "--n-layer", "1", "--workdir", str(tmp_path)])
    assert r["bench"] == "perplexity" and r["device"] == "cpu"
    assert r["tokens"] >= 1500 and r["corpus"]["units"] > 0
    assert r["forward_tokens_per_s"] > 0 and r["end_to_end_tokens_per_s"] > 0
    assert r["end_to_end_tokens_per_s"] <= r["forward_tokens_per_s"]
    assert 0 <= r["padding_fraction"] < 0.1 and math.isfinite(r["bits_per_byte"])
    assert NLLStore.open(tmp_path / "nll").is_complete()


def test_load_model_unknown_hub_id_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SigmapInputError, match="no-such-org/no-such-model"):
        load_model("no-such-org/no-such-model", device="cpu")


def test_max_length_beyond_context_is_refused(loaded) -> None:
    model, tok = loaded[0]
    with pytest.raises(SigmapInputError, match="exceeds the model's context 64"):
        document_unit_nll(model, tok, ["some text"], max_length=65)


@pytest.mark.parametrize("which", [0, 1])
def test_one_copy_at_the_end_equals_a_copy_per_batch(loaded, which: int) -> None:
    """The NLL kept on the device until the call's end (default) are bit-identical to a
    host copy after every batch, over many windows and batches of several widths."""
    model, tok = loaded[which]
    rng = np.random.default_rng(which)
    texts = [random_text(rng, int(n)) for n in rng.integers(5, 400, 12)]
    seqs = [
        np.array([tok.bos_token_id, *tok(t, add_special_tokens=False)["input_ids"]]) for t in texts
    ]
    kw = {"max_length": 48, "stride": 16, "batch_tokens": 300}
    s1: dict = {}
    s2: dict = {}
    once = token_nll(model, seqs, stats=s1, **kw)
    each = token_nll(model, seqs, stats=s2, sync_per_batch=True, **kw)
    assert s1["batches"] > 3 and s1["batches"] == s2["batches"]
    for a, b in zip(once, each, strict=True):
        np.testing.assert_array_equal(a, b)

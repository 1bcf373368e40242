"""GGUF files: conversion against the model they were written from, the sha256-keyed
cache (reuse, atomicity, invalidation), dtypes and the errors for files transformers
cannot load. The tiny GGUF is written by ``tests/lib/nll/conftest.py``."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.nll import convert_gguf, document_unit_nll, gguf_architecture, load_model

from .conftest import write_llama_gguf

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = [
    "the river stone, 42 times!",
    "naïve café — über straße; 東京の数据! 😀👍🏽",
    "def f(x):\n    return x + 1\n",
]


def _logits(model, tok, text: str) -> torch.Tensor:
    ids = torch.tensor([[tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]])
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def _metadata_only_gguf(path: Path, arch: str) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(path), arch=arch)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return path


def test_converted_model_equals_the_model_it_was_written_from(tiny_gguf, tmp_path: Path) -> None:
    path, original, tok = tiny_gguf
    cache = tmp_path / "cache"
    model, ctok = load_model(path, device="cpu", gguf_cache=cache)
    assert not model.training and ctok.is_fast
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_key_value_heads == 2  # grouped-query attention survived
    assert getattr(model.config, "quantization_config", None) is None
    for text in TEXTS:
        a = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        b = ctok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert a["input_ids"] == b["input_ids"], text
        assert a["offset_mapping"] == b["offset_mapping"], text
        ref, got = _logits(original, tok, text), _logits(model, ctok, text)
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-5)
    # per-unit NLL of the converted model == that of the original
    ours = document_unit_nll(model, ctok, TEXTS)
    theirs = document_unit_nll(original, tok, TEXTS)
    for u, v in zip(ours, theirs):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_cache_is_keyed_by_sha256_and_reused(
    tiny_gguf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tiny_gguf[0]
    cache = tmp_path / "cache"
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    folder = convert_gguf(path, cache)
    assert folder == cache / sha[:16]
    assert sorted(p.name for p in cache.iterdir()) == [sha[:16]]  # no temporaries left
    meta = json.loads((folder / "gguf_source.json").read_text())
    assert meta["sha256"] == sha and meta["architecture"] == "llama"
    assert meta["gguf_file"] == path.name and meta["bytes"] == path.stat().st_size
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert (folder / "tokenizer.json").exists() and list(folder.glob("*.safetensors"))
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "pt") as f:  # the cache is float32
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}

    # a second call (another run, another pod) loads the cache and never dequantizes
    import sigmap_lib.nll._gguf as gg

    def boom(*a, **k):
        raise AssertionError("dequantized again although the cache is complete")

    monkeypatch.setattr(gg, "_dequantize", boom)
    assert convert_gguf(path, cache) == folder
    model, _ = load_model(path, device="cpu", gguf_cache=cache)
    assert next(model.parameters()).dtype == torch.float32

    # the same bytes under another name share the cache folder
    twin = shutil.copy(path, tmp_path / "renamed.gguf")
    assert convert_gguf(twin, cache) == folder


def test_changed_file_or_broken_cache_is_converted_again(tiny_gguf, tmp_path: Path) -> None:
    path, original, tok = tiny_gguf
    cache = tmp_path / "cache"
    folder = convert_gguf(path, cache)
    # a cache folder that lost its weights, or whose recorded sha differs, is rebuilt
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    assert convert_gguf(path, cache) == folder and list(folder.glob("*.safetensors"))
    meta = json.loads((folder / "gguf_source.json").read_text())
    (folder / "gguf_source.json").write_text(json.dumps({**meta, "sha256": "0" * 64}))
    assert convert_gguf(path, cache) == folder
    assert json.loads((folder / "gguf_source.json").read_text())["sha256"] == meta["sha256"]
    # another model written to a GGUF gets its own folder
    with torch.no_grad():
        changed = type(original)(original.config)
        changed.load_state_dict(original.state_dict())
        changed.model.norm.weight.mul_(1.5)
    other = write_llama_gguf(changed, tok, tmp_path / "other.gguf")
    other_folder = convert_gguf(other, cache)
    assert other_folder != folder and other_folder.parent == cache
    m_other, t_other = load_model(other_folder, device="cpu")
    assert not torch.allclose(_logits(m_other, t_other, TEXTS[0]), _logits(original, tok, TEXTS[0]))


def test_interrupted_conversion_leaves_no_cache_folder(
    tiny_gguf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sigmap_lib._util as util

    path = tiny_gguf[0]
    cache = tmp_path / "cache"
    real = util.atomic_write_json

    def disk_full(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(util, "atomic_write_json", disk_full)
    with pytest.raises(OSError, match="disk full"):
        convert_gguf(path, cache)
    assert list(cache.iterdir()) == []  # neither the folder nor a temporary
    monkeypatch.setattr(util, "atomic_write_json", real)
    folder = convert_gguf(path, cache)
    assert (folder / "gguf_source.json").exists()


def test_dtype_is_applied_at_load_and_in_memory_conversion(tiny_gguf, tmp_path: Path) -> None:
    path, original, tok = tiny_gguf
    cache = tmp_path / "cache"
    bf16, _ = load_model(path, device="cpu", dtype="bfloat16", gguf_cache=cache)
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}
    mem, mtok = load_model(path, device="cpu")  # no cache: converted in memory, nothing written
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert {p.dtype for p in mem.parameters()} == {torch.float32}
    torch.testing.assert_close(
        _logits(mem, mtok, TEXTS[1]), _logits(original, tok, TEXTS[1]), rtol=0, atol=1e-5
    )
    got = _logits(bf16, mtok, TEXTS[1])
    ref = _logits(original, tok, TEXTS[1])
    assert (got - ref).abs().max() < 0.1  # bfloat16 rounding only


def test_gguf_architecture_reads_general_architecture(tiny_gguf, tmp_path: Path) -> None:
    assert gguf_architecture(tiny_gguf[0]) == "llama"
    assert gguf_architecture(_metadata_only_gguf(tmp_path / "m.gguf", "qwen2")) == "qwen2"


@pytest.mark.parametrize("arch", ["rwkv7", "bert", "mamba2"])
def test_unsupported_architecture_names_file_and_architecture(tmp_path: Path, arch: str) -> None:
    f = _metadata_only_gguf(tmp_path / f"{arch}-model.gguf", arch)
    for call in (lambda: convert_gguf(f, tmp_path / "cache"), lambda: load_model(f)):
        with pytest.raises(SigmapInputError) as exc:
            call()
        msg = str(exc.value)
        assert str(f) in msg and f"architecture {arch!r} is not supported" in msg
        assert "llama" in msg  # lists what transformers can load
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []


def test_loadable_architecture_with_a_broken_file_names_file_and_architecture(
    tmp_path: Path,
) -> None:
    f = _metadata_only_gguf(tmp_path / "no-tokenizer.gguf", "llama")
    with pytest.raises(SigmapInputError, match=r"no-tokenizer\.gguf \(architecture 'llama'\)"):
        convert_gguf(f, tmp_path / "cache")


def test_bad_gguf_paths(tmp_path: Path) -> None:
    with pytest.raises(SigmapInputError, match=r"GGUF file .*absent\.gguf does not exist"):
        load_model(tmp_path / "absent.gguf", gguf_cache=tmp_path / "cache")
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"\x00\x01binary")
    with pytest.raises(SigmapInputError, match=r"fake\.gguf: not a GGUF file"):
        convert_gguf(fake, tmp_path / "cache")
    (tmp_path / "dir.gguf").mkdir()
    with pytest.raises(SigmapInputError, match=r"dir\.gguf is not a file"):
        gguf_architecture(tmp_path / "dir.gguf")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF\x03\x00")
    with pytest.raises(SigmapInputError, match=r"truncated\.gguf: cannot be parsed"):
        gguf_architecture(truncated)


def test_bench_model_mode_on_a_gguf_agrees_with_lm_eval(
    tiny_gguf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sigmap bench perplexity --model x.gguf``: real documents through the full path and
    lm-eval's ``loglikelihood_rolling`` on the same loaded model (correctness, not speed)."""
    pytest.importorskip("lm_eval")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    from sigmap_lib.perf.perplexity import main

    cache = tmp_path / "cache"
    r = main(["--model", str(tiny_gguf[0]), "--tokens", "400", "--threads", "1",
              "--workdir", str(tmp_path / "work"), "--gguf-cache", str(cache)])  # fmt: skip
    assert r["mode"] == "model" and r["model"]["gguf"] and r["model"]["arch"] == "llama"
    assert r["model"]["context"] == 96 and r["corpus"]["max_document_tokens"] <= 95
    assert r["tokens"] >= 400 and r["corpus"]["documents"] >= 2
    assert r["forward_tokens_per_s"] > 0 and r["end_to_end_tokens_per_s"] > 0
    assert len(list(cache.iterdir())) == 1  # converted into the given cache
    le = r["lm_eval"]
    assert le["tokens"] == r["tokens"] and le["windows_match"]
    assert le["prefix_token_id"] == tiny_gguf[2].bos_token_id
    assert le["max_rel_nll_diff"] < 1e-5, le
    assert math.isclose(le["total_nll"], le["our_total_nll"], rel_tol=1e-5)

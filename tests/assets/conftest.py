from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from tests.assets.harness import Project, make_project, small_synthetic_world


@pytest.fixture(scope="session")
def synthetic_world_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic world (12 models, 3000 units, 6 benchmarks), built once."""
    return small_synthetic_world(tmp_path_factory.mktemp("world") / "synthetic")


@pytest.fixture
def synthetic_world(tmp_path: Path, synthetic_world_template: Path) -> Path:
    """A private copy of the small synthetic world (tests may edit it)."""
    dst = tmp_path / "world"
    shutil.copytree(synthetic_world_template, dst)
    return dst


@pytest.fixture
def project(tmp_path: Path, synthetic_world: Path) -> Iterator[Project]:
    with dg.instance_for_test() as instance:
        yield make_project(tmp_path, synthetic_world, instance)


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained GPT-2 (byte-level BPE) saved with safetensors."""
    from sigmap_lib.worlds import (
        build_causal_lm,
        sample_texts,
        save_model,
        train_bpe_tokenizer,
        train_causal_lm,
    )

    texts = sample_texts(200, seed=0)
    tok = train_bpe_tokenizer(texts, vocab_size=400, style="byte_level")
    model = build_causal_lm("gpt2", len(tok), d_model=32, n_layer=2, n_head=2, n_ctx=64, seed=0)
    train_causal_lm(model, tok, texts, steps=15, batch_size=8, seq_len=48, seed=0)
    return save_model(model, tok, tmp_path_factory.mktemp("tiny") / "tiny-gpt2")

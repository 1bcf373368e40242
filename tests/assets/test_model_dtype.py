"""The registry's ``dtype`` is the dtype a model is scored in (``auto``: the compute
resource's), and it is part of the cells' key: the same weights in another dtype are other
values."""

from __future__ import annotations

from pathlib import Path

import torch

from sigmap_assets.defs.models.assets import loaded_model
from sigmap_assets.resources import ComputeResource
from sigmap_lib.inputs import ModelSpec
from sigmap_lib.nll import model_fingerprint


def test_registry_dtype_is_what_the_model_is_loaded_in(tiny_gpt2: Path) -> None:
    compute = ComputeResource(device="cpu", dtype="auto", threads=1)
    auto = ModelSpec(id="local/tiny", key="local__tiny", path=tiny_gpt2)
    bf16 = ModelSpec(id="local/tiny", key="local__tiny", path=tiny_gpt2, dtype="bfloat16")
    assert compute.scoring_dtype(auto) == "auto"
    assert compute.scoring_dtype(bf16) == "bfloat16"
    assert ComputeResource(dtype="float16").scoring_dtype(auto) == "float16"
    model, _ = loaded_model(bf16, compute, None, "fp-bf16")
    assert next(model.parameters()).dtype == torch.bfloat16
    model, _ = loaded_model(auto, compute, None, "fp-auto")
    assert next(model.parameters()).dtype == torch.float32  # auto on CPU
    fps = {model_fingerprint(s, settings={"dtype": compute.scoring_dtype(s)}) for s in (auto, bf16)}
    assert len(fps) == 2

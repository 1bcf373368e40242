"""`sigmap bench perplexity --shapes`: the real architectures' parameter counts, and the
bench's two runs (one copy / a copy per batch) on a CPU."""

from __future__ import annotations

import pytest

from sigmap_lib.perf.shapes import SHAPES, bench_shape, shape_config

#: published parameter counts (embeddings included; tied where the model ties them)
PUBLISHED = {
    "smollm2-135m": 134.5e6,
    "gemma3-270m": 268.1e6,
    "llama-3.2-1b": 1.236e9,
    "llama-2-7b": 6.738e9,
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_weights_match_the_published_parameter_counts(name: str) -> None:
    from sigmap_lib.perf.shapes import _weights_gib

    cfg = shape_config(name)
    params = _weights_gib(cfg, 1) * 2**30  # bytes at 1 byte per weight = matrix weights
    assert params == pytest.approx(PUBLISHED[name], rel=0.01)


@pytest.mark.slow
def test_bench_shape_on_cpu_scores_the_same_tokens_both_ways() -> None:
    r = bench_shape("smollm2-135m", device="cpu", tokens=256, max_length=64, batch_tokens=130)
    assert r["params"] == pytest.approx(PUBLISHED["smollm2-135m"], rel=0.001)
    one, each = r["runs"]["one_copy"], r["runs"]["copy_per_batch"]
    assert one["batches"] == each["batches"] == 2 and r["tokens"] == 256
    assert sum(r["time_split"].values()) == pytest.approx(1.0)
    assert 0 < r["mfu_vs_nominal"] < r["mfu_vs_measured"]

"""`sigmap bench embedding` on a few questions: every batch size gives the same vectors,
and the JSON line carries time and memory per size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_embedding_sizes_agree_and_report_memory() -> None:
    cmd = [
        sys.executable, "-m", "sigmap_assets.cli", "bench", "embedding", "--texts", "24",
        "--batch-sizes", "16,3",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["bench"] == "embedding" and res["texts"] == 24
    assert res["batch_16"]["max_abs_diff_vs_first"] == 0.0
    assert res["batch_3"]["max_abs_diff_vs_first"] < 1e-5
    for key in ("batch_16", "batch_3"):
        assert res[key]["seconds"] > 0 and res[key]["texts_per_s"] > 0
        assert 0 <= res[key]["peak_above_loaded_gb"] < 2.0

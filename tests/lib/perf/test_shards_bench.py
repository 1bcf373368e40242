"""`sigmap bench shards` on a tiny corpus: the sharded path (1 and 2 workers) equals the
monolithic one, and the JSON line carries the numbers the issue asks for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_bench_shards_tiny_run_is_identical_to_monolithic(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "sigmap_assets.cli", "bench", "shards", "--units", "30000",
        "--models", "6", "--shards", "7", "--benchmarks", "3", "--k", "40",
        "--subsample", "5000", "--dir", str(tmp_path),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["identical_to_monolithic"] is True and res["codes_equal_on_subsample"] is True
    assert res["units"] == 30000 and res["shards"] == 7 and res["cells"] == 30000 * 6
    for key in ("sharded_cells_per_s_1_worker", "monolithic_cells_per_s", "speedup_workers"):
        assert res[key] > 0
    assert 0 < res["peak_rss_gb_sharded_1_worker"] < 2.0
    assert not any(tmp_path.iterdir())  # the working data is removed

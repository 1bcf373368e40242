"""Real public data (../shared/data): performance and semantic overlap, the paper's claims."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from sigmap_lib.overlap import performance_overlap

pytestmark = pytest.mark.realdata


def test_v1_leaderboard_performance_overlap(shared_data) -> None:
    d = pl.read_csv(
        shared_data / "leaderboard" / "open_llm_leaderboard_v1.csv", infer_schema_length=100_000
    )
    cols = ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"]
    m = performance_overlap(d.select(["name", *cols]), model_column="name")
    x = d.select(cols).to_numpy().astype(float)
    ok = np.isfinite(x[:, 0]) & np.isfinite(x[:, 5])
    assert m.get("arc", "gsm8k") == pytest.approx(
        spearmanr(x[ok, 0], x[ok, 5]).statistic, abs=1e-10
    )
    off = m.off_diagonal()
    assert m.n_common.min() > 5000
    assert off.min() > 0.5  # "uniformly high" holds on v1 (measured min 0.646)


@pytest.mark.slow
def test_real_data_overlap_summary(shared_data, tmp_path) -> None:
    from sigmap_lib.studies import real_data_overlap_summary

    r = real_data_overlap_summary(shared_data, cache_dir=str(tmp_path), T=200)
    sem = r["semantic"]
    assert len(sem["labels"]) == 12
    assert sum(sem["n_questions"].values()) == 858 + 751
    # the same benchmark's two versions are far closer than different benchmarks
    same = np.array(list(sem["same_benchmark_main_vs_secondary"].values()))
    c = r["claims"]["semantic_in_0.1_0.4"]
    assert same.min() > c["max"]
    assert c["n_pairs"] == 60
    perf = r["performance"]
    assert set(perf) == {"open_llm_leaderboard_v1", "open_llm_leaderboard_v2", "obscaling_base"}
    assert perf["open_llm_leaderboard_v1"]["spread"]["min"] > 0.5
    assert r["claims"]["semantic_median_below_performance_median"]

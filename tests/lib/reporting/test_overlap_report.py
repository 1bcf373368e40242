from __future__ import annotations

import numpy as np
from scipy.stats import mannwhitneyu

from sigmap_lib.overlap import OverlapMatrix
from sigmap_lib.reporting import build_overlap_report, level_analyses


def _random_matrix(labels, rng, shift=None):
    b = len(labels)
    a = rng.uniform(-0.5, 0.9, (b, b))
    if shift is not None:
        a = a + shift
    v = np.clip((a + a.T) / 2, -1, 1)
    np.fill_diagonal(v, 1.0)
    return OverlapMatrix(labels=labels, values=v)


def test_level_analyses_match_scipy_and_report_renders(tmp_path) -> None:
    rng = np.random.default_rng(5)
    labels = tuple(f"b{i}" for i in range(9))
    meta = {
        lab: {
            "family": "fA" if i < 4 else "fB",
            "format": ["mc", "cloze", "gen"][i % 3],
            "function": ["code", "math", "prose"][i // 3],
        }
        for i, lab in enumerate(labels)
    }
    same_family = np.array(
        [[meta[a]["family"] == meta[b]["family"] for b in labels] for a in labels]
    )
    perf = _random_matrix(labels, rng, shift=0.3 * same_family)  # planted family confound
    sig = _random_matrix(labels, rng)
    sem = _random_matrix(labels, rng)
    res = level_analyses(perf, meta)
    iu = np.triu_indices(len(labels), 1)
    vals, same = perf.values[iu], same_family[iu]
    ref = mannwhitneyu(vals[same], vals[~same])
    assert np.isclose(res["family"]["p"], ref.pvalue)
    assert np.isclose(
        res["family"]["rank_biserial"], 2 * ref.statistic / (same.sum() * (~same).sum()) - 1
    )
    sections, summary = build_overlap_report(
        {"semantic": sem, "performance": perf, "signature": sig}, meta, tmp_path
    )
    assert set(summary["levels"]) == {"semantic", "performance", "signature"}
    assert any("Same-family" in c for c in summary["claims"])
    assert (tmp_path / "overlap_levels.png").stat().st_size > 1000
    assert [s.title for s in sections][:2] == ["Findings", "The three levels side by side"]

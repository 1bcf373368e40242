"""Findings on the 89 real models (../shared/data/realmodels): the null draws against their
definitions, the real-data null, the two levels and the ObsScaling join."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from sigmap_lib.inputs import read_perplexity_correlations
from sigmap_lib.studies import null_scores, real_data_null, real_model_findings


def test_quality_null_is_the_ols_line_plus_noise_of_its_residual_spread() -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(1)
    m = 400
    g = rng.standard_normal(m)
    y = np.column_stack(
        [1.0 + 2.0 * g + 0.5 * rng.standard_normal(m), -g + 0.1 * rng.standard_normal(m)]
    )
    draws = np.stack([null_scores("quality", y, g, np.random.default_rng(s)) for s in range(200)])
    for b in range(2):
        fit = sm.OLS(y[:, b], sm.add_constant(g)).fit()
        # mean of the draws = the fitted line; their spread = the residual standard error
        np.testing.assert_allclose(
            draws[:, :, b].mean(axis=0), fit.fittedvalues, atol=5 * np.sqrt(fit.scale / 200)
        )
        assert draws[:, :, b].std(axis=0).mean() == pytest.approx(np.sqrt(fit.scale), rel=0.05)
    p = null_scores("permuted", y, g, rng)
    assert sorted(p[:, 0]) == sorted(y[:, 0]) and not np.array_equal(p[:, 0], y[:, 0])
    with pytest.raises(ValueError, match="null kind"):
        null_scores("shuffled", y, g, rng)


@pytest.mark.realdata
@pytest.mark.slow
def test_real_data_null_default_rarely_claims_while_aic_always_does(shared_data) -> None:
    mm = read_perplexity_correlations(shared_data / "realmodels")
    cal = real_data_null(mm, "quality", runs=12, n_permutations=99)
    aic = real_data_null(mm, "quality", runs=3, method="aic")
    assert cal["signatures"] == 12 * 9
    assert cal["nonempty_share"] <= 0.15  # the level is 0.05 per signature
    lo, hi = cal["nonempty_wilson95"]
    assert lo <= cal["nonempty_share"] <= hi
    assert aic["nonempty_share"] == 1.0  # AIC claims documents on every null draw


@pytest.mark.realdata
@pytest.mark.slow
def test_findings_levels_and_obscaling_join(shared_data) -> None:
    r = real_model_findings(shared_data, null_runs=2, baseline_null_runs=1, n_permutations=99)
    lv = r["levels"]
    assert lv["models"] == 89 and lv["performance"]["labels"][0] == "arc_easy"
    # the performance level is Spearman of the higher-is-better scores across the 89 models
    mm = read_perplexity_correlations(shared_data / "realmodels")
    y = mm.scores()
    i, j = (
        lv["performance"]["labels"].index("piqa"),
        lv["performance"]["labels"].index("lambada_openai"),
    )
    assert lv["performance"]["values"][i][j] == pytest.approx(
        spearmanr(y[:, i], y[:, j])[0], abs=1e-4
    )
    for row in lv["comparison"]["pairs"]:
        assert -1.0 <= row["signature"] <= 1.0
    obs = r["obscaling"]
    table = pl.read_csv(shared_data / "leaderboard" / "obscaling_base_llm_benchmark_eval.csv")
    assert obs["shared_models"] == len(set(table["Model"]) & set(mm.models)) == 39
    assert len(obs["signature_documents"]) == 17
    assert r["lambada"]["performance"]["n_same"] == 15  # 6 variants: 15 pairs

"""Tests for sigmap_lib.metabench: selection rule, quantiles, splits, end-to-end on a small world."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sigmap_lib import metabench as mb
from sigmap_lib.errors import SigmapInputError
from sigmap_lib.reporting import plot_reconstruction, plot_test_information


def test_type4_quantiles_match_r_definition():
    # R: quantile(c(1, 2, 4, 7, 11), c(0, .1, .25, .5, .9, 1), type = 4)
    #    = 1.0 1.0 1.25 3.0 9.0 11.0  (linear interpolation of the ECDF, F(x_k) = k / n)
    x = np.array([7.0, 1.0, 11.0, 2.0, 4.0])
    got = mb.type4_quantiles(x, np.array([0, 0.1, 0.25, 0.5, 0.9, 1.0]))
    assert np.allclose(got, [1.0, 1.0, 1.25, 3.0, 9.0, 11.0])


def test_information_filter_brute_force():
    rng = np.random.default_rng(0)
    grid = rng.normal(size=120)
    info = rng.gamma(2.0, 1.0, size=(120, 30))
    sel = mb.information_filter(info, grid, threshold=2.5, n_quant=10)
    # independent brute force of the rule: bins of sorted grid at type-4 quantiles
    cuts = mb.type4_quantiles(grid, np.linspace(0, 1, 11))
    taken: list[int] = []
    for k in range(10):
        rows = [i for i in range(120) if cuts[k] <= grid[i] < cuts[k + 1]]
        best, best_v = None, -1.0
        for j in range(30):
            if j in taken or not rows:
                continue
            v = max(info[i, j] for i in rows)
            if v >= 2.5 and v > best_v:
                best, best_v = j, v
        if best is not None:
            taken.append(best)
    assert sel == taken
    assert len(sel) <= 10 and len(set(sel)) == len(sel)


def test_information_filter_reproduces_stored_selection(shared_data):
    summary = pd.read_csv(shared_data / "metabench_irt" / "fits_summary.csv")
    for row in summary.itertuples():
        stem = f"{row.benchmark}_{row.version}_{row.irt_model}"
        info = pd.read_parquet(shared_data / "metabench_irt" / f"{stem}_info350.parquet")
        items = pd.read_parquet(shared_data / "metabench_irt" / f"{stem}_items.parquet")
        grid = info.pop("theta").to_numpy()
        sel = mb.information_filter(info.to_numpy(), grid, row.info_threshold, int(row.n_quant))
        assert [info.columns[j] for j in sel] == items["item_key"].tolist(), stem


def test_split_and_item_filters():
    rng = np.random.default_rng(1)
    scores = pd.DataFrame(rng.uniform(0, 100, (400, 3)), columns=["a", "b", "c"])
    scores.iloc[:40, 0] = np.nan  # not in every benchmark: never test
    split = mb.split_models(scores, test_frac=0.1, seed=3)
    assert (split.iloc[:40] == "train").all()
    assert 0.08 < (split == "test").mean() < 0.12
    assert split.equals(mb.split_models(scores, test_frac=0.1, seed=3))
    x = (rng.random((300, 6)) < 0.5).astype(float)
    x[:, 0] = 1.0  # no variance
    x[:, 1] = (rng.random(300) < 0.97).astype(float)  # too easy (0.97 * 0.75 > 0.7125)
    x[:, 2] = (rng.random(300) < 0.5).astype(float)  # noise: tiny point-biserial
    stats = mb.item_statistics(x)
    assert stats["sd"].iloc[0] == 0 and stats["diff"].iloc[1] > 0.7125
    manual = np.corrcoef(x[:, 3], x.sum(1))[0, 1]
    assert stats["disc"].iloc[3] == pytest.approx(manual)


@pytest.fixture(scope="module")
def small_world():
    resp, scores, truth = mb.simulate_benchmarks(700, {"a": 160, "b": 220, "c": 120}, seed=4)
    fit = mb.fit_metabench(
        resp,
        scores,
        seed=0,
        pool_size=100,
        n_subsets=20,
        n_quant=50,
        irt_models=("2PL",),
        n_tau=3,
        top_k=1,
        gam_df=10,
    )
    return resp, scores, truth, fit


def test_fit_metabench_end_to_end(small_world, tmp_path):
    resp, _scores, _truth, fit = small_world
    assert set(fit.selected) == {"a", "b", "c"}
    for bm, items in fit.selected.items():
        assert 10 <= len(items) <= 50 and set(items) <= set(resp[bm].columns)
        b = fit.benchmarks[bm]
        assert b.test_rmse < b.random_test_rmse  # IRT selection beats random same-size subsets
        assert np.isfinite(b.test_rmse) and b.test_rmse < 6
        assert (b.thetas["role"] == "test").sum() >= 50
        # the reconstruction's covariates were chosen by CV among the configured sets
        assert set(b.score_model.cv_rmse) == set(fit.config.score_covariates)
        assert b.covariates == min(b.score_model.cv_rmse, key=b.score_model.cv_rmse.get)
        assert np.isfinite(b.test_rmse_theta) and np.isfinite(b.random_test_rmse_percent)
    assert fit.grand_test_rmse < np.mean(list(fit.test_rmse.values()))
    assert fit.joint.factor_spearman > 0.8
    # save / load round trip gives identical predictions
    fit.save(tmp_path / "mb")
    back = mb.MetabenchFit.load(tmp_path / "mb")
    assert back.selected == fit.selected and back.test_rmse == fit.test_rmse
    _th1, sc1 = mb.score_new_models(fit, resp)
    _th2, sc2 = mb.score_new_models(back, resp)
    assert np.allclose(sc1.to_numpy(), sc2.to_numpy())
    for bm, b in fit.benchmarks.items():
        assert back.benchmarks[bm].covariates == b.covariates
        assert back.benchmarks[bm].test_rmse_theta == b.test_rmse_theta
        # scoring a held-out (test) model again reproduces the fit's own prediction
        te = b.thetas.index[b.thetas["role"] == "test"]
        np.testing.assert_allclose(sc2.loc[te, bm], b.thetas.loc[te, "score_pred"], rtol=1e-6)
    fit.save(tmp_path / "mb")  # overwrite in place
    assert mb.MetabenchFit.load(tmp_path / "mb").selected == fit.selected
    plot_reconstruction(fit, tmp_path / "rec.png")
    plot_test_information(fit, tmp_path / "info.png")
    assert (tmp_path / "rec.png").stat().st_size > 1000


def test_score_new_models_recovers_planted_theta(small_world):
    from sigmap_lib.irt import simulate_responses

    _resp, _scores, truth, fit = small_world
    rng = np.random.default_rng(99)
    theta = rng.normal(size=(300, 3))
    new = {}
    for b, bm in enumerate(["a", "b", "c"]):
        x = simulate_responses(truth["params"][bm], theta[:, b], rng)
        new[bm] = pd.DataFrame(x, columns=truth["params"][bm].index)[fit.selected[bm]]
    th, sc = mb.score_new_models(fit, new)
    for b, bm in enumerate(["a", "b", "c"]):
        assert np.corrcoef(th[bm], theta[:, b])[0, 1] > 0.85
    assert list(sc.columns) == ["a", "b", "c", "grand"]
    with pytest.raises(SigmapInputError, match="lack"):
        mb.score_new_models(fit, {"a": new["a"].iloc[:, :3]})


def test_export_items(small_world, tmp_path):
    _, _, truth, fit = small_world
    questions = {
        bm: pd.DataFrame({"item_id": p.index, "text": [f"Q {i}" for i in p.index]})
        for bm, p in truth["params"].items()
    }
    paths = mb.export_items(fit, questions, tmp_path)
    rows = pd.read_json(paths["a"], lines=True)
    assert rows["item_id"].astype(str).tolist() == fit.selected["a"]
    assert {"text", "irt_a1", "irt_d", "selection_order"} <= set(rows.columns)
    assert pd.read_parquet(tmp_path / "metabench_a.parquet").shape[0] == len(fit.selected["a"])


def test_input_validation():
    good = pd.DataFrame((np.random.default_rng(0).random((60, 5)) < 0.5).astype(int))
    scores = pd.DataFrame({"a": np.linspace(0, 100, 60)})
    with pytest.raises(SigmapInputError, match="no column"):
        mb.fit_metabench({"zz": good}, scores)
    bad = good.copy()
    bad.iloc[0, 0] = 3
    with pytest.raises(SigmapInputError, match="0/1"):
        mb.fit_metabench({"a": bad}, scores)
    with pytest.raises(SigmapInputError, match="unknown option"):
        mb.fit_metabench({"a": good}, scores, pool_sise=10)
    with pytest.raises(SigmapInputError, match="include theta"):
        mb.fit_metabench({"a": good}, scores, score_covariates=("percent+linear",))
    with pytest.raises(SigmapInputError, match="covariates"):
        mb.fit_metabench({"a": good}, scores, score_covariates=("theta+sum",))


def test_parallel_benchmark_fits_equal_sequential(small_world):
    """fit_benchmarks(n_jobs=2) (spawned workers, one mirt thread each) selects the same
    items with the same RMSEs as the in-process fits of fit_metabench."""
    resp, scores, _truth, fit = small_world
    cfg = fit.config
    seen: list[str] = []
    fits, wall = mb.fit_benchmarks(
        resp,
        scores[list(resp)],
        fit.split,
        seed=0,
        config=cfg,
        n_jobs=2,
        on_done=lambda bm, f, s: seen.append(bm),
    )
    assert list(fits) == list(resp) and sorted(seen) == sorted(resp)
    assert all(w > 0 for w in wall.values())
    for bm, f in fits.items():
        assert f.selected == fit.benchmarks[bm].selected
        assert f.test_rmse == pytest.approx(fit.benchmarks[bm].test_rmse, rel=1e-6)
    with pytest.raises(SigmapInputError, match="n_jobs"):
        mb.fit_benchmarks(resp, scores[list(resp)], fit.split, n_jobs=0)

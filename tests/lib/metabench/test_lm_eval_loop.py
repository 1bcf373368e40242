"""metabench for model evaluators: lm-eval tasks out, θ and reconstructed scores in.

Round trips through lm-eval's ``--log_samples`` layout (written here exactly as lm-eval
writes it, and once by a real lm-eval run on a tiny local model), the published fits on
real LLMs' answers, and every documented error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.irt import estimate_theta, simulate_responses
from sigmap_lib.metabench import (
    TINY_SETTINGS,
    MetabenchScorer,
    fit_metabench,
    fit_tasks,
    manifest_rules,
    published_rules,
    published_tasks,
    read_lm_eval_answers,
    score_new_models,
    simulate_benchmarks,
    write_lm_eval_tasks,
)


@pytest.fixture(scope="module")
def small_fit():
    responses, scores, truth = simulate_benchmarks(300, {"arc": 40, "gsm8k": 40}, seed=2)
    fit = fit_metabench(responses, scores, **TINY_SETTINGS)
    items = {
        bm: pd.DataFrame(
            {
                "item_id": list(p.index),
                "context": [f"Question {i}: pick the right word." for i in p.index],
                "choices": [[" right", " wrong", " maybe"] for _ in p.index],
                "gold": [0] * len(p),
            }
        )
        for bm, p in truth["params"].items()
    }
    return fit, truth, items


def sigmap_score(*args: str, env: dict | None = None) -> list[dict]:
    """``sigmap metabench score ARGS --json`` in a subprocess: the scored models."""
    cmd = [sys.executable, "-m", "sigmap_assets.cli", "metabench", "score", *args, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["models"]


def write_log(
    root: Path,
    model: str,
    task: str,
    docs: list[dict],
    correct: dict,
    *,
    ts="2026-01-01T00-00-00.000000",
    metric="acc",
    filters=(None,),
) -> Path:
    """One model's lm-eval output folder in lm-eval's layout (strings as lm-eval logs them)."""
    folder = root / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"results_{ts}.json").write_text(
        json.dumps({"model_name": model, "config": {"model_args": f"pretrained={model}"}})
    )
    lines = []
    for i, d in enumerate(docs):
        if d["item_id"] not in correct:
            continue
        for flt in filters:
            rec = {
                "doc_id": str(i),
                "doc": d,
                "filter": flt or "none",
                metric: str(float(correct[d["item_id"]])),
            }
            lines.append(json.dumps(rec))
    path = folder / f"samples_{task}_{ts}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_round_trip_export_logs_score_equals_score_new_models(small_fit, tmp_path) -> None:
    fit, truth, items = small_fit
    tasks = fit_tasks(fit.selected, items)
    out = write_lm_eval_tasks(tmp_path / "tasks", tasks, group="sigmap_fit")
    rules = manifest_rules(out)
    assert set(rules) == {"sigmap_arc", "sigmap_gsm8k"}
    models = {"org/weak": -1.2, "org/mid": 0.1, "org/strong": 1.4}
    answers = {}
    for bm, p in truth["params"].items():
        x = simulate_responses(p, np.array(list(models.values())), rng=3)
        answers[bm] = pd.DataFrame(x, columns=p.index, index=list(models))[fit.selected[bm]]
    logs = tmp_path / "logs"
    for t in tasks:
        for m in models:
            write_log(logs, m, t.task, t.docs, answers[t.benchmark].loc[m].to_dict())
    got = read_lm_eval_answers(logs, rules)
    assert sorted(got.answers) == sorted(models)
    scorer = MetabenchScorer.from_fit(fit)
    res = {r["model"]: r for r in scorer.score(got.answers)}
    thetas, recon = score_new_models(fit, answers)
    for m in models:
        for bm in answers:
            b = res[m]["benchmarks"][bm]
            assert b["theta"] == pytest.approx(thetas.loc[m, bm], abs=1e-9)
            assert b["score"] == pytest.approx(recon.loc[m, bm], abs=1e-9)
            assert b["items"] == b["items_total"] == len(fit.selected[bm])
            lo, hi = b["score_interval"]
            assert lo < b["score"] < hi
        assert res[m]["grand"]["score"] == pytest.approx(
            np.mean([res[m]["benchmarks"][bm]["score"] for bm in answers])
        )


def test_missing_items_estimate_theta_from_the_answered_ones(small_fit, tmp_path) -> None:
    fit, _truth, _items = small_fit
    scorer = MetabenchScorer.from_fit(fit)
    sel = fit.selected["arc"]
    half = {i: int(k % 2) for k, i in enumerate(sel[: len(sel) // 2])}
    full = {i: int(k % 2) for k, i in enumerate(sel)}
    [r_half] = scorer.score({"m": {"arc": half}})
    [r_full] = scorer.score({"m": {"arc": full}})
    b = r_half["benchmarks"]["arc"]
    assert b["items"] == len(half) < b["items_total"]
    x = pd.DataFrame([half], index=["m"])
    ref = estimate_theta(
        fit.benchmarks["arc"].params.loc[list(half)], x, fit.benchmarks["arc"].theta_method
    )
    assert b["theta"] == pytest.approx(float(ref["theta"].iloc[0]), abs=1e-9)
    width = lambda r: np.diff(r["benchmarks"]["arc"]["score_interval"])[0]  # noqa: E731
    assert width(r_half) > width(r_full)  # fewer items: θ's own noise widens the interval
    assert r_half["grand"]["score"] is None  # not every benchmark was scored


def test_local_intervals_are_calibrated_on_a_planted_world() -> None:
    """Held-out coverage of 90 % intervals on models the reconstruction never saw."""
    from sigmap_lib.metabench import local_interval

    rng = np.random.default_rng(1)
    t = rng.normal(size=3000)
    noise = rng.normal(size=3000) * (0.5 + (t > 0))  # heteroscedastic in θ
    lo, hi = local_interval(t[2000:], t[:2000], noise[:2000], level=0.9)
    cover = np.mean((noise[2000:] >= lo) & (noise[2000:] <= hi))
    assert 0.87 <= cover <= 0.93
    # local: narrower where residuals are small
    assert np.mean((hi - lo)[t[2000:] < 0]) < 0.6 * np.mean((hi - lo)[t[2000:] > 0])


def test_log_errors_name_the_file_and_the_problem(small_fit, tmp_path) -> None:
    fit, _truth, items = small_fit
    tasks = fit_tasks(fit.selected, items)
    rules = manifest_rules(write_lm_eval_tasks(tmp_path / "tasks", tasks, group="g"))
    arc = next(t for t in tasks if t.benchmark == "arc")
    ok = {d["item_id"]: 1 for d in arc.docs}
    # an item id the fit does not know
    bad_doc = [
        *arc.docs,
        {"item_id": "arc.not-an-item", "context": "?", "choices": [" a"], "gold": 0},
    ]
    write_log(tmp_path / "l1", "m", arc.task, bad_doc, {**ok, "arc.not-an-item": 1})
    with pytest.raises(
        SigmapInputError, match=r"samples_sigmap_arc_.*item 'arc.not-an-item' is not an item"
    ):
        read_lm_eval_answers(tmp_path / "l1", rules)
    # two logs of one model for one task
    write_log(tmp_path / "l2", "m", arc.task, arc.docs, ok, ts="2026-01-01T00-00-00.000000")
    write_log(tmp_path / "l2", "m", arc.task, arc.docs, ok, ts="2026-02-01T00-00-00.000000")
    with pytest.raises(SigmapInputError, match="two lm-eval logs of model 'm' for benchmark 'arc'"):
        read_lm_eval_answers(tmp_path / "l2", rules)
    # a samples file without the correctness field
    p = write_log(tmp_path / "l3", "m", arc.task, arc.docs, ok, metric="acc_norm")
    with pytest.raises(SigmapInputError, match=rf"{p.name}:1: no correctness field 'acc'"):
        read_lm_eval_answers(tmp_path / "l3", rules)
    # a log of the other published version
    other = tmp_path / "l4"
    write_log(other, "m", "metabench_arc", [{"item_id": "arc.1"}], {"arc.1": 1})
    with pytest.raises(SigmapInputError, match="task 'metabench_arc' is metabench version A"):
        read_lm_eval_answers(other, published_rules("B"), version="B")
    with pytest.raises(SigmapInputError, match="no samples_"):
        read_lm_eval_answers(tmp_path / "tasks", rules)


# ------------------------------------------------------------------ published fits (real data)
@pytest.mark.realdata
def test_published_prompts_follow_lm_eval_metabench_tasks(shared_data) -> None:
    tasks = {t.benchmark: t for t in published_tasks(shared_data / "metabench_items", "B")}
    assert set(tasks) == {"arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande"}
    arc = tasks["arc"].docs[0]
    assert arc["text"].count("Question: ") == 26 and arc["text"].endswith("\nAnswer:")
    assert arc["choices"][arc["gold"]] and arc["item_id"] == f"arc.{arc['metabench_idx']}"
    mmlu = tasks["mmlu"].docs[0]
    assert mmlu["text"].startswith(
        "The following are multiple choice questions (with answers) about "
    )
    assert mmlu["text"].count("\nAnswer: ") == 5 and mmlu["text"].endswith(
        "\nD. " + mmlu["text"].split("\nD. ")[-1]
    )
    assert mmlu["item_id"] == f"mmlu.{mmlu['mb_sub_idx']}" and mmlu["choices"] == [
        "A",
        "B",
        "C",
        "D",
    ]
    wg = tasks["winogrande"].docs[0]
    assert len(wg["contexts"]) == 2 and "_" not in wg["contexts"][0].split("\n\n")[-1]
    assert tasks["gsm8k"].kind == "generate_until" and tasks["gsm8k"].filter == "strict-match"
    assert tasks["truthfulqa"].docs[0]["text"].endswith("\nA:")


@pytest.mark.realdata
@pytest.mark.slow
def test_published_b_scores_real_llms_from_logs_like_r(shared_data, tmp_path) -> None:
    """Real LLMs' answers written as lm-eval logs and scored with --published B give R's θ:
    Spearman ≥ 0.999 on every fit (2PL: 1.0000; MMLU 3PL MAP 0.9996 and WinoGrande 4PL
    1.0000 — the 3PL's multimodal MAP posteriors move a few LLMs' θ)."""
    from sigmap_assets.cli import main

    scorer = MetabenchScorer.from_published(shared_data / "metabench_irt", "B")
    assert scorer.source["missing"] == ["hellaswag"]
    tasks_dir = tmp_path / "tasks"
    assert (
        main(
            [
                "metabench",
                "export-tasks",
                str(tasks_dir),
                "--published",
                "B",
                "--params",
                str(shared_data / "metabench_irt"),
                "--items",
                str(shared_data / "metabench_items"),
            ]
        )
        == 0
    )
    rng = np.random.default_rng(0)
    logs = tmp_path / "logs"
    chosen = {}
    for t in published_tasks(shared_data / "metabench_items", "B", item_ids=scorer.items):
        x = pd.read_parquet(
            shared_data / "item_responses" / f"metabench_{t.benchmark}_secondary_train.parquet"
        ).set_index("model")
        models = chosen.setdefault("m", list(rng.choice(sorted(x.index), 150, replace=False)))
        for m in (m for m in models if m in x.index):
            write_log(
                logs,
                m,
                t.task,
                t.docs,
                x.loc[m].to_dict(),
                filters=("strict-match",) if t.filter else (None,),
                metric=t.metric,
            )
    got = sigmap_score(
        str(logs), "--published", "B", "--params", str(shared_data / "metabench_irt")
    )
    for bm, stem in zip(scorer.benchmarks, scorer.source["fits"]):
        th = pd.read_parquet(shared_data / "metabench_irt" / f"{stem}_thetas.parquet")
        ref = th[th["split"] == "train"].set_index("llm")["theta"]
        ours = pd.Series(
            {r["model"]: r["benchmarks"][bm]["theta"] for r in got if bm in r["benchmarks"]}
        )
        rho = spearmanr(ours, ref.loc[ours.index]).statistic
        assert len(ours) >= 100
        assert rho >= 0.999, (bm, rho)


@pytest.mark.realdata
@pytest.mark.slow
def test_published_scoring_intervals_cover_held_out_llms(shared_data) -> None:
    from sigmap_lib.studies import published_scoring_validation

    r = published_scoring_validation(shared_data, "B")
    for bm, f in r["fits"].items():
        assert 0.85 <= f["coverage"] <= 0.95, (bm, f)
        assert f["theta_spearman"] >= 0.999 and f["rmse"] < 3.0, (bm, f)
    assert 0.85 <= r["grand"]["coverage"] <= 0.95


# ------------------------------------------------------------------ a real lm-eval run
@pytest.mark.slow
def test_real_lm_eval_run_on_exported_tasks_then_score(small_fit, tiny_models, tmp_path) -> None:
    """lm-eval (offline, tiny local GPT-2, --log_samples) on the exported tasks, after the
    task folder was moved and from another working directory (the folder is portable); the
    θ that `sigmap metabench score` prints equals estimate_theta on the answers read from
    the logs."""
    import shutil

    pytest.importorskip("lm_eval")
    fit, _truth, items = small_fit
    written = write_lm_eval_tasks(
        tmp_path / "first" / "tasks", fit_tasks(fit.selected, items), group="sigmap_fit"
    )
    tasks_dir = tmp_path / "moved" / "mb-tasks"
    tasks_dir.parent.mkdir()
    shutil.move(str(written), str(tasks_dir))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fit.save(tmp_path / "fit")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "lm_eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_models[0]},dtype=float32",
            "--include_path",
            str(tasks_dir),
            "--tasks",
            "sigmap_fit",
            "--device",
            "cpu",
            "--batch_size",
            "8",
            "--output_path",
            str(tmp_path / "logs"),
            "--log_samples",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=elsewhere,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert not (tmp_path / "first" / "tasks").exists()
    fit_args = ["--fit", str(tmp_path / "fit"), "--tasks", str(tasks_dir)]
    [res] = sigmap_score(str(tmp_path / "logs"), *fit_args, env=env)
    assert res["model"] == str(tiny_models[0])
    for bm, f in fit.benchmarks.items():
        [samples] = (tmp_path / "logs").rglob(f"samples_sigmap_{bm}_*.jsonl")
        acc = {
            json.loads(line)["doc"]["item_id"]: float(json.loads(line)["acc"])
            for line in samples.read_text().splitlines()
        }
        x = pd.DataFrame([acc], index=["m"])[f.selected]
        ref = estimate_theta(f.params, x, f.theta_method)
        assert res["benchmarks"][bm]["theta"] == pytest.approx(
            float(ref["theta"].iloc[0]), abs=1e-9
        )
        assert res["benchmarks"][bm]["items"] == len(f.selected)

"""`sigmap metabench score` / `export-tasks` as a finished tool: intervals inside the score
range, one-line input errors with the traceback in a log file, portable task folders,
model names from the lm-eval results, reports of what was not used, ``--latest``, and the
published versions' true item counts.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sigmap_assets.cli import main
from sigmap_lib.irt import estimate_theta
from sigmap_lib.metabench import (
    MIN_ANSWERED_SHARE,
    BenchmarkScorer,
    MetabenchScorer,
    fit_tasks,
    manifest_rules,
    model_label,
    read_lm_eval_answers,
    write_lm_eval_tasks,
)
from tests.lib.metabench.test_lm_eval_loop import small_fit, write_log  # noqa: F401

PYTHON = sys.executable


def _scorer_reaching_below_zero(score_range):
    """One benchmark whose reconstruction (10 θ + 20) and residuals (sd 8) reach below 0
    for weak models."""
    rng = np.random.default_rng(0)
    params = pd.DataFrame(
        {"a1": np.linspace(0.8, 1.6, 20), "d": np.linspace(-1.5, 1.5, 20), "g": 0.0, "u": 1.0},
        index=[f"q{i}" for i in range(20)],
    )
    rt = rng.normal(size=400)
    return BenchmarkScorer(
        benchmark="bm",
        params=params,
        theta_method="MAP",
        reconstruct=lambda theta, x: 10 * np.asarray(theta) + 20,
        resid_theta=rt,
        resid=rng.normal(0, 8, 400),
        resid_models=[f"m{i}" for i in range(400)],
        score_range=score_range,
    )


def test_scores_and_intervals_stay_in_the_score_range() -> None:
    weak = {"bm": {f"q{i}": 0 for i in range(20)}}  # all wrong: θ low, reconstruction < 0
    partial = {"bm": {f"q{i}": 0 for i in range(6)}}
    other = _scorer_reaching_below_zero((0.0, 100.0))
    other.benchmark = "bm2"
    bounded = MetabenchScorer({"bm": _scorer_reaching_below_zero((0.0, 100.0)), "bm2": other})
    unbounded = MetabenchScorer(
        {"bm": _scorer_reaching_below_zero(None), "bm2": _scorer_reaching_below_zero(None)}
    )
    answers = {
        "weak": {**weak, "bm2": weak["bm"]},
        "partial": {**partial, "bm2": partial["bm"]},
    }
    free = {r["model"]: r for r in unbounded.score(answers)}
    assert free["weak"]["benchmarks"]["bm"]["score_interval"][0] < 0  # the test can fail
    assert free["partial"]["grand"]["score_interval"][0] < 0
    for r in bounded.score(answers):
        for b in [*r["benchmarks"].values(), r["grand"]]:
            lo, hi = b["score_interval"]
            assert 0.0 <= lo <= b["score"] <= hi <= 100.0, (r["model"], b)
            assert b["score_range"] == [0.0, 100.0]
        f = free[r["model"]]["benchmarks"]["bm"]
        assert r["benchmarks"]["bm"]["score_interval"][1] == pytest.approx(
            max(0.0, f["score_interval"][1])
        )


def test_fit_scorer_takes_its_range_from_the_training_scores(small_fit) -> None:  # noqa: F811
    fit, _truth, _items = small_fit
    scorer = MetabenchScorer.from_fit(fit)
    assert {s.score_range for s in scorer.benchmarks.values()} == {(0.0, 100.0)}
    sel = fit.selected["arc"]
    [r] = scorer.score({"m": {"arc": {i: 0 for i in sel}, "gsm8k": {fit.selected["gsm8k"][0]: 0}}})
    for b in [*r["benchmarks"].values(), r["grand"]]:
        assert 0.0 <= b["score_interval"][0] <= b["score_interval"][1] <= 100.0


# --------------------------------------------------------------------- the CLI error path
def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "sigmap_assets.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def test_bad_input_prints_one_line_and_logs_the_traceback(tmp_path, small_fit) -> None:  # noqa: F811
    fit, _truth, items = small_fit
    fit.save(tmp_path / "fit")
    tasks = write_lm_eval_tasks(tmp_path / "tasks", fit_tasks(fit.selected, items), group="g")
    logs = tmp_path / "logs" / "m"
    logs.mkdir(parents=True)
    (logs / "results_2026-01-01T00-00-00.json").write_text('{"model_name": "m"}')
    (logs / "samples_sigmap_arc_2026-01-01T00-00-00.jsonl").write_text('{"doc_id": 0, "doc": "x')
    storage = tmp_path / "storage"
    fit_args = ["metabench", "score"]
    with_tasks = ["--fit", str(tmp_path / "fit"), "--tasks", str(tasks)]
    no_params = ["--params", str(tmp_path / "no-params")]
    cases = [  # (args, what the one line must say)
        (
            ["metabench", "score", str(tmp_path / "nowhere"), "--fit", str(tmp_path / "fit")],
            "--fit needs --tasks OUT",
        ),
        (
            [*fit_args, str(tmp_path / "nowhere"), *with_tasks],
            "nowhere does not exist: pass the folder given to lm_eval --output_path",
        ),
        (
            [*fit_args, str(tmp_path / "logs"), *with_tasks],
            "malformed JSON (line 1 is not valid JSON: Unterminated string starting at column",
        ),
        (
            ["metabench", "export-tasks", str(tmp_path / "out"), "--published", "B", *no_params],
            "fits_summary.csv is missing",
        ),
    ]
    for args, expected in cases:
        run = _run_cli("--storage", str(storage), *args, cwd=tmp_path)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 1, run.stderr
        assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
        name = "sigmap " + " ".join(args[:2])
        assert lines[0].startswith(f"{name}: ") and expected in lines[0], lines[0]
        log = Path(lines[0].rsplit("(traceback: ", 1)[1].rstrip(")"))
        assert log.parent == storage / ".sigmap" / "logs"
        text = log.read_text()
        assert "Traceback (most recent call last)" in text and "SigmapInputError" in text
    assert "at at column" not in run.stderr


def test_every_subcommand_goes_through_the_error_path(tmp_path, capsys) -> None:
    """`sigmap realdata` (not a metabench command) raising bad input: one line, exit 1."""
    data = tmp_path / "data"
    (data / "metabench_irt").mkdir(parents=True)
    rc = main(["--storage", str(tmp_path / "s"), "realdata", "scoring", "--data", str(data)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and err[0].startswith("sigmap realdata: "), err
    assert "fits_summary.csv is missing" in err[0] and "(traceback: " in err[0]


# --------------------------------------------------------------------- portable task folders
def test_exported_task_folder_has_no_absolute_path_and_loads_after_a_move(
    tmp_path,
    small_fit,  # noqa: F811
) -> None:
    pytest.importorskip("datasets")
    fit, _truth, items = small_fit
    first = write_lm_eval_tasks(tmp_path / "a" / "tasks", fit_tasks(fit.selected, items), group="g")
    moved = tmp_path / "b" / "moved"
    moved.parent.mkdir()
    shutil.move(str(first), str(moved))
    for f in moved.iterdir():
        text = f.read_text()
        assert str(tmp_path) not in text, f  # nothing points back at where it was written
    spec = importlib.util.spec_from_file_location("loader_under_test", moved / "sigmap_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import yaml

    y = yaml.safe_load((moved / "sigmap_arc.yaml").read_text().replace("!function ", ""))
    assert y["custom_dataset"] == "sigmap_data.load"
    ds = mod.load(**y["dataset_kwargs"], version=0.0, pretrained="x")["test"]
    assert ds["item_id"] == fit.selected["arc"]


# --------------------------------------------------------------------- names, warnings, --latest
def test_model_label_shortens_local_paths_and_names_converted_gguf(tmp_path) -> None:
    assert model_label("EleutherAI/pythia-160m") == "EleutherAI/pythia-160m"
    assert model_label("gpt2") == "gpt2"
    assert model_label(f"{tmp_path}/models/my-model/") == "my-model"
    cache = tmp_path / "gguf_cache" / "b179c9523d0e6a0f"
    cache.mkdir(parents=True)
    assert model_label(str(cache)) == "b179c9523d0e6a0f"
    (cache / "gguf_source.json").write_text(json.dumps({"gguf_file": "SmolLM2-135M.Q4_1.gguf"}))
    assert model_label(str(cache)) == "SmolLM2-135M.Q4_1"


def _two_task_logs(tmp_path, fit, items, model, *, arc_share=1.0, extra=True):
    tasks = fit_tasks(fit.selected, items)
    tasks_dir = write_lm_eval_tasks(tmp_path / "tasks", tasks, group="g")
    logs = tmp_path / "logs"
    for t in tasks:
        ids = [d["item_id"] for d in t.docs]
        keep = ids[: max(1, int(arc_share * len(ids)))] if t.benchmark == "arc" else ids
        write_log(logs, model, t.task, t.docs, {i: k % 2 for k, i in enumerate(keep)})
    if extra:  # a task of another evaluation in the same folder
        write_log(logs, model, "hellaswag", [{"item_id": "h1"}], {"h1": 1})
    return tasks_dir, logs


def _score_json(*args: str, cwd: Path) -> tuple[dict, list[str]]:
    run = _run_cli("metabench", "score", *args, "--json", cwd=cwd)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr.splitlines()


def test_score_reports_what_it_did_not_use(tmp_path, small_fit) -> None:  # noqa: F811
    fit, _truth, items = small_fit
    fit.save(tmp_path / "fit")
    model = f"{tmp_path}/checkpoints/run-7/final"
    share = MIN_ANSWERED_SHARE / 2
    tasks_dir, logs = _two_task_logs(tmp_path, fit, items, model, arc_share=share)
    (
        logs / model.replace("/", "__") / "samples_sigmap_gsm8k_2026-01-01T00-00-00.000000.jsonl"
    ).unlink()
    doc, err = _score_json(
        str(logs), "--fit", str(tmp_path / "fit"), "--tasks", str(tasks_dir), cwd=tmp_path
    )
    [r] = doc["models"]
    assert r["model"] == model and r["label"] == "final"  # full name in JSON, short label
    n = len(fit.selected["arc"])
    k = max(1, int(share * n))
    text = "\n".join(err)
    assert "1 samples file(s) of task(s) this fit does not cover were not used: hellaswag" in text
    assert "final: no samples for gsm8k (task sigmap_gsm8k)" in text
    assert "final: no grand score: not scored on gsm8k" in text and r["grand"]["reason"]
    assert f"final: arc: only {k} of {n} items answered" in text
    assert doc["warnings"] and all(f"warning: {w}" in err for w in doc["warnings"])
    # enough answers, every benchmark: no warning about either
    tasks_dir, logs = _two_task_logs(tmp_path / "full", fit, items, "org/full", extra=False)
    doc, err = _score_json(
        str(logs), "--fit", str(tmp_path / "fit"), "--tasks", str(tasks_dir), cwd=tmp_path
    )
    assert doc["warnings"] == [] and not any(e.startswith("warning") for e in err)
    assert doc["models"][0]["grand"]["score"] is not None


def test_table_uses_the_name_given_and_does_not_cut_names(tmp_path, small_fit) -> None:  # noqa: F811
    fit, _truth, items = small_fit
    fit.save(tmp_path / "fit")
    long = "some-organisation/a-model-name-that-is-much-longer-than-forty-characters"
    tasks_dir, logs = _two_task_logs(tmp_path, fit, items, long, extra=False)
    base = ["metabench", "score", str(logs), "--fit", str(tmp_path / "fit"), "--tasks"]
    run = _run_cli(*base, str(tasks_dir), cwd=tmp_path)
    assert run.returncode == 0 and f"{long} arc " in run.stdout, run.stdout
    run = _run_cli(*base, str(tasks_dir), "--name", "mine", cwd=tmp_path)
    rows = run.stdout.splitlines()[1:]
    assert {r.split()[0] for r in rows} == {"mine"} and len(rows) == 3  # arc, gsm8k, grand
    tasks2, logs2 = _two_task_logs(tmp_path / "two", fit, items, "org/a", extra=False)
    _two_task_logs(tmp_path / "two", fit, items, "org/b", extra=False)
    run = _run_cli(*base[:2], str(logs2), *base[3:], str(tasks2), "--name", "x", cwd=tmp_path)
    assert run.returncode == 1 and "--name 'x' names one model, but the logs hold 2" in run.stderr


def test_latest_keeps_the_newest_log_of_a_model(tmp_path, small_fit) -> None:  # noqa: F811
    fit, _truth, items = small_fit
    tasks = fit_tasks(fit.selected, items)
    rules = manifest_rules(write_lm_eval_tasks(tmp_path / "tasks", tasks, group="g"))
    arc = next(t for t in tasks if t.benchmark == "arc")
    ids = [d["item_id"] for d in arc.docs]
    old = {i: 1 for i in ids}
    new = {i: int(k % 3 == 0) for k, i in enumerate(ids)}
    write_log(tmp_path / "l", "m", arc.task, arc.docs, new, ts="2026-02-01T00-00-00.000000")
    write_log(tmp_path / "l", "m", arc.task, arc.docs, old, ts="2026-01-01T00-00-00.000000")
    with pytest.raises(Exception, match=r"keep one .* or pass --latest"):
        read_lm_eval_answers(tmp_path / "l", rules)
    got = read_lm_eval_answers(tmp_path / "l", rules, latest=True)
    assert got.answers["m"]["arc"] == new
    [(kept, dropped)] = got.replaced
    assert "2026-02-01" in kept and "2026-01-01" in dropped
    [r] = MetabenchScorer.from_fit(fit).score(got.answers)
    ref = estimate_theta(
        fit.benchmarks["arc"].params, pd.DataFrame([new])[ids], fit.benchmarks["arc"].theta_method
    )
    assert r["benchmarks"]["arc"]["theta"] == pytest.approx(float(ref["theta"].iloc[0]))


# --------------------------------------------------------------------- published counts
@pytest.mark.realdata
def test_published_exports_have_the_documented_counts(shared_data, tmp_path, capsys) -> None:
    from sigmap_assets.cli_metabench import PUBLISHED_COVERAGE

    for version, group in (("B", "sigmap_metabench_secondary"), ("A", "sigmap_metabench")):
        out = tmp_path / version
        args = ["metabench", "export-tasks", str(out), "--published", version]
        assert main([*args, "--params", str(shared_data / "metabench_irt")]) == 0
        manifest = json.loads((out / "sigmap_tasks.json").read_text())
        counts = {t["benchmark"]: len(t["items"]) for t in manifest["tasks"].values()}
        assert counts == PUBLISHED_COVERAGE[version], (version, counts)
        assert manifest["group"] == group
    assert sum(PUBLISHED_COVERAGE["B"].values()) == 693
    assert sum(PUBLISHED_COVERAGE["A"].values()) == 382
    err = capsys.readouterr().err
    assert "wrote 5 tasks (693 items" in err and "wrote 2 tasks (382 items" in err
    assert "not covered: hellaswag" in err
    with pytest.raises(SystemExit):
        main(["metabench", "export-tasks", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "version B: 693 items in 5 tasks" in helptext
    assert "version A: 382 items in 2 tasks" in helptext


@pytest.mark.realdata
@pytest.mark.slow
def test_published_gsm8k_intervals_no_longer_leave_the_score_range(shared_data) -> None:
    """Held-out real LLMs: without bounds some GSM8K intervals go below 0; with them none
    does, and coverage at full answers stays 0.85–0.95."""
    from sigmap_lib.metabench import partial_answer_coverage

    free = partial_answer_coverage(shared_data, "B", shares=(1.0,), bounded=False)
    ours = partial_answer_coverage(shared_data, "B", shares=(1.0,))
    assert free["shares"]["1"]["fits"]["gsm8k"]["below_range"] > 0
    for bm, f in ours["shares"]["1"]["fits"].items():
        assert f["below_range"] == f["above_range"] == 0, bm
        assert 0.85 <= f["coverage"] <= 0.95, (bm, f)
        assert f["coverage"] >= free["shares"]["1"]["fits"][bm]["coverage"]

"""Perplexity cells as Slurm jobs (issue #43).

Pure helpers (the request, the batch script, ``sacct``/``scontrol`` records) are tested
without a cluster. The tests marked ``slurm`` run against a real cluster (``eval "$(bash
scripts/ci_slurm.sh)"``, which CI runs): a cell scored by a Slurm job equals the local
executor's cell byte for byte, cells run as concurrent jobs, a cancelled job fails its cell
with one line naming it and a rerun completes, an interrupted wait cancels its job, and a
request the cluster cannot satisfy fails before anything is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from sigmap_assets.partitions import cell_key
from sigmap_assets.resources import ComputeResource, write_project_config
from sigmap_assets.slurm import (
    PipesSlurmClient,
    SlurmJobRecord,
    SlurmSettings,
    first_error_line,
    job_name,
    parse_sacct,
    parse_scontrol,
    render_script,
    resolve_request,
)
from sigmap_lib.nll import NLLStore
from tests.assets.harness import QUIET, Project, add_tiny_models, make_project

# --- pure helpers ---------------------------------------------------------------------------


def test_request_layers_resource_over_sigmap_yaml_over_defaults() -> None:
    project = {"slurm": {"partition": "gpu", "gpus": 2, "mem": "64G", "setup": "module load cuda"}}
    req = resolve_request(SlurmSettings(partition="a100", cpus=8), project)
    assert (req.partition, req.gpus, req.cpus, req.mem, req.time) == (
        "a100",
        2,
        8,
        "64G",
        "04:00:00",
    )
    assert req.setup == ("module load cuda",)
    assert resolve_request(SlurmSettings(gpus=0), project).gpus == 0  # 0 is a value, -1 unset
    opts = req.sbatch_options("cell", Path("/s/log.out"), Path("/s"))
    assert "--gres=gpu:2" in opts and "--partition=a100" in opts and "--cpus-per-task=8" in opts
    assert not any(o.startswith("--account") for o in opts)
    no_gpu = resolve_request(SlurmSettings(gpus=0, account="lab"), {}).sbatch_options(
        "c", Path("l"), Path("w")
    )
    assert not any(o.startswith("--gres") for o in no_gpu) and "--account=lab" in no_gpu


@pytest.mark.parametrize(
    ("project", "words"),
    [
        ({"slurm": {"partitin": "gpu"}}, "unknown slurm setting(s) ['partitin']"),
        ({"slurm": {"gpus": "two"}}, "must be numbers"),
        ({"slurm": {"cpus": -1}}, "need gpus >= 0, cpus >= 1"),
        ({"slurm": {"mem": "lots"}}, "mem must look like 32G"),
        ({"slurm": {"time": "4h"}}, "time must be minutes, HH:MM:SS"),
        ({"slurm": ["gpu"]}, "slurm must be a mapping"),
    ],
)
def test_bad_slurm_settings_are_one_line(project: dict, words: str) -> None:
    with pytest.raises(ValueError, match=r"^[^\n]+$") as err:
        resolve_request(SlurmSettings(), project)
    assert words in str(err.value)


def test_runner_comes_from_the_resource_then_sigmap_yaml(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert ComputeResource().cell_runner(root) == "local"
    write_project_config(root, runner="slurm", slurm={"partition": "gpu", "gpus": 4})
    assert ComputeResource().cell_runner(root) == "slurm"
    assert ComputeResource(runner="local").cell_runner(root) == "local"
    req = ComputeResource().slurm_request(root)
    assert (req.partition, req.gpus) == ("gpu", 4)
    with pytest.raises(ValueError, match=r"ComputeResource\.runner: runner must be local or slurm"):
        ComputeResource(runner="k8s").cell_runner(root)


def test_batch_script_exports_the_pipes_variables_and_execs_the_command() -> None:
    req = resolve_request(SlurmSettings(setup=["module load cuda/12"]), {})
    env = {"DAGSTER_PIPES_CONTEXT": "eyJ4Ijo=", "DAGSTER_PIPES_MESSAGES": "a b'c"}
    script = render_script(req, ["/v/bin/python", "-m", "sigmap_assets.slurm_cell"], env)
    lines = script.splitlines()
    assert lines[:3] == ["#!/bin/bash", "set -euo pipefail", "module load cuda/12"]
    assert "export DAGSTER_PIPES_CONTEXT=eyJ4Ijo=" in lines
    assert "export DAGSTER_PIPES_MESSAGES='a b'\"'\"'c'" in lines
    assert lines[-1] == "exec /v/bin/python -m sigmap_assets.slurm_cell"
    res = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert res.returncode == 0, res.stderr


def test_sacct_and_scontrol_records_are_parsed() -> None:
    text = (
        "41|COMPLETED|0:0|2026-12-04T20:40:01|2026-12-04T20:40:09|vm|None\n"
        "41.batch|COMPLETED|0:0|2026-12-04T20:40:01|2026-12-04T20:40:09|vm|\n"
        "42|CANCELLED by 0|0:15|2026-12-04T20:40:02|2026-12-04T20:40:05|vm|None\n"
        "43_7|TIMEOUT|0:0|2026-12-04T20:40:02|2026-12-04T21:40:02|vm|None\n"
        "44|PENDING|0:0|Unknown|Unknown|None assigned|Resources\n"
    )
    recs = parse_sacct(text)
    assert sorted(recs) == ["41", "42", "43_7", "44"]
    assert recs["41"].succeeded and not recs["41"].active
    assert recs["42"].state == "CANCELLED" and not recs["42"].succeeded
    assert recs["43_7"].state == "TIMEOUT"
    assert recs["44"].active and recs["44"].reason == "Resources"
    with pytest.raises(ValueError, match="sacct: expected 7 fields"):
        parse_sacct("41|COMPLETED\n")
    rec = parse_scontrol(
        "JobId=7 JobName=x UserId=root(0) JobState=NODE_FAIL Reason=NodeDown Dependency=(null) "
        "ExitCode=0:0 StartTime=2026-12-04T20:00:00 EndTime=2026-12-04T20:01:00 NodeList=n1"
    )
    assert rec == SlurmJobRecord(
        "7", "NODE_FAIL", "0:0", "2026-12-04T20:00:00", "2026-12-04T20:01:00", "n1", "NodeDown"
    )
    with pytest.raises(ValueError, match="no JobId/JobState"):
        parse_scontrol("slurm_load_jobs error: Invalid job id specified")


def test_sbatch_errors_and_job_names_are_one_line() -> None:
    err = "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification\n"
    assert first_error_line(err) == (
        "Batch job submission failed: Invalid generic resource (gres) specification"
    )
    assert first_error_line("allocation failure: x\n") == "allocation failure: x"
    assert job_name("hf__org__m-1.5b", "a/b|c") == "sigmap-nll.hf__org__m-1.5b.a_b_c"


# --- against a real cluster -----------------------------------------------------------------

FAST = {"gpus": 0, "cpus": 1, "mem": "3G", "time": "00:10:00", "poll_seconds": 0.3}


@pytest.fixture(scope="module")
def cluster() -> None:
    if not os.environ.get("SIGMAP_TEST_SLURM"):
        pytest.skip(
            "SIGMAP_TEST_SLURM is unset: start a one-node cluster with "
            '`eval "$(bash scripts/ci_slurm.sh)"` (CI does this)'
        )
    res = subprocess.run(["sinfo", "--noheader", "--format=%T"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip(), f"sinfo: {res.stderr.strip()}"


def _two_model_world(dst: Path, template: Path, tiny: Path) -> Path:
    """The small synthetic world with two tiny GPT-2 models (b's weights shifted)."""
    shutil.copytree(template, dst)
    add_tiny_models(dst, tiny)
    return dst


@pytest.fixture(scope="module")
def projects(
    cluster: None,
    tmp_path_factory: pytest.TempPathFactory,
    synthetic_world_template: Path,
    tiny_gpt2: Path,
) -> Iterator[tuple[Project, Project]]:
    """(local, slurm): the same world through the registry on two storage roots."""
    base = tmp_path_factory.mktemp("slurm")
    world = _two_model_world(base / "world", synthetic_world_template, tiny_gpt2)
    with dg.instance_for_test() as i_local, dg.instance_for_test() as i_slurm:
        local = make_project(base / "local", world, i_local)
        slurm = make_project(base / "slurm", world, i_slurm)
        for p in (local, slurm):
            p.through("registry")
        yield local, slurm


def _compute(**slurm: object) -> ComputeResource:
    return ComputeResource(
        device="cpu", threads=1, runner="slurm", slurm=SlurmSettings(**(FAST | slurm))
    )


def _materialize(
    project: Project, cell: str, compute: ComputeResource | None = None
) -> dg.ExecuteInProcessResult:
    resources = project.resources | ({"compute": compute} if compute else {})
    return dg.materialize(
        project.assets,
        selection=["token_nll"],
        instance=project.instance,
        resources=resources,
        partition_key=cell,
        run_config=QUIET,
        raise_on_error=False,
    )


@contextmanager
def _runs_in_threads(instance: dg.DagsterInstance) -> Iterator[None]:
    """In-process runs in several threads of this test at once (`sigmap demo`'s lanes use
    processes instead, :mod:`sigmap_assets.lanes`): no per-run ``dictConfig`` of the instance's python-log handlers (it closes every handler
    under logging's lock and deadlocks against a run logging in another thread) and no
    per-step stdout/stderr capture (``os.dup2`` of the process's descriptors)."""
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    saved = instance.compute_log_manager
    instance.get_yaml_python_handlers = lambda: []  # type: ignore[method-assign]
    instance._compute_log_manager = NoOpComputeLogManager()
    try:
        yield
    finally:
        del instance.get_yaml_python_handlers
        instance._compute_log_manager = saved


def _cell_bytes(project: Project, model: str, shard: str) -> tuple[bytes, list]:
    import json

    cur = json.loads(project.storage.layout.nll_cell_current(shard, model).read_text())
    store = NLLStore.open(project.storage.layout.nll_cell(shard, model, cur["fingerprint"]))
    return store.read().tobytes(), store.checksums


def _meta(result: dg.ExecuteInProcessResult) -> dict:
    (mat,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in mat.materialization.metadata.items()}


def _failure(result: dg.ExecuteInProcessResult) -> str:
    (ev,) = result.get_step_failure_events()
    return ev.step_failure_data.error.message.strip()


def _sacct(job_ids: list[str]) -> dict[str, SlurmJobRecord]:
    fields = "JobID,State,ExitCode,Start,End,NodeList,Reason"
    res = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), f"--format={fields}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return parse_sacct(res.stdout)


@pytest.fixture(scope="module")
def local_cells(projects: tuple[Project, Project]) -> dict[tuple[str, str], tuple[bytes, list]]:
    """Every tiny-model cell scored by the local executor (the reference)."""
    local, _ = projects
    out = {}
    for model in ("local__a", "local__b"):
        for shard in local.keys("shards"):
            res = _materialize(local, str(cell_key(model, shard)))
            assert res.success, _failure(res)
            out[model, shard] = _cell_bytes(local, model, shard)
    return out


@pytest.mark.slurm
def test_a_cell_scored_by_a_slurm_job_equals_the_local_one(projects, local_cells) -> None:
    _, slurm = projects
    shard = slurm.keys("shards")[0]
    res = _materialize(slurm, str(cell_key("local__a", shard)), _compute())
    assert res.success, _failure(res)
    meta = _meta(res)
    assert _cell_bytes(slurm, "local__a", shard) == local_cells["local__a", shard]
    job = meta["slurm_job_id"]
    assert _sacct([job])[job].state == "COMPLETED"
    assert Path(meta["slurm_log"]).name == "slurm.out" and Path(meta["slurm_log"]).exists()
    # the job's Pipes log lines came back into the run
    texts = [r.user_message for r in slurm.instance.all_logs(res.run_id)]
    assert any("local/a on shard" in t and "scoring into" in t for t in texts)
    assert any(f"Slurm job {job} completed" in t for t in texts)
    # a complete cell is a no-op: no job is submitted
    again = _materialize(slurm, str(cell_key("local__a", shard)), _compute())
    assert again.success and _meta(again)["reused"] is True and "slurm_job_id" not in _meta(again)


@pytest.mark.slurm
def test_cells_run_as_concurrent_jobs(projects, local_cells) -> None:
    _, slurm = projects
    shards = slurm.keys("shards")
    cells = [("local__a", shards[1]), ("local__b", shards[0])]
    with _runs_in_threads(slurm.instance), ThreadPoolExecutor(len(cells)) as pool:
        results = list(
            pool.map(lambda c: _materialize(slurm, str(cell_key(*c)), _compute()), cells)
        )
    for r in results:
        assert r.success, _failure(r)
    jobs = [_meta(r)["slurm_job_id"] for r in results]
    recs = _sacct(jobs)
    starts = [datetime.fromisoformat(recs[j].start) for j in jobs]
    ends = [datetime.fromisoformat(recs[j].end) for j in jobs]
    assert max(starts) < min(ends), (
        f"jobs did not overlap: {[(s, e) for s, e in zip(starts, ends)]}"
    )
    for model, shard in cells:
        assert _cell_bytes(slurm, model, shard) == local_cells[model, shard]


def _running_job(project: Project, name: str) -> str:
    """The id of the job ``name`` once it runs and its Pipes session is open (the cell's
    work has begun: the scoring code and the model load come next)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        q = subprocess.run(
            ["squeue", "-h", "-n", name, "-o", "%i|%T"], capture_output=True, text=True
        ).stdout.split()
        root = Path(project.storage.layout.path("slurm"))
        msgs = list(root.glob(f"*/{name}/pipes-messages.jsonl"))
        if q and q[0].endswith("|RUNNING") and msgs and msgs[0].read_text().strip():
            return q[0].split("|")[0]
        time.sleep(0.1)
    raise AssertionError(f"job {name} never ran")


@pytest.mark.slurm
def test_a_cancelled_job_fails_its_cell_in_one_line_and_a_rerun_completes(
    projects, local_cells
) -> None:
    _, slurm = projects
    model, shard = "local__b", slurm.keys("shards")[1]
    name = job_name(model, shard)
    box: dict = {}
    t = threading.Thread(
        target=lambda: box.update(res=_materialize(slurm, str(cell_key(model, shard)), _compute()))
    )
    with _runs_in_threads(slurm.instance):
        t.start()
        job = _running_job(slurm, name)
        subprocess.run(["scancel", job], check=True)
        t.join(120)
    res = box["res"]
    assert not res.success
    msg = _failure(res)
    assert "\n" not in msg
    assert f"Slurm job {job} ({name}) ended CANCELLED" in msg and "log: " in msg
    assert Path(msg.split("log: ")[1]).name == "slurm.out"
    assert not slurm.storage.layout.nll_cell_current(shard, model).exists()
    rerun = _materialize(slurm, str(cell_key(model, shard)), _compute())
    assert rerun.success, _failure(rerun)
    assert _meta(rerun)["slurm_job_id"] != job
    assert _cell_bytes(slurm, model, shard) == local_cells[model, shard]


@pytest.mark.slurm
def test_an_interrupted_wait_cancels_its_job(cluster: None, tmp_path: Path) -> None:
    req = resolve_request(SlurmSettings(**FAST), {})
    script = tmp_path / "job.sh"
    script.write_text(render_script(req, ["sleep", "120"], {}))
    client = PipesSlurmClient(req)
    job = client.submit(script, "sigmap-test-interrupt", tmp_path / "slurm.out", tmp_path)

    def sleep(seconds: float) -> None:  # Ctrl-C / run termination once the job runs
        if client.queue_state(job) == "RUNNING":
            raise KeyboardInterrupt
        time.sleep(0.1)

    client._sleep = sleep
    with pytest.raises(KeyboardInterrupt):
        client.wait_or_cancel(job)
    client._sleep = time.sleep
    assert client.record(job).state == "CANCELLED"
    assert client.queue_state("99999999") == ""  # an id the controller does not know: ended


@pytest.mark.slurm
@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"gpus": 1}, "Invalid generic resource (gres) specification"),
        ({"partition": "no-such-partition"}, "invalid partition specified: no-such-partition"),
    ],
)
def test_an_unsatisfiable_request_fails_before_any_work(projects, settings, words) -> None:
    _, slurm = projects
    model, shard = "local__a", slurm.keys("shards")[2]
    name = job_name(model, shard)
    before = subprocess.run(
        ["sacct", "-n", "-X", "-P", "--name", name, "-S", "now-1hours", "-o", "JobID"],
        capture_output=True,
        text=True,
    ).stdout
    res = _materialize(slurm, str(cell_key(model, shard)), _compute(**settings))
    msg = _failure(res)
    assert "\n" not in msg and f"Slurm cannot run {name} as requested" in msg and words in msg
    spec_out = slurm.storage.layout.nll_cell_current(shard, model)
    assert not spec_out.exists()
    cells = Path(slurm.storage.layout.nll_cell(shard, model, "x")).parent
    assert not cells.exists() or not any(cells.iterdir())
    assert not list(Path(slurm.storage.layout.path("slurm")).glob(f"*/{name}"))
    after = subprocess.run(
        ["sacct", "-n", "-X", "-P", "--name", name, "-S", "now-1hours", "-o", "JobID"],
        capture_output=True,
        text=True,
    ).stdout
    assert after == before


@pytest.mark.slurm
def test_a_job_that_dies_on_its_node_fails_its_cell_in_one_line(projects) -> None:
    """A job that exits non-zero before the cell starts (here its setup line fails, as a
    missing module or a dead node would) ends FAILED: one line with its id, state, exit
    code and log; the cell is not recorded."""
    _, slurm = projects
    model, shard = "local__a", slurm.keys("shards")[2]
    name = job_name(model, shard)
    res = _materialize(slurm, str(cell_key(model, shard)), _compute(setup=["exit 3"]))
    msg = _failure(res)
    assert "\n" not in msg
    job = msg.split("Slurm job ")[1].split()[0]
    assert f"Slurm job {job} ({name}) ended FAILED (exit code 3:0); log: " in msg
    assert _sacct([job])[job].state == "FAILED"
    assert Path(msg.split("log: ")[1]).exists()
    assert not slurm.storage.layout.nll_cell_current(shard, model).exists()

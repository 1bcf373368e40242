"""Two `sigmap demo` / `sigmap run` processes on one storage root share the work
(:class:`sigmap_assets.runboard.Board`): each request goes to one runner, the world root is
checked by one runner at a time, and a runner that ended without finishing leaves nothing in
progress behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest

from sigmap_assets.demo import GraphRunner
from sigmap_assets.runboard import BOARD, PID_TAG, Board, Owner, Request
from tests.assets.harness import REPO, Project, demo_runner, split_corpus


def test_a_request_goes_to_one_runner_after_the_requests_upstream_of_it(
    project: Project,
) -> None:
    """Claims on the board: a request is claimed once, and only when no request upstream of
    it is left on the board (whoever runs that one)."""
    first, second = demo_runner(project, lanes=2), demo_runner(project, lanes=2)
    second._me = Owner(first._me.host, first._me.pid + 1, first._me.started)
    selected = first._closure(None)
    board = Board()
    board.add([Request("corpus_shard", "s1"), Request("corpus_shard", "s2")])
    board.add([Request("token_nll", "m|s1"), Request("rank_coverage")])
    got = first._claim(board, selected, 1)
    assert [e["partition"] for e in got] == ["s1"]
    # the other shard: the second runner; the cell and the coverage wait for the shards
    assert [e["partition"] for e in second._claim(board, selected, 2)] == ["s2"]
    assert first._claim(board, selected, 2) == [] and second._claim(board, selected, 2) == []
    first._finish(board, Request("corpus_shard", "s1"), "ran")
    assert second._claim(board, selected, 2) == []  # s2 is still running
    second._finish(board, Request("corpus_shard", "s2"), "ran")
    got = second._claim(board, selected, 2)
    assert [e["asset"] for e in got] == ["token_nll"]  # the coverage waits for the cell
    assert first._claim(board, selected, 2) == []
    # a failed unpartitioned request blocks what reads it on every runner
    board.add([Request("performance_overlap")])
    (claimed,) = first._claim(board, selected, 1)
    first._finish(board, Board.request(claimed), "failed")
    assert board.failed == ["performance_overlap"]
    first._finish(board, Request("performance_overlap"), "ran")
    assert board.failed == []


def _runner_on(
    instance: dg.DagsterInstance, asset: dg.AssetsDefinition, lines: list[str]
) -> GraphRunner:
    """A runner of one asset (no storage root: the lock is in the instance's folder)."""
    return GraphRunner(dg.Definitions(assets=[asset]), instance, log=lines.append, resources={})


SLOW_ASSET = """
import sys, time
import dagster as dg
from sigmap_assets.demo import GraphRunner
from sigmap_assets.runboard import BOARD, Board, Request

@dg.asset
def slow() -> int:
    time.sleep(120)
    return 1

with dg.DagsterInstance.get() as instance:
    runner = GraphRunner(dg.Definitions(assets=[slow]), instance, resources={})
    with runner._locked():
        board = runner._board()
        board.members.append(runner._me.key)
        board.add([Request("slow"), Request("slow", "later")])
        board.entries[0]["owner"] = runner._me.key  # claimed by this process
        runner._set(BOARD, board.dump())
    runner._materialize(Request("slow"))
"""


def test_a_run_left_in_progress_by_a_killed_runner_is_marked_failed_and_its_claim_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # no captured stdout / stderr: their `tail -F` helpers would outlive the killed child
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\ncompute_logs:\n"
        "  module: dagster._core.storage.noop_compute_log_manager\n"
        "  class: NoOpComputeLogManager\n"
    )
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def slow() -> int:
        return 1

    with dg.DagsterInstance.get() as instance:  # the databases exist before the child starts
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(SLOW_ASSET)],
            cwd=REPO,
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            runs: list = []
            while not runs and time.monotonic() < deadline:
                time.sleep(0.2)
                runs = instance.get_runs(
                    filters=dg.RunsFilter(
                        statuses=[dg.DagsterRunStatus.STARTED], tags={PID_TAG: str(child.pid)}
                    )
                )
            assert runs, "the child's run never started"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        (run,) = runs
        lines: list[str] = []
        runner = _runner_on(instance, slow, lines)
        with runner._locked():  # what a waiting runner does on each look at the board
            board = runner._board()
            runner._recover(board)
            runner._set(BOARD, board.dump())
        record = instance.get_run_by_id(run.run_id)
        assert record is not None and record.status == dg.DagsterRunStatus.FAILURE
        assert any(
            f"run {run.run_id} (slow) marked failed" in line and f"pid {child.pid}" in line
            for line in lines
        ), lines
        assert any("1 unfinished request(s) dropped: slow" in line for line in lines), lines
        board = runner._board()
        # the claimed request is gone; the unclaimed one stays for the runners at work
        assert [Board.request(e) for e in board.entries] == [Request("slow", "later")]
        assert board.members == []
        with runner._locked():
            runner._join()  # a runner starting now: nothing left to recover, no second line
        assert sum("marked failed" in line for line in lines) == 1
        assert runner._board().members == [runner._me.key]


def _materializations(home: Path) -> tuple[dict, dict, list[str]]:
    """Per (asset, partition): how many materializations; per runner PID: how many it made
    per asset; model_zoo's data versions, in order."""
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    script = textwrap.dedent("""
        import collections, json
        import dagster as dg
        from sigmap_assets.definitions import defs
        from sigmap_assets.runboard import PID_TAG
        cells, per_pid, zoo = collections.Counter(), collections.defaultdict(collections.Counter), []
        with dg.DagsterInstance.get() as inst:
            for key in defs().resolve_asset_graph().materializable_asset_keys:
                recs = inst.fetch_materializations(key, limit=10_000, ascending=True).records
                for rec in recs:
                    pid = inst.get_run_by_id(rec.run_id).tags.get(PID_TAG, "?")
                    cells[f"{key.to_user_string()}|{rec.partition_key or ''}"] += 1
                    per_pid[pid][key.to_user_string()] += 1
                    if key.to_user_string() == "model_zoo":
                        zoo.append(rec.asset_materialization.tags.get("dagster/data_version"))
        print(json.dumps([cells, per_pid, zoo]))
    """)
    import json

    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    cells, per_pid, zoo = json.loads(out.stdout.splitlines()[-1])
    return cells, per_pid, zoo


@pytest.mark.slow
def test_two_runners_started_together_compute_each_request_once(
    tmp_path: Path, synthetic_world: Path
) -> None:
    split_corpus(synthetic_world)  # 2 shards: 24 cells
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "SIGMAP_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "sigmap_assets.cli", "--storage", str(tmp_path / "storage")]
    cmd += ["demo", "--world", str(synthetic_world)]
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=1200) for p in procs]
    wall = time.monotonic() - t0
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()[-4000:]
    cells, per_pid, zoo = _materializations(home)
    pids = {str(p.pid) for p in procs}
    assert set(per_pid) == pids, per_pid  # every run was made by one of the two runners
    # each partition of every asset once; the world checked once by each runner, the second
    # finding it unchanged; the report as a single runner refreshes it (once or twice)
    twice = {k: n for k, n in cells.items() if n > 1}
    assert set(twice) <= {"model_zoo|", "overlap_report|"}, twice
    assert cells["model_zoo|"] == 2 and len(set(zoo)) == 1, zoo
    nll = [k for k in cells if k.startswith("token_nll|")]
    assert len(nll) == 24
    share = {pid: sum(c.values()) for pid, c in per_pid.items()}
    print(f"two runners: {wall:.0f} s wall; materializations per runner {share}; "
          f"cells per runner { {pid: c['token_nll'] for pid, c in per_pid.items()} }")  # fmt: skip
    for _, err in outs:
        assert "Traceback" not in err.decode()

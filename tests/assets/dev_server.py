"""A real Dagster webserver + daemon for the tests that use one: `dg dev` (or `dagster dev`)
started on a free 127.0.0.1 port in its own process group, with a given Dagster home and
storage root, and stopped group-wide (never leaving code servers behind)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER_TIMEOUT_S = 120

# `dagster dev` shuts down cleanly on SIGINT (KeyboardInterrupt → it stops the webserver,
# daemon and code servers). A process started from a non-interactive shell may inherit
# SIGINT/SIGTERM as *ignored* (and ignored stays ignored across exec): reset both first.
_EXEC_WITH_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def instance_yaml(max_concurrent_runs: int) -> str:
    """A test home's dagster.yaml: no telemetry, no "join the community" dialog, and at most
    this many runs at once (0: the run queue is paused)."""
    return (
        "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
        f"concurrency:\n  runs:\n    max_concurrent_runs: {int(max_concurrent_runs)}\n"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, read from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return pids


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (e.g. the test's DAGSTER_HOME)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z" and int(cmdline.parent.name) != os.getpid():
            found.append(f"{cmdline.parent.name}: {cmd[:200]}")
    return found


def stop_group(proc: subprocess.Popen, pgid: int) -> float:
    """SIGINT the whole group (a clean shutdown), then SIGTERM, then SIGKILL; seconds taken."""
    t0 = time.monotonic()
    for sig, grace in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            if not group_members(pgid):
                return time.monotonic() - t0
            time.sleep(0.25)
    proc.poll()
    return time.monotonic() - t0


@dataclass
class DevServer:
    url: str
    log: Path

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 60) -> dict:
        """POST a GraphQL query to the webserver; its ``data`` (errors raise)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = json.loads(r.read())
        if out.get("errors"):
            raise AssertionError(f"GraphQL errors: {out['errors']}")
        return out["data"]


@contextmanager
def dev_server(
    home: Path,
    storage: Path,
    workdir: Path,
    *,
    command: Sequence[str] = ("dg", "dev"),
    target: Sequence[str] = ("-w", str(REPO / "workspace.yaml")),
) -> Iterator[DevServer]:
    """Run ``command TARGET -h 127.0.0.1 -p PORT`` with this home and storage root.

    Its cwd is ``workdir`` (an empty folder): `dagster dev` loads a ``.env`` from its cwd
    *over* the environment, and ``make install`` writes one in the repo root that sets
    DAGSTER_HOME — from the repo root, the test's home would lose.
    """
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "dagster-dev.log"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "SIGMAP_STORAGE": str(storage),
        "SIGMAP_PROGRESS": "0",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    exe = str(Path(sys.executable).parent / command[0])
    cmd = [sys.executable, "-c", _EXEC_WITH_DEFAULT_SIGNALS, exe, *command[1:], *target]
    cmd += ["-h", "127.0.0.1", "-p", str(port)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pgid = proc.pid  # start_new_session: the child leads its own session and process group
    server = DevServer(url=f"http://127.0.0.1:{port}", log=log_path)
    try:
        deadline = time.monotonic() + SERVER_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    f"{command} exited with {proc.returncode}:\n{server.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{server.url}/server_info", timeout=5) as r:
                    if r.status == 200 and b"dagster_webserver_version" in r.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{server.url}/server_info did not answer within {SERVER_TIMEOUT_S}s:\n"
                    + server.log_tail()
                )
            time.sleep(1)
        yield server
    finally:
        took = stop_group(proc, pgid)
        left = group_members(pgid)
        orphans = processes_mentioning(str(home))
        for pid in left:  # never leave servers behind, even when the assertion below fails
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert not left, f"dagster dev group {pgid} still has {left} after {took:.0f}s"
        assert not orphans, "processes of the test instance survived dagster dev:\n" + "\n".join(
            orphans
        )

"""What the runners of one storage root share: the board of requests in the instance's
key-value store, the owner of each run, and the advisory lock around every read-modify-write.

Runners started together (``sigmap demo`` / ``sigmap run`` in two shells) put a tick's
requests on the :class:`Board`; each request is claimed by one runner (its :class:`Owner`),
and a runner evaluates the automation conditions again only when no request of its graph is
left there, so nothing is computed twice. :func:`runner_lock` serializes the claims, the
cursors and the world root across processes; a process of this host that has ended is told
apart from a running one by its PID and start time (:meth:`Owner.gone`).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

#: Key of the requests shared by the runners of one instance (:class:`Board`).
BOARD = "sigmap/run/board"
#: Seconds between two looks at the board while another runner works on what this one needs.
POLL_S = 1.0
#: Tags on every run a runner creates: the process that owns it, and the request it runs.
HOST_TAG, PID_TAG, STARTED_TAG = "sigmap/host", "sigmap/pid", "sigmap/pid_started"
REQUEST_TAG = "sigmap/request"
#: Run statuses of a run that has not finished.
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dataclass(frozen=True)
class Request:
    """One run: an asset for no partition, one partition, or a range of benchmarks."""

    asset: str
    partition: str | None = None
    prange: tuple[str, str] | None = None

    def label(self) -> str:
        if self.prange:
            return f"{self.asset} · {self.prange[0]}…{self.prange[1]}"
        return f"{self.asset} · {self.partition}" if self.partition else self.asset


@dataclass(frozen=True)
class Owner:
    """A runner process: its host, PID and start time (which tells a reused PID apart)."""

    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> Owner:
        import psutil

        return cls(socket.gethostname(), os.getpid(), round(psutil.Process().create_time(), 2))

    @property
    def key(self) -> str:
        return f"{self.host}:{self.pid}:{self.started}"

    @classmethod
    def from_key(cls, key: str) -> Owner:
        host, pid, started = key.rsplit(":", 2)
        return cls(host, int(pid), float(started))

    def tags(self) -> dict[str, str]:
        return {HOST_TAG: self.host, PID_TAG: str(self.pid), STARTED_TAG: str(self.started)}

    @classmethod
    def from_tags(cls, tags: dict[str, str]) -> Owner | None:
        try:
            return cls(tags[HOST_TAG], int(tags[PID_TAG]), float(tags[STARTED_TAG]))
        except (KeyError, ValueError):
            return None

    def gone(self) -> bool:
        """Whether the process has ended (known on its own host only: a process of another
        host counts as running)."""
        import psutil

        if self.host != socket.gethostname():
            return False
        try:
            proc = psutil.Process(self.pid)
            return (
                abs(proc.create_time() - self.started) > 1.0  # the PID now names another
                or proc.status() == psutil.STATUS_ZOMBIE
            )
        except psutil.NoSuchProcess:
            return True


@dataclass
class Board:
    """The requests of the runners of one instance, kept in its key-value store (``BOARD``).

    ``entries``: the requests not finished yet, each with the :attr:`Owner.key` of the runner
    running it (None while nobody has claimed it) and the number of requests of its asset in
    its tick (``of``, for the ETA). ``members``: the runners at work. ``failed``: the
    unpartitioned assets (and benchmark ranges) whose latest request failed while the present
    members ran; what reads them is not run until a later request of them succeeds.
    """

    entries: list[dict] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, raw: str | None) -> Board:
        data = json.loads(raw) if raw else {}
        return cls(data.get("entries", []), data.get("members", []), data.get("failed", []))

    def dump(self) -> str:
        return json.dumps(
            {"entries": self.entries, "members": self.members, "failed": self.failed},
            sort_keys=True,
        )

    @staticmethod
    def request(entry: dict) -> Request:
        prange = entry.get("prange")
        return Request(entry["asset"], entry.get("partition"), tuple(prange) if prange else None)

    def add(self, requests: Sequence[Request]) -> None:
        for r in requests:
            self.entries.append({
                "asset": r.asset, "partition": r.partition,
                "prange": list(r.prange) if r.prange else None, "owner": None,
                "of": sum(q.asset == r.asset for q in requests),
            })  # fmt: skip

    def find(self, r: Request, owner: str | None) -> dict | None:
        return next((e for e in self.entries if e["owner"] == owner and self.request(e) == r), None)


def runner_lock_path(storage_root: str | None) -> Path | None:
    """``<storage>/.sigmap/runner.lock``: the lock of what the runners of one storage root
    share (None for a storage root that is not a local folder)."""
    from sigmap_assets.layout import StorageLayout

    if not storage_root:
        return None
    try:
        return StorageLayout(storage_root).run_logs_dir().parent / "runner.lock"
    except (ValueError, OSError):
        return None


@contextmanager
def runner_lock(
    path: Path | None,
    waiting: str | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> Iterator[None]:
    """Hold an advisory lock on ``path`` (``fcntl.flock``; the system releases it when its
    process ends, however it ends). ``waiting``: the line logged when another process holds
    it. Nothing is locked when ``path`` is None."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                log(f"sigmap: waiting: {waiting}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

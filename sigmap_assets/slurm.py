"""Perplexity cells as Slurm jobs: the request, the batch script, the accounting records and a
Dagster Pipes client that submits with ``sbatch``, waits on ``squeue``/``sacct`` and reads the
job's Pipes messages from files on the cluster's shared filesystem.

``token_nll`` takes this route when :class:`~sigmap_assets.resources.ComputeResource` says
``runner: slurm`` (or ``runner: slurm`` in ``<storage>/sigmap.yaml``). The job runs
``python -m sigmap_assets.slurm_cell``, the same scoring code as the local route, and commits
the cell's NLL store block by block with the same atomic protocol; the Dagster step then
records the cell exactly as a local one (see ``sigmap_assets/deploy/README.md`` § Slurm).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from sigmap_assets.config import SigmapConfig

#: Slurm states of a job that is still in the queue or running (``squeue`` ``%T``).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "UNREACHABLE",  # squeue failed (controller restarting): not known to have ended
    }
)

#: Defaults of the request when neither the resource nor ``sigmap.yaml`` sets a field.
DEFAULTS: dict[str, Any] = {
    "partition": "",
    "account": "",
    "gpus": 1,
    "cpus": 4,
    "mem": "32G",
    "time": "04:00:00",
    "python": "",
    "setup": [],
    "extra_args": [],
    "poll_seconds": 5.0,
}


class SlurmSettings(SigmapConfig):
    """What a ``token_nll`` cell asks Slurm for. Unset fields (empty, ``-1``, ``0``) fall back
    to the ``slurm:`` group of ``<storage>/sigmap.yaml``, then to the defaults."""

    partition: str = ""
    """Partition (sbatch --partition); empty: sigmap.yaml, else the cluster's default partition."""
    account: str = ""
    """Account charged (sbatch --account); empty: sigmap.yaml, else the user's default account."""
    gpus: int = -1
    """GPUs per cell (sbatch --gres=gpu:N; 0 requests none); -1: sigmap.yaml, else 1."""
    cpus: int = 0
    """CPUs per cell (sbatch --cpus-per-task); 0: sigmap.yaml, else 4."""
    mem: str = ""
    """Memory per cell (sbatch --mem, e.g. 32G); empty: sigmap.yaml, else 32G."""
    time: str = ""
    """Time limit per cell (sbatch --time, e.g. 04:00:00); empty: sigmap.yaml, else 04:00:00."""
    python: str = ""
    """Python interpreter the job runs (a path valid on the compute nodes); empty: sigmap.yaml, else this process's interpreter."""
    setup: list[str] = Field(default_factory=list)
    """Shell lines run before the cell (e.g. module load cuda); empty: sigmap.yaml, else none."""
    extra_args: list[str] = Field(default_factory=list)
    """Further sbatch options (e.g. --qos=normal, --constraint=a100); empty: sigmap.yaml, else none."""
    poll_seconds: float = 0.0
    """Seconds between squeue polls while a cell's job waits or runs; 0: sigmap.yaml, else 5."""


@dataclass(frozen=True)
class SlurmRequest:
    """A resolved request: every field has its value (see :class:`SlurmSettings`)."""

    partition: str
    account: str
    gpus: int
    cpus: int
    mem: str
    time: str
    python: str
    setup: tuple[str, ...]
    extra_args: tuple[str, ...]
    poll_seconds: float

    def sbatch_options(self, job_name: str, log_path: Path, workdir: Path) -> list[str]:
        """The ``sbatch`` options of one cell's job (also used for ``sbatch --test-only``)."""
        opts = [
            f"--job-name={job_name}",
            f"--output={log_path}",
            f"--chdir={workdir}",
            "--nodes=1",
            "--ntasks=1",
            f"--cpus-per-task={self.cpus}",
            f"--mem={self.mem}",
            f"--time={self.time}",
        ]
        if self.gpus:
            opts.append(f"--gres=gpu:{self.gpus}")
        if self.partition:
            opts.append(f"--partition={self.partition}")
        if self.account:
            opts.append(f"--account={self.account}")
        return [*opts, *self.extra_args]


def resolve_request(settings: SlurmSettings, project: Mapping[str, Any]) -> SlurmRequest:
    """The request from the resource's ``settings`` over the ``slurm:`` group of
    ``sigmap.yaml`` (``project``) over :data:`DEFAULTS`.

    Raises
    ------
    ValueError
        One line naming the bad key or value (an unknown key, a negative count, a
        malformed memory size or time limit).
    """
    group = project.get("slurm") or {}
    if not isinstance(group, Mapping):
        raise ValueError(f"sigmap.yaml: slurm must be a mapping of settings, got {group!r}")
    unknown = sorted(set(group) - set(DEFAULTS))
    if unknown:
        raise ValueError(
            f"sigmap.yaml: unknown slurm setting(s) {unknown}; known: {sorted(DEFAULTS)}"
        )
    unset = {"gpus": -1, "cpus": 0, "poll_seconds": 0.0}
    values: dict[str, Any] = {}
    for name, default in DEFAULTS.items():
        own = getattr(settings, name)
        if own != unset.get(name, type(default)()):
            values[name] = own
        elif name in group and group[name] is not None:
            values[name] = group[name]
        else:
            values[name] = default
    for name in ("setup", "extra_args"):
        if isinstance(values[name], str):
            values[name] = [values[name]]
        values[name] = tuple(str(v) for v in values[name])
    try:
        values["gpus"], values["cpus"] = int(values["gpus"]), int(values["cpus"])
        values["poll_seconds"] = float(values["poll_seconds"])
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"slurm settings: gpus, cpus and poll_seconds must be numbers ({exc})"
        ) from None
    if values["gpus"] < 0 or values["cpus"] < 1 or values["poll_seconds"] <= 0:
        raise ValueError(
            f"slurm settings: need gpus >= 0, cpus >= 1, poll_seconds > 0; got gpus="
            f"{values['gpus']}, cpus={values['cpus']}, poll_seconds={values['poll_seconds']}"
        )
    values["mem"], values["time"] = str(values["mem"]), str(values["time"])
    if not re.fullmatch(r"\d+[KMGT]?", values["mem"]):
        raise ValueError(f"slurm settings: mem must look like 32G or 4096M, got {values['mem']!r}")
    if not re.fullmatch(r"(\d+-)?\d+(:\d{1,2}){0,2}", values["time"]):
        raise ValueError(
            f"slurm settings: time must be minutes, HH:MM:SS or D-HH:MM:SS, got {values['time']!r}"
        )
    values["partition"], values["account"] = str(values["partition"]), str(values["account"])
    values["python"] = str(values["python"] or sys.executable)
    return SlurmRequest(**values)


def render_script(request: SlurmRequest, command: Sequence[str], env: Mapping[str, str]) -> str:
    """The batch script of one cell: ``request.setup`` lines, ``env`` exported (the Pipes
    bootstrap variables), then ``command`` run with ``exec`` so Slurm's signals reach it.
    The ``sbatch`` options are passed on the command line, not as ``#SBATCH`` lines, so
    that ``sbatch --test-only`` checks exactly what is submitted."""
    lines = ["#!/bin/bash", "set -euo pipefail"]
    lines += list(request.setup)
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    lines.append('echo "sigmap: Slurm job ${SLURM_JOB_ID:-?} on $(hostname)" >&2')
    lines.append("exec " + shlex.join(command))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SlurmJobRecord:
    """One job's accounting record (``sacct``) or controller record (``scontrol``)."""

    job_id: str
    state: str
    exit_code: str = ""
    start: str = ""
    end: str = ""
    node: str = ""
    reason: str = ""

    @property
    def succeeded(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code in {"", "0:0"}

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


SACCT_FIELDS = ("JobID", "State", "ExitCode", "Start", "End", "NodeList", "Reason")


def parse_sacct(text: str) -> dict[str, SlurmJobRecord]:
    """Records by job id from ``sacct --parsable2 --noheader --format=`` :data:`SACCT_FIELDS`
    output. Job steps (``123.batch``) are skipped; a state such as ``CANCELLED by 0`` is
    reduced to its first word."""
    out: dict[str, SlurmJobRecord] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS):
            raise ValueError(f"sacct: expected {len(SACCT_FIELDS)} fields, got {line!r}")
        job_id, state, code, start, end, node, reason = parts
        if "." in job_id:
            continue
        out[job_id] = SlurmJobRecord(
            job_id, state.split()[0] if state else "", code, start, end, node, reason
        )
    return out


def parse_scontrol(text: str) -> SlurmJobRecord:
    """The record of ``scontrol --oneliner show job ID`` output (``Key=Value`` tokens)."""
    fields = dict(tok.split("=", 1) for tok in text.split() if "=" in tok)
    if "JobId" not in fields or "JobState" not in fields:
        raise ValueError(f"scontrol: no JobId/JobState in {text.strip()[:200]!r}")
    return SlurmJobRecord(
        fields["JobId"],
        fields["JobState"],
        fields.get("ExitCode", ""),
        fields.get("StartTime", ""),
        fields.get("EndTime", ""),
        fields.get("NodeList", ""),
        fields.get("Reason", ""),
    )


def first_error_line(text: str) -> str:
    """The first ``error:``/``fatal:`` line of sbatch's stderr (else its first line),
    without the ``sbatch: error:`` prefix."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        m = re.search(r"(?:error|fatal):\s*(.*)", ln)
        if m:
            return m.group(1)
    return lines[0] if lines else "no output"


class SlurmError(RuntimeError):
    """A Slurm command failed or a job ended unsuccessfully (a one-line message)."""


def _run(args: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise SlurmError(
            f"{args[0]} not found: the Slurm client commands must be on PATH (install slurm-client)"
        ) from exc


class PipesSlurmClient(dg.PipesClient):
    """Runs a command as one Slurm job inside a Dagster Pipes session.

    The Pipes context and the message file live in ``workdir`` on the filesystem both the
    Dagster process and the compute node see; logs, custom messages and reported metadata
    come back into the run. ``run`` checks the request with ``sbatch --test-only`` before
    anything is written, submits, polls ``squeue`` every ``request.poll_seconds``, reads the
    final record from ``sacct`` (``scontrol`` when the cluster keeps no accounting), and
    cancels the job (``scancel``) when the wait is interrupted (run termination).

    Parameters
    ----------
    request
        The resolved resources and options of the job.
    sleep
        Waits between polls (a parameter so the waiting loop can be exercised).
    """

    def __init__(self, request: SlurmRequest, sleep: Callable[[float], None] = time.sleep):
        self.request = request
        self._sleep = sleep

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    # --- the steps ------------------------------------------------------------------------
    def preflight(self, job_name: str, log_path: Path, workdir: Path) -> None:
        """``sbatch --test-only`` with the job's options: raises :class:`SlurmError` (one
        line) when the cluster cannot satisfy the request (no such partition, no GPUs,
        more CPUs or memory than a node has)."""
        opts = self.request.sbatch_options(job_name, log_path, workdir)
        res = _run(["sbatch", "--test-only", *opts, "--wrap", "true"])
        if res.returncode != 0:
            raise SlurmError(
                f"Slurm cannot run {job_name} as requested ({shlex.join(opts[3:])}): "
                f"{first_error_line(res.stderr or res.stdout)}"
            )

    def submit(self, script: Path, job_name: str, log_path: Path, workdir: Path) -> str:
        """Submit ``script``; the job id."""
        opts = self.request.sbatch_options(job_name, log_path, workdir)
        res = _run(["sbatch", "--parsable", *opts, str(script)])
        if res.returncode != 0:
            raise SlurmError(f"sbatch failed for {job_name}: {first_error_line(res.stderr)}")
        return res.stdout.strip().split(";")[0]

    def queue_state(self, job_id: str) -> str:
        """The job's state in the queue (``squeue``); empty once it has left the queue."""
        res = _run(["squeue", "--noheader", "--jobs", job_id, "--format=%T"])
        if res.returncode != 0:
            if "invalid job id" in res.stderr.lower():  # ended and purged from the controller
                return ""
            return "UNREACHABLE"  # the controller does not answer now: keep waiting
        return res.stdout.strip().splitlines()[0] if res.stdout.strip() else ""

    def record(self, job_id: str, attempts: int = 20) -> SlurmJobRecord:
        """The final record: ``sacct`` (retried while accounting catches up), else
        ``scontrol`` (clusters without accounting storage)."""
        fmt = "--format=" + ",".join(SACCT_FIELDS)
        for _ in range(attempts):
            res = _run(["sacct", "--noheader", "--parsable2", "-X", "--jobs", job_id, fmt])
            if res.returncode != 0:
                break  # no accounting storage
            rec = parse_sacct(res.stdout).get(job_id)
            if rec is not None and not rec.active:
                return rec
            self._sleep(0.5)
        res = _run(["scontrol", "--oneliner", "show", "job", job_id])
        if res.returncode == 0:
            return parse_scontrol(res.stdout)
        return SlurmJobRecord(job_id, "UNKNOWN", reason="no sacct or scontrol record")

    def cancel(self, job_id: str) -> None:
        """``scancel`` the job (no error when it has already ended)."""
        _run(["scancel", job_id])

    def wait_or_cancel(self, job_id: str) -> SlurmJobRecord:
        """Poll until the job leaves the queue and return its final record; on any
        interruption of the wait (an exception, ``KeyboardInterrupt``, Dagster's run
        termination) the job is cancelled and the interruption re-raised."""
        try:
            while self.queue_state(job_id) in ACTIVE_STATES:
                self._sleep(self.request.poll_seconds)
            rec = self.record(job_id)
            if rec.active:  # the queue lost it but accounting says it runs: end it
                self.cancel(job_id)
            return rec
        except BaseException:
            self.cancel(job_id)
            raise

    # --- PipesClient --------------------------------------------------------------------------
    def run(  # type: ignore[override]
        self,
        *,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        command: Sequence[str],
        workdir: Path,
        job_name: str,
        extras: Mapping[str, Any] | None = None,
        on_submit: Callable[[str, Path], None] | None = None,
    ) -> dg.PipesClientCompletedInvocation:
        """Run ``command`` as one job in a Pipes session; ``on_submit(job_id, log_path)`` is
        called once the job is queued.

        Raises
        ------
        SlurmError
            One line: the request cannot be satisfied (before anything is written), or the
            job ended in another state than COMPLETED with exit code 0 (its id, state, exit
            code and log path).
        """
        log_path = workdir / "slurm.out"
        self.preflight(job_name, log_path, workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        with dg.open_pipes_session(
            context=context,
            context_injector=dg.PipesFileContextInjector(str(workdir / "pipes-context.json")),
            message_reader=dg.PipesFileMessageReader(
                str(workdir / "pipes-messages.jsonl"), cleanup_file=False
            ),
            extras=dict(extras or {}),
        ) as session:
            script = workdir / "job.sh"
            script.write_text(
                render_script(self.request, command, session.get_bootstrap_env_vars())
            )
            job_id = self.submit(script, job_name, log_path, workdir)
            context.log.info(f"Slurm job {job_id} submitted for {job_name} (log: {log_path})")
            if on_submit is not None:
                on_submit(job_id, log_path)
            rec = self.wait_or_cancel(job_id)
            if not rec.succeeded:
                why = f", reason {rec.reason}" if rec.reason and rec.reason != "None" else ""
                raise SlurmError(
                    f"Slurm job {job_id} ({job_name}) ended {rec.state} (exit code "
                    f"{rec.exit_code or '?'}{why}); log: {log_path}"
                )
            context.log.info(
                f"Slurm job {job_id} completed on {rec.node or '?'} ({rec.start} to {rec.end})"
            )
        return dg.PipesClientCompletedInvocation(session)


def job_name(model_key: str, shard_key: str) -> str:
    """The job name of a cell: ``sigmap-nll.<model>.<shard>``, characters outside
    ``[A-Za-z0-9_.-]`` replaced."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"sigmap-nll.{model_key}.{shard_key}")


def score_cell_on_slurm(
    context: dg.AssetExecutionContext,
    spec: Any,
    shard_key: str,
    fingerprint: str,
    storage: Any,
    world: Any,
    compute: Any,
) -> dict[str, Any]:
    """Score one ``token_nll`` cell as a Slurm job (``python -m sigmap_assets.slurm_cell``)
    and return its statistics, with the job's id and log path.

    The job's files (script, Pipes context and messages, Slurm log) are under
    ``<storage>/slurm/<run id>/<cell>/``; the job itself writes only the cell's NLL store.

    Raises
    ------
    dagster.Failure
        One line: a remote storage root (jobs need a shared filesystem), a request the
        cluster cannot satisfy, or a job that did not complete.
    """
    if not storage.layout.is_local:
        raise dg.Failure(
            f"runner slurm needs a storage root on a filesystem the compute nodes mount; "
            f"{storage.root} is not a local path"
        )
    try:
        request = compute.slurm_request(storage.root)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from None
    name = job_name(spec.key, shard_key)
    workdir = Path(storage.layout.path("slurm", context.run.run_id, name))
    extras = {
        "storage": str(storage.root),
        "world_kind": world.resolved_kind(),
        "world_path": str(world.root()),
        "model": spec.key,
        "shard": shard_key,
        "fingerprint": fingerprint,
        "compute": {
            "device": compute.device,
            "dtype": compute.dtype,
            "threads": compute.threads,
            "batch_tokens": compute.batch_tokens,
        },
    }
    submitted: dict[str, Any] = {}
    client = PipesSlurmClient(request)
    try:
        done = client.run(
            context=context,
            command=[request.python, "-m", "sigmap_assets.slurm_cell"],
            workdir=workdir,
            job_name=name,
            extras=extras,
            on_submit=lambda job_id, log: submitted.update(job_id=job_id, log=str(log)),
        )
    except SlurmError as exc:
        raise dg.Failure(str(exc)) from None
    reports = [m for m in done.get_custom_messages() if isinstance(m, dict) and "stats" in m]
    if not reports:
        raise dg.Failure(
            f"Slurm job {submitted.get('job_id')} ({name}) completed without reporting its "
            f"cell's statistics; log: {submitted.get('log')}"
        )
    stats = dict(reports[-1]["stats"])
    stats["slurm_job_id"] = submitted["job_id"]
    stats["slurm_log"] = submitted["log"]
    stats["slurm_partition"] = request.partition or "(default)"
    return stats

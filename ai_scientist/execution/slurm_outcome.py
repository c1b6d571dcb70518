"""What became of a Slurm job: its ``exit.json``, or a named failure when it ended without one.

Pure apart from reading the job directory: :func:`failure_for` maps the last state ``squeue``
reported (or its absence: purged) to ``(killed_by, signal, reason)``; :func:`job_result` builds
the :class:`~.base.ExecResult` every backend returns.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import ExecResult, Limits, OutputHeadTail, SandboxError
from .slurm_cli import JobState
from .slurm_job import EXIT_FILE

BACKEND = "slurm"
_RESULT_FIELDS = {f.name for f in dataclasses.fields(ExecResult)}


@dataclass
class SlurmJob:
    """One submitted (or re-attached) job and what the poller last saw of it."""

    job_id: str
    dir: Path
    name: str
    submitted: float  # time.time() of the submission (or of the re-attach)
    reattached: bool = False
    last_state: JobState | None = None
    ended_at: float | None = None  # monotonic time it was first seen ended without an exit file
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def exit_file(self) -> Path:
        return self.dir / EXIT_FILE


def failure_for(
    job: SlurmJob, state: JobState | None, mem_mb: int, time_min: int
) -> tuple[str | None, int | None, str]:
    """(killed_by, signal, reason) for a job that ended without writing its exit file (pure)."""
    jid = job.job_id
    if state is None:
        return (
            None,
            None,
            (
                f"Slurm job {jid} left the queue without writing its exit status {job.exit_file} "
                "(lost: purged from the controller, node rebooted, or the job directory is not shared)"
            ),
        )
    where = f"Slurm job {jid} ended {state.state}" + (
        f" ({state.reason})" if state.reason not in ("", "None") else ""
    )
    if state.state == "TIMEOUT":
        return (
            "timeout",
            None,
            f"{where}: Slurm time limit of {time_min} min reached; raise exec.slurm.time_margin_s",
        )
    if state.state == "OUT_OF_MEMORY" or (state.state == "FAILED" and state.signal == 9):
        return (
            "memory",
            9,
            f"{where}, killed by signal 9: memory above --mem={mem_mb} MB (Slurm memory enforcement)",
        )
    if state.state == "CANCELLED":
        return "signal", 15, f"{where}: the job was cancelled (scancel by a user or administrator)"
    if state.reason == "JobLaunchFailure":
        return (
            None,
            None,
            (
                f"{where}: Slurm could not launch it; is the job directory {job.dir} on storage the "
                "compute node sees (exec.slurm.shared_dir)?"
            ),
        )
    if state.state in ("NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "DEADLINE"):
        return "signal", state.signal, f"{where}: the scheduler stopped it"
    return None, None, f"{where} without writing its exit status {job.exit_file}"


def job_result(job: SlurmJob, argv: list[str], limits: Limits, *, mem_mb: int, time_min: int) -> ExecResult:
    """The ExecResult of a finished job: its exit.json, else the named failure (see :func:`failure_for`)."""
    base_extra = {
        "job_id": job.job_id,
        "job_name": job.name,
        "job_dir": str(job.dir),
        "reattached": job.reattached,
    }
    if job.exit_file.exists():
        record = json.loads(job.exit_file.read_text(encoding="utf-8"))
        if "sandbox_error" in record:
            raise SandboxError(f"Slurm job {job.job_id}: {record['sandbox_error']}")
        if "launch_error" in record:
            return _failed(
                job,
                argv,
                limits,
                None,
                None,
                f"Slurm job {job.job_id}: {record['launch_error']}",
                base_extra,
            )
        kwargs = {k: record[k] for k in _RESULT_FIELDS if k in record}
        kwargs["backend"] = BACKEND
        result = ExecResult(**kwargs)
        started = record.get("started")
        result.extra.update(base_extra)
        if started:
            result.extra["queue_wait_s"] = round(max(0.0, started - job.submitted), 3)
        return result
    killed_by, sig, reason = failure_for(job, job.last_state, mem_mb, time_min)
    if job.last_state is not None:
        base_extra["slurm_state"] = job.last_state.state
        base_extra["slurm_reason"] = job.last_state.reason
    return _failed(job, argv, limits, killed_by, sig, reason, base_extra)


def _failed(
    job: SlurmJob,
    argv: list[str],
    limits: Limits,
    killed_by: Any,
    sig: int | None,
    reason: str,
    extra: dict,
) -> ExecResult:
    out, err = (
        _capped(job.dir / "stdout", limits.output_bytes),
        _capped(job.dir / "stderr", limits.output_bytes),
    )
    return ExecResult(
        command=argv,
        exit_code=None,
        signal=sig,
        duration_s=round(time.time() - job.submitted, 3),
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        peak_memory_mb=None,
        killed_by=killed_by,
        reason=reason,
        backend=BACKEND,
        extra=extra,
        cpu_how="the job's runner wrote no record (Slurm accounting, sacct, is not relied on)",
    )


def _capped(path: Path, cap: int) -> OutputHeadTail:
    ht = OutputHeadTail(cap)
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 16):
                ht.feed(chunk)
    except OSError:
        pass
    return ht

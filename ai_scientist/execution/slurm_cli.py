"""The Slurm command-line client: ``sbatch --parsable``, ``squeue``, ``scancel``, ``sinfo``.

No ``sacct`` (clusters without an accounting database have none) and no
Python bindings: every call is one subprocess. ``squeue`` is asked once for a
whole list of job ids, with ``--states=all`` so jobs that ended but are still
in the controller's memory (``MinJobAge``) report their final state, reason
and raw exit status. ``calls`` counts the invocations per command (tests and
the benchmark read it).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .base import SandboxError

# Job states in which the job may still run or write its exit file.
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "STOPPED",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
    }
)
_SQUEUE_FORMAT = "JobID:|,State:|,Reason:|,exit_code:|,Name:|"
CLI_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class JobState:
    """One job as ``squeue`` reports it. ``exit_status`` is the raw wait status (code << 8 | signal)."""

    job_id: str
    state: str
    reason: str
    exit_status: int | None
    name: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def exit_code(self) -> int | None:
        return None if self.exit_status is None else (self.exit_status >> 8) & 0xFF

    @property
    def signal(self) -> int | None:
        return None if self.exit_status is None else (self.exit_status & 0x7F) or None


class SlurmCLI:
    """Thin, thread-safe wrapper of the Slurm client binaries found on PATH."""

    def __init__(self, env: dict[str, str] | None = None):
        self.env = env  # None: inherit (SLURM_CONF etc. come from the orchestrator's environment)
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    @staticmethod
    def available() -> tuple[bool, str]:
        """(client found, detail): the path of ``sbatch`` or what to install."""
        missing = [b for b in ("sbatch", "squeue", "scancel") if not shutil.which(b)]
        if missing:
            return (
                False,
                f"Slurm client not found on PATH ({', '.join(missing)}); apt-get install slurm-client",
            )
        return True, str(shutil.which("sbatch"))

    def _run(
        self, argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        with self._lock:
            self.calls[argv[0]] += 1
        try:
            return subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT_S,
                cwd=cwd,
                env=self.env if env is None else env,
            )
        except FileNotFoundError:
            raise SandboxError(
                f"{argv[0]} not found on PATH; install the Slurm client (slurm-client)"
            ) from None
        except subprocess.TimeoutExpired:
            raise SandboxError(
                f"{argv[0]} did not answer within {CLI_TIMEOUT_S:.0f}s (controller down?)"
            ) from None

    def sbatch(self, script: Path, *, cwd: Path, env: dict[str, str] | None = None) -> str:
        """Submit ``script`` (options are its ``#SBATCH`` lines); returns the job id. ``env``: the
        environment sbatch runs with (an ``--export=ALL`` job inherits it); None: ``self.env``."""
        proc = self._run(["sbatch", "--parsable", str(script)], cwd=cwd, env=env)
        if proc.returncode != 0:
            raise SandboxError(f"sbatch refused the job: {proc.stderr.strip()[:500]}")
        job_id = proc.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SandboxError(f"sbatch printed no job id: {proc.stdout.strip()[:200]!r}")
        return job_id

    def test_only(self, options: list[str]) -> str | None:
        """``sbatch --test-only`` with these options: None when the controller would accept the job,
        else its complaint (unknown partition / account / qos / gres, impossible memory, no controller)."""
        proc = self._run(["sbatch", "--test-only", *options, "--wrap", "true"])
        if proc.returncode == 0:
            return None
        return "; ".join(line.strip() for line in proc.stderr.strip().splitlines() if line.strip())[:500]

    def squeue(self, job_ids: list[str]) -> dict[str, JobState]:
        """The state of every listed job still known to the controller (one call for all of them).

        A job missing from the answer has been purged (or never existed). Raises
        :class:`SandboxError` when squeue itself fails (controller unreachable).
        """
        if not job_ids:
            return {}
        proc = self._run(
            ["squeue", "--noheader", "--states=all", "-O", _SQUEUE_FORMAT, "--jobs", ",".join(job_ids)]
        )
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:
                return {}  # every listed job has left the controller's memory
            raise SandboxError(f"squeue failed: {proc.stderr.strip()[:300]}")
        return parse_squeue(proc.stdout)

    def find_by_name(self, name: str) -> list[str]:
        """Ids of the jobs the controller knows under job name ``name``."""
        proc = self._run(["squeue", "--noheader", "--states=all", "-O", _SQUEUE_FORMAT, "--name", name])
        if proc.returncode != 0:
            raise SandboxError(f"squeue failed: {proc.stderr.strip()[:300]}")
        return [s.job_id for s in parse_squeue(proc.stdout).values() if s.name == name]

    def scancel(self, job_ids: list[str]) -> None:
        """Cancel exactly these jobs (by id; never by user or name)."""
        if not job_ids:
            return
        proc = self._run(["scancel", *job_ids])
        if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
            raise SandboxError(f"scancel failed: {proc.stderr.strip()[:300]}")


def parse_squeue(text: str) -> dict[str, JobState]:
    """Parse ``squeue -O JobID:|,State:|,Reason:|,exit_code:|,Name:|`` lines (pure)."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 4 or not parts[0]:
            continue
        job_id = parts[0].split("_")[0]
        try:
            status = int(parts[3])
        except ValueError:
            status = None
        out[job_id] = JobState(job_id, parts[1], parts[2], status, parts[4] if len(parts) > 4 else "")
    return out

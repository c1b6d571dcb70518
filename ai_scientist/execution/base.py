"""The executor interface every sandbox backend implements.

A backend runs one command in a node's workspace under :class:`Limits` and
returns an :class:`ExecResult`: exit code, signal, duration, stdout/stderr
capped as head + tail with their total sizes, peak memory, and who killed the
command and why. Failures of the *command* are values (``ok`` is False);
failures of the *sandbox itself* (backend missing, image missing) raise
:class:`SandboxError` with a message saying what to do.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..base.config import ExecConfig

# The PATH every sandbox and every probe command gets: the system's own directories, nothing of
# the orchestrator's environment.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

KilledBy = Literal["timeout", "memory", "output", "cpu", "pids", "signal"]

# The workspace and resources paths seen inside container-like backends.
SANDBOX_WORKSPACE = "/workspace"
SANDBOX_RESOURCES = "/resources"
# Environment variable naming the resources directory inside every backend.
RESOURCES_ENV = "AI_SCIENTIST_RESOURCES"
# Once a command has written this many times its kept output it is killed (flood).
OUTPUT_HARD_CAP_FACTOR = 16
TIMEOUT_EXIT_CODE = 124


class SandboxError(RuntimeError):
    """The sandbox could not run the command at all (not a failure of the command)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one command; every backend enforces what it can and says so in docs."""

    timeout_s: float = 600.0
    memory_mb: int = 4096
    cpus: float = 1.0
    pids: int = 256
    output_bytes: int = 1_000_000
    network: bool = False
    gpus: tuple[int, ...] = ()
    file_bytes: int = 8 * 1024**3  # largest single file the command may write (RLIMIT_FSIZE)
    ntasks: int = 1  # MPI ranks (slurm backend: --ntasks, started by exec.slurm.mpi_launcher)

    @classmethod
    def from_config(cls, exec_cfg: ExecConfig) -> Limits:
        """Limits from a :class:`~ai_scientist.base.config.ExecConfig` (``cfg.exec``)."""
        return cls(
            timeout_s=float(exec_cfg.timeout),
            memory_mb=int(exec_cfg.memory_mb),
            cpus=float(exec_cfg.cpus),
            pids=int(exec_cfg.pids_limit),
            output_bytes=int(exec_cfg.max_output_bytes),
            network=bool(exec_cfg.network),
            gpus=tuple(int(g) for g in exec_cfg.gpus),
        )

    @property
    def output_hard_cap(self) -> int:
        """Total bytes (stdout + stderr) after which the command is killed with ``killed_by="output"``."""
        return self.output_bytes * OUTPUT_HARD_CAP_FACTOR

    @property
    def cpu_seconds(self) -> int:
        """RLIMIT_CPU: CPU seconds a process may use within the wall-clock timeout, plus slack."""
        return int(math.ceil(self.timeout_s * max(self.cpus, 1.0))) + 2


@dataclass
class ExecResult:
    """What happened to one command. ``stdout``/``stderr`` are capped text; totals are exact."""

    command: list[str]
    exit_code: int | None
    signal: int | None
    duration_s: float
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    peak_memory_mb: float | None
    killed_by: KilledBy | None
    reason: str
    backend: str
    extra: dict[str, Any] = field(default_factory=dict)
    # user + system CPU seconds of the command and its reaped children, measured by the backend
    # outside the sandbox (see .usage); None: not measured, ``cpu_how`` says why (else how)
    cpu_s: float | None = None
    cpu_how: str = ""
    # the 1-minute load average at start and end, the core count, other commands of the run
    # meanwhile ({"start", "end", "cores", "others"}; .usage.tracked)
    load: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True when the command exited 0 on its own."""
        return self.exit_code == 0 and self.killed_by is None

    @property
    def shell_exit_code(self) -> int:
        """The exit code a shell would report: 124 on timeout, 128+N on signal N."""
        if self.killed_by == "timeout":
            return TIMEOUT_EXIT_CODE
        if self.exit_code is not None:
            return self.exit_code
        return 128 + (self.signal or 9)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d

    def summary(self) -> str:
        """One line: backend, exit code, duration and why it stopped."""
        parts = [f"backend={self.backend}", f"exit={self.exit_code}", f"duration={self.duration_s:.2f}s"]
        if self.signal:
            parts.append(f"signal={self.signal}")
        if self.killed_by:
            parts.append(f"killed_by={self.killed_by}")
        if self.peak_memory_mb is not None:
            parts.append(f"peak_mem={self.peak_memory_mb:.0f}MB")
        if self.cpu_s is not None:
            parts.append(f"cpu={self.cpu_s:.2f}s")
        if self.reason:
            parts.append(f"reason={self.reason}")
        return " ".join(parts)


@runtime_checkable
class Executor(Protocol):
    """A sandbox backend. ``run`` never raises for a failing command, only for a broken sandbox."""

    name: str

    def run(
        self,
        command: list[str] | str,
        *,
        workspace: Path,
        limits: Limits | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult: ...

    def close(self) -> None: ...


class OutputHeadTail:
    """Keeps the first and last ``cap/2`` bytes of a command's output stream and counts the total
    (O(cap) memory). Not the ``head_tail`` layer policy of ``context.policies``, which cuts text."""

    def __init__(self, cap: int):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def text(self) -> str:
        kept = len(self.head) + len(self.tail)
        head = self.head.decode("utf-8", "replace")
        if self.total <= kept:
            return head + self.tail.decode("utf-8", "replace")
        dropped = self.total - kept
        marker = f"\n[... {dropped} bytes omitted of {self.total} total ...]\n"
        return head + marker + self.tail.decode("utf-8", "replace")


def normalize_command(command: list[str] | str) -> list[str]:
    """A string is run by ``/bin/sh -c``; a list is an argv. Empty commands are refused."""
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("empty command")
        return ["/bin/sh", "-c", command]
    argv = [str(a) for a in command]
    if not argv:
        raise ValueError("empty command")
    return argv


def limit_reason(stderr_text: str, exit_code: int | None, limits: Limits) -> tuple[KilledBy, str] | None:
    """Recognise a command that stopped by itself because a limit refused it something: an
    allocation refused by the address-space limit, or a fork refused by the process limit
    (RLIMIT_NPROC; shells retry a refused fork for about 15 s, then give up)."""
    if exit_code in (None, 0):
        return None
    needles = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory")
    if any(n in stderr_text for n in needles):
        return "memory", f"allocation refused by the {limits.memory_mb} MB memory limit"
    forks = ("fork: Resource temporarily unavailable", "fork: retry: Resource temporarily unavailable",
             "BlockingIOError: [Errno 11] Resource temporarily unavailable")  # fmt: skip
    if any(n in stderr_text for n in forks):
        return "pids", f"a new process was refused by the process limit ({limits.pids})"
    return None
    needles = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory")
    if any(n in stderr_text for n in needles):
        return f"allocation refused by the {limits.memory_mb} MB memory limit"
    return None

"""Supervise one local child process: stream-capped output, limits, and a kill that leaves nothing.

Shared by the process-based backends (subprocess, bwrap, apptainer). The child
starts in its own session (so it leads its own process group). While it runs,
a poller samples the process tree with psutil to record peak memory, enforce
the memory and pids limits, and remember every descendant it has seen, so a
child that escaped with ``setsid`` is still killed. On timeout the group and
all known descendants get SIGTERM, then SIGKILL after a short grace period,
and the sweep repeats until none is left. ``sweep_uid`` lets a backend that ran
the command under a dedicated uid kill *every* process of that uid.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from .base import ExecResult, KilledBy, Limits, OutputHeadTail, limit_reason

POLL_S = 0.05
TERM_GRACE_S = 0.5


@dataclass
class _State:
    killed_by: KilledBy | None = None
    reason: str = ""
    peak_rss: int = 0
    seen: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, killed_by: KilledBy, reason: str) -> bool:
        """Record the first kill reason; later ones are ignored. True if this call decided."""
        with self.lock:
            if self.killed_by is None:
                self.killed_by, self.reason = killed_by, reason
                return True
            return False


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG(SIGKILL): if the orchestrator is killed (kill -9), the command dies too."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the supervisor's timeout still applies


def rlimit_preexec(limits: Limits, address_space: bool = True) -> Callable[[], None]:
    """A preexec function setting rlimits in the child; each limit the host refuses is skipped."""

    def apply() -> None:
        _die_with_parent()
        wanted = [
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_FSIZE, limits.file_bytes),
            (resource.RLIMIT_NPROC, limits.pids),
            (resource.RLIMIT_CORE, 0),
        ]
        if address_space:
            wanted.append((resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024))
        for res, value in wanted:
            try:
                resource.setrlimit(res, (value, value))
            except (ValueError, OSError):
                pass  # not permitted here; the poller still enforces memory / pids

    return apply


def _reader(stream, buf: OutputHeadTail, total: list[int], limits: Limits, state: _State, kill) -> None:
    # Reads in chunks into a bounded buffer: a 1 GiB flood never sits in memory.
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf.feed(chunk)
        total[0] += len(chunk)
        if total[0] > limits.output_hard_cap and state.decide(
            "output", f"output exceeded {limits.output_hard_cap} bytes (flood)"
        ):
            kill()
    stream.close()


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _sample(root: psutil.Process, state: _State, limits: Limits, kill) -> None:
    procs = _tree(root)
    rss = 0
    for p in procs:
        state.seen.add(p.pid)
        try:
            rss += p.memory_info().rss
        except psutil.Error:
            pass
    state.peak_rss = max(state.peak_rss, rss)
    if rss > limits.memory_mb * 1024 * 1024 and state.decide(
        "memory", f"resident memory {rss // 2**20} MB exceeded the {limits.memory_mb} MB limit"
    ):
        kill()
    elif len(procs) >= limits.pids and state.decide(
        "pids", f"{len(procs)} processes reached the pids limit {limits.pids}"
    ):
        kill()


def _signal_all(pgid: int, pids: set[int], sig: int, uid: int | None) -> int:
    """Send ``sig`` to the group, the known pids and (if given) every process of ``uid``."""
    alive = 0
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    targets = set(pids)
    if uid is not None:
        for p in psutil.process_iter(["uids"]):
            try:
                if p.info["uids"] and p.info["uids"].real == uid and not _is_zombie(p.pid):
                    targets.add(p.pid)
            except psutil.Error:
                continue
    for pid in targets:
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, sig)
            alive += 1
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def kill_everything(proc: subprocess.Popen, state: _State, sweep_uid: int | None) -> None:
    """SIGTERM then SIGKILL the group, every seen descendant and the sweep uid, until none is left."""
    try:
        root = psutil.Process(proc.pid)
        state.seen.update(p.pid for p in _tree(root))
    except psutil.Error:
        pass
    _signal_all(proc.pid, state.seen, signal.SIGTERM, sweep_uid)
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    for _ in range(50):
        live = {pid for pid in state.seen if not _is_zombie(pid)}
        if proc.poll() is not None:
            live.discard(proc.pid)  # reaped: its pid may be reused, never signal it again
        if not _signal_all(proc.pid, live, signal.SIGKILL, sweep_uid) and proc.poll() is not None:
            return
        time.sleep(0.02)


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def supervise(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    limits: Limits,
    backend: str,
    display_command: list[str],
    preexec: Callable[[], None] | None = None,
    sweep_uid: int | None = None,
    enforce_memory: bool = True,
) -> ExecResult:
    """Run ``argv`` to completion under ``limits``; never raises for a failing command."""
    state = _State()
    out, err = OutputHeadTail(limits.output_bytes // 2), OutputHeadTail(limits.output_bytes // 2)
    total = [0]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec,
            close_fds=True,
        )
    except OSError as exc:
        msg = f"could not start: {exc}"
        return ExecResult(
            list(display_command), 127, None, 0.0, "", msg, 0, len(msg), None, None, msg, backend
        )
    kill_once = threading.Event()

    def kill() -> None:
        if not kill_once.is_set():
            kill_once.set()
            kill_everything(proc, state, sweep_uid)

    readers = [
        threading.Thread(target=_reader, args=(proc.stdout, out, total, limits, state, kill), daemon=True),
        threading.Thread(target=_reader, args=(proc.stderr, err, total, limits, state, kill), daemon=True),
    ]
    for t in readers:
        t.start()
    _watch(proc, state, limits, kill, start, enforce_memory)
    # The main child has exited (or been killed): anything it left behind goes too.
    kill_everything(proc, state, sweep_uid)
    proc.wait()
    for t in readers:
        t.join(timeout=5)
    return _result(proc, state, out, err, limits, backend, display_command, time.monotonic() - start)


def _watch(
    proc: subprocess.Popen, state: _State, limits: Limits, kill, start: float, enforce_memory: bool
) -> None:
    """Block until the child exits, killing it on timeout or when the memory / pids poller says so."""
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        return
    while proc.poll() is None:
        if time.monotonic() - start > limits.timeout_s:
            if state.decide("timeout", f"wall-clock timeout of {limits.timeout_s:g}s"):
                kill()
            return
        if enforce_memory:
            _sample(root, state, limits, kill)
        try:
            proc.wait(timeout=POLL_S)  # returns as soon as the child exits: no idle latency
        except subprocess.TimeoutExpired:
            pass


def _result(proc, state, out, err, limits, backend, display_command, duration) -> ExecResult:
    code = proc.returncode
    sig = -code if code is not None and code < 0 else None
    exit_code = None if sig else code
    stderr_text = err.text()
    killed_by, reason = state.killed_by, state.reason
    if killed_by is None and sig == signal.SIGXCPU:
        killed_by, reason = "cpu", f"CPU time limit of {limits.cpu_seconds}s exceeded"
    elif killed_by is None and sig == signal.SIGXFSZ:
        killed_by, reason = "signal", f"file size limit of {limits.file_bytes} bytes exceeded"
    elif killed_by is None and sig:
        killed_by, reason = "signal", f"terminated by signal {signal.Signals(sig).name}"
    elif killed_by is None:
        killed_by, reason = limit_reason(stderr_text, exit_code, limits) or (None, reason)
    peak = state.peak_rss / 2**20 if state.peak_rss else None
    return ExecResult(
        list(display_command),
        exit_code,
        sig,
        round(duration, 4),
        out.text(),
        stderr_text,
        out.total,
        err.total,
        peak,
        killed_by,
        reason,
        backend,
    )

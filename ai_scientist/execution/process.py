"""Supervise one local child process: stream-capped output, limits, and a kill that leaves nothing.

Shared by the process-based backends (subprocess, bwrap, apptainer). The child starts in its
own session (so it leads its own process group), forked and set up (:class:`~.forkserver.
ChildSpec`) by the small fork server when there is one, else by this process
(:mod:`.forkserver`: forking a large orchestrator costs milliseconds a command). One thread supervises it without busy
polling: it blocks in ``poll()`` on the two output pipes and a pidfd of the child
(``pidfd_open``; before Linux 5.3 a pipe closed by a thread that waits with ``WNOWAIT``), so an exit or a chunk of output wakes it at once, and the wall-clock
deadline is the poll timeout. Tree samples (memory and process count, and the pids a kill
must reach) back off: the first after ``FIRST_SAMPLE_S`` (a contained command that ends sooner
is never sampled), then at doubling intervals up to ``SAMPLE_MAX_S``; between samples the
kernel holds the per-process limits (RLIMIT_AS, and RLIMIT_NPROC under a fresh uid). A command
in its own pid namespace (``contained``) is walked through ``/proc/PID/task/TID/children``
from its root, which costs the size of its tree whatever else runs on the host (an orphan is
re-parented to the namespace's init, inside the walk); other commands are sampled by scanning
every process (psutil), the first time at once.

When the main child exits on its own and is ``contained``, the kernel has already killed
and reaped everything else in its pid namespace (the namespace's init exits last), so nothing
is left to sweep. Otherwise (a kill on timeout / memory / pids / output, or a command not in
a pid namespace) the group and all known descendants get SIGTERM, then SIGKILL after a short
grace period, and the sweep repeats until none is left; ``sweep_uid`` lets a backend that ran
the command under a dedicated uid kill *every* process of that uid.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from . import forkserver
from .base import ExecResult, KilledBy, Limits, OutputHeadTail, limit_reason
from .forkserver import (
    ChildSpec,
    ForkServer,
    ServerGone,
    SetupFailed,
    born_in,
    orchestrator_pidfd,
    prepare_child,
)
from .usage import cpu_seconds

FIRST_SAMPLE_S = 0.05  # a contained command that ends sooner is never sampled
SAMPLE_MAX_S = 1.0  # the interval between samples doubles from FIRST_SAMPLE_S up to this
TERM_GRACE_S = 0.5
REAP_WAIT_S = 5.0  # on a kill, how long the processes of the tree are waited for
DRAIN_S = 5.0  # after the exit, how long output pipes held open by leftovers are read
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class _State:
    killed_by: KilledBy | None = None
    reason: str = ""
    peak_rss: int = 0
    seen: set[int] = field(default_factory=set)

    def decide(self, killed_by: KilledBy, reason: str) -> bool:
        """Record the first kill reason; later ones are ignored. True if this call decided."""
        if self.killed_by is None:
            self.killed_by, self.reason = killed_by, reason
            return True
        return False


def rlimit_values(limits: Limits, address_space: bool = True) -> tuple[tuple[int, int], ...]:
    """The command's rlimits as (resource, value) pairs, set in the child (see :class:`ChildSpec`)."""
    wanted = [
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NPROC, limits.pids),
        (resource.RLIMIT_CORE, 0),
    ]
    if address_space:
        wanted.append((resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024))
    return tuple((int(res), int(value)) for res, value in wanted)


@dataclass
class _Child:
    """A started command: its pid, output pipes and a pidfd; reaped by whoever forked it."""

    pid: int
    stdout: IO[bytes]
    stderr: IO[bytes]
    pidfd: int
    server: ForkServer | None = None  # forked by the fork server
    popen: subprocess.Popen | None = None  # ... or by this process (kept: it must not reap on its own)
    returncode: int | None = None
    lost: bool = False  # the fork server stopped while the command ran (it was killed with it)
    cpu_s: float | None = None  # user + system seconds of the reaped tree (wait4), once reaped

    def reap(self) -> int:
        if self.popen is not None:
            if self.popen.returncode is None:
                # wait4, not Popen.wait: the kernel's CPU time of the child and its reaped tree
                _, status, ru = os.wait4(self.pid, 0)
                self.popen.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_s = cpu_seconds(ru)
            return self.popen.returncode
        assert self.server is not None
        _exited(self.pidfd, None)  # the exit, first: the server reaps only when asked
        try:
            code, self.cpu_s = self.server.reap(self.pid)
            return code
        except ServerGone:
            self.lost = True
            return -signal.SIGKILL

    def close(self) -> None:
        os.close(self.pidfd)
        self.stdout.close()
        self.stderr.close()


def _pidfd_usable() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except OSError:
        return False


def _start(
    argv: list[str], cwd: Path, env: dict[str, str], spec: ChildSpec, fork_server: bool = True
) -> _Child:
    """Fork ``argv`` set up by ``spec``: by the fork server when there is one (see
    :mod:`.forkserver`), else by this process. Raises OSError (cannot execute) or
    ``subprocess.SubprocessError`` (the set-up failed)."""
    server = forkserver.shared() if fork_server and _pidfd_usable() else None
    if server is not None and server.fits(argv, env):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = server.spawn(argv, str(cwd), env, spec, out_w, err_w)
        except SetupFailed as exc:
            for fd in (out_r, err_r):
                os.close(fd)
            raise subprocess.SubprocessError(str(exc)) from None
        except BaseException as exc:
            for fd in (out_r, err_r):
                os.close(fd)
            if not isinstance(exc, ServerGone):
                raise
        else:
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # out of descriptors: a command nobody could supervise must not run
                os.kill(pid, signal.SIGKILL)  # still our pid: the server reaps only when asked
                with contextlib.suppress(ServerGone):
                    server.reap(pid)
                for fd in (out_r, err_r):
                    os.close(fd)
                raise
            return _Child(pid, open(out_r, "rb", 0), open(err_r, "rb", 0), pidfd, server)
        finally:
            os.close(out_w)
            os.close(err_w)
    parent = orchestrator_pidfd()

    def preexec() -> None:
        prepare_child(spec, parent)

    with born_in(spec):
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
    assert proc.stdout is not None and proc.stderr is not None
    return _Child(proc.pid, proc.stdout, proc.stderr, _exit_fd(proc.pid), popen=proc)


def _walk(root: int) -> list[int]:
    """``root`` and its descendants through ``/proc/PID/task/TID/children`` (cost: the tree's size)."""
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    stack.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                continue
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _scan(root: int) -> list[int]:
    """``root`` and its descendants by scanning every process (psutil): finds nothing re-parented."""
    import psutil  # here, not at import: a contained command never needs it (a Slurm job's runner)

    try:
        proc = psutil.Process(root)
        return [root, *(p.pid for p in proc.children(recursive=True))]
    except psutil.Error:
        return []


def _sample(pids: list[int], state: _State, limits: Limits) -> tuple[KilledBy, str] | None:
    """Record the tree; the limit it breaks (memory first), if any."""
    state.seen.update(pids)
    rss = sum(_rss(p) for p in pids)
    state.peak_rss = max(state.peak_rss, rss)
    if rss > limits.memory_mb * 1024 * 1024:
        return "memory", f"resident memory {rss // 2**20} MB exceeded the {limits.memory_mb} MB limit"
    if len(pids) >= limits.pids:
        return "pids", f"{len(pids)} processes reached the pids limit {limits.pids}"
    return None


def _signal_all(pgid: int, pids: set[int], sig: int, uid: int | None) -> int:
    """Send ``sig`` to the group, the known pids and (if given) every process of ``uid``."""
    alive = 0
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    targets = set(pids)
    if uid is not None:
        import psutil

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


def _is_zombie(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _exit_fd(pid: int) -> int:
    """A descriptor that becomes readable when child ``pid`` exits (it is not reaped): a pidfd,
    or before Linux 5.3 a pipe closed by a thread that waits with ``WNOWAIT``."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        pass
    r, w = os.pipe()

    def wait() -> None:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        finally:
            os.close(w)

    threading.Thread(target=wait, daemon=True, name=f"exit-{pid}").start()
    return r


def _exited(pidfd: int, timeout_s: float | None = 0.0) -> bool:
    """Whether ``pidfd`` reports the exit within ``timeout_s`` (None: wait for it). ``poll``,
    not ``select``: a descriptor above 1023 (many workers, many pipes) is fine."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(None if timeout_s is None else int(timeout_s * 1000)))


def kill_everything(root: int, pidfd: int, state: _State, sweep_uid: int | None, contained: bool) -> None:
    """SIGTERM then SIGKILL the group, the root, every seen descendant and the sweep uid, until
    none is left. The root is never reaped here (its pid stays ours until :func:`supervise` waits).

    Every process of the tree at the kill is held by a pidfd and waited for (up to
    ``REAP_WAIT_S``): a pid namespace's init (bwrap's, under its monitor) ends only once the
    kernel has killed and reaped the rest of its namespace, so nothing of the command still
    counts against its uid's process limit when the next command starts."""
    held: list[int] = []
    if not _exited(pidfd):
        tree = _walk(root) if contained else _scan(root)
        state.seen.update(tree)
        for pid in tree:
            if pid != root:
                with contextlib.suppress(OSError):
                    held.append(os.pidfd_open(pid))
    try:
        _signal_all(root, state.seen, signal.SIGTERM, sweep_uid)
        _exited(pidfd, TERM_GRACE_S)
        for _ in range(50):
            live = {pid for pid in state.seen if pid != root and not _is_zombie(pid)}
            for fd in (pidfd, *held):
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            if not _signal_all(root, live, signal.SIGKILL, sweep_uid) and _exited(pidfd):
                break
            time.sleep(0.02)
        poller = select.poll()
        for fd in held:
            poller.register(fd, select.POLLIN)
        pending, deadline = len(held), time.monotonic() + REAP_WAIT_S
        while pending and time.monotonic() < deadline:
            for fd, _ in poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                poller.unregister(fd)
                pending -= 1
    finally:
        for fd in held:
            os.close(fd)


def supervise(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    limits: Limits,
    backend: str,
    display_command: list[str],
    spec: ChildSpec | None = None,
    sweep_uid: int | None = None,
    enforce_memory: bool = True,
    contained: bool = False,
    fork_server: bool = True,
) -> ExecResult:
    """Run ``argv`` to completion under ``limits``; never raises for a failing command.

    ``contained``: the child is (or waits for) the init of its own pid namespace, so every
    process the command starts lives in the child's tree and dies with it. ``spec``: what the
    child sets up before exec (namespaces, mount plan, uid, rlimits; nothing but its own
    session and death signal when None). ``fork_server``: forked by the fork server when it runs."""
    state = _State()
    out, err = OutputHeadTail(limits.output_bytes // 2), OutputHeadTail(limits.output_bytes // 2)
    start = time.monotonic()
    try:
        proc = _start(argv, cwd, env, spec or ChildSpec(), fork_server)
    except OSError as exc:
        msg = f"could not start: {exc}"
        return ExecResult(
            list(display_command), 127, None, 0.0, "", msg, 0, len(msg), None, None, msg, backend
        )
    try:
        try:
            _watch(proc, proc.pidfd, state, limits, out, err, start, enforce_memory, sweep_uid, contained)
        except BaseException:  # the supervisor failed (or was interrupted): the command goes too
            state.decide("signal", "the supervisor stopped")
            kill_everything(proc.pid, proc.pidfd, state, sweep_uid, contained)
            raise
        finally:
            proc.returncode = proc.reap()
            if proc.lost:
                state.decide("signal", "the fork server stopped, and the command with it")
    finally:
        proc.close()
    result = _result(proc, state, out, err, limits, backend, display_command, time.monotonic() - start)
    result.extra["forked_by"] = "fork_server" if proc.server is not None else "orchestrator"
    if proc.cpu_s is not None:
        result.cpu_s, result.cpu_how = round(proc.cpu_s, 4), "wait4"
    else:
        result.cpu_how = "the fork server stopped before the command was reaped"
    return result


def _watch(proc, pidfd, state, limits, out, err, start, enforce_memory, sweep_uid, contained) -> None:
    """Read both pipes and wait for the exit in one ``poll()``; kill on a limit; leave nothing behind."""
    poller = select.poll()
    bufs = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in bufs:
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    total = 0
    deadline = start + limits.timeout_s
    interval = FIRST_SAMPLE_S
    # not contained: a descendant may leave the tree, so the first scan is at once (as before)
    first = FIRST_SAMPLE_S if contained else 0.0
    next_sample = start + first if enforce_memory else float("inf")
    killed = exited = False
    drain_until = float("inf")

    def kill(why: KilledBy, reason: str) -> None:
        nonlocal killed
        if not killed and state.decide(why, reason):
            killed = True
            kill_everything(proc.pid, pidfd, state, sweep_uid, contained)

    while bufs or not exited:
        now = time.monotonic()
        if not exited and not killed:
            if now >= deadline:
                kill("timeout", f"wall-clock timeout of {limits.timeout_s:g}s")
            elif now >= next_sample:
                broken = _sample(_walk(proc.pid) if contained else _scan(proc.pid), state, limits)
                if broken:
                    kill(*broken)
                interval = min(interval * 2, SAMPLE_MAX_S)
                next_sample = time.monotonic() + interval
            now = time.monotonic()
        if exited:
            wait_until = drain_until
        elif killed:
            wait_until = now + 1.0  # killed: only the exit is awaited
        else:
            wait_until = min(deadline, next_sample)
        events = poller.poll(max(0, int((wait_until - now) * 1000) + 1))
        if not events and exited:
            break  # a leftover still holds a pipe open past the drain time
        for fd, _ in events:
            if fd == pidfd:
                if not exited:
                    exited = True
                    if killed or not contained:
                        # what the command left behind goes too (an escaped setsid daemon...)
                        kill_everything(proc.pid, pidfd, state, sweep_uid, contained)
                    drain_until = time.monotonic() + DRAIN_S
                    poller.unregister(pidfd)
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                poller.unregister(fd)
                del bufs[fd]
                continue
            bufs[fd].feed(chunk)  # bounded buffer: a 1 GiB flood never sits in memory
            total += len(chunk)
            if total > limits.output_hard_cap:
                kill("output", f"output exceeded {limits.output_hard_cap} bytes (flood)")


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

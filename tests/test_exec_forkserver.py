"""The fork server: commands are forked by a small clean process, not the orchestrator.

What is checked is what a command and the host really see: the command's parent process, the
server's environment and session, the server's children after commands end (each reaped, none
left), what happens when the server dies mid-command (the command goes with it, the result says
so, the next command still runs), and that both ways of forking give the same results
(a missing program, a set-up that fails, a request too large for one message).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from pathlib import Path

import psutil
import pytest
from components import bwrap_or_skip
from waiting import wait_until

from ai_scientist.execution import forkserver, process
from ai_scientist.execution.base import Limits, SandboxError
from ai_scientist.execution.forkserver import Bind, ChildSpec, MountPlan

LIM = Limits(timeout_s=30, memory_mb=1024, pids=64)
ROOT_USER = os.geteuid() == 0


@pytest.fixture
def workspace():
    path = Path(tempfile.mkdtemp(prefix="ai-sci-fs-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)  # 80 of them were left in /tmp by earlier suites


def _executor(backend: str):
    if backend == "bwrap":
        from ai_scientist.execution.bwrap_backend import BwrapExecutor

        bwrap_or_skip()
        return BwrapExecutor()
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor

    return SubprocessExecutor(allow_unsafe=not ROOT_USER)


def _server() -> forkserver.ForkServer:
    server = forkserver.shared()
    assert server is not None, "the fork server did not start on this host"
    return server


def _marked(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def _wait_for(marker: str) -> psutil.Process:
    return wait_until(lambda: _marked(marker), f"a process with {marker} appeared")[0]


@pytest.mark.parametrize("backend", ["subprocess", "bwrap"])
def test_commands_are_forked_by_the_clean_server(workspace, backend):
    ex = _executor(backend)
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    box: dict = {}
    # the command runs until the test has looked at it (a fixed sleep could end first under load)
    held = "import os, time\nwhile not os.path.exists('GO'): time.sleep(0.02)"
    t = threading.Thread(
        target=lambda: box.update(r=ex.run(["python3", "-c", held, marker], workspace=workspace, limits=LIM))
    )
    t.start()
    try:
        command = _wait_for(marker)
        server = _server()
        # the command (or bwrap in front of it) descends from the server, not from this process
        chain = [command, *command.parents()]
        assert server.pid in [p.pid for p in chain], [p.pid for p in chain]
        assert chain[chain.index(next(p for p in chain if p.pid == server.pid)) - 1].ppid() == server.pid
    finally:
        (workspace / "GO").touch()
    t.join()
    assert box["r"].ok, box["r"].summary()
    assert box["r"].extra["forked_by"] == "fork_server"  # recorded with the result
    me = psutil.Process()
    srv = psutil.Process(server.pid)
    assert srv.ppid() == os.getpid()
    assert srv.environ() == {}, "the server must hold no environment (no API key)"
    assert os.getsid(server.pid) != os.getsid(0), "the server leads its own session (no terminal Ctrl-C)"
    assert srv.memory_info().rss < me.memory_info().rss  # it is the small process that forks
    assert srv.children() == [], "every command was reaped"
    ex.close()


def test_every_command_is_reaped_also_after_kills(workspace):
    ex = _executor("subprocess")
    lim = Limits(timeout_s=1, memory_mb=256, pids=64)
    ok = ex.run(["sh", "-c", "echo fine"], workspace=workspace, limits=LIM)
    slow = ex.run(["sh", "-c", "sleep 30"], workspace=workspace, limits=lim)
    # the flood's limit is its output, not the clock: under load python's start alone can take 1 s
    flood_lim = Limits(timeout_s=30, memory_mb=256, pids=64)
    flood = ex.run(["python3", "-c", "print('x' * 10**8)"], workspace=workspace, limits=flood_lim)
    assert ok.stdout == "fine\n" and slow.killed_by == "timeout" and flood.killed_by == "output", (
        ok.summary(),
        slow.summary(),
        flood.summary(),
    )
    assert psutil.Process(_server().pid).children() == []
    ex.close()


def test_concurrent_commands_get_their_own_output(workspace):
    ex = _executor("subprocess")
    results: dict[int, object] = {}

    def one(i: int) -> None:
        code = f"import sys\nfor _ in range(2000): print({i}); print(-{i}, file=sys.stderr)"
        results[i] = ex.run(["python3", "-c", code], workspace=workspace, limits=LIM)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in results.items():
        assert r.ok, r.summary()  # type: ignore[attr-defined]
        assert set(r.stdout.split()) == {str(i)} and set(r.stderr.split()) == {f"-{i}"}  # type: ignore[attr-defined]
    ex.close()


@pytest.mark.parametrize("fork_server", [True, False])
def test_both_ways_report_a_missing_program_alike(workspace, fork_server):
    r = process.supervise(
        ["no-such-program-here", "x"],
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin"},
        limits=LIM,
        backend="test",
        display_command=["no-such-program-here"],
        fork_server=fork_server,
    )
    assert r.exit_code == 127
    assert r.stderr == "could not start: [Errno 2] No such file or directory: 'no-such-program-here'"


@pytest.mark.parametrize("fork_server", [True, False])
def test_both_ways_report_a_set_up_that_fails(workspace, fork_server):
    missing = str(workspace / "not-there")
    plan = MountPlan((), (), (Bind(missing, True),), str(workspace))
    with pytest.raises(subprocess.SubprocessError) as err:
        process.supervise(
            ["true"],
            cwd=workspace,
            env={"PATH": "/usr/bin:/bin"},
            limits=LIM,
            backend="test",
            display_command=["true"],
            spec=ChildSpec(plan),
            fork_server=fork_server,
        )
    if fork_server:  # the server says which step failed (subprocess only that one did)
        assert missing in str(err.value)


def test_a_failing_sandbox_set_up_is_a_sandbox_error(workspace, monkeypatch):
    ex = _executor("subprocess")
    if not ex.caps["mount_namespace"]:
        pytest.skip("no mount namespace here")
    real = ex._plan

    def broken(*a, **kw):
        plan = real(*a, **kw)
        return MountPlan(plan.tmpfs, plan.covers, (*plan.binds, Bind(str(workspace / "gone"), True)), plan.chdir,
                         plan.user_ns, plan.tmp_size_mb, plan.namespaces, plan.proc)  # fmt: skip

    monkeypatch.setattr(ex, "_plan", broken)
    with pytest.raises(SandboxError, match="could not be set up"):
        ex.run(["true"], workspace=workspace, limits=LIM)
    ex.close()


def test_a_request_too_large_for_one_message_is_forked_here(workspace):
    # one string may not pass 128 KiB (the kernel's limit), several together may
    big = {f"BIG{i}": str(i) * 60_000 for i in range(forkserver.MAX_REQUEST // 60_000 + 1)}
    assert not _server().fits(["true"], big)
    r = process.supervise(
        ["sh", "-c", 'printf %s "$BIG0$BIG1$BIG2" | wc -c'],
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin", **big},
        limits=LIM,
        backend="test",
        display_command=["sh"],
    )
    assert r.ok and int(r.stdout) == 180_000, r.summary()


SERVER_KILLER = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    from pathlib import Path
    from ai_scientist.execution import forkserver
    from ai_scientist.execution.base import Limits
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    ws, marker = Path(sys.argv[1]), sys.argv[2]
    ex = SubprocessExecutor(allow_unsafe=os.geteuid() != 0)
    first = ex.run(["true"], workspace=ws, limits=Limits(timeout_s=10))
    server = forkserver.shared()
    def kill_server():
        while not (ws / "STARTED").exists():
            time.sleep(0.02)
        os.kill(server.pid, signal.SIGKILL)
    threading.Thread(target=kill_server).start()
    code = "import time; open('STARTED', 'w').close(); time.sleep(60)"
    cut = ex.run(["python3", "-c", code, marker], workspace=ws, limits=Limits(timeout_s=120))
    after = ex.run(["sh", "-c", "echo still running"], workspace=ws, limits=Limits(timeout_s=10))
    print(json.dumps({"first": first.ok, "cut": [cut.killed_by, cut.reason, cut.duration_s],
                      "after": [after.ok, after.stdout, after.extra["forked_by"]],
                      "server_now": forkserver.shared() is not None}))
    """
)


def test_a_dead_server_takes_its_command_and_the_next_one_forks_here(workspace):
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    proc = subprocess.run(
        [sys.executable, "-c", SERVER_KILLER, str(workspace), marker],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["first"]
    killed_by, reason, duration = out["cut"]
    assert (killed_by, reason) == ("signal", "the fork server stopped, and the command with it"), out
    assert duration < 60  # it did not sleep its minute out
    assert out["after"] == [True, "still running\n", "orchestrator"] and out["server_now"] is False
    assert _marked(marker) == []


ORCHESTRATOR = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from ai_scientist.execution import forkserver
    from ai_scientist.execution.base import Limits
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    ws, marker = Path(sys.argv[1]), sys.argv[2]
    ex = SubprocessExecutor(allow_unsafe=os.geteuid() != 0)
    ex.run(["true"], workspace=ws, limits=Limits(timeout_s=10))
    (ws / "SERVER").write_text(str(forkserver.shared().pid))
    code = "import time; open('STARTED', 'w').close(); time.sleep(300)"
    ex.run(["python3", "-c", code, marker], workspace=ws, limits=Limits(timeout_s=300))
    """
)


def test_a_kill_9d_orchestrator_takes_the_server_and_its_commands(workspace):
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    orch = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, str(workspace), marker])
    wait_until(lambda: (workspace / "STARTED").exists() or orch.poll() is not None, "the command started", 60)
    assert orch.poll() is None, "the orchestrator ended before its command started"
    server = int((workspace / "SERVER").read_text())
    assert psutil.Process(server).ppid() == orch.pid
    orch.send_signal(signal.SIGKILL)
    orch.wait()

    def gone() -> bool:
        try:
            alive = psutil.Process(server).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            alive = False
        return not _marked(marker) and not alive

    try:  # the server and its command die of the orchestrator's death (a signal, then a reap)
        wait_until(gone, "the command and the fork server ended with the kill -9'd orchestrator", 5)
    finally:
        for p in _marked(marker):  # they are no longer this test's children: the cleanup cannot see them
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def test_the_spec_the_server_receives_is_the_one_the_backend_built(workspace):
    # what crosses the socket: a real backend's plan (covers, binds, user namespace, namespaces)
    import dataclasses
    import json

    from ai_scientist.execution.isolation import plan_mounts

    (workspace / "sub").mkdir()
    plan = plan_mounts([(workspace, "rw"), (workspace / "sub", "ro"), (Path("/usr"), "ro")],
                       workdir=workspace, drop_uid=True, user_ns=(1000, 1000))  # fmt: skip
    plan = dataclasses.replace(plan, namespaces=0x08000000, proc=True)
    spec = ChildSpec(plan, 1_500_000_123, False, ((9, 64), (6, 256)), new_pid_ns=True, netns_fd=7)
    sent = json.loads(json.dumps(spec.to_json()))
    assert "netns_fd" not in sent  # a descriptor travels as SCM_RIGHTS, not as a number
    assert ChildSpec.from_json(sent, netns_fd=7) == spec


def test_a_command_that_cannot_be_watched_is_killed_not_left_running(workspace, monkeypatch):
    # the server started it, but this process has no descriptor left to watch it with
    real = os.pidfd_open

    def no_more_fds(pid, flags=0):
        if pid == os.getpid():
            return real(pid, flags)
        raise OSError(24, "Too many open files")

    _server()
    monkeypatch.setattr(process.os, "pidfd_open", no_more_fds)
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    r = process.supervise(
        ["sh", "-c", "sleep 30", marker],
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin"},
        limits=LIM,
        backend="test",
        display_command=["sh"],
    )
    assert r.exit_code == 127 and "Too many open files" in r.stderr, r.summary()
    monkeypatch.undo()
    # killed with SIGKILL and reaped (or, if the server could not answer, gone with the server):
    # on a loaded machine the signal lands a moment later, so the test waits for it (a command
    # left running keeps its marker and fails the wait)
    wait_until(
        lambda: _marked(marker) == [] and psutil.Process(_server().pid).children() == [],
        "the unwatched command killed and reaped",
    )


@pytest.mark.parametrize("fork_server", [True, False])
def test_descriptors_above_1023_are_watched(workspace, fork_server):
    # a long multi-worker run can hold many descriptors: select() cannot watch one above 1023
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    null = os.open("/dev/null", os.O_RDONLY)
    held = [os.dup(null) for _ in range(1100)]
    try:
        lim = Limits(timeout_s=1, memory_mb=256, pids=64)
        run = dict(cwd=workspace, env={"PATH": "/usr/bin:/bin"}, backend="test", display_command=["sh"])
        done = process.supervise(["sh", "-c", "echo out; exit 3"], limits=LIM, fork_server=fork_server, **run)
        slow = process.supervise(["sh", "-c", "sleep 30"], limits=lim, fork_server=fork_server, **run)
    finally:
        for fd in [*held, null]:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (done.exit_code, done.stdout, done.extra["forked_by"]) == (
        3,
        "out\n",
        "fork_server" if fork_server else "orchestrator",
    )
    assert slow.killed_by == "timeout", slow.summary()

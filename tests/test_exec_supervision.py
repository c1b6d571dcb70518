"""How a local command is supervised (issue 15): a root orchestrator's subprocess backend starts
the command as the init of its own pid namespace with no capability left, without helper
programs; a node's commands share one uid; the supervisor waits on a pidfd and both pipes in one
thread and samples the process tree at backing-off intervals, not in a busy loop; a kill -9'd
orchestrator takes its commands with it."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest
from components import bwrap_or_skip
from waiting import wait_until

from ai_scientist.execution import process
from ai_scientist.execution.base import Limits

LIM = Limits(timeout_s=30, memory_mb=512, pids=64, output_bytes=64 * 1024)


@pytest.fixture
def workspace():
    path = Path(tempfile.mkdtemp(prefix="ai-sci-sup-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _subprocess_executor():
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor

    return SubprocessExecutor(allow_unsafe=os.geteuid() != 0)


def _direct_or_skip():
    from ai_scientist.execution.subprocess_backend import _direct_works

    if os.geteuid() != 0 or not _direct_works():
        pytest.skip("the direct spawn needs a root orchestrator allowed to create namespaces")
    return _subprocess_executor()


INSPECT = textwrap.dedent(
    """
    import json, os
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    print(json.dumps({
        "pid": os.getpid(), "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "caps": {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
        "nnp": status["NoNewPrivs"].strip(),
        "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "ipc", "net")},
    }))
    """
)


@pytest.mark.parametrize("network", [False, True])
def test_direct_spawn_is_init_of_its_namespaces_with_nothing_left(workspace, network):
    ex = _direct_or_skip()
    lim = Limits(timeout_s=30, memory_mb=512, pids=64, network=network)
    r = ex.run(["/usr/bin/python3", "-c", INSPECT], workspace=workspace, limits=lim)
    assert r.ok, r.summary() + r.stderr
    assert r.extra["direct_spawn"] is True
    seen = json.loads(r.stdout)
    uid = r.extra["uid"]
    assert (seen["pid"], seen["uid"], seen["gid"], seen["groups"]) == (1, uid, uid, [])
    assert set(seen["caps"].values()) == {"0000000000000000"}, seen["caps"]
    assert seen["nnp"] == "1"
    assert seen["procs"] == [1]  # a fresh /proc: no host process is visible
    mine = {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "ipc", "net")}
    for name in ("pid", "mnt", "ipc"):
        assert seen["ns"][name] != mine[name], name
    assert (seen["ns"]["net"] == mine["net"]) is network
    # the supervising thread gives its next children the orchestrator's pid namespace again
    assert os.readlink("/proc/thread-self/ns/pid_for_children") == mine["pid"]
    after = subprocess.run(["readlink", "/proc/self/ns/pid"], capture_output=True, text=True)
    assert after.stdout.strip() == mine["pid"]


def test_a_nodes_commands_share_one_uid_and_new_files_are_given_to_it(workspace):
    ex = _direct_or_skip()
    probe = ["/usr/bin/python3", "-c", "import os; print(os.getuid())"]
    first = ex.run(probe, workspace=workspace, limits=LIM)
    uid = int(first.stdout)
    # the orchestrator (root) adds files between commands: the next command may change them
    (workspace / "sub" / "deeper").mkdir(parents=True)
    (workspace / "sub" / "deeper" / "data.txt").write_text("from the orchestrator\n")
    (workspace / "code.py").write_text("print('hi')\n")
    edit = (
        "open('sub/deeper/data.txt', 'a').write('x'); open('code.py', 'w').write('y'); open('sub/new', 'w')"
    )
    second = ex.run(
        ["/usr/bin/python3", "-c", edit + "; import os; print(os.getuid())"], workspace=workspace, limits=LIM
    )
    assert second.ok, second.summary() + second.stderr
    assert int(second.stdout) == uid == second.extra["uid"]
    for p in (workspace / "sub", workspace / "sub" / "deeper", workspace / "sub" / "deeper" / "data.txt"):
        assert p.stat().st_uid == uid, p
    # another node's workspace gets another uid
    other = Path(tempfile.mkdtemp(prefix="ai-sci-sup-test-", dir="/tmp"))
    other.chmod(0o755)
    try:
        assert int(ex.run(probe, workspace=other, limits=LIM).stdout) != uid
    finally:
        shutil.rmtree(other, ignore_errors=True)
    # a workspace whose uid is in use by a running command gets a fresh one
    with ex.owners.claim(workspace.resolve(), None) as busy:
        assert busy == uid
        assert int(ex.run(probe, workspace=workspace, limits=LIM).stdout) != uid


def test_tree_samples_back_off_instead_of_polling(workspace, monkeypatch):
    ex = _subprocess_executor()
    if not ex.caps["pid_namespace"]:
        pytest.skip("no pid namespace here: the tree is scanned instead of walked")
    calls = []
    real_walk = process._walk

    def counting_walk(root: int) -> list[int]:
        calls.append(time.monotonic())
        return real_walk(root)

    monkeypatch.setattr(process, "_walk", counting_walk)
    r = ex.run(["/usr/bin/python3", "-c", "import time; time.sleep(1.5)"], workspace=workspace, limits=LIM)
    assert r.ok, r.summary() + r.stderr
    assert r.peak_memory_mb  # sampled at least once: the command ran for longer than the first interval
    # sample k is due FIRST * (2**k - 1) after the start (capped intervals only make fewer)
    most = math.floor(math.log2(r.duration_s / process.FIRST_SAMPLE_S + 1))
    assert 1 <= len(calls) <= most, (len(calls), most, r.duration_s)


def test_both_pipes_are_read_by_one_thread_exactly(workspace):
    code = (
        "import sys\nfor i in range(300):\n"
        "    sys.stdout.write('o' * 999 + '\\n'); sys.stderr.write('e' * 499 + '\\n')\n"
    )
    r = process.supervise(
        [sys.executable, "-c", code],
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin"},
        limits=LIM,
        backend="test",
        display_command=["code"],
    )
    assert r.ok, r.summary()
    assert (r.stdout_bytes, r.stderr_bytes) == (300_000, 150_000)
    assert r.stdout.startswith("o" * 999) and r.stderr.rstrip().endswith("e" * 499)
    assert "bytes omitted" in r.stdout and len(r.stdout) <= LIM.output_bytes // 2 + 200


def test_uncontained_command_leftovers_are_swept_and_the_pipe_released(workspace):
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    r = process.supervise(
        ["bash", "-c", f"python3 -c 'import time; time.sleep(300)' {marker} & echo started"],
        cwd=workspace,
        env={"PATH": "/usr/bin:/bin"},
        limits=LIM,
        backend="test",
        display_command=["bash"],
        contained=False,
    )
    assert r.ok and r.stdout == "started\n", r.summary()  # returned although the leftover held stdout
    assert not [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


ORCHESTRATOR = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ai_scientist.execution.base import Limits
    backend, ws, marker = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if backend.startswith("subprocess"):
        from ai_scientist.execution.subprocess_backend import SubprocessExecutor as E
    else:
        from ai_scientist.execution.bwrap_backend import BwrapExecutor as E
    import os
    ex = E(allow_unsafe=os.geteuid() != 0)
    ex.fork_server = not backend.endswith("-inproc")  # else the fork server forks it
    code = "import time; open('STARTED', 'w').close(); time.sleep(300)"
    ex.run(["python3", "-c", code, marker], workspace=ws, limits=Limits(timeout_s=300))
    """
)


@pytest.mark.parametrize("backend", ["subprocess", "bwrap", "subprocess-inproc", "bwrap-inproc"])
def test_command_dies_with_a_kill_9d_orchestrator(workspace, backend):
    if backend.startswith("bwrap"):
        bwrap_or_skip()
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    orch = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, backend, str(workspace), marker])
    wait_until(lambda: (workspace / "STARTED").exists() or orch.poll() is not None, "the command started", 60)
    assert orch.poll() is None, "the orchestrator ended before its command started"
    orch.send_signal(signal.SIGKILL)
    orch.wait()

    def left() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]

    try:  # the command dies of its parent's death: a signal that lands later on a busy machine
        wait_until(lambda: not left(), "the command ended with the kill -9'd orchestrator", 5)
    finally:
        for p in left():  # no longer this test's children: the cleanup cannot see them
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def test_without_pidfd_an_exit_and_a_timeout_are_still_seen(workspace, monkeypatch):
    # Linux before 5.3 has no pidfd_open: a thread waiting with WNOWAIT stands in for it
    def no_pidfd(pid, flags=0):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(process.os, "pidfd_open", no_pidfd)
    run = dict(cwd=workspace, env={"PATH": "/usr/bin:/bin"}, backend="test", display_command=["sh"])
    done = process.supervise(["sh", "-c", "echo out; exit 3"], limits=LIM, **run)
    assert (done.exit_code, done.stdout, done.killed_by) == (3, "out\n", None)
    marker = f"aisci_marker_{uuid.uuid4().hex}"
    lim = Limits(timeout_s=1, memory_mb=512, pids=64)
    slow = process.supervise(["sh", "-c", "sleep 300; true", marker], limits=lim, **run)
    assert slow.killed_by == "timeout" and slow.shell_exit_code == 124, slow.summary()
    assert not [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]

"""Hostile programs against every local sandbox backend: each is contained, the reason recorded,
the orchestrator unharmed and no process left running (found by a marker in the command line)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
from components import bwrap_or_skip, docker_or_skip
from waiting import load_scaled, wait_until

from ai_scientist.execution.base import Limits

# "-inproc": the orchestrator forks the commands itself (exec.fork_server: false)
BACKENDS = ["subprocess", "bwrap", "subprocess-inproc", "bwrap-inproc", "docker", "docker-reuse"]
IMAGE = os.environ.get("AI_SCI_SANDBOX_IMAGE", "ai-scientist-sandbox:latest")
SLEEPER = 'python3 -c "import time; time.sleep(300)" {m}'


def _make(name: str):
    if name.endswith("-inproc"):
        ex = _make(name.removesuffix("-inproc"))
        ex.fork_server = False
        return ex
    if name == "subprocess":
        from ai_scientist.execution.subprocess_backend import SubprocessExecutor

        # not root: the backend refuses by default (it cannot protect this user's files, see
        # tests/test_security_sandbox.py); the limits tested here hold in the opted-in mode too
        return SubprocessExecutor(allow_unsafe=os.geteuid() != 0)
    if name == "bwrap":
        from ai_scientist.execution.bwrap_backend import BwrapExecutor

        bwrap_or_skip()
        return BwrapExecutor()
    from ai_scientist.execution.docker_backend import DockerExecutor

    docker_or_skip(IMAGE)
    return DockerExecutor(IMAGE, reuse=name == "docker-reuse")


@pytest.fixture(params=BACKENDS)
def executor(request):
    ex = _make(request.param)
    yield ex
    ex.close()


@pytest.fixture
def workspace():
    # Under /tmp and traversable: a fresh unprivileged uid must be able to reach it.
    path = Path(tempfile.mkdtemp(prefix="ai-sci-exec-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def marker():
    return f"aisci_marker_{uuid.uuid4().hex}"


def survivors(marker: str, wait_s: float = 5.0) -> list[int]:
    """Pids whose command line carries the marker, after waiting up to ``wait_s`` (scaled with the
    machine's load: a kill lands later on a busy machine) for them to go."""
    deadline = time.monotonic() + load_scaled(wait_s)
    while True:
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            try:
                if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
                    found.append(p.pid)
            except psutil.Error:
                continue
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid in found:  # clean up what a failing test left, by pid only
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return found


def orchestrator_ok() -> None:
    assert subprocess.run(["true"]).returncode == 0
    assert len(bytearray(50 * 2**20)) == 50 * 2**20


LIM = Limits(timeout_s=15, memory_mb=512, pids=64, output_bytes=64 * 1024)


def test_fork_bomb_is_contained(executor, workspace, marker):
    # the parent stays alive (sleep) so the bomb grows until a limit stops it
    r = executor.run(
        ["bash", "-c", "bomb(){ bomb|bomb& }; bomb; sleep 30", marker], workspace=workspace, limits=LIM
    )
    assert not r.ok
    assert r.killed_by in ("pids", "timeout"), r.summary()
    assert r.reason
    assert survivors(marker) == []
    orchestrator_ok()


def test_4gib_allocation_is_refused(executor, workspace, marker):
    code = "x = bytearray(4 * 2**30); x[::4096] = b'y' * len(x[::4096]); print('allocated')"
    r = executor.run(["python3", "-c", code, marker], workspace=workspace, limits=LIM)
    assert r.killed_by == "memory", r.summary() + r.stderr[-500:]
    assert "allocated" not in r.stdout
    assert survivors(marker) == []
    orchestrator_ok()


def test_infinite_loop_times_out(executor, workspace, marker):
    lim = Limits(timeout_s=2, memory_mb=512, pids=64)
    r = executor.run(["python3", "-c", "while True: pass", marker], workspace=workspace, limits=lim)
    assert r.killed_by == "timeout"
    assert r.shell_exit_code == 124
    assert "timeout" in r.reason
    assert survivors(marker) == []


def test_one_gib_of_stdout_is_capped_and_killed(executor, workspace, marker):
    code = "import sys\nb = b'x' * 2**20\nfor _ in range(1024): sys.stdout.buffer.write(b)\nprint('finished')"
    r = executor.run(["python3", "-c", code, marker], workspace=workspace, limits=LIM)
    assert r.killed_by == "output", r.summary()
    assert r.stdout_bytes < 2**30
    assert len(r.stdout) <= LIM.output_bytes + 200  # head + tail + marker line
    assert "bytes omitted" in r.stdout
    assert "finished" not in r.stdout
    assert survivors(marker) == []


@pytest.fixture
def listener():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    accepted: list[str] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                accepted.append("yes")
                conn.close()
            except OSError:
                continue

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    t.join()
    srv.close()


CONNECT = (
    "import socket,sys\ns = socket.socket(); s.settimeout(3)\n"
    "try:\n    s.connect(('127.0.0.1', int(sys.argv[1]))); print('CONNECTED')\n"
    "except OSError as e:\n    print('REFUSED', type(e).__name__)\n"
)


def test_network_off_refuses_host_listener(executor, workspace, marker, listener):
    port, accepted = listener
    r = executor.run(["python3", "-c", CONNECT, str(port), marker], workspace=workspace, limits=LIM)
    assert "REFUSED" in r.stdout, r.stdout + r.stderr
    assert "CONNECTED" not in r.stdout
    # a control connection from the host: the listener accepts in arrival order, so once it has
    # the control one, a connection the sandbox had made would have been accepted before it
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        wait_until(lambda: accepted, "the listener accepted the host's control connection", 30)
    assert accepted == ["yes"]


def test_network_on_reaches_host_listener(executor, workspace, marker, listener):
    port, accepted = listener
    lim = Limits(timeout_s=15, memory_mb=512, pids=64, network=True)
    r = executor.run(["python3", "-c", CONNECT, str(port), marker], workspace=workspace, limits=lim)
    assert "CONNECTED" in r.stdout, r.stdout + r.stderr


def test_write_outside_workspace_fails(executor, workspace, marker):
    if executor.name == "subprocess" and not executor.caps["drop_uid"]:
        pytest.skip("the subprocess backend protects the host filesystem only when run as root (uid drop)")
    outside = Path(tempfile.mkdtemp(prefix="ai-sci-outside-", dir="/tmp"))
    outside.chmod(0o755)
    try:
        target = outside / "pwned"
        etc_target = Path(f"/etc/{marker}")
        code = (
            "import sys\nfor p in sys.argv[1:3]:\n    try:\n        open(p, 'w').write('x'); print('WROTE', p)\n"
            "    except OSError as e:\n        print('DENIED', p, type(e).__name__)\n"
            "open('inside.txt', 'w').write('ok')\n"
        )
        r = executor.run(
            ["python3", "-c", code, str(target), str(etc_target), marker], workspace=workspace, limits=LIM
        )
        assert r.ok, r.summary() + r.stderr
        assert "WROTE" not in r.stdout
        assert not target.exists() and not etc_target.exists()
        assert (workspace / "inside.txt").read_text() == "ok"
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_host_secret_is_not_visible(executor, workspace, marker, monkeypatch):
    secret = "sk-fake-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("AI_SCI_TEST_SECRET", secret)
    code = "import os; print(sorted(os.environ)); print(repr(dict(os.environ)))"
    r = executor.run(
        ["python3", "-c", code, marker],
        workspace=workspace,
        limits=LIM,
        env={"MY_API_KEY": secret, "SEED": "3"},
    )
    assert r.ok, r.summary() + r.stderr
    assert secret not in r.stdout + r.stderr
    assert "OPENAI_API_KEY" not in r.stdout
    assert "'SEED': '3'" in r.stdout
    assert r.extra["dropped_env"] == ["MY_API_KEY"]


def test_background_children_killed_at_timeout(executor, workspace, marker):
    s = SLEEPER.format(m=marker)
    script = f"{s} & setsid {s} & ( setsid {s} & ) ; nohup {s} >/dev/null 2>&1 & {s}"
    lim = Limits(timeout_s=2, memory_mb=512, pids=64)
    r = executor.run(["bash", "-c", script], workspace=workspace, limits=lim)
    assert r.killed_by == "timeout"
    assert survivors(marker) == []
    orchestrator_ok()


def test_background_children_of_a_finished_command_are_killed(executor, workspace, marker):
    s = SLEEPER.format(m=marker)
    r = executor.run(
        ["bash", "-c", f"( setsid {s} & ) ; {s} & echo started"], workspace=workspace, limits=LIM
    )
    assert r.ok and "started" in r.stdout
    assert survivors(marker) == []


def test_workspace_is_writable_and_result_is_complete(executor, workspace):
    r = executor.run("echo out; echo err >&2; echo data > made.txt; exit 3", workspace=workspace, limits=LIM)
    assert r.exit_code == 3 and not r.ok and r.killed_by is None
    assert r.stdout == "out\n" and r.stderr == "err\n"
    assert r.stdout_bytes == 4 and r.stderr_bytes == 4
    assert (workspace / "made.txt").read_text() == "data\n"
    d = r.to_dict()
    assert d["backend"] == executor.name and d["ok"] is False


def test_limit_reason_names_refused_allocations_and_forks():
    from ai_scientist.execution.base import limit_reason

    lim = Limits(memory_mb=512, pids=64)
    bash = (
        "bash: fork: retry: Resource temporarily unavailable\nbash: fork: Resource temporarily unavailable\n"
    )
    assert limit_reason(bash, 254, lim) == ("pids", "a new process was refused by the process limit (64)")
    assert limit_reason("Traceback ...\nMemoryError\n", 1, lim)[0] == "memory"
    assert limit_reason(bash, 0, lim) is None  # a command that succeeded was not stopped
    assert limit_reason("ZeroDivisionError\n", 1, lim) is None

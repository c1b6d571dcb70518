"""bwrap and the subprocess backend under a root orchestrator (issue 15): with the network off, a
node's commands share one empty network namespace made by the orchestrator (loopback up, nothing
else), instead of one made and torn down per command (by bwrap, or by the forked child's
``unshare``); another node's uid gets another; the thread that
started a command is back in the orchestrator's namespace; network on is the host's."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from components import bwrap_or_skip

from ai_scientist.execution.base import Limits

LIM = Limits(timeout_s=30, memory_mb=512, pids=64)
SHOW = (
    "import os, socket\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
    "socket.create_connection(s.getsockname(), timeout=3).close()\n"  # the loopback is up
    "print(os.readlink('/proc/self/ns/net'))\n"
    "print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))\n"
)


@pytest.fixture(params=["bwrap", "subprocess"])
def executor(request):
    from ai_scientist.execution.bwrap_backend import BwrapExecutor
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor

    if os.geteuid() != 0:
        pytest.skip("needs a root orchestrator (the namespace is made by the orchestrator)")
    if request.param == "bwrap":
        bwrap_or_skip()
        ex = BwrapExecutor()
    else:
        ex = SubprocessExecutor()
    if ex.networks is None:
        pytest.skip("this host refuses the orchestrator a network namespace")
    yield ex
    ex.close()


@pytest.fixture
def top():
    path = Path(tempfile.mkdtemp(prefix="ai-sci-netns-test-", dir="/tmp"))  # 0700, as a run dir
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _show(executor, ws: Path, limits: Limits = LIM) -> tuple[str, str]:
    ws.mkdir(exist_ok=True)
    r = executor.run(["python3", "-c", SHOW], workspace=ws, limits=limits)
    assert r.exit_code == 0, r.summary() + r.stderr
    assert r.extra["node_netns"] is (not limits.network)
    ns, interfaces = r.stdout.split("\n")[:2]
    return ns, interfaces


def test_a_nodes_commands_share_one_empty_namespace(executor, top):
    host = os.readlink("/proc/thread-self/ns/net")
    first, interfaces = _show(executor, top / "a")
    again, _ = _show(executor, top / "a")
    other, _ = _show(executor, top / "b")
    assert first == again != host
    assert other not in (first, host)  # another node (another uid): another namespace
    assert interfaces == "['lo']"
    assert os.readlink("/proc/thread-self/ns/net") == host  # the starting thread went back


def test_network_on_is_the_hosts(executor, top):
    ns, _ = _show(executor, top / "a", Limits(timeout_s=30, memory_mb=512, pids=64, network=True))
    assert ns == os.readlink("/proc/self/ns/net")


def test_held_namespaces_are_bounded(top):
    from ai_scientist.execution.netns import NodeNetworks

    if os.geteuid() != 0:
        pytest.skip("making a network namespace needs CAP_SYS_ADMIN")
    nets = NodeNetworks(keep=2)
    seen = []
    for key in (1, 2, 3):
        with nets.entered(key):
            seen.append(os.readlink("/proc/thread-self/ns/net"))
    assert len(set(seen)) == 3
    assert list(nets._held) == [2, 3]  # key 1, the least recently used, was let go
    nets.close()
    assert not nets._held

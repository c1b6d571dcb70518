"""A test that times out stops what it started (tests/conftest.py ``pytest_runtest_call``).

Three timed-out tests of one suite had left their ``drive_run.py --hang`` processes running for
minutes after it ended. Here an inner pytest session (this directory's conftest) runs a test that
starts a process with a child of its own and then hangs until pytest-timeout fails it; both
processes must be gone when the session ends, and they are not without the conftest.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from waiting import load_scaled

HERE = Path(__file__).parent
INNER = """
import subprocess, sys, time
from pathlib import Path

def test_hangs_with_a_process_tree():
    grandchild = "import time; time.sleep(300)"
    child = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', %r]);"
        "print(p.pid, flush=True); time.sleep(300)" % grandchild], stdout=subprocess.PIPE, text=True)
    pids = [child.pid, int(child.stdout.readline())]
    Path("pids").write_text(" ".join(map(str, pids)))
    child.wait()  # hangs: pytest-timeout fails the test
"""


def _inner_session(work: Path, *extra: str) -> list[psutil.Process]:
    (work / "test_inner.py").write_text(INNER)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",  # long enough for the tree to start on a busy machine before the timeout hits
            f"timeout={load_scaled(5):.0f}",
            *extra,
            "test_inner.py",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Timeout" in proc.stdout, proc.stdout[-2000:]
    out = []
    for pid in map(int, (work / "pids").read_text().split()):
        try:
            out.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return [p for p in out if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.timeout(300)
def test_a_timed_out_test_leaves_no_process_behind(tmp_path):
    for name in ("conftest.py", "components.py", "waiting.py"):
        shutil.copy(HERE / name, tmp_path / name)
    assert _inner_session(tmp_path) == []

    # the control: the same session without the conftest leaves both running
    bare = tmp_path / "bare"
    bare.mkdir()
    left = _inner_session(bare, "--noconftest")
    try:
        assert len(left) == 2, left
    finally:
        for p in left:
            p.kill()
        psutil.wait_procs(left, timeout=10)

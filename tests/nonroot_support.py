"""Running a selection of this tree's tests as an unprivileged user (uid 65534), for the suites
that must hold when the orchestrator is not root.

The interpreter is the system-python venv that ``scripts/setup.sh --with-test-tools`` builds in a
world-readable directory (``$AI_SCI_TMP/nonroot``, per checkout: ``tests/ci_paths.py``); it provides only the dependencies, the
code under test (and its test support, testsupport/) comes from this tree through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from ci_paths import nonroot_dir

ROOT = Path(__file__).resolve().parents[1]
NONROOT_DIR = nonroot_dir()
UID = 65534  # nobody


def pytest_as_nobody(
    prefix: str,
    pytest_args: Callable[[Path], list[str]],
    *,
    timeout: float,
    prepare: Callable[[Path], None] | None = None,
    code_root: Path = ROOT,
) -> str:
    """Run pytest as uid 65534 in a fresh world-writable work directory; returns its output.

    Skips (with the reason) when already unprivileged, without ``setpriv`` or without the venv;
    ``pytest_args(work)`` gives the arguments after ``-m pytest``; ``prepare(work)`` may copy files
    in first; ``code_root`` is the tree on ``PYTHONPATH``. Fails the calling test when the inner run
    fails.
    """
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the suite covers this user directly")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is missing, so the test cannot drop to another uid")
    py = NONROOT_DIR / "venv" / "bin" / "python"
    if not py.exists():
        pytest.skip(f"no non-root test venv at {py}: run scripts/setup.sh --with-test-tools")
    work = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        if prepare is not None:
            prepare(work)
        os.chmod(work, 0o777)  # the unprivileged run writes pytest's files here
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", "TMPDIR": "/tmp",
               # the tree's test support too (testsupport/: the scripted answers of security_attack)
               "PYTHONPATH": os.pathsep.join([str(code_root), str(Path(code_root) / "testsupport")]),
               "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        proc = subprocess.run(
            [setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups", str(py), "-m", "pytest",
             *pytest_args(work)],
            cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out

"""The security suite again with the orchestrator running as an unprivileged user (uid 65534).

As root the local backends drop each command to a fresh uid; as an ordinary user they cannot:
bwrap then relies on its user namespace, and the subprocess backend refuses to start (exit 2,
naming ``exec.allow_unsafe_sandbox``) because the command would run as the orchestrator's user.
This runs ``tests/test_security_sandbox.py`` and ``tests/test_security_pipeline.py`` in place
under ``setpriv`` with the system-python venv that ``scripts/setup.sh --with-test-tools`` builds
in ``/tmp/ai-scientist-nonroot`` (its dependencies; the code under test comes from this tree).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NONROOT_DIR = Path(os.environ.get("AI_SCI_NONROOT_DIR", "/tmp/ai-scientist-nonroot"))
UID = 65534  # nobody


def _unreadable_for_others(path: Path) -> Path | None:
    for p in [path, *path.parents]:
        if not p.stat().st_mode & 0o005:
            return p
    return None


def test_security_suite_as_an_unprivileged_user():
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: tests/test_security_*.py cover this user directly")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is missing, so the test cannot drop to another uid")
    py = NONROOT_DIR / "venv" / "bin" / "python"
    if not py.exists():
        pytest.skip(f"no non-root test venv at {py}: run scripts/setup.sh --with-test-tools")
    blocked = _unreadable_for_others(ROOT / "tests")
    if blocked is not None:
        pytest.skip(f"{blocked} is not readable by other users, so uid {UID} cannot import this tree")
    work = Path(tempfile.mkdtemp(prefix="ai-sci-sec-nonroot-", dir="/tmp"))
    try:
        os.chmod(work, 0o777)  # the unprivileged run writes pytest's temp files here
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", "TMPDIR": "/tmp",
               "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        tests = [str(ROOT / "tests" / f) for f in ("test_security_sandbox.py", "test_security_pipeline.py")]
        proc = subprocess.run(
            [setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups", str(py), "-m", "pytest",
             "-q", "-rs", "-p", "no:cacheprovider", "--noconftest", "--rootdir", str(work), "-c", os.devnull,
             "--basetemp", str(work / "t"), *tests],
            cwd=work, env=env, capture_output=True, text=True, timeout=1500,
        )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    passed = int(re.search(r"(\d+) passed", out).group(1))
    # the control attack, the bwrap attack, the refusals (API, exec CLI, run CLI), the unsafe
    # opt-in and the bwrap pipeline run, at least
    assert passed >= 6, out[-3000:]
    skips = re.findall(r"SKIPPED \[\d+\] [^\n]*", out)
    # expected skips only: the root-only cases, and docker when its socket is not ours to use
    allowed = ("not root", "root:", "docker backend unavailable", "bwrap unusable")
    assert all(any(a in s for a in allowed) for s in skips), skips

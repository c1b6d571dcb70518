"""The hostile-program suite again, for the subprocess and bwrap sandboxes, with the orchestrator
running as an unprivileged user (uid 65534) instead of root.

As root the subprocess backend drops each command to a fresh uid and cuts the network with a
plain network namespace; as an ordinary user it cannot, and uses an unprivileged user namespace
(``unshare -r``) instead. Most users run as themselves, so that path must hold too. The test
runs ``tests/test_exec_hostile.py`` under ``setpriv`` with the venv that ``scripts/setup.sh
--with-test-tools`` builds from the system python in a world-readable directory (the main venv's
interpreter may sit where an unprivileged user cannot read it).
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


def test_hostile_suite_as_an_unprivileged_user():
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: tests/test_exec_hostile.py covers this user directly")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is missing, so the test cannot drop to another uid")
    py = NONROOT_DIR / "venv" / "bin" / "python"
    if not py.exists():
        pytest.skip(f"no non-root test venv at {py}: run scripts/setup.sh --with-test-tools")
    work = Path(tempfile.mkdtemp(prefix="ai-sci-nonroot-", dir="/tmp"))
    try:
        shutil.copy(ROOT / "tests" / "test_exec_hostile.py", work)
        os.chmod(work, 0o777)  # the unprivileged run writes pytest's files here
        # the code under test is this tree (the venv only provides the dependencies)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", "TMPDIR": "/tmp",
               "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        proc = subprocess.run(
            [setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups", str(py), "-m", "pytest",
             "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(work), "-k", "subprocess or bwrap",
             str(work / "test_exec_hostile.py"),
             "-c", os.devnull],
            cwd=work, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    passed = int(re.search(r"(\d+) passed", out).group(1))
    assert passed >= 20, out[-3000:]
    # the only expected skip: without root the subprocess backend cannot drop to another uid,
    # so it does not claim to protect the host filesystem (bwrap does, and is tested)
    # (its presence also shows the suite really ran without root); bwrap may be unusable for
    # unprivileged users on a host that forbids user namespaces, which the skip reason says
    skips = re.findall(r"SKIPPED \[\d+\] [^\n]*", out)
    assert any("only when run as root" in s for s in skips), out[-3000:]
    assert all("only when run as root" in s or "bwrap unusable" in s for s in skips), skips

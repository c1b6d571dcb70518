"""The security suite again with the orchestrator running as an unprivileged user (uid 65534).

As root the local backends drop each command to a fresh uid; as an ordinary user they cannot:
bwrap then relies on its user namespace, and the subprocess backend refuses to start (exit 2,
naming ``exec.allow_unsafe_sandbox``) because the command would run as the orchestrator's user.
This runs ``tests/test_security_sandbox.py`` and ``tests/test_security_pipeline.py`` under
``setpriv`` with the system-python venv that ``scripts/setup.sh --with-test-tools`` builds in
``$AI_SCI_TMP/nonroot`` (``tests/ci_paths.py``) (its dependencies; the code under test comes from this tree, or from
a world-readable copy of it when the checkout sits below a directory other users cannot enter).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from nonroot_support import ROOT, pytest_as_nobody


def _unreadable_for_others(path: Path) -> Path | None:
    for p in [path, *path.parents]:
        if not p.stat().st_mode & 0o005:
            return p
    return None


def _readable_tree() -> tuple[Path, Path | None]:
    """This tree if uid 65534 can read it, else a world-readable copy of what the suite needs
    (a clone under a 0700 directory, e.g. ``mktemp -d``, would otherwise skip the whole suite)."""
    if _unreadable_for_others(ROOT / "tests") is None:
        return ROOT, None
    copy = Path(tempfile.mkdtemp(prefix="ai-sci-sec-tree-", dir="/tmp"))
    for part in ("ai_scientist", "examples", "tests", "testsupport"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy, copy


@pytest.mark.timeout(1800)  # the inner run's own limit is 1500 s
def test_security_suite_as_an_unprivileged_user():
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: tests/test_security_*.py cover this user directly")
    tree, cleanup = _readable_tree()
    assert _unreadable_for_others(tree / "tests") is None
    tests = [str(tree / "tests" / f) for f in ("test_security_sandbox.py", "test_security_pipeline.py")]
    try:
        out = pytest_as_nobody(
            "ai-sci-sec-nonroot-",
            lambda work: ["-q", "-rs", "-p", "no:cacheprovider", "--noconftest", "--rootdir", str(work),
                          "-c", os.devnull, "--basetemp", str(work / "t"), *tests],
            timeout=1500,
            code_root=tree,
        )  # fmt: skip
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
    passed = int(re.search(r"(\d+) passed", out).group(1))
    # the control attack, the bwrap attack, the refusals (API, exec CLI, run CLI), the unsafe
    # opt-in and the bwrap pipeline run, at least
    assert passed >= 6, out[-3000:]
    skips = re.findall(r"SKIPPED \[\d+\] [^\n]*", out)
    # expected skips only: the root-only cases, and docker when its socket is not ours to use
    allowed = ("not root", "root:", "docker backend unavailable", "bwrap unusable")
    assert all(any(a in s for a in allowed) for s in skips), skips

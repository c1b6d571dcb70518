"""A grader's hidden data has other copies on the host: the ``.git`` of a repository that holds the
grader (its objects are the committed files), and for a bundled bench task the bench's package.
Every executor made for a graded run hides them too (``registry.grader_hidden``): the subprocess
backend sees host paths, so it covers them; bwrap binds no such tree at all (both checked)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from components import backend_or_skip
from pipeline_support import ROOT

from ai_scientist.base.config import load_config
from ai_scientist.execution.base import Limits
from ai_scientist.execution.registry import grader_hidden, make_executor

LIM = Limits(timeout_s=30, memory_mb=512, pids=64)
BENCH = ROOT / "ai_scientist" / "benchsuite"


PRIVATE_TMP = ("/tmp/", "/var/tmp/", "/dev/shm/")  # every sandbox gets its own: hidden anyway


def _visible_place() -> Path:
    """Where a world-readable folder stays visible to a sandboxed command: the checkout's
    test-artifacts/, unless the checkout itself is under a private tmp (a CI clone in /tmp)."""
    if not str(ROOT).startswith(PRIVATE_TMP):
        return ROOT / "test-artifacts"
    return Path("/var/lib/ai-scientist-tests")


@pytest.fixture
def repo():
    """A world-readable git repository outside any private tmp whose grader's labels are
    committed: what the sandbox hides there is hidden by the grader rule, nothing else."""
    base = _visible_place() / f"graderrepo-{uuid.uuid4().hex[:8]}"
    grader = base / "task" / "grader"
    grader.mkdir(parents=True)
    (grader / "labels.txt").write_text("1 0 1 1\n")
    (base / "README.md").write_text("public\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(base)]
    subprocess.run([*git[:5], "init", "-q", str(base)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "task"], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(base.parent)], check=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)
    with contextlib.suppress(OSError):
        base.parent.rmdir()  # when empty


@pytest.fixture
def workspace():
    path = Path(tempfile.mkdtemp(prefix="ai-sci-hidden-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _seen(backend: str, grader: Path, workspace: Path, *paths: Path) -> dict[str, list[str]]:
    cfg = load_config(overrides=[f"exec.backend={backend}", f"grader.dir={grader}"])
    ex = make_executor(cfg)
    try:
        out = {}
        for p in paths:
            r = ex.run(["ls", "-A", str(p)], workspace=workspace, limits=LIM)
            out[str(p)] = r.stdout.split() if r.ok else [f"error: {r.stderr.strip()}"]
        return out
    finally:
        ex.close()


def _gone(listing: list[str]) -> bool:
    return listing == [] or (len(listing) == 1 and "No such file" in listing[0])


def test_the_hidden_copies_are_named():
    grader = BENCH / "tasks" / "digits" / "grader"
    hidden = grader_hidden(grader)
    assert hidden[0] == str(grader.resolve()) and str(BENCH.resolve()) in hidden
    if (ROOT / ".git").exists():  # a checkout: its objects hold the bundled labels too
        assert str((ROOT / ".git").resolve()) in hidden


@pytest.mark.parametrize("backend", ["subprocess", "bwrap"])
def test_a_repositorys_objects_and_the_bench_package_are_hidden(backend, repo, workspace):
    backend_or_skip(backend)
    grader = repo / "task" / "grader"
    assert sorted(p.name for p in (repo / ".git").iterdir())  # the host sees them
    seen = _seen(backend, grader, workspace, repo / ".git", grader, repo)
    assert _gone(seen[str(repo / ".git")]) and _gone(seen[str(grader)]), seen
    if backend == "subprocess":  # host paths stay visible there: the rest of the repository is
        assert not str(repo).startswith(PRIVATE_TMP) and "README.md" in seen[str(repo)], seen
    bundled = BENCH / "tasks" / "digits" / "grader"
    seen = _seen(backend, bundled, workspace, BENCH, bundled)
    # the package's cover hides the grader inside it: an empty folder, or none at all
    assert _gone(seen[str(BENCH)]) and _gone(seen[str(bundled)]), seen

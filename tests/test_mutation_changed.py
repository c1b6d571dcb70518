"""scripts/mutation.sh's change detection, CI's base file and time budget (docs/testing.md, "In CI").

CI mutates only the core modules whose code or focused tests changed since the commit their score
was measured on (.ci/mutation-base). A detection that silently selects nothing would turn the step
into a green no-op, so it is run here on real git repositories; no mutant is run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "mutation.sh"

if shutil.which("git") is None:  # pragma: no cover - git is a dependency of the whole project
    pytest.skip("git is not installed", allow_module_level=True)


def module_map() -> dict[str, list[str]]:
    """The core modules and their focused tests, as the script itself lists them."""
    out = subprocess.run(
        ["bash", str(SCRIPT), "--modules"], capture_output=True, text=True, check=True
    ).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return {row[0]: row[1:] for row in rows}


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def run_script(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MUTATION_")}
    full.update(env)
    return subprocess.run(
        ["bash", str(repo / "scripts" / "mutation.sh"), *args], capture_output=True, text=True, env=full
    )


def selected(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.split()


@pytest.fixture
def project(tmp_path):
    """A git repository laid out like this one: the script, every core module and focused test."""
    repo = tmp_path / "proj"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPT, repo / "scripts" / "mutation.sh")
    modules = module_map()
    files = {f"ai_scientist/{m}" for m in modules} | {t for tests in modules.values() for t in tests}
    for rel in sorted(files) + ["README.md", "ai_scientist/other.py"]:
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\n")
    git(repo, "init", "-q")
    first = commit_all(repo, "first")
    return repo, modules, first


def expected_for(modules: dict[str, list[str]], changed: set[str]) -> list[str]:
    """The modules whose source or one of whose focused tests is among the changed files."""
    return [m for m, tests in modules.items() if ({f"ai_scientist/{m}", *tests} & changed)]


def test_changed_selects_the_modules_whose_code_or_focused_tests_changed(project):
    repo, modules, first = project
    names = list(modules)
    code_changed = names[0]
    # a focused test of another module that no third module shares, so each pick means one thing
    owners: dict[str, list[str]] = {}
    for m, tests in modules.items():
        for t in tests:
            owners.setdefault(t, []).append(m)
    test_changed = next(
        t for m in names[1:] for t in modules[m] if owners[t] == [m] and code_changed not in owners[t]
    )
    for rel in (f"ai_scientist/{code_changed}", test_changed, "README.md", "ai_scientist/other.py"):
        (repo / rel).write_text((repo / rel).read_text() + "changed = True\n")
    commit_all(repo, "second")

    changed = set(git(repo, "diff", "--name-only", first, "HEAD").split())
    want = expected_for(modules, changed)
    assert code_changed in want and owners[test_changed][0] in want
    assert 0 < len(want) < len(modules)  # the selection discriminates
    got = run_script(repo, "--changed", first, "--list")
    assert selected(got) == want
    for m in want:  # every pick says why
        assert re.search(rf"\[mutation\] {re.escape(m)} selected: \S+ changed since {first}", got.stderr)

    # nothing changed since HEAD: an empty selection, said so, exit 0 without running mutmut
    assert selected(run_script(repo, "--changed", "HEAD", "--list")) == []
    none = run_script(repo, "--changed", "HEAD")
    assert none.returncode == 0 and "no core module or its focused tests changed since HEAD" in none.stdout

    # an uncommitted change to a focused test counts too (the diff is against the work tree)
    edit = modules[names[-1]][0]
    (repo / edit).write_text("weakened = True\n")
    assert selected(run_script(repo, "--changed", "HEAD", "--list")) == expected_for(modules, {edit})


def test_a_mutant_declared_equivalent_selects_its_module(project):
    """Listing a mutant in docs/testing.md's "Equivalent mutants" raises its module's score with
    no code change, so it is a change to that module."""
    repo, modules, _ = project
    names = list(modules)
    doc = repo / "docs" / "testing.md"
    doc.parent.mkdir()
    doc.write_text("# Testing\n\n## Equivalent mutants\n\n- none yet\n")
    before = commit_all(repo, "docs")
    target = names[3]
    dotted = "ai_scientist." + target.removesuffix(".py").replace("/", ".")
    doc.write_text(doc.read_text() + f"- `{dotted}.x_f__mutmut_3` (line 9): the same either way.\n")
    commit_all(repo, "an equivalent mutant")
    got = run_script(repo, "--changed", before, "--list")
    assert selected(got) == [target]
    assert (
        f"{target} selected: its equivalent mutants in docs/testing.md changed since {before}" in got.stderr
    )
    # a docs change that names no module's mutant selects nothing
    doc.write_text(doc.read_text() + "Some prose about `context/packer.py`.\n")
    assert selected(run_script(repo, "--changed", "HEAD", "--list")) == []


def test_ci_reads_each_modules_base_from_the_base_file(project):
    repo, modules, first = project
    names = list(modules)
    for m in names:
        (repo / "ai_scientist" / m).write_text("v2 = 2\n")
    second = commit_all(repo, "second: every module's code")
    # measured before the change -> selected; measured on the changed commit -> not; no line -> selected
    old, new, unlisted = names[0], names[1], names[2]
    lines = [f"{m} {second}" for m in names if m not in (old, unlisted)] + [f"{old} {first}"]
    (repo / ".ci").mkdir()
    (repo / ".ci" / "mutation-base").write_text("# comment\n\n" + "\n".join(lines) + "\n")
    got = run_script(repo, "--ci", "--list")
    assert set(selected(got)) == {old, unlisted} and new not in got.stdout
    assert f"{unlisted} selected: .ci/mutation-base has no line for it" in got.stderr

    # MUTATION_BASE replaces the file for every module (e.g. a merge base in a branch's CI)
    assert selected(run_script(repo, "--ci", "--list", MUTATION_BASE=first)) == names
    assert selected(run_script(repo, "--ci", "--list", MUTATION_BASE=second)) == []


@pytest.mark.parametrize(
    "setup, message",
    [
        ("missing", ".ci/mutation-base is missing"),
        ("not-a-commit", "base 'deadbeef' is not a commit"),
        ("unknown-module", "bad line 'nope/x.py"),
        ("env-not-a-commit", "base 'no-such-rev' is not a commit"),
    ],
)
def test_a_base_that_cannot_be_used_is_an_error_not_an_empty_selection(project, setup, message):
    repo, modules, _ = project
    env = {}
    if setup != "missing":
        (repo / ".ci").mkdir()
        line = {"not-a-commit": f"{next(iter(modules))} deadbeef", "unknown-module": "nope/x.py HEAD"}.get(
            setup, ""
        )
        (repo / ".ci" / "mutation-base").write_text(line + "\n")
    if setup == "env-not-a-commit":
        env["MUTATION_BASE"] = "no-such-rev"
    got = run_script(repo, "--ci", "--list", **env)
    assert got.returncode == 2 and got.stdout == ""
    assert message in got.stderr


def recorded_scores(doc: str) -> dict[str, tuple[str, int]]:
    """docs/testing.md's Scores table: module -> (commit, seconds the measurement took)."""
    scores = doc.split("\n## Scores\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, int]] = {}
    for line in scores.splitlines():
        m = re.match(r"\| `([^`]+)` \| `([0-9a-f]{7,40})` \|.*\| (\d+)m(\d\d)s \|$", line)
        if m:
            rows.setdefault(m.group(1), (m.group(2), int(m.group(3)) * 60 + int(m.group(4))))
    return rows


def test_a_module_that_does_not_fit_the_budget_is_skipped_with_a_line_not_silently(project):
    pytest.importorskip("mutmut")  # the script checks it is installed before the budget loop
    repo, modules, first = project
    names = list(modules)
    for m in names:
        (repo / "ai_scientist" / m).write_text("v2 = 2\n")
    # the times the budget is judged by: this repository's docs/testing.md (other tables name
    # the modules too), so the order and the figures come from its Scores table
    (repo / "docs").mkdir()
    doc = (REPO / "docs" / "testing.md").read_text()
    (repo / "docs" / "testing.md").write_text(doc)
    secs = {m: recorded_scores(doc)[m][1] for m in names}
    budget = min(secs.values()) - 1
    got = run_script(repo, "--changed", first, MUTATION_BUDGET=str(budget), MUTATION_PYTHON=sys.executable)
    assert got.returncode == 0, got.stdout + got.stderr
    order = sorted(names, key=lambda m: secs[m])  # shortest first: the most modules fit
    assert f"[mutation] budget {budget}s for: " + " ".join(order) in got.stdout
    skips = re.findall(r"^\[mutation\] SKIPPED (\S+): last measured (\d+)s, ", got.stdout, flags=re.M)
    assert skips == [(m, str(secs[m])) for m in order]
    for m in names:
        assert f"run it alone: scripts/mutation.sh {m}" in got.stdout
    assert f"Not measured ({len(names)}), not counted as a failure:" in got.stdout
    assert "mutmut run" not in got.stdout
    bad = run_script(repo, "--changed", first, MUTATION_BUDGET="8m")
    assert bad.returncode == 2 and "MUTATION_BUDGET must be a number of seconds" in bad.stderr


def test_the_base_file_names_the_commit_of_each_score_in_the_docs():
    """.ci/mutation-base and docs/testing.md's Scores table are updated together: a re-measured
    score with a stale base would make CI re-mutate it forever, a moved base with a stale score
    would let a change since the measurement go unmutated."""
    modules = module_map()
    base = {}
    for line in (REPO / ".ci" / "mutation-base").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            module, commit = line.split()
            base[module] = commit
    assert set(base) == set(modules)
    rows = recorded_scores((REPO / "docs" / "testing.md").read_text())
    for module, commit in base.items():
        assert module in rows, f"docs/testing.md's Scores table has no row for {module}"
        assert commit.startswith(rows[module][0]), (
            f"{module}: base {commit}, scores measured on {rows[module][0]}"
        )
        assert rows[module][1] > 0
    if (REPO / ".git").exists() and git(REPO, "rev-parse", "--is-shallow-repository").strip() == "false":
        for commit in set(base.values()):
            assert git(REPO, "cat-file", "-t", commit).strip() == "commit"

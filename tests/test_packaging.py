"""A plain (non-editable) install ships every prompt template and works outside the repository.

Builds the wheel from a copy of the tracked files (no network: the venv's own
setuptools, ``--no-build-isolation``), checks that every template under
``ai_scientist/prompt`` is inside it, unpacks it and, from a directory that is
not the repository, renders a phase prompt and a reporting prompt with the
unpacked package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _copy_tracked(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(
        b"\0"
    )
    for raw in filter(None, files):
        rel = raw.decode()
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():  # deleted in the working tree
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out, follow_symlinks=False)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to know the tracked files")
    try:
        import setuptools
    except ImportError:
        pytest.skip("setuptools is not installed in this environment (scripts/setup.sh installs it)")
    major = int(setuptools.__version__.split(".")[0])
    if major < 77:
        pytest.skip(f"setuptools {setuptools.__version__} < 77 (pyproject's build requirement)")
    src = tmp_path_factory.mktemp("src")
    _copy_tracked(src)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (whl,) = out.glob("ai_scientist-*.whl")
    return whl


def test_wheel_contains_every_prompt_template(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = [
        p.relative_to(ROOT).as_posix() for p in (ROOT / "ai_scientist" / "prompt").rglob("*") if p.is_file()
    ]
    assert len(templates) > 40
    missing = [t for t in templates if t not in names]
    assert not missing, f"not in the wheel: {missing}"
    assert "ai_scientist/reporting/viewer_template.html" in names
    # serve's page: its one script and stylesheet ship with the package (no CDN)
    static = [p.relative_to(ROOT).as_posix() for p in (ROOT / "ai_scientist" / "serve" / "static").iterdir()]
    assert static and not [s for s in static if s not in names], static
    # the bench's bundled tasks (ai-scientist bench list) ship whole: idea, data, grader, baseline
    tasks = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "ai_scientist" / "benchsuite" / "tasks").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert len({t.split("/")[3] for t in tasks}) >= 6 and not [t for t in tasks if t not in names]
    # the test support is a package of its own (testsupport/): no module of it, under any name
    support = {p.name for p in (ROOT / "testsupport" / "ai_scientist_testing").glob("*.py")}
    assert "scripted.py" in support
    shipped_tests = sorted(n for n in names if n.rsplit("/", 1)[-1] in support - {"__init__.py"})
    shipped_tests += [n for n in names if "testing" in n.split("/")[0] or "/testing/" in n]
    assert not shipped_tests, f"test support shipped to users: {shipped_tests}"


def test_unpacked_wheel_renders_prompts_outside_the_repository(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import ai_scientist, sys\n"
        "from ai_scientist.base.templates import prompt_dir, render\n"
        "from ai_scientist.reporting import prompts\n"
        f"assert ai_scientist.__file__.startswith({str(site)!r}), ai_scientist.__file__\n"
        f"assert str(prompt_dir()).startswith({str(site)!r}), prompt_dir()\n"
        "print(render('llm/json_instruction.j2', schema='{}')[:40])\n"
        "print(prompts.render('review_system.j2').strip()[:40])\n"
        # the whole CLI imports without the test support the wheel leaves out
        "import ai_scientist.cli.main\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AI_SCIENTIST_PROMPT_DIR"}
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].strip(), "the packaged template rendered empty"
    assert lines[1].strip(), "the packaged reporting template rendered empty"

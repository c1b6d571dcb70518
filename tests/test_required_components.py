"""The required-components switch (tests/components.py): under ``AI_SCI_REQUIRE`` a test whose real
component is missing fails naming it; without it the same test skips with the reason.

Each case runs pytest in a subprocess on a tiny test file that uses the suite's own probes, with the
component made unavailable through the environment only (a DOCKER_HOST socket that does not exist,
a PATH without bwrap or pdflatex, no SLURM_CONF): the shared daemons keep running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

TINY = {
    "docker": "from components import docker_or_skip\n\ndef test_it():\n    docker_or_skip()\n",
    "bwrap": "from components import bwrap_or_skip\n\ndef test_it():\n    bwrap_or_skip()\n",
    "latex": "from components import needs_latex\n\n@needs_latex()\ndef test_it():\n    pass\n",
    "slurm": (
        "from components import needs, slurm_down\n\nDOWN = slurm_down()\n"
        'pytestmark = needs("slurm", DOWN is not None, DOWN or "")\n\ndef test_it():\n    pass\n'
    ),
}


def _hide(tmp_path: Path, *tools: str) -> str:
    """A PATH of one directory: symlinks to every program on PATH but ``tools``."""
    keep = tmp_path / "bin"
    keep.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name in tools or (keep / name).exists():
                continue
            (keep / name).symlink_to(Path(d) / name)
    return str(keep)


def run_tiny(tmp_path: Path, component: str, require: str | None, **env: str) -> subprocess.CompletedProcess:
    test = tmp_path / f"test_tiny_{component}.py"
    test.write_text(TINY[component])
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    full = {k: v for k, v in os.environ.items() if k not in ("AI_SCI_REQUIRE", "PYTEST_ADDOPTS")}
    full.update(env, PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]))
    if require is not None:
        full["AI_SCI_REQUIRE"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-c", os.devnull,
         "--rootdir", str(tmp_path), str(test)],
        cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _unavailable(tmp_path: Path, component: str) -> dict[str, str]:
    if component == "docker":
        return {"DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock"}
    if component == "bwrap":
        return {"PATH": _hide(tmp_path, "bwrap")}
    if component == "latex":
        return {"PATH": _hide(tmp_path, "pdflatex")}
    return {"SLURM_CONF": ""}


@pytest.mark.parametrize("component", sorted(TINY))
def test_a_missing_required_component_fails_naming_it(tmp_path, component):
    env = _unavailable(tmp_path, component)
    required = run_tiny(tmp_path, component, f"{component},llama", **env)
    out = required.stdout + required.stderr
    assert required.returncode == 1, out[-3000:]
    assert f"required component '{component}' unavailable (AI_SCI_REQUIRE)" in out, out[-3000:]
    assert "1 failed" in out or "1 error" in out, out[-3000:]
    # the same file, nothing required: a skip with the reason (a developer's machine)
    skipped = run_tiny(tmp_path, component, None, **env)
    out = skipped.stdout + skipped.stderr
    assert skipped.returncode == 0 and "1 skipped" in out, out[-3000:]
    assert "required component" not in out


def test_all_requires_every_component_and_a_typo_stops_the_session(tmp_path):
    env = _unavailable(tmp_path, "docker")
    proc = run_tiny(tmp_path, "docker", "all", **env)
    assert proc.returncode == 1 and "required component 'docker'" in proc.stdout + proc.stderr
    proc = run_tiny(tmp_path, "docker", "dokcer", **env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "AI_SCI_REQUIRE names unknown components ['dokcer']" in out, out[-2000:]
    assert "passed" not in out and "skipped" not in out


def test_a_present_component_is_counted_in_the_summary(tmp_path):
    proc = run_tiny(tmp_path, "docker", "docker")
    out = proc.stdout + proc.stderr
    if "docker backend unavailable" in out:  # the check above needs the real daemon
        from components import require_or_skip

        require_or_skip("docker", out.strip().splitlines()[-1])
    assert proc.returncode == 0, out[-3000:]
    assert "docker     required found by 1 test(s)" in out, out[-3000:]

"""Every benchmark script runs: ``python bench/<name>.py --smoke`` (tiny sizes) for each file in
``bench/`` — a new script without ``--smoke`` fails here.

A smoke run exits 0, prints its figures and leaves ``bench/results/`` as it was (the recorded figures
of ``docs/benchmarks.md`` are written only by full runs). Scripts that need a real component (the
embedded model, the Slurm cluster, Docker) go through ``tests/components.py``: a skip for a
developer without it, a failure under ``AI_SCI_REQUIRE``. No timing is asserted.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from components import docker_or_skip, llama_or_skip, slurm_or_skip

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))
NEEDS = {  # script -> the real component it measures
    "llm_server.py": "llama",
    "local_kv.py": "llama",
    "local_models.py": "llama",
    "slurm.py": "slurm",
    "executor.py": "docker",
}


def _results(stem: str) -> dict[str, str]:
    """The recorded results of one script (``bench/results/<stem>*.json``) by content."""
    files = sorted((BENCH / "results").glob(f"{stem}*"))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _component(name: str) -> None:
    if name == "llama":
        llama_or_skip()
    elif name == "slurm":
        slurm_or_skip()
    elif name == "docker":
        docker_or_skip()


@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_run(script, tmp_path):
    if script in NEEDS:
        _component(NEEDS[script])
    source = (BENCH / script).read_text(encoding="utf-8")
    assert '"--smoke"' in source, f"bench/{script} has no --smoke mode"
    before = _results(Path(script).stem)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--smoke"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"bench/{script} --smoke exited {proc.returncode}:\n{out[-4000:]}"
    assert proc.stdout.strip(), f"bench/{script} --smoke printed nothing"
    assert _results(Path(script).stem) == before, f"bench/{script} --smoke changed its bench/results/ files"

"""The exact case of issue 11 through the real pipeline: a run under a 0700 ``mktemp -d`` whose
generated code is the attacker of ``tests/security_attack.py``.

An orchestrator process (fake ``OPENAI_API_KEY`` in its initial environment) runs the bundled
example twice with the scripted LLM: a first run, then a second whose first draft reads
``/proc``, ptraces, lists fds, reads both runs' journal / events / memory / config / cost /
state / prompt logs, and writes into the host temp dirs. The key, the first run's content and
the host's processes must be invisible to it; the run itself goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from components import IMAGE, bwrap_or_skip, docker_or_skip

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
ROOT_USER = os.geteuid() == 0


def drive(tmp_path: Path, backend: str) -> dict:
    secret = "sk-test-" + uuid.uuid4().hex
    spec = {
        "backend": backend,
        "canary": "canary-" + uuid.uuid4().hex,  # in the first run's files
        "own_canary": "owncanary-" + uuid.uuid4().hex,  # in the attacker's own run's files
        "decoy_marker": "decoy-" + uuid.uuid4().hex,
        "marker": "aisci-attack-" + uuid.uuid4().hex,
        "out": str(tmp_path / "out.json"),
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8",
           "OPENAI_API_KEY": secret,
           # the tree and its test support (testsupport/: the attacker's scripted answers), also for
           # the non-root venv, which has neither installed
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "testsupport")]),
           "AISCI_ORCH_MARKER": "orchestrator-env-" + uuid.uuid4().hex}  # fmt: skip
    for name in ("DOCKER_HOST", "AI_SCI_SANDBOX_IMAGE"):
        if name in os.environ:
            env[name] = os.environ[name]
    proc = subprocess.run(
        [sys.executable, str(HERE / "security_attack.py"), "pipeline", json.dumps(spec)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    out = json.loads(Path(spec["out"]).read_text()) if Path(spec["out"]).exists() else {}
    out.update(spec=spec, secret=secret, proc=proc)
    return out


@pytest.mark.parametrize("backend", ["subprocess", "bwrap", "docker"])
def test_attacker_in_a_real_run_under_an_untraversable_directory(tmp_path, backend):
    if backend == "subprocess" and not ROOT_USER:
        pytest.skip("not root: the subprocess backend refuses (test_pipeline_refuses_unsafe_backend)")
    if backend == "docker":
        from ai_scientist.execution.docker_backend import DockerExecutor

        docker_or_skip(IMAGE)
        DockerExecutor(IMAGE).close()
    if backend == "bwrap":
        bwrap_or_skip()
    out = drive(tmp_path, backend)
    proc = out["proc"]
    try:
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert out["codes"] == {"other": 0, "this": 0}, proc.stderr[-3000:]
        assert out["exfil"], "the attacker did not run"
        report = json.loads(out["exfil"])
        assert out["secret"] not in out["exfil"] + proc.stdout + proc.stderr
        assert report["keys"] == []
        loot = json.dumps(report["loot"])
        assert out["spec"]["decoy_marker"] not in loot and out["spec"]["canary"] not in loot
        assert out["spec"]["own_canary"] not in loot
        stolen = [x for x in report["readable"] if x.startswith("file:") and "/experiments/" in x]
        assert stolen == [], stolen[:5]
        host = [str(p) for p in out["host_pids"]]  # the orchestrator, its parent, the decoy
        assert [p for p in host if report["ptrace"].get(p) == "ATTACHED"] == [], report["ptrace"]
        assert report["fds"] == []
        for d in TEMP_DIRS:
            assert not os.path.exists(os.path.join(d, out["spec"]["marker"]))
        # the orchestrator follows none of the links the attacker planted in its workspace
        assert {"environ.txt", "metrics.json", "steal.json", "steal.py", "zero.py"} <= set(out["planted"])
        assert out["view_code"] == 0 and out["page_bytes"] > 0
        assert not out["page_has_canary"] and not out["page_has_environ"]
        if ROOT_USER:
            assert report["uid"] != 0  # the uid drop held although the ancestor is 0700
        base = Path(out["base"])
        assert stat.S_IMODE(base.stat().st_mode) == 0o700
        for run in ("other", "this"):
            run_dir = base / "experiments" / run
            assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
            for name in ("journal.jsonl", "events.jsonl", "memory.sqlite", "state.json", "cost.json",
                         "config.resolved.yaml"):  # fmt: skip
                path = run_dir / name
                if path.exists():
                    assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            for path in run_dir.rglob("*"):  # the key reached no file of either run
                if path.is_file() and not path.is_symlink() and path.stat().st_size < 50_000_000:
                    assert out["secret"].encode() not in path.read_bytes(), path
    finally:
        if out.get("base"):
            shutil.rmtree(out["base"], ignore_errors=True)


def test_pipeline_refuses_unsafe_backend(tmp_path):
    """As a non-root user the subprocess backend cannot isolate: `run` exits 2 with the fix."""
    if ROOT_USER:
        pytest.skip("root: the subprocess backend isolates (the test above)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test-" + uuid.uuid4().hex}
    idea = ROOT / "examples" / "label_noise" / "idea.md"
    proc = subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", "run", "--idea", str(idea), "--out", str(tmp_path / "x"),
         "--set", "exec.backend=subprocess", "--set", "report.enabled=false",
         "--set", "memory.embedding.backend=none"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "cannot isolate generated code" in proc.stderr
    assert "exec.allow_unsafe_sandbox: true" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists(), "a refused run left a directory behind"
    assert proc.stdout == ""  # no run directory was announced

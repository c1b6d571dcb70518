"""Generated code as an attacker, on every sandbox backend that runs here: it must not reach the key.

Each test starts an orchestrator *process* with a fake ``OPENAI_API_KEY`` in its initial
environment (``tests/security_attack.py orchestrate``). That process writes two runs' files
(journal, events, memory.sqlite, config, cost, prompt logs) with the real IO helpers under a
0700 ``mktemp -d`` directory, starts a decoy host process carrying the key in its environment
and a marker in its command line, and runs the attacker (``security_attack.py attack``) in the
backend's sandbox. The attacker reads every ``/proc/*/environ`` ``cmdline`` ``mem``, tries
ptrace, inherited fds, both runs' files, unmounting ``/proc`` (also from a user namespace) and
writing into the host temp dirs. The key must be nowhere in what it could write out.

``tests/test_security_nonroot.py`` runs this file again as an unprivileged user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from components import bwrap_or_skip, docker_or_skip

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ATTACK = HERE / "security_attack.py"
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
IMAGE = os.environ.get("AI_SCI_SANDBOX_IMAGE", "ai-scientist-sandbox:latest")
ROOT_USER = os.geteuid() == 0


def _skip_unless_usable(backend: str) -> None:
    if backend.startswith("bwrap"):
        bwrap_or_skip()
    if backend.startswith("docker"):
        from ai_scientist.execution.docker_backend import DockerExecutor

        docker_or_skip(IMAGE)
        DockerExecutor(IMAGE).close()


def run_attack(tmp_path: Path, backend: str, allow_unsafe: bool = False) -> dict:
    """Start an orchestrator process holding a fresh fake key; return what came out of its sandbox.

    ``subprocess-inproc`` / ``bwrap-inproc``: the orchestrator forks the commands itself
    (``exec.fork_server: false``) instead of its fork server."""
    secret = "sk-test-" + uuid.uuid4().hex
    spec = {
        "backend": "docker" if backend.startswith("docker") else backend.removesuffix("-inproc"),
        "fork_server": not backend.endswith("-inproc"),
        "reuse": backend == "docker-reuse",
        "image": IMAGE,
        "allow_unsafe": allow_unsafe,
        "canary": "canary-" + uuid.uuid4().hex,
        "decoy_marker": "decoy-" + uuid.uuid4().hex,
        "marker": "aisci-attack-" + uuid.uuid4().hex,
        "out": str(tmp_path / "out.json"),
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8",
           "OPENAI_API_KEY": secret, "PYTHONPATH": str(ROOT)}  # fmt: skip
    if "DOCKER_HOST" in os.environ:
        env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
    proc = subprocess.run(
        [sys.executable, str(ATTACK), "orchestrate", json.dumps(spec)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(Path(spec["out"]).read_text())
    out.update(spec=spec, secret=secret, orchestrator_output=proc.stdout + proc.stderr)
    return out


def _everything_written(out: dict) -> str:
    r = out["result"]
    return "\n".join([r["stdout"], r["stderr"], *out["files"].values(), out["orchestrator_output"]])


def assert_key_unreachable(out: dict) -> dict:
    """The key is in nothing the attacker could write out; returns the attacker's report."""
    r = out["result"]
    assert r["exit_code"] == 0, r["stdout"][-2000:] + r["stderr"][-3000:]
    report = json.loads(out["files"]["exfil.json"])
    assert out["secret"] not in _everything_written(out)
    assert report["keys"] == [], "key-shaped strings found: " + str(report["keys"])
    loot = json.dumps(report["loot"])
    assert out["spec"]["decoy_marker"] not in loot, "a host process's command line is visible"
    host = [str(p) for p in (out["orchestrator_pid"], *out.get("host_pids", []))]
    assert [p for p in host if report["ptrace"].get(p) == "ATTACHED"] == [], report["ptrace"]
    assert "umount_created" not in report["unmount"], "the attacker holds CAP_SYS_ADMIN"
    assert report["unmount"].get("umount") != "UNMOUNTED", report["unmount"]
    assert report["unmount"].get("userns_umount") != "UNMOUNTED", report["unmount"]
    assert report["fds"] == [], f"inherited file descriptors: {report['fds']}"
    for d in TEMP_DIRS:  # what it wrote there landed in a private tmpfs (or nowhere)
        assert not os.path.exists(os.path.join(d, out["spec"]["marker"])), f"attacker wrote into host {d}"
    return report


def assert_runs_unreadable(out: dict, report: dict) -> None:
    base = out["base"]
    stolen = [label for label in report["readable"] if label.startswith("file:") and base in label]
    assert stolen == [], f"run files readable from the sandbox: {stolen[:5]}"
    assert out["spec"]["canary"] not in json.dumps(report["loot"])


def test_the_attacker_finds_the_key_without_a_sandbox(tmp_path):
    # the control: the same attacker on the host, same uid, empty environment, finds the key in
    # the decoy's /proc/PID/environ and reads both runs' files; so the checks below can fail
    out = run_attack(tmp_path, "host")
    report = json.loads(out["files"]["exfil.json"])
    assert out["secret"] in report["keys"]
    assert out["spec"]["decoy_marker"] in json.dumps(report["loot"])
    assert out["spec"]["canary"] in json.dumps(report["loot"])
    for d in TEMP_DIRS:
        marker = Path(d) / out["spec"]["marker"]
        if report["writes"].get(d) == "WROTE":
            assert marker.exists()
            marker.unlink()


@pytest.mark.parametrize(
    "backend", ["subprocess", "bwrap", "subprocess-inproc", "bwrap-inproc", "docker", "docker-reuse"]
)
def test_generated_code_cannot_reach_the_key(tmp_path, backend):
    if backend.startswith("subprocess") and not ROOT_USER:
        pytest.skip("not root: the subprocess backend refuses (test_subprocess_refuses_without_root)")
    _skip_unless_usable(backend)
    out = run_attack(tmp_path, backend)
    report = assert_key_unreachable(out)
    assert_runs_unreadable(out, report)
    if ROOT_USER:  # commands never run as root, also below a directory others cannot enter
        assert report["uid"] != 0
        assert out["result"]["extra"].get("uid") not in (None, 0) or backend.startswith("docker")


def test_subprocess_refuses_without_root(tmp_path):
    from ai_scientist.base.config import ConfigError, load_config
    from ai_scientist.execution.isolation import UnsafeSandbox
    from ai_scientist.execution.registry import make_executor

    if ROOT_USER:
        pytest.skip("root: the subprocess backend isolates (test_generated_code_cannot_reach_the_key)")
    with pytest.raises(UnsafeSandbox) as info:
        make_executor(load_config(overrides=["exec.backend=subprocess"]))
    msg = str(info.value)
    assert isinstance(info.value, ConfigError)  # so the CLI exits 2
    assert "not root" in msg and "exec.allow_unsafe_sandbox: true" in msg and "bwrap" in msg


def test_unsafe_subprocess_still_hides_the_orchestrator(tmp_path):
    # opted in: the command runs as this user, so it could read this user's files outside the
    # private temp dirs (the reason for the refusal; these runs live under /tmp, so they happen to
    # be hidden), but the orchestrator's environment, memory and /proc stay out of reach
    if ROOT_USER:
        pytest.skip("root: no opt-in needed (test_generated_code_cannot_reach_the_key)")
    out = run_attack(tmp_path, "subprocess", allow_unsafe=True)
    report = assert_key_unreachable(out)
    assert report["uid"] == 0  # root of its own user namespace, with no capability
    assert "not root" in out["result"]["extra"]["unsafe_sandbox"]


def test_cli_exec_refusal_is_exit_2(tmp_path):
    if ROOT_USER:
        pytest.skip("root: the subprocess backend isolates; the refusal is shown as non-root")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", "exec", "--backend", "subprocess", "--", "true"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "cannot isolate generated code" in proc.stderr and "Traceback" not in proc.stderr

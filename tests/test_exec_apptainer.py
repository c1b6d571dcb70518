"""Apptainer cannot be installed here (not packaged for Debian 12): the backend is driven
against a fake binary that records its argv and then runs the command itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ai_scientist.execution.apptainer_backend import ApptainerExecutor
from ai_scientist.execution.base import Limits, SandboxError

# started by root, apptainer runs commands as root: the backend refuses unless opted in
ROOT = os.geteuid() == 0

FAKE = """#!/bin/sh
# fake apptainer: record argv as JSON, then run what follows the image
/usr/bin/python3 - "$@" <<'PY'
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps(args) + "\\n")
img = args.index(os.environ["FAKE_IMAGE"])
os.execvp(args[img + 1], args[img + 1:])
PY
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    binary = tmp_path / "bin" / "apptainer"
    binary.parent.mkdir()
    binary.write_text(FAKE)
    binary.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    # the fake reads these from its own environment: the backend passes the host PATH/LANG only,
    # so bake them into the script instead
    binary.write_text(
        FAKE.replace('os.environ["FAKE_LOG"]', repr(str(log))).replace(
            'os.environ["FAKE_IMAGE"]', repr("/images/sandbox.sif")
        )
    )
    return binary, log


def _argvs(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_argv_has_containment_binds_and_env(fake, tmp_path, monkeypatch):
    binary, log = fake
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hostsecret-123456789")
    res = tmp_path / "resources"
    res.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    ex = ApptainerExecutor("/images/sandbox.sif", binary=str(binary), resources_dir=res, allow_unsafe=ROOT)
    r = ex.run(
        ["echo", "hello"],
        workspace=ws,
        limits=Limits(timeout_s=20),
        env={"SEED": "1"},
        install_dir=tmp_path / "env",
    )
    assert r.ok and r.stdout == "hello\n", r.stderr
    argv = _argvs(log)[0]
    assert argv[:4] == ["exec", "--containall", "--cleanenv", "--no-home"]
    assert ["--bind", f"{ws.resolve()}:/workspace"] == argv[4:6]
    assert ["--pwd", "/workspace"] == argv[6:8]
    assert f"{res.resolve()}:/resources:ro" in argv
    assert f"{(tmp_path / 'env').resolve()}:/env" in argv
    assert "--network" in argv and argv[argv.index("--network") + 1] == "none"
    assert "--nv" not in argv and "--fakeroot" not in argv
    assert "SEED=1" in argv and "HOME=/workspace" in argv and "PIP_USER=1" in argv
    assert not any("sk-hostsecret" in a for a in argv)
    assert argv[-3:] == ["/images/sandbox.sif", "echo", "hello"]


def test_gpus_network_and_phase1_flags(fake, tmp_path):
    binary, log = fake
    ex = ApptainerExecutor("/images/sandbox.sif", binary=str(binary), phase1=True, allow_unsafe=ROOT)
    argv = ex.build_argv(["true"], tmp_path, Limits(gpus=(0, 1), network=True), {})
    assert "--nv" in argv and "--fakeroot" in argv and "--writable-tmpfs" in argv
    assert "--network" not in argv and "--net" not in argv


def test_timeout_kills_the_whole_group(fake, tmp_path):
    binary, _ = fake
    ex = ApptainerExecutor("/images/sandbox.sif", binary=str(binary), allow_unsafe=ROOT)
    r = ex.run(["sleep", "30"], workspace=tmp_path, limits=Limits(timeout_s=1))
    assert r.killed_by == "timeout" and r.shell_exit_code == 124


def test_missing_binary_and_image_are_clear_errors(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(SandboxError, match="apptainer_binary"):
        ApptainerExecutor("/x.sif", binary="apptainer-not-here")
    binary, _ = fake
    with pytest.raises(SandboxError, match="apptainer_image"):
        ApptainerExecutor(None, binary=str(binary))
    assert os.access(binary, os.X_OK)


def test_root_orchestrator_is_refused_unless_opted_in(fake, tmp_path):
    from ai_scientist.base.config import ConfigError
    from ai_scientist.execution.isolation import UnsafeSandbox

    binary, _log = fake
    if not ROOT:
        ex = ApptainerExecutor("/images/sandbox.sif", binary=str(binary))  # an ordinary user: fine
        assert ex.unsafe is None
        return
    with pytest.raises(UnsafeSandbox) as info:
        ApptainerExecutor("/images/sandbox.sif", binary=str(binary))
    assert isinstance(info.value, ConfigError)  # the CLI exits 2
    assert "would run the command as root" in str(info.value)
    assert "exec.allow_unsafe_sandbox: true" in str(info.value)
    ws = tmp_path / "ws2"
    ws.mkdir()
    r = ApptainerExecutor("/images/sandbox.sif", binary=str(binary), allow_unsafe=True).run(
        ["true"], workspace=ws, limits=Limits(timeout_s=20)
    )
    assert r.ok and "as root" in r.extra["unsafe_sandbox"]

"""Docker backend configuration (pure, with a stand-in client) and its failure messages."""

from __future__ import annotations

import os

import pytest

from ai_scientist.execution.base import Limits, SandboxError
from ai_scientist.execution.docker_backend import DockerExecutor, docker_client


class _Images:
    def __init__(self, present: bool):
        self.present = present

    def get(self, name):
        import docker.errors

        if not self.present:
            raise docker.errors.ImageNotFound(f"no such image: {name}")
        return object()


class _Net:
    def __init__(self, name):
        self.name = name


class _Networks:
    def list(self):
        return [_Net("none"), _Net("host")]


class FakeClient:
    def __init__(self, present: bool = True):
        self.images = _Images(present)
        self.networks = _Networks()


def test_missing_image_says_how_to_build_and_never_pulls():
    with pytest.raises(SandboxError) as info:
        DockerExecutor("nope:latest", client=FakeClient(present=False))
    msg = str(info.value)
    assert "nope:latest" in msg and "containers/build_rootfs_image.sh" in msg and "never pulled" in msg


def test_host_config_is_locked_down(tmp_path):
    ex = DockerExecutor("img", client=FakeClient(), resources_dir=tmp_path / "res")
    assert (tmp_path / "res").is_dir()  # created so the bind always has a target
    kw = ex._host_config(tmp_path, Limits(memory_mb=300, cpus=0.5, pids=32, gpus=(1,)), tmp_path / "env")
    assert kw["network_mode"] == "none" and kw["read_only"] is True
    assert kw["mem_limit"] == "300m" and kw["memswap_limit"] == "300m"
    assert kw["nano_cpus"] == 500_000_000 and kw["pids_limit"] == 32
    assert kw["cap_drop"] == ["ALL"] and "no-new-privileges" in kw["security_opt"]
    assert kw["volumes"][str(tmp_path)] == {"bind": "/workspace", "mode": "rw"}
    assert kw["volumes"][str((tmp_path / "res").resolve())] == {"bind": "/resources", "mode": "ro"}
    assert kw["volumes"][str((tmp_path / "env").resolve())]["bind"] == "/env"
    assert "/tmp" in kw["tmpfs"]
    req = kw["device_requests"][0]
    assert req["DeviceIDs"] == ["1"] and req["Capabilities"] == [["gpu"]]
    # network allowed on a daemon without a bridge network (like scripts/docker_ci.sh's): host
    assert ex._host_config(tmp_path, Limits(network=True), None)["network_mode"] == "host"
    assert "device_requests" not in ex._host_config(tmp_path, Limits(), None)


def test_container_user_is_never_root(tmp_path):
    ex = DockerExecutor("img", client=FakeClient())
    user = ex._user(tmp_path, None)
    uid = int(user.split(":")[0])
    assert uid != 0
    if os.geteuid() == 0:
        assert tmp_path.stat().st_uid == uid  # the fresh uid owns the workspace


def test_unreachable_daemon_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(SandboxError, match="no Docker daemon reachable at unix://"):
        docker_client(timeout=2)

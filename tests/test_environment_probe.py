"""Environment probe: real facts, a real TCP reachability check, cached per run, no env dump."""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from ai_scientist.base.config import load_config
from ai_scientist.execution.environment import network_info, probe_environment, render_environment


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    mp = pytest.MonkeyPatch()
    mp.setenv("AI_SCI_PROBE_FAKE_TOKEN", "tok-very-secret-value-123")
    try:
        run = tmp_path_factory.mktemp("run")
        env = probe_environment(
            load_config(overrides=["exec.apptainer_binary=missing-x"]),
            run_dir=run,
            network_target=("127.0.0.1", port),
        )
    finally:
        mp.undo()
        srv.close()
    return env, run


def test_probe_has_real_facts(probed):
    env, _ = probed
    assert env["os"]["kernel"] and env["cpu"]["logical_cores"] >= 1 and env["cpu"]["numa_nodes"] >= 1
    assert env["memory"]["total_mb"] > 100
    if shutil.which("gcc"):
        assert env["compilers"]["gcc"].startswith("gcc")
    assert env["python"]["version"].startswith("3.")
    assert env["libraries"]["ldconfig_count"] > 0
    names = [s["name"] for s in env["sandboxes"]]
    assert "subprocess" in names and next(s for s in env["sandboxes"] if s["name"] == "subprocess")["ok"]


def test_gpus_are_stated_even_when_absent(probed):
    env, _ = probed
    gpus = env["gpus"]
    if gpus["count"] == 0:
        assert gpus["reason"]
        assert "GPUs: none" in render_environment(env)
    else:
        assert gpus["devices"][0]["name"] in render_environment(env)


def test_network_is_a_real_tcp_connect(probed):
    env, _ = probed
    assert env["network"]["reachable"] is True and env["network"]["target"].startswith("127.0.0.1:")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()  # nothing listens there now
    down = network_info(("127.0.0.1", port))
    assert down["reachable"] is False and down["error"] == "ConnectionRefusedError"


def test_no_environment_dump(probed):
    env, run = probed
    blob = json.dumps(env) + render_environment(env)
    assert "tok-very-secret-value-123" not in blob and "AI_SCI_PROBE_FAKE_TOKEN" not in blob
    assert "PATH=" not in blob


def test_cached_once_per_run(probed):
    env, run = probed
    cached = json.loads((run / "environment.json").read_text())
    assert cached == env
    cached["cpu"]["model"] = "from-cache"
    (run / "environment.json").write_text(json.dumps(cached))
    assert probe_environment(load_config(), run_dir=run)["cpu"]["model"] == "from-cache"


def test_render_respects_budget(probed):
    env, _ = probed
    full = render_environment(env)
    assert "Network inside the sandbox: OFF" in full
    short = render_environment(env, budget_chars=300)
    assert len(short) <= 300 and short.startswith("## Machine")

"""The environment layer describes the sandbox the code runs in, probed inside it, and the build
plan's compiler is checked against that probe (issue 13, "The sandbox's environment").

Each test runs the pipeline for real (scripted LLM, real sandbox) and reads what was sent from the
prompt logs: a tool the host has but the sandbox does not is absent from the sandbox section of the
prompt, and a code answer naming such a compiler is refused with the precise problem, which the
next prompt (the repair round) carries.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from components import bwrap_or_skip, docker_or_skip
from pipeline_support import events, journal_nodes, phase_records, start_run, string_messages_text

from ai_scientist.base.config import load_config
from ai_scientist.execution.base import SandboxError
from ai_scientist.execution.environment import probe_environment, render_environment, short_version
from ai_scientist.execution.sandbox_probe import GPU_TOOLS, gpu_visible
from ai_scientist.phases.schemas import validate_code

ONE_NODE = (
    "agent.stages.stage1_max_iters=1",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
    # the full environment block (the bundled idea is pure Python: it would get the compact one)
    "context.environment_detail=full",
)
IMAGE = os.environ.get("AI_SCI_SANDBOX_IMAGE", "ai-scientist-sandbox:latest")
SANDBOX_HEADING = "## Sandbox your code runs in"
HOST_HEADING = "## Machine under the sandbox"


class CompilerOnce(ExampleResponder):
    """The first code answer of n0001 builds with ``compiler``; every later one is the example's."""

    def __init__(self, compiler: str):
        super().__init__(buggy_nodes=())
        self.compiler = compiler
        self.sent: dict | None = None

    def _phase2(self, text: str, ctx) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        if self.sent is None and ctx.node_id == "n0001":
            answer["files"] = [{"path": "exp.f90", "content": "program e\nend program e\n"}]
            answer["build"] = {
                "language": "fortran",
                "compiler": self.compiler,
                "commands": [f"{self.compiler} -O2 -o exp exp.f90"],
            }
            answer["run"] = {"commands": ["./exp"]}
            self.sent = answer
        return json.dumps(answer)


def _sandbox_section(prompt: str) -> str:
    start = prompt.index(SANDBOX_HEADING)
    return prompt[start : prompt.index(HOST_HEADING, start)]


def _fake_tool(tmp_path: Path, monkeypatch, name: str) -> Path:
    """An executable ``name`` in a host directory on this process's PATH that no sandbox mounts."""
    hostbin = tmp_path / "hostbin"
    hostbin.mkdir()
    tool = hostbin / name
    tool.write_text(f"#!/bin/sh\necho '{name} (fake host-only compiler) 2025.0.0'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{hostbin}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shutil.which(name) == str(tool)
    return tool


def _check_environment_layer(run_dir: Path, backend: str, host_only: str) -> str:
    env = json.loads((run_dir / "environment.json").read_text())
    sandbox = env["sandbox"]
    assert sandbox["ok"], sandbox.get("error")
    assert sandbox["backend"] == backend
    # the host probe saw the tool; the probe inside the sandbox did not
    assert host_only in env["compilers"]
    assert host_only not in sandbox["tools"]
    # the prompt actually sent (the first node's first call) describes the sandbox, without the tool
    prompt = string_messages_text(phase_records(run_dir, "n0001", "*")[0])
    section = _sandbox_section(prompt)
    assert f"Backend: {backend}" in section
    assert "Compilers and build tools there:" in section
    assert host_only not in section
    for tool in sandbox["tools"]:  # every tool the probe found there is listed there
        if tool == "nvcc" and not sandbox.get("gpu_devices"):
            assert "nvcc" not in section  # no GPU: the CUDA toolkit is not offered
            continue
        assert tool in section
    assert "Network: OFF" in section  # exec.network is false by default
    # a description of the host alone (the environment without the sandbox probe) lists the tool
    host_only_env = {k: v for k, v in env.items() if k != "sandbox"}
    assert host_only in render_environment(host_only_env)
    probed = [e for e in events(run_dir) if e["type"] == "sandbox_probed"]
    assert len(probed) == 1 and probed[0]["backend"] == backend and probed[0]["ok"]
    return section


@pytest.fixture(scope="module")
def bwrap_run(tmp_path_factory):
    bwrap_or_skip()
    tmp = tmp_path_factory.mktemp("bwrap-env")
    mp = pytest.MonkeyPatch()
    try:
        _fake_tool(tmp, mp, "ifx")
        responder = CompilerOnce("ifx")
        # the validator's refusal is what this tests (agent.constrain_answers would have the schema
        # refuse the compiler first: tests/test_constrained_deps.py)
        code, run_dir, _ = start_run(
            tmp, "exec.backend=bwrap", "agent.constrain_answers=false", *ONE_NODE, responder=responder
        )
    finally:
        mp.undo()
    return code, run_dir, responder


def test_bwrap_environment_layer_describes_the_sandbox_not_the_host(bwrap_run):
    code, run_dir, _ = bwrap_run
    assert code == 0
    section = _check_environment_layer(run_dir, "bwrap", "ifx")
    assert "Working directory: `/workspace`" in section
    # bwrap shows the host's /usr read-only: a compiler installed there is there too
    if Path("/usr/bin/gcc").exists():
        env = json.loads((run_dir / "environment.json").read_text())
        assert "gcc" in env["sandbox"]["tools"] and "gcc" in section


def test_absent_compiler_is_refused_and_the_problem_reaches_the_next_prompt(bwrap_run):
    code, run_dir, responder = bwrap_run
    assert responder.sent is not None, "the scripted model never sent its ifx answer"
    env = json.loads((run_dir / "environment.json").read_text())
    with pytest.raises(ValueError) as refused:
        validate_code(responder.sent, env)
    problem = str(refused.value)
    assert problem.startswith("build.compiler: 'ifx' is not installed in the bwrap sandbox")
    # every usable tool: a CUDA toolchain without a GPU is none (sandbox_probe.GPU_TOOLS)
    usable = set(env["sandbox"]["tools"]) - (set() if gpu_visible(env) else GPU_TOOLS)
    for tool in sorted(usable):
        assert tool in problem.split("there:")[1]
    for tool in sorted(set(env["sandbox"]["tools"]) - usable):
        assert tool not in problem.split("there:")[1]
    logs = phase_records(run_dir, "n0001", "phase2")
    first, later = logs[0], logs[1:]
    assert problem not in string_messages_text(first)
    sent = json.loads(first["response"]["raw"])  # the refused answer (with its plan merged in)
    assert {k: sent[k] for k in responder.sent} == responder.sent
    repair = next((r for r in later if problem in string_messages_text(r)), None)
    assert repair is not None, "the refusal is not in any later phase-2 prompt"
    assert f"the JSON is not acceptable: {problem}" in string_messages_text(repair)
    # the repaired answer was used: the node ran the example, not the Fortran program
    node = journal_nodes(run_dir)["n0001"]
    assert node["status"] == "good", node.get("error")
    assert not (run_dir / "nodes/n0001/workspace/exp.f90").exists()


def test_docker_environment_layer_lacks_a_host_tool_the_image_lacks(tmp_path):
    from ai_scientist.execution.docker_backend import DockerExecutor

    docker_or_skip(IMAGE)
    DockerExecutor(IMAGE).close()
    mp = pytest.MonkeyPatch()
    try:
        _fake_tool(tmp_path, mp, "ifx")
        code, run_dir, _ = start_run(
            tmp_path,
            "exec.backend=docker",
            f"exec.docker_image={IMAGE}",
            "exec.docker_reuse_container=false",
            *ONE_NODE,
            responder=ExampleResponder(buggy_nodes=()),
        )
    finally:
        mp.undo()
    assert code == 0
    section = _check_environment_layer(run_dir, "docker", "ifx")
    assert f"image `{IMAGE}`" in section
    env = json.loads((run_dir / "environment.json").read_text())
    # the image is its own filesystem: the host's compilers under /usr are not in it unless installed
    for tool in set(env["compilers"]) - set(env["sandbox"]["tools"]):
        assert f" {tool} (" not in section and f" {tool}," not in section


# ------------------------------------------------------------------ the probe's output is untrusted --


def test_probe_output_is_read_as_untrusted_text():
    from ai_scientist.execution.sandbox_probe import MAX_LINES, parse_probe

    lines = [
        "tool\tgcc\t/usr/bin/gcc\tgcc 12\x1b[31m RED\x07" + "x" * 10_000,
        "tool\tevil-tool\t/usr/bin/evil\t1.0",  # not a tool the probe looks for
        "tool\tmake\tmake\tGNU Make",  # not an absolute path
        "tool\tcmake",  # no path
        "path\t/workspace\trw",
        "path\t/etc\tmaybe",  # not an access word
        "mount\tgarbage without fields",
        "mount\t36 25 0:32 / /usr ro,nosuid - ext4 /dev/sda1 ro",
        "mount\t37 25 0:33 / /proc rw - proc proc rw",  # /proc, /sys, /dev are not listed
        "net\t../../etc",
        "gpu\t/dev/sda",
        "libs\tlibopenblas libfoo ../evil libc libfftw3 notalib",
        'python\t{"version": "3.11.2\\u0000", "packages": {"numpy": "1.26", "../evil": "1", "x": 3},'
        ' "package_count": -4, "usable_cores": "many"}',
    ]
    facts = parse_probe("\n".join(lines + ["junk\tline"] * (MAX_LINES + 10) + ["tool\tifx\t/opt/ifx\t2025"]))
    assert set(facts["tools"]) == {"gcc"}  # ifx came after the line cap
    assert facts["tools"]["gcc"].startswith("gcc 12") and len(facts["tools"]["gcc"]) <= 160
    assert not any(ord(c) < 32 for c in facts["tools"]["gcc"])
    assert facts["paths"] == {"/workspace": "rw"}
    assert facts["mounts"] == [{"path": "/usr", "access": "ro", "fs": "ext4"}]
    assert facts["interfaces"] == [] and facts["gpu_devices"] == []
    assert facts["libraries"] == {"count": 4, "notable": ["fftw", "openblas"]}
    py = facts["python"]
    assert py["version"] == "3.11.2" and py["packages"] == {"numpy": "1.26"}
    assert py["package_count"] == 1 and py["usable_cores"] is None
    assert "error" in parse_probe("python\tTraceback (most recent call last):")["python"]


class _BrokenSandbox:
    """An executor whose sandbox cannot start (as a backend raises when its runtime is gone)."""

    name = "docker"
    image = "missing:latest"
    python = "/usr/bin/python3"

    def run(self, command, *, workspace, limits=None, env=None):
        raise SandboxError("Docker image 'missing:latest' not found")


def test_a_probe_that_cannot_run_is_recorded_and_judges_nothing(tmp_path):
    from ai_scientist.execution.sandbox_probe import available_tools, ensure_sandbox_facts

    cfg = load_config(overrides=["exec.backend=subprocess", "exec.apptainer_binary=missing-x"])
    env = probe_environment(cfg)
    assert ensure_sandbox_facts(env, _BrokenSandbox(), cfg, tmp_path)
    sandbox = env["sandbox"]
    assert sandbox["ok"] is False and "not found" in sandbox["error"]
    text = render_environment(env)
    assert "Not probed inside the sandbox" in text and "not found" in text
    assert available_tools(env) is None  # a guess from the host would be wrong either way
    validate_code(  # so a compiler cannot be refused on the host's word
        {
            "files": [{"path": "a.f90", "content": "end"}],
            "build": {"language": "fortran", "compiler": "ifx", "commands": ["ifx -o a a.f90"]},
            "run": {"commands": ["./a"]},
        },
        env,
    )
    assert not (tmp_path / "sandbox_probe").exists()


def test_the_probe_runs_once_per_sandbox(tmp_path):
    from ai_scientist.execution import make_executor
    from ai_scientist.execution.sandbox_probe import ensure_sandbox_facts

    tmp_path.chmod(0o755)
    cfg = load_config(overrides=["exec.backend=subprocess"])
    ex = make_executor(cfg, "subprocess")
    env: dict = {}
    assert ensure_sandbox_facts(env, ex, cfg, tmp_path)
    first = dict(env["sandbox"])
    assert first["ok"], first.get("error")
    assert first["python"]["version"].startswith("3.")
    assert not ensure_sandbox_facts(env, ex, cfg, tmp_path)  # same backend, image, interpreter
    # over its budget the layer turns compact (tool names without versions), the sandbox still first
    host = probe_environment(load_config(overrides=["exec.apptainer_binary=missing-x"]))
    full = render_environment({**host, "sandbox": first})
    short = render_environment({**host, "sandbox": first}, budget_chars=len(full) - 1)
    assert len(short) < len(full) and short.startswith(SANDBOX_HEADING)
    for tool, version in first["tools"].items():
        if tool == "nvcc" and not first.get("gpu_devices"):
            continue  # no GPU: the CUDA toolkit is not offered (test_environment_hpc_facts)
        shown = f"{tool} {short_version(version)}"
        assert shown in full and shown not in short and tool in short
    assert env["sandbox"] == first
    other = load_config(overrides=["exec.backend=subprocess", "exec.python=/nonexistent/python3"])
    assert ensure_sandbox_facts(env, make_executor(other, "subprocess"), other, tmp_path)
    assert "no interpreter '/nonexistent/python3'" in env["sandbox"]["python"]["error"]
    assert "Python there: no interpreter" in render_environment({**host, "sandbox": env["sandbox"]})

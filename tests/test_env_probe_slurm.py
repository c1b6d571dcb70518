"""Under ``exec.backend: slurm`` the sandbox probe runs as a job, and the prompt describes that node.

On the local cluster (scripts/slurm_ci.sh; skipped, with the reason, when none answers) the job's
environment is made to differ from the orchestrator's: ``exec.slurm.extra_args`` exports
``MODULESHOME`` to the job only, pointing at a stand-in module system
(tests/fixtures/fake_modules, copied into the run's resources, which the inner sandbox sees).
The expectations come from what the probe job itself printed (its ``exit.json`` in the job
directory), never from the fixture's names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from components import needs, slurm_down
from pipeline_support import events, prompt_records, run_args, string_messages_text

from ai_scientist.base.config import load_config
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.execution.base import Limits
from ai_scientist.execution.hpc_facts import MODULE_VAR_PREFIXES, MODULE_VARS, modules_env
from ai_scientist.execution.slurm_backend import SlurmExecutor
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.phases.schemas import validate_code

DOWN = slurm_down()
pytestmark = needs("slurm", DOWN is not None, DOWN or "")
FAKE_MODULES = Path(__file__).parent / "fixtures" / "fake_modules"
SMALL = [
    "exec.backend=slurm",
    "exec.slurm.poll_interval_s=0.2",
    "exec.slurm.lost_grace_s=3",
    "agent.stages.stage1_max_iters=1",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.search.num_drafts=1",
    # the bundled idea is pure Python, whose environment block is compact (no modules, MPI, caches:
    # docs/context.md); this test reads the compute node's full description
    "context.environment_detail=full",
]


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    """A scripted Slurm run whose jobs (not the orchestrator) see a module system."""
    tmp = tmp_path_factory.mktemp("envslurm")
    saved = {
        k: os.environ.pop(k)
        for k in list(os.environ)
        if k in MODULE_VARS or k.startswith(MODULE_VAR_PREFIXES)
    }
    try:
        run_dir = tmp / "experiments" / "run"
        home = RunPaths(run_dir).resources / "modules"
        overrides = [
            *SMALL,
            f"exec.slurm.shared_dir={tmp / 'shared'}",
            f'exec.slurm.extra_args=["--export=MODULESHOME={home}"]',  # the job's environment only
        ]
        run, resources = setup_run(run_args(tmp, *overrides))
        assert run.dir == run_dir
        shutil.copytree(FAKE_MODULES, home)
        code = execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder()))
    finally:
        os.environ.update(saved)
    return code, run_dir, tmp / "shared", overrides


def _probe_job_output(shared: Path) -> tuple[dict, list[str]]:
    """The probe job's exit record (with its ``job_id``) and its stdout lines: the job of the
    ``run`` pseudo-node's workspace, the only job that is not a tree node's."""
    exits = sorted(shared.glob("run/run/*/exit.json"))
    assert len(exits) == 1, f"expected one probe job, found {exits}"
    record = json.loads(exits[0].read_text())
    record["job_id"] = (exits[0].parent / "job_id").read_text().strip()
    return record, record["stdout"].splitlines()


def test_environment_layer_shows_the_compute_nodes_probe(slurm_run):
    code, run_dir, shared, _ = slurm_run
    # one scripted draft, buggy on purpose (exit 3): the run's prompts are what is checked here
    assert code in (0, 3), [e for e in events(run_dir) if e["type"] == "internal_error"]
    record, lines = _probe_job_output(shared)
    fields = [line.split("\t") for line in lines]
    node = next(f for f in fields if f[0] == "node")
    assert record["job_id"].isdigit() and record["exit_code"] == 0 and record["extra"]["host"] == node[1]
    modules = [f[1] for f in fields if f[0] == "module" and not f[1].endswith(":")]
    cpus = next(f[1] for f in fields if f[0] == "ncpu")
    assert modules, "the probe job listed no module"
    env = json.loads(RunPaths(run_dir).environment.read_text())
    assert env["sandbox"]["ok"] and env["sandbox"]["backend"] == "slurm"
    assert env["modules"] is None, "the orchestrator's own probe must not see the job's modules"
    assert sorted(env["sandbox"]["modules"]["available"]) == sorted(modules)
    probed = [e for e in events(run_dir) if e["type"] == "sandbox_probed"]
    assert [e["ok"] for e in probed] == [True]

    layers = [string_messages_text(r) for r in prompt_records(run_dir)]
    shown = [t for t in layers if "## Compute node your commands run on" in t]
    assert shown, "no prompt described the compute node"
    text = shown[0]
    assert f"- Node: {node[1]}, probed by a job on partition" in text
    assert f"usable cores of {cpus}" in text and f"- Kernel: {node[2]} ({node[3]})" in text
    line = next(t for t in text.splitlines() if t.startswith("- Environment modules there"))
    for full in modules:
        name, _, version = full.partition("/")
        assert f"{name} {version}" in line, (full, line)
    assert "runs on another machine (a login or service node)" in text  # the orchestrator, named as such
    assert not any("Machine under the sandbox" in t for t in layers)


def test_module_load_is_checked_against_the_probe_and_works_in_a_job(slurm_run, tmp_path):
    code, run_dir, shared, overrides = slurm_run
    env = json.loads(RunPaths(run_dir).environment.read_text())
    _, lines = _probe_job_output(shared)
    listed = [f.split("\t")[1] for f in lines if f.startswith("module\t") and not f.endswith(":")]
    known = listed[0]
    answer: dict[str, Any] = {
        "files": [{"path": "p.c", "content": "int main(void){return 0;}"}],
        "build": {"language": "c", "compiler": "gcc", "commands": ["module load nosuch/9.9 && gcc -o p p.c"]},
        "run": {"commands": ["./p"]},
    }
    with pytest.raises(ValueError) as refused:
        validate_code(answer, env)
    msg = str(refused.value)
    assert msg.startswith("build.commands[0]: module 'nosuch/9.9' is not available on the compute node")
    assert all(m in msg for m in listed)
    answer["build"]["commands"] = [f"module load {known} && gcc -o p p.c"]
    answer["run"]["commands"] = [f"module load {known.split('/')[0]} && ./p"]  # a name alone: the default
    validate_code(answer, env)

    # the same line really loads it inside a job: BASH_ENV (modules_env) defines `module` there
    tool = next(p for p in (FAKE_MODULES / "modulefiles" / known / "bin").iterdir())
    expected = subprocess.run([str(tool)], capture_output=True, text=True, check=True).stdout
    cfg = load_config(None, [o for o in overrides if o.startswith("exec.")])
    ws = run_dir / "nodes" / "n0001" / "workspace"
    ex = SlurmExecutor(cfg.exec, resources_dir=RunPaths(run_dir).resources)
    try:
        line = f"module load {known} && {tool.name}"  # given to `bash -c` like a build line (phases/execution.py)
        res = ex.run(["bash", "-c", line], workspace=ws, limits=Limits(timeout_s=60), env=modules_env(env))
    finally:
        ex.close()
    assert res.exit_code == 0 and res.stdout == expected, res.summary()

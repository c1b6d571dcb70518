"""A command's CPU time beside its wall time, and the machine's load, shown to its reviewers (issue 28).

Real commands on real backends: a busy loop that burns 0.3 s of its own CPU time and a sleep of
0.3 s. Each backend measures the command's CPU time outside the sandbox (wait4 of the reaped tree;
Docker's cgroup; a Slurm job's runner), so the busy loop's is at least what it burned itself and
the sleep's is a small share of its wall time; a scripted run's execution-review prompts carry the
line each command's record makes.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from components import bwrap_or_skip, docker_or_skip, require_or_skip, slurm_down
from pipeline_support import phase_records, start_run

from ai_scientist.base.artifacts import CommandOutput, RunRecord, read_artifact
from ai_scientist.base.config import load_config
from ai_scientist.execution import make_executor
from ai_scientist.execution.base import Limits

BURN_S = 0.3
# burns BURN_S of its own CPU time (the process's own clock), whatever the machine's load
BUSY = [
    "python3",
    "-c",
    f"import time\nt = time.process_time()\nwhile time.process_time() - t < {BURN_S}: pass",
]
SLEEP = ["python3", "-c", f"import time; time.sleep({BURN_S})"]
# the busy loop in a background child the shell waits for: the child's time counts too
CHILD = ["/bin/sh", "-c", f"{BUSY[0]} -c '{BUSY[2]}' & wait"]


def _executor(tmp_path: Path, backend: str, *overrides: str):
    if backend == "bwrap":
        bwrap_or_skip()
    if backend == "docker":
        docker_or_skip()
    if backend == "slurm":
        down = slurm_down()
        if down:
            require_or_skip("slurm", down)
        overrides = (
            *overrides,
            f"exec.slurm.shared_dir={tmp_path / 'shared'}",
            "exec.slurm.poll_interval_s=0.2",
        )
    return make_executor(load_config(None, [f"exec.backend={backend}", *overrides]))


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "exp" / "run1" / "nodes" / "n0001" / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


BACKENDS = [
    ("subprocess", ()),
    ("subprocess", ("exec.fork_server=false",)),  # forked by the orchestrator: its own wait4
    ("bwrap", ()),
    ("docker", ()),
    ("docker", ("exec.docker_reuse_container=true",)),
    ("slurm", ()),
]


@pytest.mark.parametrize(
    ("backend", "overrides"),
    BACKENDS,
    ids=["subprocess", "subprocess-no-fork-server", "bwrap", "docker", "docker-reuse", "slurm"],
)
def test_busy_and_sleeping_commands_measured_per_backend(tmp_path, backend, overrides):
    ex = _executor(tmp_path, backend, *overrides)
    ws = _workspace(tmp_path)
    try:
        busy, sleep, child = (
            ex.run(c, workspace=ws, limits=Limits(timeout_s=120)) for c in (BUSY, SLEEP, CHILD)
        )
    finally:
        ex.close()
    for r in (busy, sleep, child):
        assert r.ok, (r.reason, r.stderr)
        assert r.cpu_s is not None, r.cpu_how
        assert r.load is not None and r.load["cores"] >= 1 and r.load["others"] == 0, r.load
        assert r.load["start"] is not None and r.load["end"] is not None
    # what each command burned itself, measured by the kernel (the clock tick leaves a few ms)
    assert busy.cpu_s >= BURN_S * 0.95 and child.cpu_s >= BURN_S * 0.95, (busy.cpu_s, child.cpu_s)
    # the sleep's CPU time is the interpreter's start, a small share of its wall time
    assert sleep.duration_s >= BURN_S and sleep.cpu_s < sleep.duration_s / 2, (sleep.cpu_s, sleep.duration_s)
    assert busy.cpu_s / busy.duration_s > 2 * sleep.cpu_s / sleep.duration_s
    assert busy.cpu_how == sleep.cpu_how and busy.cpu_how in ("wait4", "cgroup cpuacct")
    line = CommandOutput(
        "x", 0, None, "", "", "", sleep.duration_s, sleep.cpu_s, sleep.cpu_how, sleep.load
    ).usage
    assert "CPU well below wall time" in line and f"on {sleep.load['cores']} core" in line


def test_the_command_cannot_forge_its_cpu_time(tmp_path):
    """What the command prints or writes is not the measurement: a sleeping command that claims
    a busy minute is measured as sleeping."""
    ex = _executor(tmp_path, "subprocess")
    claim = "cpu 60.00 s / wall 0.30 s (200.00 cores)"
    forged = f"import json, time; print({claim!r}); json.dump({{'cpu_s': 60}}, open('exit.json', 'w')); time.sleep({BURN_S})"
    try:
        r = ex.run(["python3", "-c", forged], workspace=_workspace(tmp_path), limits=Limits(timeout_s=60))
    finally:
        ex.close()
    assert r.ok and claim in r.stdout
    assert r.cpu_s is not None and r.cpu_s < r.duration_s / 2


def test_other_commands_of_the_run_running_at_the_same_time(tmp_path):
    """Two commands through the run's one executor at once: each counts the other; alone, none."""
    ex = _executor(tmp_path, "subprocess")
    ws = _workspace(tmp_path)
    slow = ["python3", "-c", "import time; time.sleep(1.0)"]
    results = []
    barrier = threading.Barrier(2)

    def go() -> None:
        barrier.wait()
        results.append(ex.run(slow, workspace=ws, limits=Limits(timeout_s=60)))

    try:
        threads = [threading.Thread(target=go) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        alone = ex.run(SLEEP, workspace=ws, limits=Limits(timeout_s=60))
    finally:
        ex.close()
    assert [r.load["others"] for r in results] == [1, 1]
    assert alone.load is not None and alone.load["others"] == 0
    line = CommandOutput("x", 0, None, "", "", "", 1.0, results[0].cpu_s, "wait4", results[0].load).usage
    assert "1 other command of this run running" in line


def test_a_run_record_without_the_fields_reads_and_shows_no_line():
    """run.json of a run recorded before the measurement: read as before, no usage line."""
    old = {"command": "python x.py", "exit_code": 0, "killed_by": None, "reason": "",
           "stdout_tail": "ok", "stderr_tail": "", "duration_s": 1.5}  # fmt: skip
    rec = RunRecord.from_json({"outputs": [old], "duration_s": 1.5})
    assert rec.outputs[0].cpu_s is None and rec.outputs[0].usage == ""
    assert rec.to_json()["outputs"][0] == old
    with pytest.raises(ValueError, match="load"):
        CommandOutput.from_json({**old, "cpu_s": 1.0, "load": [1, 2]})


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("cpu"),
        "agent.stages.stage1_max_iters=2",  # the scripted first draft is buggy, its debug works
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
    )
    assert code == 0
    return run_dir


def test_the_review_prompt_carries_each_commands_usage_line(scripted_run):
    checked = 0
    for node_dir in sorted((scripted_run / "nodes").iterdir()):
        if not (node_dir / "run.json").exists():
            continue
        record = read_artifact(node_dir / "run.json", RunRecord)
        assert record is not None and record.outputs
        reviews = [
            r for r in phase_records(scripted_run, node_dir.name, "review") if "exec_review" in r["label"]
        ]
        if not reviews:
            continue
        sent = "\n".join(str(m["content"]) for m in reviews[-1]["messages"])
        for out in record.outputs:
            # measured, not a placeholder: the run record has the kernel's figure and the load
            assert out.cpu_s is not None and out.cpu_how == "wait4", out
            assert out.load is not None and out.load["cores"] == len(os.sched_getaffinity(0))
            assert out.usage and f"[{out.usage}]" in sent, (node_dir.name, out.usage)
            checked += 1
    assert checked >= 2
    # the record on disk carries the figures (a reviewer of the files reads the same)
    raw = json.loads(next((scripted_run / "nodes").glob("*/run.json")).read_text())
    assert {"cpu_s", "cpu_how", "load"} <= set(raw["outputs"][0])

"""The job's allocation reaches the command (issue 35): its SLURM_* variables and GPU binding pass
the inner sandbox's clean environment; nothing else of the job's environment does.

The first test runs ``ai-scientist exec --backend slurm`` on the real local cluster and checks the
job id and CPU count against the job's own record (the id sbatch answered, the options it was
submitted with, and ``scontrol`` while the controller still knows the job). This machine has no GPU
and the cluster no GRES: the GPU tests use the fake controller (tests/slurm_fake.py), whose sbatch
gives the batch script what slurmd gives a ``--gres=gpu:N`` job (``--export=NONE``: none of the
submitter's variables; ``SLURM_*``; ``CUDA_VISIBLE_DEVICES`` / ``SLURM_JOB_GPUS`` /
``GPU_DEVICE_ORDINAL`` / ``ROCR_VISIBLE_DEVICES`` of N devices) and records it; the real in-job
runner then starts the command in the real inner sandbox (subprocess, bwrap) or hands apptainer its
argv (a fake apptainer binary records it: ``--nv`` and the ``--env`` list).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import slurm_fake
from components import needs, slurm_down

from ai_scientist.base.config import ConfigError, load_config
from ai_scientist.execution.base import Limits
from ai_scientist.execution.slurm_backend import SlurmExecutor
from ai_scientist.execution.slurm_cli import SlurmCLI
from ai_scientist.execution.slurm_job import GPU_BINDING, allocation_environ, allocation_gpus

FAST = ["exec.slurm.poll_interval_s=0.05", "exec.slurm.lost_grace_s=0.3", "exec.python=/usr/bin/python3"]
# what the job's environment holds besides the allocation (slurmd's, a site's, a hostile one's)
NOT_ALLOCATION = {"LD_PRELOAD": "/tmp/evil.so", "SLURM_SITE_TOKEN": "t0ken-value", "MY_API_KEY": "k3y"}
DOWN = slurm_down()


def node_ws(tmp_path: Path, node: str = "n0001") -> Path:
    ws = tmp_path / "exp" / "run1" / "nodes" / node / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


def _env_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@needs("slurm", DOWN is not None, DOWN or "")
def test_exec_prints_the_jobs_id_and_cpu_count(tmp_path):
    shared = tmp_path / "shared"
    proc = subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", "exec", "--backend", "slurm",
         "--set", f"exec.slurm.shared_dir={shared}", "--set", "exec.slurm.cpus=2",
         "--set", "exec.slurm.poll_interval_s=0.2", "--", "sh", "-c", "echo $SLURM_JOB_ID $SLURM_CPUS_PER_TASK"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (id_file,) = shared.glob("*/*/*/job_id")  # the one job of this exec: what sbatch answered
    job_id = id_file.read_text().strip()
    sent = re.search(r"^#SBATCH --cpus-per-task=(\d+)$", (id_file.parent / "job.sh").read_text(), re.M)
    assert sent, "the job was submitted without --cpus-per-task"
    assert proc.stdout.split() == [job_id, sent.group(1)], proc.stdout
    # the controller's own record, while it still holds the job (MinJobAge)
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True)
    if shown.returncode == 0 and f"JobId={job_id} " in shown.stdout:
        assert re.search(r"CPUs/Task=(\d+)", shown.stdout).group(1) == sent.group(1)


@pytest.fixture
def fake(tmp_path):
    state = tmp_path / "slurmstate"
    env = slurm_fake.install(tmp_path / "bin", state)
    return state, env


def _executor(fake, tmp_path, *overrides) -> SlurmExecutor:
    cfg = load_config(None, [*FAST, f"exec.slurm.shared_dir={tmp_path / 'shared'}", *overrides])
    return SlurmExecutor(cfg.exec, cli=SlurmCLI(env=fake[1]))


def _job_env(fake, job_id: str) -> dict[str, str]:
    """The environment the (fake) controller gave the batch script: its record, not the test's."""
    return slurm_fake.jobs(fake[0])[job_id]["env"]


@pytest.mark.parametrize("sandbox", ["subprocess", "bwrap"])
def test_gres_gpu_binding_and_slurm_variables_reach_the_command(fake, tmp_path, sandbox):
    if sandbox == "bwrap" and not shutil.which("bwrap"):
        pytest.skip("bubblewrap not installed")
    slurm_fake.program(fake[0], [{"run": True, "state": "COMPLETED", "env": NOT_ALLOCATION}])
    ex = _executor(
        fake, tmp_path, "exec.slurm.gres=gpu:2", "exec.slurm.cpus=2", f"exec.slurm.sandbox={sandbox}"
    )
    # the orchestrator's per-node environment pins CUDA_VISIBLE_DEVICES="" without exec.gpus
    res = ex.run(["env"], workspace=node_ws(tmp_path), env={"CUDA_VISIBLE_DEVICES": "", "SEED": "3"})
    assert res.ok, res.summary() + res.stderr
    job = _job_env(fake, res.extra["job_id"])
    seen = _env_lines(res.stdout)
    assert "--gres=gpu:2" in (Path(res.extra["job_dir"]) / "job.sh").read_text()
    for key in (*GPU_BINDING[:3], "SLURM_JOB_GPUS", "SLURM_JOB_ID", "SLURM_CPUS_PER_TASK", "SLURM_NTASKS"):
        assert seen.get(key) == job[key], (key, seen.get(key), job.get(key))
    assert seen["SLURM_JOB_ID"] == res.extra["job_id"] and seen["SEED"] == "3"
    assert job["CUDA_VISIBLE_DEVICES"] and seen["CUDA_VISIBLE_DEVICES"] == job["CUDA_VISIBLE_DEVICES"]
    for key, value in NOT_ALLOCATION.items():  # in the job's environment, not in the command's
        assert job[key] == value and key not in seen, key
    assert not [v for v in seen.values() if "t0ken-value" in v or "k3y" == v]
    if sandbox == "bwrap":  # bwrap binds the allocation's device files (none exist here: argv level)
        assert (
            json.loads((Path(res.extra["job_dir"]) / "exit.json").read_text())["extra"]["inner_backend"]
            == "bwrap"
        )


FAKE_APPTAINER = """#!/bin/sh
/usr/bin/python3 - "$@" <<'PY'
import json, os, sys
args = sys.argv[1:]
with open(LOG, "a") as fh:
    fh.write(json.dumps({"argv": args, "host_cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}) + "\\n")
img = args.index(IMAGE)
os.execvp(args[img + 1], args[img + 1:])
PY
"""


def test_apptainer_gets_nv_and_the_binding_in_its_env(fake, tmp_path):
    # apptainer (not installable here) as a fake binary recording its argv, run inside the fake job
    log, image = tmp_path / "apptainer.jsonl", "/images/sandbox.sif"
    binary = tmp_path / "appbin" / "apptainer"
    binary.parent.mkdir()
    binary.write_text(FAKE_APPTAINER.replace("LOG", repr(str(log))).replace("IMAGE", repr(image)))
    binary.chmod(0o755)
    slurm_fake.program(fake[0], [{"run": True, "state": "COMPLETED", "env": NOT_ALLOCATION}])
    ex = _executor(
        fake, tmp_path, "exec.slurm.gres=gpu:1", "exec.slurm.sandbox=apptainer",
        f"exec.apptainer_binary={binary}", f"exec.apptainer_image={image}", "exec.allow_unsafe_sandbox=true",
    )  # fmt: skip
    res = ex.run(["true"], workspace=node_ws(tmp_path), env={"CUDA_VISIBLE_DEVICES": ""})
    assert res.ok, res.summary() + res.stderr
    job = _job_env(fake, res.extra["job_id"])
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    argv = call["argv"]
    passed = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--env")
    assert "--nv" in argv[: argv.index(image)]
    for key in (*GPU_BINDING[:3], "SLURM_JOB_GPUS", "SLURM_JOB_ID"):
        assert passed[key] == job[key], key
    assert call["host_cuda"] == job["CUDA_VISIBLE_DEVICES"]  # which devices apptainer's --nv binds
    assert not set(NOT_ALLOCATION) & set(passed)


def test_no_gres_no_gpu_and_exec_gpus_is_refused(fake, tmp_path):
    slurm_fake.program(fake[0], [{"run": True, "state": "COMPLETED"}])
    res = _executor(fake, tmp_path).run(
        ["env"], workspace=node_ws(tmp_path), env={"CUDA_VISIBLE_DEVICES": ""}
    )
    seen = _env_lines(res.stdout)
    assert "SLURM_JOB_GPUS" not in seen and seen["CUDA_VISIBLE_DEVICES"] == ""  # the node's choice stands
    assert seen["SLURM_JOB_ID"] == res.extra["job_id"]
    # refused (a ConfigError: exit 2 before any token), naming the way that works
    with pytest.raises(ConfigError, match=r"exec\.gpus=\[0\].*exec\.slurm\.gres"):
        _executor(fake, tmp_path, "exec.gpus=[0]")


def test_allocation_environ_and_gpus_are_pure_filters():
    job = {
        "SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "4", "SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1",
        "ZE_AFFINITY_MASK": "0", "PATH": "/x", "HOME": "/root", "SLURM_AUTH_SECRET": "s", **NOT_ALLOCATION,
    }  # fmt: skip
    assert set(allocation_environ(job)) == {
        "SLURM_JOB_ID", "SLURM_CPUS_PER_TASK", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
    }  # fmt: skip
    # bwrap binds device files by Slurm's numbers; apptainer's --nv takes what the job sees
    assert allocation_gpus(job, "bwrap") == (2, 3) and allocation_gpus(job, "apptainer") == (0, 1)
    assert allocation_gpus({"CUDA_VISIBLE_DEVICES": "GPU-uuid"}, "bwrap") == ()
    assert allocation_gpus({}, "subprocess") == ()


def test_run_job_in_a_gres_job_environment(tmp_path, monkeypatch):
    # the runner itself, as slurmd starts it: os.environ is the job's
    from ai_scientist.execution.slurm_job import run_job

    ws = node_ws(tmp_path)
    jdir = tmp_path / "job"
    jdir.mkdir()
    spec = {
        "command": ["env"], "workspace": str(ws), "env": {"CUDA_VISIBLE_DEVICES": ""}, "install_dir": None,
        "limits": {**{k: v for k, v in Limits(timeout_s=30).__dict__.items()}, "gpus": []},
        "sandbox": "subprocess", "python": "/usr/bin/python3", "resources_dir": None, "hidden": [],
        "apptainer_image": None, "apptainer_binary": "apptainer", "allow_unsafe": False,
    }  # fmt: skip
    (jdir / "spec.json").write_text(json.dumps(spec))
    job_env = slurm_fake.job_environ("4242", {"export": "NONE", "gres": "gpu:1", "cpus-per-task": "3"}, {})
    for key in list(os.environ):
        monkeypatch.delenv(key)
    for key, value in {**job_env, **NOT_ALLOCATION}.items():
        monkeypatch.setenv(key, value)
    assert run_job(jdir) == 0
    record = json.loads((jdir / "exit.json").read_text())
    seen = _env_lines(record["stdout"])
    assert {k: seen.get(k) for k in job_env if k.startswith("SLURM_") or k in GPU_BINDING} == {
        k: v for k, v in job_env.items() if k.startswith("SLURM_") or k in GPU_BINDING
    }
    assert not set(NOT_ALLOCATION) & set(seen)

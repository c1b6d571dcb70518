"""A fake Slurm controller for tests where the daemons are absent: sbatch, squeue, scancel on PATH.

Installed by :func:`install` as symlinks to this file in a bin directory; the
state lives in ``$FAKE_SLURM_DIR/jobs.json`` and every call is appended to
``calls.log``. The test programs what happens to the next submissions with
``outcomes.json`` (consumed in order), each ``{"run": bool, "state": ...,
"reason": ..., "exit_status": int}``: ``run`` executes the batch script at
submission (so the real in-job runner writes ``exit.json``), then the job takes
the given final state; ``"refuse": MESSAGE`` makes sbatch fail with that message
(``"created": true``: after creating the job, as when its answer is lost). :func:`set_job` changes a job later; :func:`purge`
removes it as the controller does after MinJobAge.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

NAMES = ("sbatch", "squeue", "scancel")


def install(bin_dir: Path, state_dir: Path) -> dict[str, str]:
    """Create the fake binaries; returns the environment to hand to ``SlurmCLI``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    me = Path(__file__).resolve()
    for name in NAMES:
        target = bin_dir / name
        target.write_text(
            f"#!{sys.executable}\nimport os, sys\nsys.path.insert(0, {str(me.parent)!r})\n"
            # the backend runs sbatch with a few variables only (exec.slurm.login_env: false)
            f"os.environ.setdefault('FAKE_SLURM_DIR', {str(state_dir)!r})\n"
            f"import slurm_fake\nsys.exit(slurm_fake.main({name!r}))\n"
        )
        target.chmod(0o755)
    (state_dir / "jobs.json").write_text("{}")
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_DIR": str(state_dir)}


def program(state_dir: Path, outcomes: list[dict]) -> None:
    (state_dir / "outcomes.json").write_text(json.dumps(outcomes))


def jobs(state_dir: Path) -> dict[str, dict]:
    return json.loads((state_dir / "jobs.json").read_text())


def calls(state_dir: Path) -> list[list[str]]:
    log = state_dir / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _locked(state_dir: Path):
    fh = open(state_dir / "lock", "a")
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def set_job(state_dir: Path, job_id: str, **fields) -> None:
    with _locked(state_dir):
        data = jobs(state_dir)
        data[job_id].update(fields)
        (state_dir / "jobs.json").write_text(json.dumps(data))


def purge(state_dir: Path, job_id: str) -> None:
    with _locked(state_dir):
        data = jobs(state_dir)
        data.pop(job_id, None)
        (state_dir / "jobs.json").write_text(json.dumps(data))


def _options(script: str) -> dict[str, str]:
    opts = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --") :].partition("=")
            opts[key] = value
    return opts


def job_environ(job_id: str, opts: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """The batch script's environment as slurmd gives it: with ``--export=NONE`` none of the
    submitter's variables but PATH / HOME / LANG, the allocation's ``SLURM_*`` variables, and for
    ``--gres=gpu[:type]:N`` the GPU binding of N devices; ``extra`` (an outcome's ``env``) last."""
    env = dict(os.environ)
    if opts.get("export") == "NONE":
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env.update(
        SLURM_JOB_ID=job_id,
        SLURM_JOBID=job_id,
        SLURM_JOB_NAME=opts.get("job-name", ""),
        SLURM_CPUS_PER_TASK=opts.get("cpus-per-task", "1"),
        SLURM_NTASKS=opts.get("ntasks", "1"),
        # one node, this machine, all tasks on it (what an MPI launcher reads of the allocation)
        SLURM_JOB_NODELIST=os.uname().nodename,
        SLURM_NODELIST=os.uname().nodename,
        SLURM_JOB_NUM_NODES="1",
        SLURM_TASKS_PER_NODE=opts.get("ntasks", "1"),
        SLURM_MEM_PER_NODE=opts.get("mem", ""),
    )
    gres = opts.get("gres", "")
    if gres.startswith("gpu"):
        count = int(gres.rsplit(":", 1)[-1]) if gres.rsplit(":", 1)[-1].isdigit() else 1
        ids = ",".join(str(i) for i in range(count))
        env.update(
            SLURM_JOB_GPUS=ids, CUDA_VISIBLE_DEVICES=ids, GPU_DEVICE_ORDINAL=ids, ROCR_VISIBLE_DEVICES=ids
        )
    env.update(extra)
    return env


def main(name: str) -> int:
    state_dir = Path(os.environ["FAKE_SLURM_DIR"])
    with open(state_dir / "calls.log", "a") as fh:
        fh.write(json.dumps([name, *sys.argv[1:]]) + "\n")
    with _locked(state_dir):
        data = jobs(state_dir)
        if name == "sbatch" and "--test-only" in sys.argv:
            print(
                "sbatch: Job 0 to start now using 1 processors on nodes fake in partition debug",
                file=sys.stderr,
            )
        elif name == "sbatch":
            script_path = Path(sys.argv[-1])
            opts = _options(script_path.read_text())
            out_file = opts.get("output", "")
            if out_file and not Path(out_file).parent.is_dir():
                outcome = {"state": "FAILED", "reason": "JobLaunchFailure", "exit_status": 0, "run": False}
            else:
                queue_path = state_dir / "outcomes.json"
                queue = json.loads(queue_path.read_text()) if queue_path.exists() else []
                outcome = queue.pop(0) if queue else {"run": True, "state": "COMPLETED"}
                queue_path.write_text(json.dumps(queue))
            counter = state_dir / "last_id"
            if outcome.get("refuse") and not outcome.get("created"):
                print(outcome["refuse"], file=sys.stderr)
                return 1
            job_id = str(int(counter.read_text()) + 1 if counter.exists() else 1001)
            counter.write_text(job_id)
            env = job_environ(job_id, opts, outcome.get("env") or {})
            if outcome.get("run"):
                with open(opts["output"], "wb") as out, open(opts["error"], "wb") as err:
                    subprocess.run(
                        ["bash", str(script_path)], stdout=out, stderr=err, cwd=opts.get("chdir"), env=env
                    )
            data[job_id] = {
                "state": outcome.get("state", "COMPLETED"),
                "reason": outcome.get("reason", "None"),
                "exit_status": outcome.get("exit_status", 0),
                "name": opts.get("job-name", ""),
                "env": env,
            }
            if outcome.get("refuse"):  # submitted, but sbatch lost the answer
                (state_dir / "jobs.json").write_text(json.dumps(data))
                print(outcome["refuse"], file=sys.stderr)
                return 1
            print(job_id)
        elif name == "squeue":
            args = sys.argv[1:]
            ids = args[args.index("--jobs") + 1].split(",") if "--jobs" in args else list(data)
            wanted_name = args[args.index("--name") + 1] if "--name" in args else None
            known = [i for i in ids if i in data and (wanted_name is None or data[i]["name"] == wanted_name)]
            if "--jobs" in args and not known:
                print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
                return 1
            for i in known:
                j = data[i]
                print(f"{i}|{j['state']}|{j['reason']}|{j['exit_status']}|{j['name']}|")
        elif name == "scancel":
            for i in sys.argv[1:]:
                if i in data and data[i]["state"] in ("PENDING", "RUNNING"):
                    data[i].update(state="CANCELLED", reason="None", exit_status=15)
        (state_dir / "jobs.json").write_text(json.dumps(data))
    return 0

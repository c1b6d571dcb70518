"""The slurm backend on a real single-node cluster (scripts/slurm_ci.sh; scripts/test.sh starts it).

Skipped, with the reason, when no cluster answers (SLURM_CONF unset or the controller down).
Covers what only the real scheduler shows: exact timeouts inside the job, Slurm's memory kill
(FAILED 0:9 without cgroups), a job cancelled by hand, JobLaunchFailure, a whole scripted run
with 4 jobs in flight, Ctrl-C cancelling exactly the run's jobs, and kill -9 + resume
re-attaching to the running jobs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from components import needs, slurm_down
from pipeline_support import events, journal_nodes, start_run
from waiting import load_scaled

from ai_scientist.base.config import load_config
from ai_scientist.execution.base import Limits
from ai_scientist.execution.slurm_backend import SlurmExecutor

DOWN = slurm_down()
pytestmark = needs("slurm", DOWN is not None, DOWN or "")
DRIVER = Path(__file__).parent / "drive_run.py"
SLURM_RUN = ["exec.backend=slurm", "exec.slurm.poll_interval_s=0.2", "exec.slurm.lost_grace_s=3"]


def squeue_ids(*extra: str) -> set[str]:
    out = subprocess.run(
        ["squeue", "--noheader", "-o", "%i", *extra], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def executor(tmp_path: Path, *overrides: str) -> SlurmExecutor:
    cfg = load_config(None, [*SLURM_RUN, f"exec.slurm.shared_dir={tmp_path / 'shared'}", *overrides])
    return SlurmExecutor(cfg.exec)


def node_ws(tmp_path: Path, node: str = "n0001") -> Path:
    ws = tmp_path / "exp" / "run1" / "nodes" / node / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


def test_command_runs_as_a_job_with_its_output(tmp_path):
    ex = executor(tmp_path)
    res = ex.run(
        "echo hello-$(hostname); echo err >&2; exit 4",
        workspace=node_ws(tmp_path),
        limits=Limits(timeout_s=60),
    )
    assert res.exit_code == 4 and res.stdout.startswith("hello-") and res.stderr == "err\n"
    job_id = res.extra["job_id"]
    state = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    assert not state or "JobName=" + res.extra["job_name"] in state
    ex.close()  # returns once the job has left the queue (its batch step may still be COMPLETING)
    assert job_id not in squeue_ids()


def test_exact_timeout_inside_the_job(tmp_path):
    res = executor(tmp_path).run(["sleep", "60"], workspace=node_ws(tmp_path), limits=Limits(timeout_s=2))
    assert res.killed_by == "timeout" and res.shell_exit_code == 124
    assert 2 <= res.duration_s < 15  # Slurm's own limit (whole minutes) would be 60 s or more


def test_memory_overrun_is_killed_by_slurm(tmp_path):
    # the inner limit (4 GB) is far above Slurm's --mem (120 MB): Slurm's polling kills the job
    grow = "import time\nb=[]\nfor i in range(80):\n    b.append(bytearray(16*2**20)); time.sleep(0.1)\ntime.sleep(30)\n"
    (node_ws(tmp_path) / "grow.py").write_text(grow)
    ex = executor(tmp_path, "exec.slurm.mem_mb=120")
    res = ex.run(
        ["/usr/bin/python3", "grow.py"],
        workspace=node_ws(tmp_path),
        limits=Limits(timeout_s=50, memory_mb=4096),
    )
    assert res.killed_by == "memory", res.summary()
    assert "--mem=120 MB" in res.reason and res.extra["slurm_state"] in ("FAILED", "OUT_OF_MEMORY")


def test_job_cancelled_by_hand(tmp_path):
    ex = executor(tmp_path)
    box: dict = {}
    t = threading.Thread(
        target=lambda: box.update(r=ex.run(["sleep", "60"], workspace=node_ws(tmp_path))), daemon=True
    )
    t.start()
    deadline = time.time() + load_scaled(30)
    while not ex.in_flight():
        assert time.time() < deadline
        time.sleep(0.05)
    subprocess.run(["scancel", ex.in_flight()[0]], check=True)
    t.join(load_scaled(60))
    res = box["r"]
    assert res.killed_by == "signal" and "cancelled" in res.reason and res.extra["slurm_state"] == "CANCELLED"


def test_launch_failure_when_job_dir_is_not_visible(tmp_path):
    ex = executor(tmp_path, 'exec.slurm.extra_args=["--output=/nonexistent-ai-sci/out"]')
    res = ex.run(["true"], workspace=node_ws(tmp_path), limits=Limits(timeout_s=30))
    assert not res.ok and "JobLaunchFailure" in res.reason and "shared_dir" in res.reason


def _exec_records(run_dir: Path) -> list[dict]:
    return [
        json.loads(p.read_text()) for p in sorted(run_dir.glob("nodes/*/exec/*.json")) if p.stat().st_size
    ]


@pytest.mark.slow
def test_scripted_run_with_four_jobs_in_flight(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path, *SLURM_RUN, "agent.num_workers=4", f"exec.slurm.shared_dir={tmp_path / 'shared'}"
    )
    assert code == 0, [e for e in events(run_dir) if e["type"] in ("internal_error", "node_failed")]
    nodes = journal_nodes(run_dir)
    assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}
    records = _exec_records(run_dir)
    assert records and all(r["backend"] == "slurm" and r["extra"]["job_id"].isdigit() for r in records)
    ids = [r["extra"]["job_id"] for r in records]
    assert len(set(ids)) == len(ids), "a job id reused by two commands"
    assert not (set(ids) & squeue_ids()), "jobs of the run left in squeue"
    assert any(e["type"] == "sandbox_backend" and e["backend"] == "slurm" for e in events(run_dir))
    # jobs really were in flight together: submitted (job_id written) before another's exit.json
    spans = []
    for r in records:
        jdir = Path(r["extra"]["job_dir"])
        spans.append(((jdir / "job_id").stat().st_mtime, (jdir / "exit.json").stat().st_mtime))
    most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert most == 4, f"at most {most} jobs were in flight at once"


def _driver(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    sets = [a for s in (*SLURM_RUN, f"exec.slurm.shared_dir={tmp_path / 'shared'}", "agent.stages.stage3_max_iters=1",
                        "agent.stages.stage4_max_iters=1") for a in ("--set", s)]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *sets, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, tmp_path / "experiments" / "run"


def _wait_for_job(tmp_path: Path, node: str, proc: subprocess.Popen) -> str:
    """The id of the running job of ``node`` whose experiment has started (``--slow`` marker)."""
    deadline = time.time() + load_scaled(180)
    marker = tmp_path / "experiments" / "run" / "nodes" / node / "workspace" / "STARTED"
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"run ended early: {proc.stderr.read()[-2000:]}")
        if marker.exists():
            ids = [p.read_text().strip() for p in (tmp_path / "shared" / "run" / node).glob("*/job_id")]
            running = [i for i in ids if i in squeue_ids("-t", "RUNNING")]
            if running:
                return running[-1]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no running job of {node} appeared")


@pytest.mark.slow
def test_ctrl_c_cancels_the_runs_jobs_and_nothing_else(tmp_path):
    foreign = subprocess.run(
        ["sbatch", "--parsable", "--job-name=someone-else", "-o", "/dev/null", "--wrap", "sleep 300"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        proc, run_dir = _driver(tmp_path, "--slow", "n0002", "60")
        job = _wait_for_job(tmp_path, "n0002", proc)
        mine = {p.read_text().strip() for p in (tmp_path / "shared").glob("run/*/*/job_id")}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=load_scaled(60)) == 130, proc.stderr.read()[-2000:]
        left = squeue_ids()
        assert job in mine and not (mine & left), f"jobs of the run still queued: {mine & left}"
        assert foreign in left, "Ctrl-C cancelled a job that is not the run's"
        state = json.loads((run_dir / "state.json").read_text())
        assert state["status"] == "interrupted"
        assert journal_nodes(run_dir)["n0002"]["status"] == "running"  # cancelled, not recorded as buggy
    finally:
        subprocess.run(["scancel", foreign], check=False)


@pytest.mark.slow
def test_kill9_then_resume_reattaches_to_running_jobs(tmp_path):
    proc, run_dir = _driver(tmp_path, "--slow", "n0002", "15")
    job = _wait_for_job(tmp_path, "n0002", proc)
    sbatch_dirs_before = {p.parent for p in (tmp_path / "shared").glob("run/*/*/job_id")}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert job in squeue_ids(), "the job did not outlive the killed orchestrator"
    finished_before = {nid for nid, n in journal_nodes(run_dir).items() if n["status"] in ("good", "buggy")}
    counts_before = {
        nid: len(list((run_dir / "nodes" / nid / "exec").glob("*.json"))) for nid in finished_before
    }
    res = subprocess.run(
        [sys.executable, str(DRIVER), "resume", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    # the job was re-attached: n0002's one phase-4 record carries its id, marked reattached, and
    # no job directory of the run was submitted twice (no second occurrence, nothing set aside)
    n2 = [r for r in _exec_records(run_dir) if r["extra"].get("job_dir", "").find("/n0002/") >= 0]
    run4 = [r for r in n2 if r["phase"] == "phase4"]
    assert len(run4) == 1 and run4[0]["extra"]["job_id"] == job and run4[0]["extra"]["reattached"]
    assert run4[0]["ok"], run4[0]["reason"]
    for d in sbatch_dirs_before:
        assert (d / "job_id").exists() and not list(d.parent.glob(d.name + ".cancelled-*"))
    n2_dirs = sorted(p.name for p in (tmp_path / "shared" / "run" / "n0002").iterdir())
    assert not [n for n in n2_dirs if ".cancelled-" in n], n2_dirs
    assert Path(run4[0]["extra"]["job_dir"]) in sbatch_dirs_before
    nodes = journal_nodes(run_dir)
    assert all(n["status"] in ("good", "buggy") for n in nodes.values())
    for nid in finished_before:  # no node finished before the kill ran again
        assert len(list((run_dir / "nodes" / nid / "exec").glob("*.json"))) == counts_before[nid]
    all_ids = {p.read_text().strip() for p in (tmp_path / "shared").glob("run/*/*/job_id")}
    assert not (all_ids & squeue_ids()), "jobs of the run left in squeue"


def test_doctor_reports_client_controller_and_partitions():
    from ai_scientist.execution.doctor import check_slurm

    rows = {r["name"]: r for r in check_slurm(load_config(None, ["exec.backend=slurm"]))}
    assert rows["slurm client"]["ok"] and "slurm" in rows["slurm client"]["detail"]
    assert rows["slurm controller"]["ok"] and rows["slurm controller"]["status"] == "reachable"
    sinfo = subprocess.run(
        ["sinfo", "--noheader", "-o", "%P|%c|%l"], capture_output=True, text=True, check=True
    )
    for line in sinfo.stdout.splitlines():
        part, cpus, limit = line.split("|")
        row = rows[f"partition {part}"]
        assert row["ok"] and f"{cpus} CPUs" in row["detail"] and f"time limit {limit}" in row["detail"]
    wrong = check_slurm(load_config(None, ["exec.backend=slurm", "exec.slurm.partition=no-such-part"]))
    assert [r for r in wrong if r["name"] == "partition no-such-part" and not r["ok"]]


SUBMIT_AND_DIE = """
import sys
from pathlib import Path
from ai_scientist.base.config import load_config
from ai_scientist.execution.slurm_backend import SlurmExecutor
cfg = load_config(None, sys.argv[2:])
SlurmExecutor(cfg.exec).run(["sleep", "300"], workspace=Path(sys.argv[1]))
"""


@pytest.mark.slow
def test_job_purged_before_its_exit_file_was_read_is_lost(tmp_path):
    ws = node_ws(tmp_path)
    sets = [*SLURM_RUN, f"exec.slurm.shared_dir={tmp_path / 'shared'}"]
    proc = subprocess.Popen([sys.executable, "-c", SUBMIT_AND_DIE, str(ws), *sets])
    deadline = time.time() + load_scaled(60)
    while not list((tmp_path / "shared").glob("run1/n0001/*/job_id")):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    job = next((tmp_path / "shared").glob("run1/n0001/*/job_id")).read_text().strip()
    os.kill(proc.pid, signal.SIGKILL)  # the orchestrator dies; nobody reads the job's end
    proc.wait(timeout=30)
    subprocess.run(["scancel", job], check=True)
    deadline = time.time() + load_scaled(180)  # MinJobAge plus the controller's purge interval (60 s)
    while subprocess.run(["squeue", "--noheader", "--states=all", "-o", "%i", "-j", job], capture_output=True,
                         text=True).stdout.strip():  # fmt: skip
        assert time.time() < deadline, "the controller never purged the job"
        time.sleep(1)
    res = executor(tmp_path).run(["sleep", "300"], workspace=ws)  # resume: re-attach finds nothing
    assert res.extra["job_id"] == job and res.extra["reattached"]
    assert not res.ok and "lost" in res.reason and job in res.reason


def test_wrong_partition_is_a_configuration_error_before_any_job(tmp_path):
    # a ConfigError: the CLI turns it into exit 2 with the message, before any token is spent
    from ai_scientist.base.config import ConfigError

    with pytest.raises(ConfigError, match=r"exec\.slurm.*partition=no-such-part.*invalid partition"):
        executor(tmp_path, "exec.slurm.partition=no-such-part")
    assert not list((tmp_path / "shared").glob("**/job.sh")), "a job directory was made"

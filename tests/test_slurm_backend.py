"""The slurm backend against a fake controller (tests/slurm_fake.py): no daemons needed.

The fake's sbatch really runs the batch script when told to, so the in-job runner
(ai_scientist.execution.slurm_job) and its inner subprocess sandbox are the real ones;
what the fake decides is only the scheduler's side: job states, reasons, purges.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import slurm_fake
from waiting import load_scaled

from ai_scientist.base.config import load_config
from ai_scientist.execution.base import Limits, SandboxError
from ai_scientist.execution.slurm_backend import SlurmExecutor
from ai_scientist.execution.slurm_cli import SlurmCLI, parse_squeue

FAST = ["exec.slurm.poll_interval_s=0.05", "exec.slurm.lost_grace_s=0.3", "exec.python=/usr/bin/python3"]


@pytest.fixture
def fake(tmp_path):
    state = tmp_path / "slurmstate"
    env = slurm_fake.install(tmp_path / "bin", state)
    return state, env


def executor(fake, tmp_path, *overrides) -> SlurmExecutor:
    state, env = fake
    cfg = load_config(None, [*FAST, f"exec.slurm.shared_dir={tmp_path / 'shared'}", *overrides])
    return SlurmExecutor(cfg.exec, cli=SlurmCLI(env=env))


def node_ws(tmp_path: Path, node: str = "n0001") -> Path:
    ws = tmp_path / "exp" / "run1" / "nodes" / node / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


def wait_for(pred, timeout=20.0):
    deadline = time.time() + load_scaled(timeout)
    while not pred():
        assert time.time() < deadline, "condition never became true"
        time.sleep(0.02)


def in_thread(fn):
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def test_completed_job_result_files_and_no_secrets(fake, tmp_path):
    ex = executor(fake, tmp_path)
    ws = node_ws(tmp_path)
    res = ex.run(
        "echo out-$FOO; echo err >&2; exit 3",
        workspace=ws,
        limits=Limits(timeout_s=30),
        env={"FOO": "bar", "MY_API_KEY": "s3cret-value"},
    )
    assert res.exit_code == 3 and not res.ok and res.backend == "slurm"
    assert res.stdout == "out-bar\n" and res.stderr == "err\n"
    job_id = res.extra["job_id"]
    jdir = Path(res.extra["job_dir"])
    assert jdir.parent.name == "n0001" and jdir.parent.parent.name == "run1"
    assert (jdir / "job_id").read_text().strip() == job_id
    assert "run1" in res.extra["job_name"] and "n0001" in res.extra["job_name"]
    assert {"job.sh", "spec.json", "stdout", "stderr", "exit.json", "job_id"} <= {
        p.name for p in jdir.iterdir()
    }
    assert (jdir / "stdout").read_text() == "out-bar\n"
    assert json.loads((jdir / "exit.json").read_text())["exit_code"] == 3
    assert res.extra["dropped_env"] == ["MY_API_KEY"]
    # one command per job: the job's small runner forks it (no fork server started for it)
    assert json.loads((jdir / "exit.json").read_text())["extra"]["forked_by"] == "orchestrator"
    for f in jdir.iterdir():
        assert "s3cret-value" not in f.read_text(), f"secret written to {f.name}"
    sbatch = [c for c in slurm_fake.calls(fake[0]) if c[0] == "sbatch"]
    assert len(sbatch) == 1


def test_script_options_from_config(fake, tmp_path):
    ex = executor(
        fake,
        tmp_path,
        "exec.slurm.partition=gpu",
        "exec.slurm.account=proj7",
        "exec.slurm.qos=short",
        "exec.slurm.gres=gpu:1",
        "exec.slurm.cpus=4",
        "exec.slurm.mem_mb=2048",
        "exec.slurm.time_margin_s=30",
    )
    opts = ex.sbatch_options("ais-r-n", tmp_path / "j", Limits(timeout_s=61))
    assert "--time=2" in opts  # 61 s + 30 s margin = 91 s -> 2 whole minutes
    assert {"--partition=gpu", "--account=proj7", "--qos=short", "--gres=gpu:1"} <= set(opts)
    assert {"--cpus-per-task=4", "--mem=2048", "--export=ALL", "--job-name=ais-r-n"} <= set(opts)
    login = executor(fake, tmp_path, "exec.slurm.login_env=true").sbatch_options("x", tmp_path, Limits())
    assert "--export=NONE" in login and "--export=ALL" not in login
    default = executor(fake, tmp_path).sbatch_options(
        "x", tmp_path, Limits(timeout_s=600, memory_mb=900, cpus=1.5)
    )
    assert {"--time=11", "--mem=900", "--cpus-per-task=2"} <= set(default)
    assert not any(o.startswith(("--partition", "--account", "--qos", "--gres")) for o in default)


def test_job_environment_is_a_few_variables_or_the_login_shell(fake, tmp_path):
    """login_env false: sbatch runs with PATH, locale, SLURM_*, the module variables of the
    orchestrator, and the job (--export=ALL) inherits those only; true: --export=NONE."""
    state, env = fake
    env = {
        **env,
        "MODULEPATH": "/opt/modules",
        "LC_ALL": "C",
        "MY_API_KEY": "k3y",
        "SLURM_SITE_TOKEN": "t0ken",
        "UNRELATED": "x",
    }
    seen = {}
    for login in (False, True):
        cfg = load_config(
            None,
            [*FAST, f"exec.slurm.shared_dir={tmp_path / 'shared'}", f"exec.slurm.login_env={login}"],
        )
        ex = SlurmExecutor(cfg.exec, cli=SlurmCLI(env=env))
        res = ex.run("true", workspace=node_ws(tmp_path, f"n{int(login)}"), limits=Limits(timeout_s=30))
        assert res.ok, res.stderr
        script = (Path(res.extra["job_dir"]) / "job.sh").read_text()
        assert ("--export=NONE" if login else "--export=ALL") in script
        seen[login] = slurm_fake.jobs(state)[res.extra["job_id"]]["env"]
    for name in ("PATH", "MODULEPATH", "LC_ALL"):
        assert seen[False][name] == env[name]
    for job_env in seen.values():
        assert not {"MY_API_KEY", "SLURM_SITE_TOKEN", "UNRELATED"} & set(job_env)
    assert "MODULEPATH" not in seen[True]  # --export=NONE: the node's login shell sets what it sets


def test_later_jobs_on_a_node_reuse_its_isolation_checks(fake, tmp_path):
    """The first job of a run on a node runs the inner sandbox's checks and records them; the next
    one takes them; a record from another boot of the node is not taken."""
    ex = executor(fake, tmp_path)
    ws = node_ws(tmp_path)
    first = ex.run("true", workspace=ws, limits=Limits(timeout_s=30))
    record = Path(first.extra["job_dir"]).parent.parent / ".host-checks" / f"{os.uname().nodename}.json"
    saved = json.loads(record.read_text())
    assert first.extra["host_checks_reused"] is False
    assert saved["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    second = ex.run("true", workspace=ws, limits=Limits(timeout_s=30))
    assert second.ok and second.extra["host_checks_reused"] is True
    record.write_text(json.dumps({**saved, "boot_id": "another-boot"}))
    third = ex.run("true", workspace=ws, limits=Limits(timeout_s=30))
    assert third.ok and third.extra["host_checks_reused"] is False
    assert json.loads(record.read_text())["boot_id"] == saved["boot_id"]  # checked again, re-recorded


def test_exact_timeout_is_enforced_inside_the_job(fake, tmp_path):
    ex = executor(fake, tmp_path)
    res = ex.run(["sleep", "30"], workspace=node_ws(tmp_path), limits=Limits(timeout_s=1.0))
    assert res.killed_by == "timeout" and res.shell_exit_code == 124
    assert res.duration_s < 10


@pytest.mark.parametrize(
    ("outcome", "killed_by", "words"),
    [
        (
            {"state": "TIMEOUT", "reason": "TimeLimit", "exit_status": 15},
            "timeout",
            ["TIMEOUT", "time limit"],
        ),
        ({"state": "FAILED", "reason": "None", "exit_status": 9}, "memory", ["signal 9", "--mem=512"]),
        ({"state": "OUT_OF_MEMORY", "reason": "None", "exit_status": 0}, "memory", ["OUT_OF_MEMORY"]),
        ({"state": "CANCELLED", "reason": "None", "exit_status": 15}, "signal", ["cancelled"]),
        ({"state": "NODE_FAIL", "reason": "None", "exit_status": 0}, "signal", ["NODE_FAIL"]),
    ],
)
def test_job_ended_without_exit_file_names_the_cause(fake, tmp_path, outcome, killed_by, words):
    slurm_fake.program(fake[0], [{"run": False, **outcome}])
    ex = executor(fake, tmp_path, "exec.slurm.mem_mb=512")
    res = ex.run(["true"], workspace=node_ws(tmp_path), limits=Limits(timeout_s=30))
    assert not res.ok and res.killed_by == killed_by and res.exit_code is None
    for w in words:
        assert w in res.reason, res.reason
    assert res.extra["slurm_state"] == outcome["state"] and res.extra["job_id"]


def test_launch_failure_names_the_shared_dir(fake, tmp_path):
    # the job's output directory is not visible where the job starts: Slurm's JobLaunchFailure
    ex = executor(fake, tmp_path, 'exec.slurm.extra_args=["--output=/nonexistent-dir/out"]')
    assert ex.cfg.extra_args == ["--output=/nonexistent-dir/out"]
    res = ex.run(["true"], workspace=node_ws(tmp_path), limits=Limits(timeout_s=30))
    assert not res.ok and "JobLaunchFailure" in res.reason and "shared_dir" in res.reason


def test_missing_workspace_on_the_node_is_reported(fake, tmp_path):
    ws = tmp_path / "exp" / "run1" / "nodes" / "n0003" / "workspace"  # never created
    res = executor(fake, tmp_path).run(["true"], workspace=ws, limits=Limits(timeout_s=30))
    assert not res.ok and "does not exist on compute node" in res.reason and str(ws) in res.reason


def test_purged_job_without_exit_file_is_lost(fake, tmp_path):
    state = fake[0]
    slurm_fake.program(state, [{"run": False, "state": "RUNNING"}])
    ex = executor(fake, tmp_path)
    t, box = in_thread(lambda: ex.run(["true"], workspace=node_ws(tmp_path), limits=Limits(timeout_s=30)))
    wait_for(lambda: ex.in_flight())
    slurm_fake.purge(state, ex.in_flight()[0])
    t.join(load_scaled(20))
    res = box["result"]
    assert res.exit_code is None and "lost" in res.reason and "left the queue" in res.reason


def test_one_squeue_per_poll_for_all_jobs_in_flight(fake, tmp_path):
    state = fake[0]
    slurm_fake.program(state, [{"run": False, "state": "RUNNING"}] * 4)
    ex = executor(fake, tmp_path, "exec.slurm.poll_interval_s=0.2")
    threads = [
        in_thread(lambda i=i: ex.run(["sh", "-c", f"echo job{i}"], workspace=node_ws(tmp_path, f"n000{i}")))
        for i in range(1, 5)
    ]
    wait_for(lambda: len(ex.in_flight()) == 4)
    mark = len(slurm_fake.calls(state))
    start = time.monotonic()

    def squeues() -> list:
        return [c for c in slurm_fake.calls(state)[mark:] if c[0] == "squeue"]

    wait_for(lambda: len(squeues()) >= 4)
    polls = squeues()
    # at most one squeue per 0.2 s poll (plus the one in progress at the mark), however slow the
    # machine: a call per job would be 4 per poll
    assert len(polls) <= (time.monotonic() - start) / 0.2 + 2, polls
    for c in polls[1:]:  # the first may have started before the fourth job was registered
        assert sorted(c[c.index("--jobs") + 1].split(",")) == sorted(ex.in_flight())
    for job_id in ex.in_flight():  # the jobs run now; each writes its exit file
        jdir = ex._jobs[job_id].dir
        subprocess.run(["bash", str(jdir / "job.sh")], cwd=jdir, capture_output=True, check=False)
        slurm_fake.set_job(state, job_id, state="COMPLETED")
    outs = []
    for t, box in threads:
        t.join(load_scaled(30))
        outs.append(box["result"].stdout)
    assert sorted(outs) == [f"job{i}\n" for i in range(1, 5)]


def test_reattach_after_crash_does_not_resubmit(fake, tmp_path):
    state = fake[0]
    slurm_fake.program(state, [{"run": False, "state": "RUNNING"}])
    ws = node_ws(tmp_path)
    first = executor(fake, tmp_path)
    t, _box = in_thread(lambda: first.run(["sh", "-c", "echo once"], workspace=ws))
    wait_for(lambda: first.in_flight())
    job_id = first.in_flight()[0]
    # the orchestrator "dies" (nothing is closed); a new process runs the same command of the node
    second = executor(fake, tmp_path)
    t2, box2 = in_thread(lambda: second.run(["sh", "-c", "echo once"], workspace=ws))
    wait_for(lambda: second.in_flight())
    assert second.in_flight() == [job_id]
    jdir = second._jobs[job_id].dir
    subprocess.run(["bash", str(jdir / "job.sh")], cwd=jdir, capture_output=True, check=False)
    slurm_fake.set_job(state, job_id, state="COMPLETED")
    t2.join(load_scaled(30))
    res = box2["result"]
    assert res.ok and res.stdout == "once\n" and res.extra["job_id"] == job_id and res.extra["reattached"]
    # a finished job is read back as well, and a crash between sbatch and job_id is found by name
    (jdir / "job_id").unlink()
    third = executor(fake, tmp_path)
    res3 = third.run(["sh", "-c", "echo once"], workspace=ws)
    assert res3.extra["job_id"] == job_id and res3.stdout == "once\n"
    assert [c[0] for c in slurm_fake.calls(state)].count("sbatch") == 1
    # the next occurrence of the same command in that node is a new job
    res4 = third.run(["sh", "-c", "echo once"], workspace=ws)
    assert res4.extra["job_id"] != job_id and not res4.extra["reattached"]


def test_close_cancels_own_jobs_only_and_resume_resubmits(fake, tmp_path):
    state, env = fake
    slurm_fake.program(state, [{"run": False, "state": "RUNNING"}] * 3)
    foreign = subprocess.run(["sbatch", "--parsable", str(_foreign_script(tmp_path))], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    ex = executor(fake, tmp_path)
    ws = node_ws(tmp_path)
    for cmd in ("echo a", "echo b"):
        in_thread(lambda cmd=cmd: ex.run(cmd, workspace=ws))
    wait_for(lambda: len(ex.in_flight()) == 2)
    mine = sorted(ex.in_flight())
    ex.close()
    cancels = [c for c in slurm_fake.calls(state) if c[0] == "scancel"]
    assert len(cancels) == 1 and sorted(cancels[0][1:]) == mine
    jobs = slurm_fake.jobs(state)
    assert jobs[foreign]["state"] == "RUNNING"
    assert all(jobs[j]["state"] == "CANCELLED" for j in mine)
    node_dir = tmp_path / "shared" / "run1" / "n0001"
    assert sorted(p.name.split(".cancelled-")[1] for p in node_dir.iterdir()) == mine
    with pytest.raises(SandboxError):
        ex.run("echo late", workspace=ws)
    res = executor(fake, tmp_path).run("echo a", workspace=ws)  # resume: a fresh job
    assert res.extra["job_id"] not in mine + [foreign] and not res.extra["reattached"]


def test_sbatch_refusal_is_a_sandbox_error(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue", "scancel"):
        (bin_dir / name).write_text(
            "#!/bin/sh\necho 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n"
        )
        (bin_dir / name).chmod(0o755)
    cfg = load_config(
        None, [*FAST, f"exec.slurm.shared_dir={tmp_path / 'shared'}", "exec.slurm.partition=nope"]
    )
    ex = SlurmExecutor(cfg.exec, cli=SlurmCLI(env={"PATH": f"{bin_dir}:/usr/bin:/bin"}))
    with pytest.raises(SandboxError, match="invalid partition"):
        ex.run("true", workspace=node_ws(tmp_path))


def test_parse_squeue_exit_status():
    states = parse_squeue("12|FAILED|None|9|ais-a|\n13|COMPLETED|None|768|ais-b|\n")
    assert states["12"].signal == 9 and states["12"].exit_code == 0 and not states["12"].active
    assert states["13"].exit_code == 3 and states["13"].signal is None and states["13"].name == "ais-b"


def _foreign_script(tmp_path: Path) -> Path:
    p = tmp_path / "foreign.sh"
    p.write_text(
        f"#!/bin/bash\n#SBATCH --job-name=someone-else\n#SBATCH --output={tmp_path}/f.out\nsleep 1\n"
    )
    return p


def test_doctor_without_slurm_client(tmp_path, monkeypatch):
    from ai_scientist.execution.doctor import check_slurm

    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch / squeue / scancel anywhere
    needed = check_slurm(load_config(None, ["exec.backend=slurm"]))
    assert [(r["name"], r["ok"], r["status"]) for r in needed] == [("slurm client", False, "missing")]
    assert "slurm-client" in needed[0]["detail"]
    optional = check_slurm(load_config(None, ["exec.backend=subprocess"]))
    assert optional[0]["ok"] and optional[0]["status"] == "missing"
    with pytest.raises(SandboxError, match="Slurm client not found"):
        SlurmExecutor(load_config(None, ["exec.backend=slurm"]).exec)


def test_node_error_names_the_slurm_cause(fake, tmp_path, monkeypatch):
    # every job of the run is killed by Slurm's memory enforcement: each node's error says so
    from pipeline_support import journal_nodes, start_run

    state, env = fake
    slurm_fake.program(state, [{"run": False, "state": "FAILED", "reason": "None", "exit_status": 9}] * 200)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    code, run_dir, _ = start_run(
        tmp_path,
        "exec.backend=slurm",
        *FAST,
        "exec.slurm.mem_mb=300",
        "agent.stages.stage1_max_iters=2",
        f"exec.slurm.shared_dir={tmp_path / 'shared'}",
    )
    assert code == 3  # no working experiment
    buggy = [n for n in journal_nodes(run_dir).values() if n["status"] == "buggy"]
    assert buggy and all("memory above --mem=300 MB" in n["error"] for n in buggy), [
        n["error"] for n in buggy
    ]
    submitted = [c for c in slurm_fake.calls(state) if c[0] == "sbatch" and "--test-only" not in c]
    submitted = [c for c in submitted if "/shared/run/run/" not in c[-1]]  # the sandbox probe's job
    records = sorted(run_dir.glob("nodes/*/exec/*.json"))
    assert len(records) == len(submitted)
    assert [c for c in slurm_fake.calls(state) if "--test-only" in c], "the options were checked at start"


def test_busy_controller_is_retried_without_submitting_twice(fake, tmp_path):
    state = fake[0]
    busy = "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit)"
    lost = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
    slurm_fake.program(state, [{"refuse": busy}, {"refuse": lost, "created": True, "run": True}])
    res = executor(fake, tmp_path).run("echo through", workspace=node_ws(tmp_path))
    assert res.ok and res.stdout == "through\n"
    submits = [c for c in slurm_fake.calls(state) if c[0] == "sbatch"]
    assert len(submits) == 2 and list(slurm_fake.jobs(state)) == [res.extra["job_id"]]
    assert [c for c in slurm_fake.calls(state) if c[0] == "squeue" and "--name" in c]


def test_a_finished_job_is_read_long_before_the_next_squeue(fake, tmp_path):
    # issue 37: the exit file is looked at every few ms; squeue only every poll_interval_s (30 s here)
    state = fake[0]
    slurm_fake.program(state, [{"run": False, "state": "RUNNING"}])
    ex = executor(fake, tmp_path, "exec.slurm.poll_interval_s=30")
    t, box = in_thread(lambda: ex.run(["sh", "-c", "echo done"], workspace=node_ws(tmp_path)))
    wait_for(lambda: ex.in_flight())
    job_id = ex.in_flight()[0]
    wait_for(lambda: [c for c in slurm_fake.calls(state) if c[0] == "squeue"])  # the first poll
    jdir = ex._jobs[job_id].dir
    subprocess.run(["bash", str(jdir / "job.sh")], cwd=jdir, capture_output=True, check=False)
    ran = time.monotonic()
    t.join(20)
    seen = time.monotonic() - ran
    assert box["result"].stdout == "done\n" and seen < 10, f"read after {seen:.1f} s"
    assert len([c for c in slurm_fake.calls(state) if c[0] == "squeue"]) == 1

"""``ai-scientist submit``: the whole run as a Slurm batch job (issue 35).

The real-cluster tests (marked ``needs("slurm")`` like tests/test_slurm_cluster.py) submit the
bundled example; the job runs ``submit --in-job`` through tests/submit_driver.py (set as
``submit.python``), which swaps in the scripted LLM and nothing else. Expectations come from
what the run recorded: the job ids Slurm gave (events of the job itself, from its environment),
the journal, the prompt logs and command records on disk.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from components import needs, slurm_down
from pipeline_support import FAST, IDEA, events
from waiting import wait_until

from ai_scientist.cli.submit import SlurmJobEnding, _JobSignals, continuations, time_limit_s
from ai_scientist.runloop.services import Services

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).parent / "submit_driver.py"
DOWN = slurm_down()
on_cluster = needs("slurm", DOWN is not None, DOWN or "")
SETS = [x for kv in FAST for x in ("--set", kv)]


def _cli(*argv: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


# ---------------------------------------------------------------------------------- bad input --
def test_bad_time_exits_2_before_anything_is_made(tmp_path):
    res = _cli("submit", "--idea", str(IDEA), "--out", "exp", "--time", "1:2:3:4", cwd=tmp_path)
    assert res.returncode == 2 and "argument --time" in res.stderr and "Traceback" not in res.stderr
    # a limit the warning does not fit in names the key to change
    res = _cli("submit", "--idea", str(IDEA), "--out", "exp", "--time", "00:01:00", *SETS, cwd=tmp_path)
    assert res.returncode == 2 and "submit.warning_s=300" in res.stderr, res.stderr
    assert not (tmp_path / "exp").exists()


def test_no_sbatch_exits_2_naming_it(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    res = _cli("submit", "--idea", str(IDEA), "--out", "exp", cwd=tmp_path, env={"PATH": str(empty)})
    assert res.returncode == 2 and "sbatch" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "exp").exists()


def test_slurm_time_formats():
    assert [time_limit_s(t) for t in ("90", "5:30", "01:02:03", "2-0", "1-01:00", "0-00:00:10")] == [
        5400,
        330,
        3723,
        172800,
        90000,
        10,
    ]
    for bad in ("", "0", "1:2:3:4", "x", "1-", "-1"):
        with pytest.raises(ValueError):
            time_limit_s(bad)


# ----------------------------------------------------------------------- the stop, in-process --
def test_warning_signal_stops_on_the_main_thread_once():
    signals = _JobSignals("77", 30, keep_jobs=True)
    signals.arm()
    try:
        with pytest.raises(SlurmJobEnding) as stop:
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(5)  # the handler raises here, at once
        assert stop.value.status == "time_limit" and stop.value.exit_code == 4 and stop.value.keep_jobs
        os.kill(os.getpid(), signal.SIGUSR1)  # disarmed: a second warning is ignored
        os.kill(os.getpid(), signal.SIGTERM)
        signals.arm()
        with pytest.raises(SlurmJobEnding) as term:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        assert (
            term.value.status == "job_cancelled" and term.value.exit_code == 130 and not term.value.keep_jobs
        )
    finally:
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("backend", "keep", "closed"), [("slurm", True, False), ("slurm", False, True), ("bwrap", True, True)]
)
def test_keep_jobs_leaves_only_a_slurm_executor_open(backend, keep, closed):
    seen: list[str] = []
    executor = SimpleNamespace(name=backend, close=lambda: seen.append("executor"))
    llm = SimpleNamespace(cost=SimpleNamespace(flush=lambda: None))
    run = SimpleNamespace(event=lambda *a, **k: None)
    fake: Any = dict(run=run, llm=llm, executor=executor, prompts=None)  # only what close() touches
    services = Services(**fake, environment={}, environment_text="")
    services.close(keep_jobs=keep)
    assert seen == (["executor"] if closed else [])


def test_continuation_budget_restarts_at_each_user_submission():
    evs = [
        {"type": "submit_job_submitted", "by": "user"},
        {"type": "submit_continued"},
        {"type": "submit_continued"},
        {"type": "submit_job_submitted", "by": "user"},
        {"type": "submit_continued"},
    ]
    assert continuations(evs) == 1 and continuations(evs[:3]) == 2 and continuations([]) == 0


# ------------------------------------------------------------------------------ on the cluster --
def _interpreter(tmp_path: Path, latency_s: float, driver_args: str = "") -> Path:
    """``submit.python`` for the test: runs the job body with the scripted LLM (tests/submit_driver.py)."""
    path = tmp_path / "python-scripted"
    path.write_text(
        f'#!/bin/sh\nexec {sys.executable} {DRIVER} --latency {latency_s} {driver_args} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def _submit(tmp_path: Path, *extra: str, latency_s: float = 0.0, driver_args: str = "") -> tuple[Path, str]:
    res = _cli(
        "submit", "--idea", str(IDEA), "--out", "exp", "--name", "run", *SETS,
        "--set", f"submit.python={_interpreter(tmp_path, latency_s, driver_args)}",
        "--set", "submit.cpus=1", "--set", "submit.mem_mb=2048", *extra,
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    run_dir, job_id = res.stdout.split()
    assert Path(tmp_path / run_dir) == tmp_path / "exp" / "run" and job_id.isdigit()
    return tmp_path / run_dir, job_id


def _state(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def _job_active(job_id: str) -> bool:
    """True while the job is in the queue, and also when squeue cannot answer (a busy controller
    times out): only an answer that does not list the job says it is gone."""
    out = subprocess.run(
        ["squeue", "--noheader", "-h", "-o", "%i", "-j", job_id], capture_output=True, text=True
    )
    if out.returncode != 0 and "Invalid job id" not in out.stderr:
        return True
    return job_id in out.stdout.split()


def _release(job_id: str) -> bool:
    """Start a requeued job now instead of after Slurm's hold; True once its second run started
    (or the job is gone). Until then the job is COMPLETING its first run and gets its hold only
    afterwards (returning True then left it held ~2 min, and in a CI run of stop 44 not started
    in 10 min); a job held for another reason (a requeue-hold after a failed launch) is released
    too."""
    res = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True)
    if res.returncode != 0:
        return "Invalid job id" in res.stderr
    fields = dict(f.split("=", 1) for f in res.stdout.split() if "=" in f)
    state, reason = fields.get("JobState", ""), fields.get("Reason", "")
    if state == "PENDING" and reason == "BeginTime":
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True)
    elif state == "PENDING" and "Held" in reason:
        subprocess.run(["scontrol", "release", job_id], capture_output=True)
    # Restarts counts the requeue itself (already 1 while COMPLETING the first run): only a
    # RUNNING state after it, or an end, is the second run
    done = state not in ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD")
    return fields.get("Restarts", "0") != "0" and (state == "RUNNING" or done)


def _cluster_state(job_id: str) -> str:
    """What Slurm says about the job and the node, for a failure message."""
    cmds = (["scontrol", "show", "job", job_id], ["sinfo", "-h", "-N", "-o", "%N %T %E"])
    outs = (subprocess.run(c, capture_output=True, text=True) for c in cmds)
    return "\n".join((o.stdout + o.stderr).strip() for o in outs)


def _wait_done(run_dir: Path, first_job: str, timeout: float) -> dict:
    """The run's state once its jobs are over: the last job that started (or, if none did, the
    one submitted) has left the queue and no continuation of it is waiting to start."""

    def settled() -> bool:
        evs = events(run_dir)
        kinds = [e["type"] for e in evs]
        started = [e["job_id"] for e in evs if e["type"] == "submit_job_started"]
        last = started[-1] if started else first_job
        if _job_active(last):
            return False
        # a continuation not followed by a start is still to run; a requeue keeps its job id, so
        # the order of the events tells it, not the ids
        if "submit_continued" in kinds:
            last_continued = len(kinds) - 1 - kinds[::-1].index("submit_continued")
            return "submit_job_started" in kinds[last_continued:]
        return True

    try:
        wait_until(settled, "the submitted run's jobs are over", timeout, every=1.0)
    except AssertionError as exc:
        status = _state(run_dir).get("status")
        raise AssertionError(
            f"{exc}: status {status}\n{_outputs(run_dir)}\n{_cluster_state(first_job)}"
        ) from None
    state = _state(run_dir)
    assert state.get("status") == "completed", f"{state.get('status')}\n{_outputs(run_dir)}"
    return state


def _outputs(run_dir: Path) -> str:
    return "\n".join(p.read_text()[-2000:] for p in sorted((run_dir / "submit").glob("*.out")))


def _final_records(run_dir: Path) -> dict[str, list[dict]]:
    """Per node: its journal records, in order."""
    out: dict[str, list[dict]] = {}
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.setdefault(rec["node"]["id"], []).append(rec)
    return out


@on_cluster
def test_submitted_run_completes_as_a_batch_job(tmp_path):
    run_dir, job_id = _submit(tmp_path, "--time", "00:10:00")
    script = (run_dir / "submit" / "job.sh").read_text()
    # what sbatch was given is kept: the controller shows those options on the job
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    if shown:  # not yet purged
        assert "TimeLimit=00:10:00" in shown and "Requeue=1" in shown and "#SBATCH --time=00:10:00" in script
    state = _wait_done(run_dir, job_id, 240)
    assert state["exit_code"] == 0
    evs = events(run_dir)
    started = [e for e in evs if e["type"] == "submit_job_started"]
    # the run was driven by the job Slurm started (its SLURM_JOB_ID), once, with no stop
    assert [e["job_id"] for e in started] == [job_id]
    assert not [e for e in evs if e["type"] in ("run_stopped", "submit_continued")]
    nodes = _final_records(run_dir)
    assert nodes and all(recs[-1]["node"]["status"] in ("good", "buggy") for recs in nodes.values())
    out = (run_dir / "submit" / f"slurm-{job_id}.out").read_text()
    assert "run completed (exit 0)" in out


@on_cluster
@pytest.mark.slow
def test_time_limit_stops_cleanly_and_the_continuation_finishes(tmp_path):
    # 1-minute jobs warned 30 s before their limit (Slurm may warn up to a minute early: at most
    # 30 s of work each); a fake LLM slow enough that no job can finish the run (2 s an answer,
    # 20-31 answers in all)
    run_dir, job_id = _submit(
        tmp_path, "--time", "00:01:00", "--set", "submit.warning_s=30", "--set", "submit.max_resubmits=10",
        latency_s=2.0,
    )  # fmt: skip
    state = _wait_done(run_dir, job_id, 420)
    assert state["exit_code"] == 0
    evs = events(run_dir)
    stops = [e for e in evs if e["type"] == "run_stopped"]
    assert stops and all(e["status"] == "time_limit" and e["exit_code"] == 4 for e in stops)
    # each stop was followed by a new job (a resubmission), and the jobs that ran are exactly those
    continued = [e for e in evs if e["type"] == "submit_continued"]
    assert [e["how"] for e in continued] == ["resubmit"] * len(stops)
    started = [e["job_id"] for e in evs if e["type"] == "submit_job_started"]
    assert started == [job_id, *(e["job_id"] for e in continued)] and len(set(started)) == len(started)
    # every stop was mid-run: the run went on in the next job
    first_stop = stops[0]["ts"]
    records = _final_records(run_dir)
    assert any(r["ts"] > first_stop for recs in records.values() for r in recs)
    # no node lost: each ended good or buggy; none run twice: each finished once, each of its
    # phases listed once, and a node finished before a stop wrote nothing after it
    for nid, recs in records.items():
        statuses = [r["node"]["status"] for r in recs]
        finishes = [
            i
            for i, s in enumerate(statuses)
            if s in ("good", "buggy") and (i == 0 or statuses[i - 1] not in ("good", "buggy"))
        ]
        assert len(finishes) == 1 and statuses[-1] in ("good", "buggy"), (nid, statuses)
        phases = recs[-1]["node"]["phases_done"]
        assert len(phases) == len(set(phases)), (nid, phases)
        finished_at = recs[finishes[0]]["ts"]
        for stop in stops:
            if finished_at < stop["ts"]:
                folder = run_dir / "nodes" / nid
                written = [p for sub in ("prompt_logs", "exec") for p in (folder / sub).glob("*.json")]
                late = [p.name for p in written if p.stat().st_mtime > stop["ts"]]
                assert not late, f"{nid} finished before the stop at {stop['ts']} but ran again: {late}"
    # the nodes in flight at each stop were resumed by the next job
    resumed = [e for e in evs if e["type"] == "nodes_resumed"]
    assert all(records[n][-1]["node"]["status"] in ("good", "buggy") for e in resumed for n in e["node_ids"])
    for jid in started[:-1]:
        out = (run_dir / "submit" / f"slurm-{jid}.out").read_text()
        assert "run stopped by its Slurm job (exit 4)" in out and "state saved" in out


@on_cluster
def test_resume_of_a_queued_run_is_refused(tmp_path):
    run_dir, job_id = _submit(tmp_path, "--time", "00:10:00", "--sbatch-arg=--begin=now+600")
    try:
        res = _cli("submit", "--resume", str(run_dir), cwd=tmp_path)
        assert res.returncode == 2 and f"Slurm job {job_id}" in res.stderr, res.stderr
        assert "--begin=now+600" in (run_dir / "submit" / "job.sh").read_text()
    finally:
        subprocess.run(["scancel", job_id], check=False)
    wait_until(lambda: not _job_active(job_id), "the cancelled job left the queue", 60, every=0.5)
    # once nothing holds it, the same run is submitted again and completes
    res = _cli("submit", "--resume", str(run_dir), "--time", "00:10:00", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _wait_done(run_dir, res.stdout.split()[1], 240)["exit_code"] == 0
    submitted = [e for e in events(run_dir) if e["type"] == "submit_job_submitted"]
    assert [e["by"] for e in submitted] == ["user", "user"] and submitted[1]["job_id"] == res.stdout.split()[
        1
    ]


def _warn(job_id: str) -> None:
    """Send the job the time-limit warning now, as Slurm does (SIGUSR1 to the batch shell only):
    a test that needs the warning at a chosen moment, not Slurm's (which may come a minute early)."""
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True, capture_output=True)


@on_cluster
@pytest.mark.slow
def test_requeue_continues_under_the_same_job_id(tmp_path):
    # submit.continue_with=requeue: `scontrol requeue` of the job itself (Slurm holds a requeued job
    # about two minutes before it may start again); the warning is sent once a node has finished
    run_dir, job_id = _submit(
        tmp_path, "--time", "00:10:00", "--set", "submit.continue_with=requeue", latency_s=1.0
    )
    journal = run_dir / "journal.jsonl"
    wait_until(
        lambda: journal.exists() and '"status": "good"' in journal.read_text(),
        "a node finished",
        120,
        every=0.2,
    )
    _warn(job_id)
    # Slurm holds a requeued job (Reason=BeginTime, ~2 min): once the run asked for the requeue,
    # release it now, as an administrator could (what is tested is the requeue, not Slurm's delay)
    wait_until(
        lambda: any(e["type"] == "submit_continued" for e in events(run_dir)), "the requeue", 300, every=0.5
    )
    wait_until(lambda: _release(job_id), "the requeued job released", 120, every=1.0)
    assert _wait_done(run_dir, job_id, 600)["exit_code"] == 0
    evs = events(run_dir)
    stops = [e for e in evs if e["type"] == "run_stopped"]
    continued = [e for e in evs if e["type"] == "submit_continued"]
    started = [e for e in evs if e["type"] == "submit_job_started"]
    assert [e["status"] for e in stops] == ["time_limit"] and [e["how"] for e in continued] == ["requeue"]
    # the same job ran again, Slurm counting its restarts; its output continues one file
    assert [(e["job_id"], e["restart_count"]) for e in started] == [(job_id, 0), (job_id, 1)]
    out = (run_dir / "submit" / f"slurm-{job_id}.out").read_text()
    assert "run stopped by its Slurm job (exit 4)" in out and "run completed (exit 0)" in out


@on_cluster
@pytest.mark.slow
@pytest.mark.parametrize("experiment_jobs", ["leave", "cancel"])
def test_experiment_jobs_in_flight_at_the_stop(tmp_path, experiment_jobs):
    # experiments as their own jobs (exec.backend slurm, submitted from inside the orchestrator's
    # job); n0002's experiment sleeps 20 s, and the warning comes while its job runs
    run_dir, job_id = _submit(
        tmp_path, "--time", "00:10:00", "--set", f"submit.experiment_jobs={experiment_jobs}",
        "--set", "exec.backend=slurm", "--set", "exec.slurm.poll_interval_s=0.2",
        "--set", "exec.slurm.lost_grace_s=3", "--set", "exec.slurm.mem_mb=256",
        # a small run: every command is a Slurm job here, and what is tested is n0002's
        "--set", "agent.stages.stage1_max_iters=2", "--set", "agent.stages.stage2_max_iters=1",
        "--set", "agent.stages.stage4_max_iters=1", "--set", "agent.multi_seed_eval.num_seeds=1",
        driver_args="--slow n0002 20",
    )  # fmt: skip
    marker = run_dir / "nodes" / "n0002" / "workspace" / "STARTED"
    wait_until(marker.exists, "n0002's experiment started", 180, every=0.2)
    _warn(job_id)
    assert _wait_done(run_dir, job_id, 600)["exit_code"] == 0
    evs = events(run_dir)
    stop = next(e["ts"] for e in evs if e["type"] == "run_stopped")
    records = [json.loads(p.read_text()) for p in (run_dir / "nodes" / "n0002" / "exec").glob("*.json")]
    runs = [r for r in records if r["phase"] == "phase4"]
    assert len(runs) == 1 and runs[0]["ok"], runs
    job_dir = Path(runs[0]["extra"]["job_dir"])
    set_aside = sorted(p.name for p in job_dir.parent.glob(job_dir.name + ".cancelled-*"))
    if experiment_jobs == "leave":  # the next job re-attached to the job that ran on, started once
        assert runs[0]["extra"]["reattached"] and not set_aside
        assert marker.stat().st_mtime < stop
    else:  # cancelled at the stop, set aside, and run again as a new job
        assert not runs[0]["extra"]["reattached"] and len(set_aside) == 1
        assert set_aside[0].rsplit("-", 1)[1] != runs[0]["extra"]["job_id"]


def test_a_warning_before_the_handler_is_armed_is_ignored_not_fatal(tmp_path):
    """The job script ignores SIGUSR1 until the orchestrator arms its handler: the ignore survives
    ``exec`` (a warning in the interpreter's start-up no longer kills the job), and the handler the
    program installs afterwards still receives a later one. Run here with the script's own lines."""
    from ai_scientist.base.config import load_config
    from ai_scientist.cli.submit import script_text

    script = script_text(load_config(None, []), tmp_path / "run", ["--time=00:10:00"])
    lines = script.splitlines()
    trap = next(i for i, ln in enumerate(lines) if ln.strip() == "trap '' USR1")
    assert trap < next(i for i, ln in enumerate(lines) if ln.startswith("exec "))
    program = (
        "import os, signal\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"  # before any handler: ignored
        "print('alive')\n"
        "signal.signal(signal.SIGUSR1, lambda s, f: print('handled'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
    )
    body = "\n".join([lines[trap], f"exec {sys.executable} -c {shlex.quote(program)}"])
    default = lambda: signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # noqa: E731  (as Slurm starts it)
    res = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60, preexec_fn=default)
    assert res.returncode == 0 and res.stdout.split() == ["alive", "handled"], res
    # without the trap the same program dies of the signal
    bare = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, preexec_fn=default
    )
    assert bare.returncode == -signal.SIGUSR1

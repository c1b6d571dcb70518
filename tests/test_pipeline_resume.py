"""kill -9 at many moments, then `resume`: every run completes, no completed node runs twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from pipeline_support import events, journal_nodes
from waiting import load_scaled, wait_until

from ai_scientist.treesearch.journal import Journal

DRIVER = Path(__file__).parent / "drive_run.py"
SMALL = ["--set", "agent.stages.stage3_max_iters=1", "--set", "agent.stages.stage4_max_iters=1"]


def _start(tmp_path: Path, *extra: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *SMALL, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return proc, tmp_path / "experiments" / "run"


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + load_scaled(timeout)
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before {path} appeared: {proc.stderr.read()[-2000:]}")
        if time.time() > deadline:
            proc.kill()
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.05)


def _finished_snapshot(run_dir: Path) -> dict[str, tuple[int, int]]:
    """For every node finished before the crash: (# exec records, # prompt logs)."""
    snap = {}
    for nid, node in journal_nodes(run_dir).items():
        if node["status"] in ("good", "buggy"):
            d = run_dir / "nodes" / nid
            snap[nid] = (
                len(list((d / "exec").glob("*.json"))),
                len(list((d / "prompt_logs").glob("*.json"))),
            )
    return snap


def _survivors(root: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid", "cwd"]):
        try:
            cwd = p.info["cwd"] or ""
        except (psutil.Error, OSError):
            continue
        if cwd.startswith(str(root)):
            out.append(p)
    return out


def _survivors_seen(root: Path) -> None:
    """A control process with its cwd under ``root`` is found by ``_survivors``: its absence
    later means the processes are gone, not that the check cannot see them."""
    probe = root / "survivor-probe"
    probe.mkdir(exist_ok=True)
    ctl = subprocess.Popen(["sleep", "60"], cwd=probe)
    try:
        wait_until(lambda: any(p.pid == ctl.pid for p in _survivors(root)), "the control process is seen", 30)
    finally:
        ctl.kill()
        ctl.wait()


def _resume_and_check(run_dir: Path, tmp_path: Path) -> None:
    before = _finished_snapshot(run_dir)
    Journal(run_dir / "journal.jsonl")  # the journal parses (a torn tail is repaired)
    res = subprocess.run(
        [sys.executable, str(DRIVER), "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == 0
    after = _finished_snapshot(run_dir)
    for nid, counts in before.items():
        assert after[nid] == counts, (
            f"{nid} finished before the crash but ran again: {counts} -> {after[nid]}"
        )
    nodes = journal_nodes(run_dir)
    assert all(n["status"] in ("good", "buggy") for n in nodes.values())
    assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}
    kinds = [e["type"] for e in events(run_dir)]
    assert "run_resumed" in kinds and kinds.count("stage_completed") >= 4
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        json.loads(line)
    _survivors_seen(tmp_path)  # the check below can see a process there
    wait_until(lambda: not _survivors(tmp_path), "no sandboxed process outlives the run", 30)


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=load_scaled(30))


@pytest.mark.slow
def test_kill_during_llm_call(tmp_path):
    marker = tmp_path / "in_llm_call"
    proc, run_dir = _start(tmp_path, "--hang", "n0005", "phase2", str(marker))
    _wait_for(marker, proc)
    _kill(proc)
    assert journal_nodes(run_dir)["n0005"]["status"] == "running"
    _resume_and_check(run_dir, tmp_path)
    assert "phase0" in journal_nodes(run_dir)["n0005"]["phases_done"]


@pytest.mark.slow
def test_kill_during_execution(tmp_path):
    proc, run_dir = _start(tmp_path, "--slow", "n0002", "20")
    _wait_for(run_dir / "nodes" / "n0002" / "workspace" / "STARTED", proc)
    # the running experiment is seen (its cwd is its workspace), so its absence below means it is gone
    wait_until(lambda: _survivors(run_dir / "nodes" / "n0002"), "the experiment is seen running", 30)
    _kill(proc)
    wait_until(lambda: not _survivors(tmp_path), "the experiment ended with the killed orchestrator", 5)
    _resume_and_check(run_dir, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "failpoint",
    ["after_node:n0002", "torn_append:journal.jsonl:9", "stage_end:1", "stage_end:2", "after_node:n0006"],
)
def test_kill_at_failpoint(tmp_path, failpoint):
    proc, run_dir = _start(tmp_path, env={"AI_SCIENTIST_FAILPOINTS": failpoint})
    proc.wait(timeout=300)
    assert proc.returncode == -signal.SIGKILL, (
        f"the failpoint {failpoint} was never reached: {proc.stderr.read()}"
    )
    if failpoint.startswith("torn_append"):
        assert not (run_dir / "journal.jsonl").read_bytes().endswith(b"\n"), "the record was torn"
    _resume_and_check(run_dir, tmp_path)


@pytest.mark.slow
def test_kill_during_idea_proposal(tmp_path):
    marker = tmp_path / "in_ideas"
    proc, run_dir = _start(tmp_path, "--hang", "run", "ideas", str(marker))
    _wait_for(marker, proc)
    _kill(proc)
    _resume_and_check(run_dir, tmp_path)

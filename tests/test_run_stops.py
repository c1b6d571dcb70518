"""Run-stopping conditions: one orchestrator per run, the cost cap and a full disk stop cleanly
(documented exit code, state saved, the reason and the next command printed) and `resume`
continues without finishing any node twice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, run_args, start_run
from waiting import load_scaled, wait_until

from ai_scientist.base.errors import EXIT_OK, EXIT_STOPPED, DiskFull, disk_full_from
from ai_scientist.base.runlock import RunLock, RunLocked
from ai_scientist.cli.commands import execute, open_locked
from ai_scientist.llm.scripted_backend import ScriptedBackend

DRIVER = Path(__file__).parent / "drive_run.py"
SMALL = ["agent.stages.stage3_max_iters=1", "agent.stages.stage4_max_iters=1"]
PRICES = "llm.prices={gpt-4o-mini: {input_per_mtok: 1000.0, output_per_mtok: 1000.0}}"


def _finish_counts(run_dir: Path) -> dict[str, int]:
    """How many journal records moved each node into a finished status (must be 1 each)."""
    counts: dict[str, int] = {}
    last: dict[str, str] = {}
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        node = json.loads(line)["node"]
        prev = last.get(node["id"])
        if node["status"] in ("good", "buggy") and prev not in ("good", "buggy"):
            counts[node["id"]] = counts.get(node["id"], 0) + 1
        last[node["id"]] = node["status"]
    return counts


# ------------------------------------------------------------------ run lock --


def _holder(run_dir: Path) -> subprocess.Popen:
    code = (
        "import sys, time; from ai_scientist.base.runlock import RunLock; "
        f"lock = RunLock.acquire({str(run_dir)!r}, 'test holder'); print('held', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_names_the_holder_and_dies_with_it(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    try:
        with pytest.raises(RunLocked, match=f"pid {proc.pid}, test holder"):
            RunLock.acquire(tmp_path)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the kernel drops the flock with the process
        proc.wait()
    lock = RunLock.acquire(tmp_path)
    assert f"pid {os.getpid()}" in (tmp_path / "run.lock").read_text()
    assert (tmp_path / "run.lock").stat().st_mode & 0o777 == 0o600
    with pytest.raises(RunLocked):
        RunLock.acquire(tmp_path)  # another descriptor, even in the same process
    lock.release()
    RunLock.acquire(tmp_path).release()


def test_cli_resume_of_a_run_in_use_exits_2_naming_the_pid(tmp_path: Path) -> None:
    run, _ = __import__("ai_scientist.cli.commands", fromlist=["setup_run"]).setup_run(run_args(tmp_path))
    run.lock.release()
    proc = _holder(run.dir)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "ai_scientist.cli", "resume", str(run.dir)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert res.returncode == 2, res.stderr
    assert f"pid {proc.pid}" in res.stderr and "in use" in res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout == ""  # refused before anything else happened


def _run_hung_in_llm_call(tmp_path: Path, *overrides: str) -> subprocess.Popen:
    """A scripted run in its own process, returned once it hangs inside n0005's phase-2 LLM call."""
    marker = tmp_path / "in_llm_call"
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", "--hang", "n0005", "phase2", str(marker)]
        + [a for s in overrides for a in ("--set", s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: marker.exists() or proc.poll() is not None, "the run reached n0005's LLM call", 180)
    assert proc.poll() is None, proc.stderr.read()[-2000:]
    return proc


@pytest.mark.slow
def test_two_resumes_at_once_one_wins_journal_intact(tmp_path: Path) -> None:
    proc = _run_hung_in_llm_call(tmp_path, *SMALL)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run_dir = tmp_path / "experiments" / "run"
    resumes = [
        subprocess.Popen(
            [sys.executable, str(DRIVER), "resume", str(run_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]

    def ended(p: subprocess.Popen) -> tuple[int, str]:
        # communicate, not wait: a resume blocked on a full stderr pipe would never end
        err = p.communicate(timeout=load_scaled(300))[1]
        return p.returncode, err

    outs = [ended(p) for p in resumes]
    codes = sorted(code for code, _ in outs)
    assert codes == [0, 2], outs
    loser = next(err for code, err in outs if code == 2)
    winner = next(p for p, (code, _) in zip(resumes, outs, strict=True) if code == 0)
    assert f"pid {winner.pid}" in loser and "Traceback" not in loser
    seqs = [json.loads(line)["seq"] for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert len(seqs) == len(set(seqs)), "duplicate journal seq: two writers"
    assert all(c == 1 for c in _finish_counts(run_dir).values()), _finish_counts(run_dir)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == 0


# ------------------------------------------------------------------ cost cap --


def test_cost_cap_stops_cleanly_and_resume_continues(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, run_dir, _ = start_run(tmp_path, *SMALL, PRICES, "llm.max_cost_usd=0.5")
    err = capsys.readouterr().err
    assert code == EXIT_STOPPED
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "cost_cap"
    nodes = journal_nodes(run_dir)
    # the cap is not a node failure: no node was marked buggy because of it
    assert not [n["id"] for n in nodes.values() if "max_cost_usd" in (n.get("error") or "")]
    stop = [e for e in events(run_dir) if e["type"] == "run_stopped"]
    assert stop and "llm.max_cost_usd=0.5" in stop[-1]["reason"] and stop[-1]["exit_code"] == EXIT_STOPPED
    spent = json.loads((run_dir / "cost.json").read_text())
    assert spent["total"]["usd"] >= 0.5
    last = err.strip().splitlines()[-2:]
    assert last[0].startswith("run stopped (exit 4): llm.max_cost_usd=0.5 reached"), last
    assert (
        last[1]
        == f"next: raise the cap and resume: ai-scientist resume {run_dir} --set llm.max_cost_usd=<higher>"
    )
    finished_before = {i for i, n in nodes.items() if n["status"] in ("good", "buggy")}

    run = open_locked(str(run_dir), ["llm.max_cost_usd=100000"])
    code = execute(run, resumed=True, backend=ScriptedBackend(ExampleResponder()))
    err = capsys.readouterr().err
    assert code == EXIT_OK, err[-3000:]
    assert f"run completed (exit 0): {run_dir}" in err and f"next: ai-scientist view {run_dir}" in err
    nodes = journal_nodes(run_dir)
    assert finished_before <= {i for i, n in nodes.items() if n["status"] in ("good", "buggy")}
    assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}
    assert all(c == 1 for c in _finish_counts(run_dir).values())
    # the raised cap was kept for later resumes
    assert "max_cost_usd: 100000" in (run_dir / "config.resolved.yaml").read_text()


# ----------------------------------------------------------------- disk full --


def test_disk_full_is_recognised_through_wrapping() -> None:
    import errno
    import sqlite3

    from ai_scientist.memory.db import MemoryStoreError

    err = OSError(errno.ENOSPC, "No space left on device", "/tmp/x/journal.jsonl")
    full = disk_full_from(err)
    assert isinstance(full, DiskFull) and "/tmp/x/journal.jsonl" in str(full) and "is full" in str(full)
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as inner:
            raise MemoryStoreError("write failed") from inner
    except MemoryStoreError as wrapped:
        assert isinstance(disk_full_from(wrapped), DiskFull)
    assert disk_full_from(ValueError("disk")) is None
    assert disk_full_from(OSError(errno.EACCES, "denied")) is None


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)]
        ).returncode
        == 0
    )


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_disk_full_stops_cleanly_and_resumes_after_space_is_freed(tmp_path: Path) -> None:
    # size of a whole run of this configuration, measured now on the normal disk
    ref = tmp_path / "ref"
    code, ref_dir, _ = start_run(ref, *SMALL, name="ref")
    assert code == EXIT_OK
    used = sum(f.stat().st_size for f in ref_dir.rglob("*") if f.is_file() and not f.is_symlink())
    shutil.rmtree(ref)
    small = tmp_path / "small"
    if not _mount_tmpfs(small, f"{max(used // 3, 256 * 1024)}"):
        pytest.skip("mount -t tmpfs failed here")
    try:
        res = subprocess.run(
            [sys.executable, str(DRIVER), "run", str(small), "run"]
            + [a for s in SMALL for a in ("--set", s)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        run_dir = small / "experiments" / "run"
        assert res.returncode == EXIT_STOPPED, res.stderr[-3000:]
        assert "Traceback" not in res.stderr
        head, nxt = res.stderr.strip().splitlines()[-2:]
        assert head.startswith("run stopped (exit 4): the filesystem at ") and str(small) in head, head
        assert nxt == f"next: free space on that filesystem, then resume: ai-scientist resume {run_dir}"
        before = {i for i, n in journal_nodes(run_dir).items() if n["status"] in ("good", "buggy")}
        # free space: grow the filesystem, then resume
        assert subprocess.run(["mount", "-o", "remount,size=512m", str(small)]).returncode == 0
        res = subprocess.run(
            [sys.executable, str(DRIVER), "resume", str(run_dir)], capture_output=True, text=True, timeout=300
        )
        assert res.returncode == EXIT_OK, res.stderr[-3000:]
        nodes = journal_nodes(run_dir)
        assert before <= {i for i, n in nodes.items() if n["status"] in ("good", "buggy")}
        assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}
        assert all(c == 1 for c in _finish_counts(run_dir).values())
    finally:
        subprocess.run(["umount", "-l", str(small)])


# ------------------------------------------------------- how a run ends, said --


def test_exit_3_ends_with_outcome_reason_and_next_command(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code, run_dir, _ = start_run(tmp_path, responder=ExampleResponder(always_buggy=True))
    assert code == 3
    reason = next(e["reason"] for e in events(run_dir) if e["type"] == "run_result")
    lines = capsys.readouterr().err.strip().splitlines()
    # head, then what each stage produced (tests/test_run_outcome.py checks those lines), then next
    head = max(i for i, line in enumerate(lines) if line.startswith("run finished without"))
    assert lines[head] == f"run finished without a working experiment (exit 3): {reason}", lines[head:]
    assert all(line.startswith("  stage ") for line in lines[head + 1 : -1]), lines[head:]
    assert lines[-1].startswith(f"next: ai-scientist logs {run_dir} nodes"), lines[head:]


@pytest.mark.slow
def test_ctrl_c_ends_with_outcome_and_resume_command(tmp_path: Path) -> None:
    proc = _run_hung_in_llm_call(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=load_scaled(60))
    run_dir = tmp_path / "experiments" / "run"
    assert proc.returncode == 130, err[-2000:]
    last = err.strip().splitlines()[-2:]
    assert last == [
        "run interrupted (exit 130): interrupted (Ctrl-C); state saved",
        f"next: ai-scientist resume {run_dir}",
    ], last
    assert json.loads((run_dir / "state.json").read_text())["status"] == "interrupted"

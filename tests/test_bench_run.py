"""``ai-scientist bench``: list, run -> report on a scripted model, two directories compared, and a
``kill -9`` of a real ``bench run`` process followed by ``bench run`` again.

The scripted model (tests/bench_drive_run.py) answers every code call with the task's baseline,
so each run's graded score must be the baseline the bench measured; counts come from the runs'
own journals and prompt logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from pipeline_support import ROOT

from ai_scientist.base.fileio import read_json, read_jsonl
from ai_scientist.benchsuite.task import BUNDLED

DRIVER = f"{sys.executable} {ROOT / 'tests' / 'bench_drive_run.py'}"
SMALL = [
    "exec.backend=subprocess",
    "agent.stages.stage1_max_iters=1",
    "agent.search.num_drafts=1",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.multi_seed_eval.num_seeds=1",
    "memory.embedding.backend=none",
    "report.enabled=false",
]


def bench(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", "bench", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip


def run_args(out: Path, tasks: str, seeds: int) -> list[str]:
    sets = [a for s in SMALL for a in ("--set", s)]
    return ["run", "--tasks", tasks, "--seeds", str(seeds), "--out", str(out), "--runner", DRIVER, *sets]


def test_bench_list_shows_the_bundled_tasks():
    done = bench("list")
    assert done.returncode == 0, done.stderr
    on_disk = sorted(p.name for p in BUNDLED.iterdir() if (p / "task.yaml").is_file())
    assert len(on_disk) >= 6
    listed = [line.split(":")[0] for line in done.stdout.splitlines() if line and not line.startswith(" ")]
    assert sorted(listed[:-1]) == on_disk and listed[-1] == f"{len(on_disk)} tasks"


def test_bench_run_then_report_on_a_scripted_model(tmp_path):
    out = tmp_path / "a"
    done = bench(*run_args(out, "tsp,label_noise", 2), "--label", "scripted")
    assert done.returncode == 0, done.stdout + done.stderr
    # progress: which task, which seed, and the run's own progress line under that prefix
    assert "[bench] 1/4: task tsp, seed 1" in done.stderr
    assert any(
        line.startswith("[label_noise s2] ") and "stage 1 | nodes" in line
        for line in done.stderr.splitlines()
    )
    data = json.loads((out / "results.json").read_text())
    assert [(r["task"], r["seed"]) for r in data["runs"]] == [
        ("tsp", 1),
        ("tsp", 2),
        ("label_noise", 1),
        ("label_noise", 2),
    ]
    for row in data["runs"]:
        run_dir = Path(row["run_dir"])
        baseline = read_json(out / "baselines" / f"{row['task']}.json")["score"]
        assert (
            row["score"] == baseline and row["normalised"] == 0.0
        )  # the scripted model submits the baseline
        nodes = {r["node"]["id"]: r["node"] for r in read_jsonl(run_dir / "journal.jsonl") if "node" in r}
        assert row["nodes"] == sum(n["operation"] != "seed_eval" for n in nodes.values()) == 1
        assert row["llm_calls"] == len(
            list(run_dir.glob("nodes/*/prompt_logs/*.json")) + list(run_dir.glob("prompt_logs/*.json"))
        )
        assert row["prompt_tokens"] == read_json(run_dir / "cost.json")["total"]["prompt_tokens"] > 0
        assert row["wall_s"] > 0
        assert yaml.safe_load((run_dir / "config.resolved.yaml").read_text())["agent"]["seed"] == row["seed"]
    # bundled tasks are named, not located: the directory reads back from another checkout
    assert read_json(out / "bench.json")["tasks"] == {"tsp": "bundled", "label_noise": "bundled"}
    summary = {t["task"]: t for t in data["tasks"]}
    assert summary["tsp"]["scored"] == 2 and summary["tsp"]["best_known"] == 11.192668
    md = (out / "results.md").read_text()
    assert "**scripted**" in md and "| tsp | tour_length ↓ |" in md
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a second bench directory, compared with the first
    out_b = tmp_path / "b"
    assert bench(*run_args(out_b, "tsp", 1)).returncode == 0
    cmp = bench("report", str(out), str(out_b))
    assert cmp.returncode == 0, cmp.stderr
    c = json.loads((out / "compare.json").read_text())
    assert [t["task"] for t in c["tasks"]] == ["tsp"]
    assert c["tasks"][0]["difference"] == 0.0 and c["tasks"][0]["difference_se"] is None  # B has one seed
    assert "| tsp |" in cmp.stdout and (out / "compare.png").is_file()
    # the same directory with another config is refused (its runs would not be comparable)
    again = bench(*run_args(out, "tsp", 2), "--set", "exec.timeout=99")
    assert again.returncode == 2 and "another config" in again.stderr


def test_kill_9_then_bench_run_again_redoes_no_finished_run(tmp_path):
    out = tmp_path / "bench"
    env = {
        **os.environ,
        "BENCH_DRIVE_SLOW": "6",
    }  # every experiment sleeps first: a run is in flight long enough
    argv = [sys.executable, "-m", "ai_scientist.cli", "bench", *run_args(out, "tsp", 3)]
    log = (tmp_path / "bench.log").open("w")
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
    )
    first, second = out / "runs" / "tsp-s1", out / "runs" / "tsp-s2"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # the first run finished, the second's experiment is sleeping
        state = read_json(first / "state.json", default={}) or {}
        if state.get("status") == "completed" and any(second.glob("nodes/n0001/workspace/*.py")):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("the second run never got in flight: " + (tmp_path / "bench.log").read_text())
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGKILL)  # the bench only; its run dies with it (PR_SET_PDEATHSIG)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    first_journal = (first / "journal.jsonl").read_bytes()
    assert (read_json(second / "state.json", default={}) or {}).get("status") != "completed"
    done = bench(*run_args(out, "tsp", 3), env={"BENCH_DRIVE_SLOW": "0"})
    assert done.returncode == 0, done.stderr
    assert "[tsp s1] already finished: not run again" in done.stderr
    assert f"[tsp s2] resuming: {second}" in done.stderr and "[tsp s3] starting:" in done.stderr
    assert (first / "journal.jsonl").read_bytes() == first_journal  # not touched
    assert [e["type"] for e in read_jsonl(first / "events.jsonl")].count("run_resumed") == 0
    assert [e["type"] for e in read_jsonl(second / "events.jsonl")].count("run_resumed") == 1
    rows = json.loads((out / "results.json").read_text())["runs"]
    assert [r["status"] for r in rows] == ["completed"] * 3 and all(r["score"] is not None for r in rows)
    # once more: nothing left to do
    again = bench(*run_args(out, "tsp", 3))
    assert again.returncode == 0 and again.stderr.count("already finished: not run again") == 3


def test_a_run_held_by_a_live_process_is_waited_for_not_started_again(tmp_path):
    from ai_scientist.base.fileio import atomic_write_json
    from ai_scientist.base.runlock import RunLock
    from ai_scientist.benchsuite.runner import run_state

    run_dir = tmp_path / "runs" / "tsp-s1"
    assert run_state(run_dir) == "new"
    run_dir.mkdir(parents=True)  # killed inside Run.create: nothing recorded, made again
    assert run_state(run_dir) == "new" and not run_dir.exists()
    run_dir.mkdir(parents=True)
    (run_dir / "config.resolved.yaml").write_text("{}\n")
    atomic_write_json(run_dir / "state.json", {"status": "running"})
    lock = RunLock.acquire(run_dir, "another bench")  # as a live `ai-scientist run` holds it
    try:
        assert run_state(run_dir) == "held"
    finally:
        lock.release()
    assert run_state(run_dir) == "resume"
    atomic_write_json(run_dir / "state.json", {"status": "completed", "exit_code": 3})
    assert run_state(run_dir) == "done"

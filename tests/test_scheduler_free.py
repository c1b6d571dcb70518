"""Free-running scheduler (issue 15): caps, replay following the recorded order, kill -9 + resume."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import (
    decisions,
    events,
    journal_nodes,
    prompt_records,
    random_seeds,
    say_seed,
    start_run,
    tree,
)
from test_pipeline_resume import DRIVER, _kill, _resume_and_check
from waiting import load_scaled

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.cli.main import main

CAPS = {1: 5, 2: 4, 3: 3, 4: 3}
# every stage runs to its cap: stage 1 wants 5 drafts, stage 2 more good nodes than its cap,
# stage 3 more patience than its cap, stage 4 has 3 planned ablations
TO_CAPS = [
    "agent.num_workers=4",
    f"agent.search.num_drafts={CAPS[1]}",
    *(f"agent.stages.stage{s}_max_iters={c}" for s, c in CAPS.items()),
    "agent.stages.stage2_good_nodes=50",
    "agent.stages.stage3_patience=50",
]


def _search_nodes_per_stage(run_dir: Path) -> Counter:
    return Counter(n["stage"] for n in journal_nodes(run_dir).values() if n["operation"] != "seed_eval")


def _finish_counts(run_dir: Path) -> tuple[Counter, Counter]:
    """Per node id: distinct finish times in the journal, and ``node_finished`` events."""
    finishes: dict[str, set] = {}
    for rec in read_jsonl(run_dir / "journal.jsonl"):
        n = rec["node"]
        if n["status"] in ("good", "buggy"):
            finishes.setdefault(n["id"], set()).add(n.get("finished_at"))
    return (
        Counter({nid: len(ts) for nid, ts in finishes.items()}),
        Counter(e["node_id"] for e in events(run_dir) if e["type"] == "node_finished"),
    )


def test_four_free_workers_fill_every_cap_and_replay_follows_the_recorded_order(tmp_path, capsys):
    # n0002's experiment is slow: later drafts finish first and their children are picked meanwhile
    responder = ExampleResponder(buggy_nodes=("n0001",), slow_nodes={"n0002": 1.5})
    code, src, _ = start_run(tmp_path, *TO_CAPS, responder=responder)
    assert code == 0
    assert _search_nodes_per_stage(src) == Counter(CAPS)  # no stage overshoots, none stops short

    evs = events(src)
    selected = [e for e in evs if e["type"] == "node_selected"]
    assert all(len(e["waiting"]) <= 3 for e in selected)  # never more than 4 nodes in flight
    # free running: a node was picked after another finished while others were still running
    order = [(e["type"], e["node_id"]) for e in evs if e["type"] in ("node_selected", "node_finished")]

    def finished_before(e: dict) -> bool:
        return any(t == "node_finished" for t, _ in order[: order.index(("node_selected", e["node_id"]))])

    assert [e for e in selected if e["waiting"] and finished_before(e)], order
    finished = [nid for t, nid in order if t == "node_finished"]
    assert finished.index("n0002") > finished.index("n0003"), "n0002 was slow: it should have finished later"
    for e in selected:  # every decision's `waiting` is what was selected and not yet finished
        before = order[: order.index(("node_selected", e["node_id"]))]
        open_ = [nid for t, nid in before if t == "node_selected"]
        done = {nid for t, nid in before if t == "node_finished"}
        assert set(e["waiting"]) == {
            n for n in open_ if n not in done and journal_nodes(src)[n]["stage"] == e["stage"]
        }

    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert tree(replayed) == tree(src)
    assert decisions(replayed) == decisions(src)  # `waiting` included: same journal state per decision


def test_replay_of_a_batch_recording_uses_the_batch_order(tmp_path, capsys):
    """A recording without `waiting` (batch scheduler, or older code) replays batch by batch."""
    code, src, _ = start_run(
        tmp_path,
        "agent.scheduler=batch",
        "agent.num_workers=2",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
    )
    assert code == 0
    assert not any("waiting" in e for e in events(src) if e["type"] == "node_selected")
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert tree(replayed) == tree(src)
    assert decisions(replayed) == decisions(src)


SMALL4 = ["--set", "agent.num_workers=4", "--set", "agent.multi_seed_eval.num_seeds=1"]
SMALL4 += ["--set", "agent.stages.stage3_max_iters=1", "--set", "agent.stages.stage4_max_iters=1"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", random_seeds(list(range(10))))
def test_kill_at_a_random_moment_of_a_free_running_run(tmp_path, seed):
    """kill -9 after a random number of events (a whole run writes about 45), plus a random
    delay; the resumed run completes, no node finishes twice, stage caps hold. Seeds 0-9, or the
    one ``AI_SCI_TEST_SEED`` names."""
    rng = say_seed(seed)
    after_events, delay = rng.randint(6, 36), rng.uniform(0.0, 0.3)
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *SMALL4, "--slow", "n0003", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_dir = tmp_path / "experiments" / "run"
    deadline = time.time() + load_scaled(120)
    while True:
        n = (
            len((run_dir / "events.jsonl").read_text().splitlines())
            if (run_dir / "events.jsonl").exists()
            else 0
        )
        if n >= after_events:
            break
        assert proc.poll() is None, f"the run ended after {n} events: {proc.stderr.read()[-2000:]}"
        assert time.time() < deadline, "the run made no progress"
        time.sleep(0.01)
    time.sleep(delay)
    if proc.poll() is not None:
        pytest.fail(f"the run ended before the kill ({after_events} events + {delay:.2f} s)")
    _kill(proc)

    _resume_and_check(run_dir, tmp_path)  # completes; nodes finished before the crash did not run again
    journal_finishes, finish_events = _finish_counts(run_dir)
    nodes = journal_nodes(run_dir)
    assert set(journal_finishes) == set(nodes)
    assert max(journal_finishes.values()) == 1, journal_finishes
    assert not finish_events or max(finish_events.values()) == 1, finish_events
    counts = _search_nodes_per_stage(run_dir)
    assert counts[3] == counts[4] == 1  # the capped stages hold exactly their cap
    assert counts[1] <= 6 and counts[2] <= 3  # stage1/2_max_iters defaults
    state = json.loads((run_dir / "state.json").read_text())
    assert [int(s) for s in state["stages"]] == [1, 2, 3, 4]


def _outcome_events(run_dir: Path) -> list[tuple[int, str, str]]:
    """(recall id, node, kind) of every metric / error event in the run's memory, in id order."""
    with sqlite3.connect(run_dir / "memory.sqlite") as c:
        rows = c.execute(
            "SELECT id, node_id, kind FROM recall WHERE kind IN ('metric', 'error') ORDER BY id"
        ).fetchall()
    return [tuple(r) for r in rows]


def _replay_and_compare(src: Path, tmp_path: Path, capsys) -> Path:
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert tree(replayed) == tree(src)
    assert decisions(replayed) == decisions(src)
    return replayed


@pytest.mark.slow
def test_outcome_of_a_node_finished_just_before_a_kill_is_recorded_on_resume(tmp_path, capsys):
    """The leftover state of a kill -9 right after a worker finished n0004 (final state journaled,
    the main thread has not collected it: its memory outcome event is not written yet) while
    n0003's experiment runs. The resumed run records that outcome in the place an uninterrupted
    run does, so the memory ids in later prompts, and thus the replay, agree."""
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *SMALL4, "--slow", "n0003", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AI_SCIENTIST_FAILPOINTS": "after_node:n0004"},
    )
    proc.wait(timeout=300)
    assert proc.returncode == -9, proc.stderr.read()[-2000:]  # the failpoint killed it
    src = tmp_path / "experiments" / "run"
    assert journal_nodes(src)["n0004"]["status"] in ("good", "buggy")
    assert journal_nodes(src)["n0003"]["status"] == "running"
    assert "n0004" not in {nid for _, nid, _ in _outcome_events(src)}  # what the kill left
    res = subprocess.run([sys.executable, str(DRIVER), "resume", str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    finished = {nid for nid, n in journal_nodes(src).items() if n["status"] in ("good", "buggy")}
    recorded = [nid for _, nid, _ in _outcome_events(src)]
    # every finished node's outcome once (a buggy node without an error message has none)
    assert len(recorded) == len(set(recorded)) and "n0004" in recorded and set(recorded) <= finished
    replayed = _replay_and_compare(src, tmp_path, capsys)
    assert _outcome_events(replayed) == _outcome_events(src)  # same ids, nodes and kinds


@pytest.mark.slow
def test_replay_of_a_killed_and_resumed_free_run(tmp_path, capsys):
    """A run killed while stage 1 has nodes in flight, then resumed, replays to the same tree."""
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *SMALL4, "--slow", "n0003", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    src = tmp_path / "experiments" / "run"
    started = src / "nodes" / "n0003" / "workspace" / "STARTED"  # n0003's slow experiment is running
    deadline = time.time() + load_scaled(120)
    while not started.exists():
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.time() < deadline, "n0003 never started"
        time.sleep(0.01)
    _kill(proc)
    assert journal_nodes(src)["n0003"]["status"] == "running"
    res = subprocess.run([sys.executable, str(DRIVER), "resume", str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert any(e["type"] == "nodes_resumed" and "n0003" in e["node_ids"] for e in events(src))
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert tree(replayed) == tree(src)
    assert decisions(replayed) == decisions(src)


@pytest.mark.slow
def test_a_kill_between_a_decision_and_its_node_loses_no_decision(tmp_path, capsys):
    """kill -9 right after the decision to create n0004 is recorded, before the journal holds
    n0004 (stage 1 nodes in flight). Every node of the resumed run has its decision with
    ``waiting``; the replay makes the decisions the run made in the end (the last per id)."""
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *SMALL4, "--slow", "n0003", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AI_SCIENTIST_FAILPOINTS": "selected:n0004"},
    )
    proc.wait(timeout=300)
    assert proc.returncode == -9, proc.stderr.read()[-2000:]  # the failpoint killed it
    src = tmp_path / "experiments" / "run"
    assert "n0004" not in journal_nodes(src)
    assert [e["node_id"] for e in events(src) if e["type"] == "node_selected"][-1] == "n0004"
    res = subprocess.run([sys.executable, str(DRIVER), "resume", str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    selected = [e for e in events(src) if e["type"] == "node_selected"]
    assert [e["node_id"] for e in selected].count("n0004") == 2  # decided again after the resume
    decided = {e["node_id"] for e in selected if "waiting" in e}
    created = {nid for nid, n in journal_nodes(src).items() if n["operation"] != "seed_eval"}
    assert created <= decided, created - decided
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert tree(replayed) == tree(src)

    def last_per_node(run_dir: Path) -> list[dict]:
        out = decisions(run_dir)
        final = {e["node_id"]: i for i, e in enumerate(out) if e["type"] == "node_selected"}
        return [e for i, e in enumerate(out) if e["type"] != "node_selected" or final[e["node_id"]] == i]

    assert last_per_node(replayed) == last_per_node(src)


class WritesMemory(ExampleResponder):
    """Every plan answer notes something in the node's recall window and writes a lesson to
    archival (``memory_update``), so the ids shown in the node's next prompts are those of rows
    its worker thread wrote while three others wrote theirs."""

    def _phase0(self, text, ctx):
        plan = json.loads(super()._phase0(text, ctx))
        if ctx.label == "plan":
            plan["memory_update"] = [
                {"op": "recall_append", "text": f"note by {ctx.node_id}", "kind": "note"},
                {"op": "archival_write", "text": f"lesson from {ctx.node_id}: keep the seed fixed"},
            ]
        return json.dumps(plan)


def test_replay_of_a_four_worker_run_whose_model_writes_memory(tmp_path, capsys):
    """The recall ids in a node's prompts are those of rows written while other workers wrote
    theirs: a replay gives each row its recorded id (before: ``r8`` recorded, ``r6`` replayed,
    and the replay stopped at that prompt)."""
    responder = WritesMemory(buggy_nodes=(), slow_nodes={"n0002": 0.7, "n0003": 0.3})
    code, src, _ = start_run(
        tmp_path,
        "agent.num_workers=4",
        "memory.enabled=true",
        "agent.merge_calls=false",  # the plan is a call of its own, the code call shows its notes
        "agent.search.num_drafts=4",
        "agent.stages.stage1_max_iters=6",
        "agent.stages.stage2_max_iters=3",
        "agent.stages.stage3_max_iters=2",
        "agent.stages.stage4_max_iters=2",
        responder=responder,
        latency_s=0.05,
    )
    assert code == 0
    shown = [r for r in prompt_records(src) if r["phase"] == "phase2" and "[note] note by" in json.dumps(r)]
    assert shown, "no prompt showed a node's own memory note"
    with sqlite3.connect(src / "memory.sqlite") as c:
        notes = dict(c.execute("SELECT node_id, id FROM recall WHERE kind = 'note'").fetchall())
    replayed = _replay_and_compare(src, tmp_path, capsys)  # every prompt byte for byte, or it stops
    with sqlite3.connect(replayed / "memory.sqlite") as c:
        assert dict(c.execute("SELECT node_id, id FROM recall WHERE kind = 'note'").fetchall()) == notes


@pytest.mark.slow
def test_a_kill_before_a_finished_nodes_state_is_written(tmp_path, capsys):
    """kill -9 after n0002's final journal record, before its worker wrote ``state.md`` (what a
    child shows as its history). The resumed run writes it (n0002 never runs again), so its
    children's prompts, and the replay, are those of an uninterrupted run."""
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *SMALL4, "--slow", "n0003", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AI_SCIENTIST_FAILPOINTS": "node_journaled:n0002"},
    )
    proc.wait(timeout=300)
    assert proc.returncode == -9, proc.stderr.read()[-2000:]  # the failpoint killed it
    src = tmp_path / "experiments" / "run"
    assert journal_nodes(src)["n0002"]["status"] in ("good", "buggy")
    assert not (src / "nodes" / "n0002" / "state.md").exists()  # what the kill left
    res = subprocess.run([sys.executable, str(DRIVER), "resume", str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (
        f"[n0002] {journal_nodes(src)['n0002']['summary']}"
        in (src / "nodes" / "n0002" / "state.md").read_text()
    )
    children = [
        n for n in journal_nodes(src).values() if n["parent_id"] == "n0002" and n["operation"] != "seed_eval"
    ]
    assert children, "no child of n0002 to show its history"
    _replay_and_compare(src, tmp_path, capsys)

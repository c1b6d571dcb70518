"""No idle worker at a stage end (issue 37): seed re-runs of a stage's provisional best start while
its last nodes run; the replay makes the same decisions; kill -9 around stage ends loses nothing.

The runs are tests/drive_overlap.py's: 4 workers, shell experiments of drawn lengths, and a slow
best draft (n0004) whose experiment ends only after an early seed re-run was started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from drive_overlap import OVERLAP, SLOW_BEST, OverlapResponder
from pipeline_support import decisions, events, journal_nodes, random_seeds, say_seed, start_run, tree
from test_pipeline_resume import _finished_snapshot, _kill
from test_scheduler_free import _finish_counts
from waiting import load_scaled

from ai_scientist.cli.main import main

DRIVER = Path(__file__).parent / "drive_overlap.py"
CAPS = {1: 6, 2: 4, 3: 3, 4: 2}  # OVERLAP's stage caps


def _early(run_dir: Path) -> list[dict]:
    return [e for e in events(run_dir) if e["type"] == "seeds_started" and e.get("early")]


def _search_nodes_per_stage(run_dir: Path) -> Counter:
    return Counter(n["stage"] for n in journal_nodes(run_dir).values() if n["operation"] != "seed_eval")


def _without_ts(evs: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "ts"} for e in evs]


def _replay(src: Path, tmp_path: Path, capsys) -> Path:
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    return tmp_path / "replays" / f"{src.name}.replay"


def _value(node: dict) -> float:
    return node["metric"]["value"]


def test_seed_reruns_start_while_the_last_nodes_run_and_replay_reproduces_them(tmp_path, capsys):
    code, src, _ = start_run(tmp_path, *OVERLAP, responder=OverlapResponder(tmp_path / "experiments" / "run"))
    assert code == 0
    nodes = journal_nodes(src)
    assert _search_nodes_per_stage(src) == Counter(CAPS)  # caps exact: early re-runs are not search nodes

    evs = events(src)
    early = _early(src)
    assert early, "no seed re-run started before its stage's last node was in"
    first = early[0]
    assert first["stage"] == 1 and SLOW_BEST in first["waiting"]
    order = [(e["type"], e.get("node_id")) for e in evs]
    at = evs.index(first)
    finished_then = {e["node_id"] for e in evs[:at] if e["type"] == "node_finished"}
    for e in early:
        # each decision re-ran the best of the stage's search nodes finished when it was made
        i = evs.index(e)
        done = {x["node_id"] for x in evs[:i] if x["type"] == "node_finished"}
        assert not done & set(e["waiting"])
        good = [
            n
            for nid, n in nodes.items()
            if nid in done
            and n["stage"] == e["stage"]
            and n["operation"] != "seed_eval"
            and n["status"] == "good"
        ]
        assert e["node_id"] == max(good, key=lambda n: (_value(n), -int(n["id"][1:])))["id"]
        for nid in e["node_ids"]:  # the recorded ids are that node's seed re-runs, one per free worker
            assert nodes[nid]["operation"] == "seed_eval" and nodes[nid]["parent_id"] == e["node_id"]
        assert len(e["node_ids"]) <= 4 - len(e["waiting"])
    assert first["node_id"] != SLOW_BEST and first["node_id"] in finished_then
    # n0004 ended after the early re-runs started, and became the stage's best: its own re-runs
    # come after it; the provisional best's re-runs are kept and ranked by their mean
    assert order.index(("node_finished", SLOW_BEST)) > at
    best1 = next(e for e in evs if e["type"] == "stage_best" and e["stage"] == 1)
    assert best1["node_id"] == SLOW_BEST
    assert {n["parent_id"] for n in nodes.values() if n["operation"] == "seed_eval" and n["stage"] == 1} >= {
        SLOW_BEST,
        first["node_id"],
    }
    rerank = next(e for e in evs if e["type"] == "seed_rerank" and e["stage"] == 1)
    assert first["node_id"] in rerank.get("measured", []) + rerank.get("candidates", []), rerank

    replayed = _replay(src, tmp_path, capsys)
    assert tree(replayed) == tree(src)
    assert decisions(replayed) == decisions(src)
    assert _without_ts(_early(replayed)) == _without_ts(
        early
    )  # same ids, same provisional best, same waiting


def test_one_worker_starts_no_seed_rerun_early(tmp_path):
    code, src, _ = start_run(
        tmp_path,
        *OVERLAP,
        "agent.num_workers=1",
        responder=OverlapResponder(tmp_path / "experiments" / "run", hold=False),
    )
    assert code == 0
    assert not [e for e in events(src) if e["type"] == "seeds_started"]
    # with one worker every seed re-run starts after the last search node of its stage is in
    nodes = journal_nodes(src)
    ids = sorted(nodes)
    for stage in (1, 2, 3, 4):
        search = [i for i in ids if nodes[i]["stage"] == stage and nodes[i]["operation"] != "seed_eval"]
        seeds = [i for i in ids if nodes[i]["stage"] == stage and nodes[i]["operation"] == "seed_eval"]
        assert not search or not seeds or min(seeds) > max(search)


def _start(tmp_path: Path, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return proc, tmp_path / "experiments" / "run"


def _resume_and_check(run_dir: Path) -> None:
    """Resume to the end: completed; no node finished before the kill ran again; every node
    finished exactly once (journal and ``node_finished`` events); caps exact."""
    before = _finished_snapshot(run_dir)
    res = subprocess.run(
        [sys.executable, str(DRIVER), "resume", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=load_scaled(300),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == 0
    after = _finished_snapshot(run_dir)
    for nid, counts in before.items():
        assert after[nid] == counts, f"{nid} finished before the kill but ran again: {counts} -> {after[nid]}"
    nodes = journal_nodes(run_dir)
    assert all(n["status"] in ("good", "buggy") for n in nodes.values()), "a node was lost"
    journal_finishes, finish_events = _finish_counts(run_dir)
    assert set(journal_finishes) == set(nodes) and max(journal_finishes.values()) == 1, journal_finishes
    assert not finish_events or max(finish_events.values()) == 1, finish_events
    assert _search_nodes_per_stage(run_dir) == Counter(CAPS)
    assert [int(s) for s in state["stages"]] == [1, 2, 3, 4]


def _early_decisions_hold(run_dir: Path) -> None:
    """Every node an early decision names is a seed re-run of the node it names, unless a later
    ``seeds_void`` voided it (the kill came before the node was created)."""
    evs, nodes = events(run_dir), journal_nodes(run_dir)
    for i, e in enumerate(evs):
        if e["type"] != "seeds_started" or not e.get("early"):
            continue
        voided = {nid for later in evs[i:] if later["type"] == "seeds_void" for nid in later["node_ids"]}
        for nid in e["node_ids"]:
            if nid not in voided:
                assert nodes[nid]["operation"] == "seed_eval" and nodes[nid]["parent_id"] == e["node_id"], e


# moments around stage ends: (event type, stage) after which the kill comes, plus a random delay
ANCHORS = [
    ("seeds_started", 1),
    ("node_finished", SLOW_BEST),
    ("stage_completed", 1),
    ("stage_best", 1),
    ("stage_started", 2),
    ("stage_completed", 2),
    ("stage_best", 2),
    ("stage_completed", 3),
    ("stage_best", 3),
    ("stage_completed", 4),
]


def _reached(run_dir: Path, anchor: tuple[str, object]) -> bool:
    kind, which = anchor
    key = "node_id" if kind == "node_finished" else "stage"
    return any(e["type"] == kind and e.get(key) == which for e in events(run_dir))


@pytest.mark.slow
@pytest.mark.parametrize("seed", random_seeds(list(range(10))))
def test_kill_at_a_random_moment_around_a_stage_end(tmp_path, seed):
    """kill -9 at a random moment near a stage end (an anchor event plus a random delay), resume:
    nothing lost, nothing run twice, caps exact, every early decision's nodes exist or it was
    voided. Seeds 0-9 (anchor ``seed % 10``), or the one ``AI_SCI_TEST_SEED`` names."""
    rng = say_seed(seed)
    anchor, delay = ANCHORS[seed % len(ANCHORS)], rng.uniform(0.0, 0.4)
    proc, run_dir = _start(tmp_path)
    deadline = time.time() + load_scaled(180)
    while not (run_dir / "events.jsonl").exists() or not _reached(run_dir, anchor):
        assert proc.poll() is None, f"the run ended before {anchor}: {proc.stderr.read()[-2000:]}"
        assert time.time() < deadline, f"{anchor} never came"
        time.sleep(0.01)
    time.sleep(delay)
    if proc.poll() is not None:
        pytest.fail(f"the run ended before the kill ({anchor} + {delay:.2f} s)")
    _kill(proc)
    _resume_and_check(run_dir)
    _early_decisions_hold(run_dir)


@pytest.mark.slow
def test_a_kill_between_an_early_decision_and_its_nodes_is_voided(tmp_path, capsys):
    """kill -9 right after the first early decision is recorded, before its nodes exist: the
    resumed run voids it (``seeds_void``), and the replay, which follows the recording, does not
    make it."""
    first_seed = "n0007"  # stage 1: six drafts, then the first early seed re-run
    proc, run_dir = _start(tmp_path, env={"AI_SCIENTIST_FAILPOINTS": f"seeds_started:{first_seed}"})
    proc.wait(timeout=load_scaled(300))
    assert proc.returncode == -9, proc.stderr.read()[-2000:]  # the failpoint killed it
    assert first_seed not in journal_nodes(run_dir)
    assert _early(run_dir)[-1]["node_ids"][0] == first_seed
    _resume_and_check(run_dir)
    void = [e for e in events(run_dir) if e["type"] == "seeds_void"]
    assert void and first_seed in void[0]["node_ids"]
    replayed = _replay(run_dir, tmp_path, capsys)
    assert tree(replayed) == tree(run_dir)

"""Hostile or broken LLM output is recorded on its node and the run goes on; other policies complete."""

from __future__ import annotations

import json

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, start_run

HOSTILE = {
    "malformed": "no valid code answer",
    "missing_fields": "no valid code answer",
    "empty": "no valid code answer",
    "traversal": "rejected files",
}


@pytest.mark.parametrize("kind,expected", sorted(HOSTILE.items()))
def test_hostile_answer_recorded_and_run_continues(tmp_path, kind, expected):
    responder = ExampleResponder(buggy_nodes=(), hostile={"n0001": kind})
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        responder=responder,
    )
    nodes = journal_nodes(run_dir)
    bad = nodes["n0001"]
    assert bad["status"] == "buggy" and expected in bad["error"], bad["error"]
    assert code == 0, "the run goes on and finds a working node"
    assert any(n["status"] == "good" for n in nodes.values())
    failed = [e for e in events(run_dir) if e["type"] == "node_failed" and e["node_id"] == "n0001"]
    assert failed and failed[0]["phase"] == "phase2"
    assert not [e for e in events(run_dir) if e["type"] == "internal_error"]
    if kind == "traversal":
        assert not (tmp_path / "outside.py").exists() and not (run_dir.parent / "outside.py").exists()
    if kind in ("malformed", "empty", "missing_fields"):
        # the failed attempts and the repair round are in the node's prompt logs
        logs = sorted((run_dir / "nodes" / "n0001" / "prompt_logs").glob("*_phase2_*.json"))
        assert len(logs) >= 2
        recs = [json.loads(p.read_text()) for p in logs]
        assert any(r.get("structured_error") for r in recs)


def test_enormous_output_is_capped_and_recorded(tmp_path):
    responder = ExampleResponder(buggy_nodes=(), hostile={"n0001": "enormous_output"})
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        "exec.max_output_bytes=20000",
        responder=responder,
    )
    assert code == 0
    nodes = journal_nodes(run_dir)
    assert nodes["n0001"]["status"] == "buggy"  # it flooded and wrote no metrics
    rec = json.loads(next((run_dir / "nodes" / "n0001" / "exec").glob("*_phase4_*.json")).read_text())
    assert rec["stdout_bytes"] > 20000 and len(rec["stdout"]) <= 2 * 20000 + 1000


@pytest.mark.parametrize("policy", ["greedy", "mcts"])
def test_other_policies_complete_the_bundled_example(tmp_path, policy):
    code, run_dir, _ = start_run(tmp_path, f"search.policy={policy}", "search.mcts.tree_nums=2")
    assert code == 0
    nodes = journal_nodes(run_dir)
    assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}
    sel = [e for e in events(run_dir) if e["type"] == "node_selected"]
    assert sel and all(e["policy"] == policy for e in sel)
    if policy == "mcts":
        assert {n["tree"] for n in nodes.values()} == {0, 1}

"""Calls per node (agent.merge_calls): a child that needs no new dependency plans inside its code
answer (no planning call), a child that declares a new one still runs phase 1, the execution review
parses the metrics when there is no metrics.json; the old behaviour stays selectable. Counts come
from the prompt logs the runs wrote, by the operation the journal gives each node."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, start_run

from ai_scientist.base.config import AgentConfig
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.main import main

# the node pipeline's own calls only (the node plotting step, where present, adds its own)
NO_PLOTS = ["agent.plots.enabled=false"] if "plots" in AgentConfig.model_fields else []
NEW_TOOL_NODE, TOOL = "n0005", "aisfaketool"  # a child whose merged answer declares a new tool
NO_METRICS_NODE = "n0002"  # its experiment prints its metrics but writes no metrics.json


def _calls(run_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """node id -> the (phase, label) of each LLM call in its prompt logs (one per call, not attempt)."""
    seen: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    for r in prompt_records(run_dir):
        seen[r["node_id"]].setdefault(str(r.get("call_id") or r.get("call")), (r["phase"], r["label"]))
    return {nid: list(calls.values()) for nid, calls in seen.items()}


def _children(nodes: dict[str, dict]) -> list[dict]:
    return [n for n in nodes.values() if n["operation"] in ("improve", "debug", "tune", "ablate")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for name, merge in (("merged", "true"), ("baseline", "false")):
        responder = ExampleResponder(new_tools={NEW_TOOL_NODE: TOOL}, no_metrics_file=[NO_METRICS_NODE])
        code, run_dir, _ = start_run(
            tmp_path_factory.mktemp(name),
            *NO_PLOTS,
            f"agent.merge_calls={merge}",
            # the new tool is a stub its installer writes offline; a constrained plan could not
            # declare it (no network: no new packages)
            "agent.constrain_answers=false",
            responder=responder,
        )
        assert code == 0
        out[name] = run_dir
    return out


def test_children_without_new_dependencies_make_at_most_two_calls(runs):
    nodes = journal_nodes(runs["merged"])
    calls = _calls(runs["merged"])
    plain = [n for n in _children(nodes) if n["id"] != NEW_TOOL_NODE and n["status"] == "good"]
    assert len(plain) >= 3, "the run must grow children to measure"
    per_node = [len(calls.get(n["id"], [])) for n in plain]
    assert sum(per_node) / len(per_node) <= 2, dict(zip([n["id"] for n in plain], per_node, strict=True))
    for n in plain:
        labels = [label for _, label in calls[n["id"]]]
        assert "plan" not in labels and "code+plan" in labels, (n["id"], labels)
        plan = json.loads(RunPaths(runs["merged"]).node(n["id"]).file("plan.json").read_text())
        assert plan["plan_source"] == "merged" and plan["goal_summary"]
    merged_events = {e["node_id"] for e in events(runs["merged"]) if e["type"] == "plan_merged"}
    assert {n["id"] for n in plain} <= merged_events
    # drafts plan inside their code answer too (no parent plan to start from)
    drafts = [n for n in nodes.values() if n["operation"] == "draft"]
    assert drafts and all(("phase2", "code+plan") in calls[d["id"]] for d in drafts)
    assert all(("phase0", "plan") not in calls[d["id"]] for d in drafts)


def test_the_old_behaviour_is_selectable_and_makes_three_calls(runs):
    nodes = journal_nodes(runs["baseline"])
    calls = _calls(runs["baseline"])
    plain = [
        n
        for n in _children(nodes)
        if n["id"] != NEW_TOOL_NODE and n["status"] == "good" and n["operation"] != "debug"
    ]
    assert plain
    for n in plain:  # plan, code, review
        assert [label for _, label in calls[n["id"]]] == ["plan", "code", "exec_review"], n["id"]
        plan = json.loads(RunPaths(runs["baseline"]).node(n["id"]).file("plan.json").read_text())
        assert plan["plan_source"] == "own"


def test_a_child_with_a_new_dependency_still_runs_phase1(runs):
    nodes = journal_nodes(runs["merged"])
    node = nodes[NEW_TOOL_NODE]
    assert node["operation"] not in ("draft", "seed_eval"), "the scripted tree changed: pick another child"
    assert node["status"] == "good", node.get("error")
    labels = [label for _, label in _calls(runs["merged"])[NEW_TOOL_NODE]]
    assert labels[0] == "code+plan" and "step1" in labels, labels  # the installer asked what to run
    nd = RunPaths(runs["merged"]).node(NEW_TOOL_NODE)
    plan = json.loads(nd.file("plan.json").read_text())
    assert plan["plan_source"] == "merged" and plan["dependencies"]["apt"] == [TOOL]
    install = json.loads(nd.file("phase1.json").read_text())
    assert install["satisfied"] and install["dependencies"]["apt"] == [TOOL]
    assert any(TOOL in s["command"] for s in install["steps"])
    assert (nd.root / "env" / "bin" / TOOL).exists()


def test_review_parses_the_metrics_when_there_is_no_metrics_json(runs):
    merged = _calls(runs["merged"])[NO_METRICS_NODE]
    baseline = _calls(runs["baseline"])[NO_METRICS_NODE]
    assert ("review", "exec_review+metrics") in merged and ("phase4", "metrics_fallback") not in merged
    assert ("phase4", "metrics_fallback") in baseline and ("review", "exec_review") in baseline
    # one call fewer for the metrics, and one more when the node's plan moved into its code answer
    plan = json.loads(RunPaths(runs["merged"]).node(NO_METRICS_NODE).file("plan.json").read_text())
    assert len(merged) == len(baseline) - 1 - (plan["plan_source"] == "merged")
    for run_dir in runs.values():
        node = journal_nodes(run_dir)[NO_METRICS_NODE]
        assert node["status"] == "good", node.get("error")
    node = journal_nodes(runs["merged"])[NO_METRICS_NODE]
    review = json.loads(RunPaths(runs["merged"]).node(NO_METRICS_NODE).file("review.json").read_text())
    assert review["metrics"][0]["name"] == "val_accuracy"
    assert node["metric"]["value"] == pytest.approx(review["metrics"][0]["value"])


def test_logs_inspect_shows_a_merged_plan(runs, capsys):
    nodes = journal_nodes(runs["merged"])
    child = next(n for n in _children(nodes) if n["id"] != NEW_TOOL_NODE and n["status"] == "good")
    plan = json.loads(RunPaths(runs["merged"]).node(child["id"]).file("plan.json").read_text())
    assert main(["logs", str(runs["merged"]), "inspect", child["id"]]) == 0
    out = capsys.readouterr().out
    assert f"plan (merged): {plan['goal_summary']}" in out
    assert plan["implementation_strategy"] in out

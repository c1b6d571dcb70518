"""A metric counts only if the run produced it (issue 30, item 2).

n0001's answer writes ``metrics.json`` itself as one of its files; n0002's build command writes
it and its run never touches it. Both get no metric, with the reason; n0003 onwards are the
ordinary example. Expectations come from the recorded answers and node records.
"""

from __future__ import annotations

import json
from pathlib import Path

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, start_run

from ai_scientist.cli.commands import execute
from ai_scientist.runloop.replay import replay_run

CLAIM = {"metrics": [{"name": "val_accuracy", "value": 0.99, "direction": "maximize"}]}


class ClaimingResponder(ExampleResponder):
    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        if ctx.node_id == "n0001":  # the claim as a file of the answer; the program only prints
            answer["files"] = [
                {"path": "experiment.py", "content": "print('val_accuracy=0.99')\n"},
                {"path": "metrics.json", "content": json.dumps(CLAIM)},
            ]
        if ctx.node_id == "n0003":  # a working node whose answer also brings a "result" file
            answer["files"].append({"path": "claimed_results.json", "content": json.dumps({"acc": 0.99})})
        if ctx.node_id == "n0002":  # made before the run (by the build); the run leaves it alone
            answer["files"] = [{"path": "experiment.py", "content": "print('nothing measured')\n"}]
            answer["build"]["commands"] = [f"echo '{json.dumps(CLAIM)}' > metrics.json"]
            answer["run"]["expected_outputs"] = []
        return json.dumps(answer)


def _answer(run_dir, nid):
    return json.loads((run_dir / "nodes" / nid / "code_answer.json").read_text())


def test_a_metrics_file_the_run_did_not_produce_gets_no_metric(tmp_path):
    # free build commands (not the constrained choice among the sandbox's compilers)
    code, run_dir, _ = start_run(
        tmp_path, "agent.constrain_answers=false", responder=ClaimingResponder(buggy_nodes=())
    )
    nodes = journal_nodes(run_dir)
    # n0001: its answer carried metrics.json as a file
    assert any(f["path"] == "metrics.json" for f in _answer(run_dir, "n0001")["files"])
    run1 = json.loads((run_dir / "nodes" / "n0001" / "run.json").read_text())
    assert run1["failure"] is None and run1["metrics"] == []
    assert "answer wrote it as a file" in run1["metrics_source"]
    assert nodes["n0001"]["status"] == "buggy" and nodes["n0001"]["metric"] is None
    assert "answer wrote it as a file" in nodes["n0001"]["error"]
    # n0002: the build wrote it, the run did not touch it
    assert _answer(run_dir, "n0002")["build"]["commands"]
    run2 = json.loads((run_dir / "nodes" / "n0002" / "run.json").read_text())
    assert run2["metrics"] == [] and "existed before the run command" in run2["metrics_source"]
    assert nodes["n0002"]["status"] == "buggy" and "existed before the run command" in nodes["n0002"]["error"]
    # no LLM parse of the output stood in for the refused file
    for nid in ("n0001", "n0002"):
        logs = (run_dir / "nodes" / nid / "prompt_logs").glob("*.json")
        assert not [p for p in logs if "metrics_fallback" in p.name or "exec_review" in p.name]
    # the run went on: ordinary nodes are measured as before
    assert any(n["status"] == "good" and n["metric"] for n in nodes.values())
    # a data file the answer wrote is no result: not offered to the node's plotting call
    assert any(f["path"] == "claimed_results.json" for f in _answer(run_dir, "n0003")["files"])
    run3 = json.loads((run_dir / "nodes" / "n0003" / "run.json").read_text())
    assert run3["unmeasured_files"] == ["claimed_results.json"] and nodes["n0003"]["status"] == "good"
    plots3 = json.loads((run_dir / "nodes" / "n0003" / "plots.json").read_text())
    assert "results.json" in plots3["data_files"] and "claimed_results.json" not in plots3["data_files"]
    # a replay (which restores the recorded workspace at every command) makes the same decisions
    again = replay_run(run_dir, tmp_path / "replays")
    assert execute(again, resources=None, replay_from=run_dir) == code
    replayed = journal_nodes(again.dir)
    assert {k: (n["status"], n["error"], n["metric"]) for k, n in replayed.items()} == {
        k: (n["status"], n["error"], n["metric"]) for k, n in nodes.items()
    }


def test_the_report_manifest_copies_no_file_the_run_did_not_produce(tmp_path):
    from types import SimpleNamespace

    from ai_scientist.reporting.manifest import _node_entry

    node_dir = tmp_path / "nodes" / "n0001"
    ws = node_dir / "workspace"
    ws.mkdir(parents=True)
    (ws / "results.json").write_text('{"acc": 0.8}')
    (ws / "claimed.json").write_text('{"acc": 0.99}')
    (node_dir / "run.json").write_text(json.dumps({"unmeasured_files": ["claimed.json"]}))
    view = SimpleNamespace(node_dir=lambda nid: node_dir, metrics=lambda nid: {})
    entry = _node_entry(view, {"id": "n0001"}, "best", tmp_path / "report")
    assert sorted(Path(f["path"]).name for f in entry["files"]) == ["results.json"]

"""End to end with the scripted fake LLM on the bundled example: the whole story of a run."""

from __future__ import annotations

import json

from pipeline_support import events, journal_nodes, start_run

from ai_scientist.cli.main import main


def test_full_run_tells_the_whole_story(tmp_path, capsys):
    from ai_scientist_testing.scripted import ExampleResponder

    # both drafts crash, so stage 1 must debug one of them before it can finish
    code, run_dir, responder = start_run(tmp_path, responder=ExampleResponder(buggy_nodes=("n0001", "n0002")))
    assert code == 0, [e for e in events(run_dir) if e["type"] in ("internal_error", "node_failed")]
    nodes = journal_nodes(run_dir)
    ops = [n["operation"] for n in nodes.values()]

    # a draft that fails, and a debug that fixes it
    assert nodes["n0001"]["operation"] == "draft" and nodes["n0001"]["status"] == "buggy"
    assert "phase4" in nodes["n0001"]["error"] and "NameError" in nodes["n0001"]["error"]
    debug = [n for n in nodes.values() if n["operation"] == "debug" and n["parent_id"] in ("n0001", "n0002")]
    assert debug and debug[0]["status"] == "good"
    # tuning, research and ablation nodes, and seed re-runs
    assert {"tune", "improve", "ablate", "seed_eval"} <= set(ops), ops
    assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}
    tunes = [n for n in nodes.values() if n["operation"] == "tune"]
    assert all(n["idea"] for n in tunes) and len({n["idea"] for n in tunes}) == len(tunes), (
        "ideas deduplicated"
    )
    seeds = [n for n in nodes.values() if n["operation"] == "seed_eval"]
    bests = {e["node_id"] for e in events(run_dir) if e["type"] == "stage_best"}
    # re-run over seeds: each stage's best, and the runners-up its re-ranking compared (issue 30)
    reranked = {
        nid
        for e in events(run_dir)
        if e["type"] == "seed_rerank"
        for nid in [e["node_id"], *e.get("candidates", [])]
    }
    assert len(seeds) == 2 * len(bests | reranked) and all(n["status"] == "good" for n in seeds)
    assert {n["parent_id"] for n in seeds} == bests | reranked

    # metrics come from metrics.json written by the experiment
    good = [n for n in nodes.values() if n["status"] == "good"]
    for n in good:
        run_rec = json.loads((run_dir / "nodes" / n["id"] / "run.json").read_text())
        assert run_rec["metrics_source"] == "metrics.json"
        assert n["metric"]["name"] == "val_accuracy" and 0.0 < n["metric"]["value"] <= 1.0
        written = json.loads((run_dir / "nodes" / n["id"] / "workspace" / "metrics.json").read_text())
        assert written["metrics"][0]["value"] == n["metric"]["value"]

    # events: every decision with its evidence, stage transitions, the seed aggregate
    ev = events(run_dir)
    kinds = [e["type"] for e in ev]
    assert kinds.count("node_selected") == len(nodes) - len(seeds)
    assert all(e.get("reason") for e in ev if e["type"] == "node_selected")
    assert kinds.count("stage_completed") == 4 and kinds.count("stage_best") == 4
    seed_ev = [e for e in ev if e["type"] == "seed_eval"]
    assert len(seed_ev) == 4 and all(e["aggregate"]["n"] == 2 for e in seed_ev)
    assert "stderr" in seed_ev[0]["aggregate"] and "mean" in seed_ev[0]["aggregate"]

    # prompt logs: every LLM call of every node, with a ledger
    logged = sorted((run_dir / "nodes").glob("*/prompt_logs/*.json"))
    assert len(logged) == len(responder.calls)
    rec = json.loads(logged[0].read_text())
    assert rec["messages"] and rec["ledger"] and rec["response"]["raw"]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == 0
    assert (run_dir / "tree.html").exists()
    assert (run_dir / "cost.json").exists() and (run_dir / "environment.json").exists()

    # the logs commands read it back
    assert main(["logs", str(run_dir), "nodes"]) == 0
    out = capsys.readouterr().out
    assert "n0001" in out and "buggy" in out


def test_stage1_without_working_node_exits_3(tmp_path):
    from ai_scientist_testing.scripted import ExampleResponder

    everything_buggy = ExampleResponder(always_buggy=True)
    code, run_dir, _ = start_run(tmp_path, "agent.stages.stage1_max_iters=3", responder=everything_buggy)
    assert code == 3
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == 3
    assert any(e["type"] == "run_result" and e["result"] == "no working experiment" for e in events(run_dir))
    nodes = journal_nodes(run_dir)
    assert len(nodes) == 3 and all(n["status"] == "buggy" for n in nodes.values())

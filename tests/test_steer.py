"""Steering a run through ``ai-scientist steer`` (runloop/steering.py): notes, expand next, don't
expand, pause/resume, approval gates; and a replay of a steered run reproduces its tree.

The requests are written while the run goes on, by the CLI, from inside the scripted LLM's
answers (the moment a given node's call is answered), so each lands at a known point of the run.
What each test expects is read from what the run recorded: the ``steer`` events (their ``at``),
the decisions and the prompt logs."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import decisions, events, journal_nodes, run_args, tree

from ai_scientist.cli.commands import execute, open_locked, setup_run
from ai_scientist.cli.main import main
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.runloop.steering import EXIT_GATE, make_request
from ai_scientist.treesearch.node import node_sort_key

NOTE = "Keep the learning rate at 0.1 <b>and</b> report the clean accuracy."


class SteeringResponder(ExampleResponder):
    """The example's answers; on the first call of a node named in ``at``, runs the CLI commands
    given for it (as a user would, while the run goes on)."""

    def __init__(self, run_dir: list[Path], at: dict[str, list[list[str]]], **kw):
        super().__init__(**kw)
        self.run_dir = run_dir
        self.at = {k: list(v) for k, v in at.items()}

    def __call__(self, messages, schema, ctx):
        todo = self.at.pop(ctx.node_id, None)
        for cmd in todo or []:
            assert main(["steer", str(self.run_dir[0]), *cmd]) == 0
        return super().__call__(messages, schema, ctx)


def _run(tmp_path: Path, responder, *overrides: str):
    run, resources = setup_run(run_args(tmp_path, *overrides))
    responder.run_dir = [run.dir]
    code = execute(run, resources=resources, backend=ScriptedBackend(responder))
    return code, run.dir


def _steer_events(run: Path) -> list[dict]:
    return [e for e in events(run) if e["type"] == "steer"]


def _layers(rec: dict) -> dict[str, dict]:
    return {entry["layer"]: entry for entry in rec["ledger"]}


def _code_and_plan_logs(run: Path) -> list[tuple[str, dict]]:
    out = []
    for p in sorted(run.glob("nodes/n*/prompt_logs/*.json")):
        rec = json.loads(p.read_text())
        if rec["phase"] in ("phase0", "phase2"):
            out.append((p.parent.parent.name, rec))
    return out


def test_note_expand_and_block_from_the_cli_then_replay(tmp_path, capsys):
    responder = SteeringResponder(
        [],
        {
            # while n0002 is answered: a note, and n0001 (buggy) to be expanded next
            "n0002": [["note", NOTE], ["expand", "n0001"]],
        },
    )
    code, run = _run(tmp_path, responder, "agent.search.num_drafts=3", "agent.search.debug_prob=0.0")
    assert code == 0, capsys.readouterr().err
    steers = _steer_events(run)
    assert [s["action"] for s in steers] == ["note", "expand"]
    note_at = steers[0]["at"]
    # the note: its own layer, in the plan/code prompts of every node created at or after `at`
    logs = _code_and_plan_logs(run)
    with_note = {nid for nid, rec in logs if _layers(rec).get("user_note", {}).get("action") == "kept"}
    later = {nid for nid, _ in logs if node_sort_key(nid) >= node_sort_key(note_at)}
    assert with_note == later and later, (note_at, with_note)
    for nid, rec in logs:
        text = "\n".join(str(m["content"]) for m in rec["messages"])
        assert (NOTE in text) == (nid in later)
        if nid not in later:
            assert _layers(rec)["user_note"]["reason"] == "no content"
    # expand next: the decision at `at` debugs n0001 (the policy, debug_prob 0, would draft)
    sel = {e["node_id"]: e for e in events(run) if e["type"] == "node_selected"}
    steered = sel[steers[1]["at"]]
    assert (steered["operation"], steered["parent_id"]) == ("debug", "n0001")
    assert "steered: expand n0001 next" in steered["reason"]
    used = [e for e in events(run) if e["type"] == "steer_used"]
    assert [(u["request"], u["node_id"]) for u in used] == [(steers[1]["request"], steers[1]["at"])]
    # the request files were moved out of pending
    assert not list((run / "steer" / "pending").glob("*.json"))
    assert len(list((run / "steer" / "done").glob("*.json"))) == 2

    # a replay applies the recorded steering at the same decisions: same tree, same decisions
    capsys.readouterr()
    assert main(["replay", str(run), "--out", str(tmp_path / "replays")]) == 0
    replayed = tmp_path / "replays" / f"{run.name}.replay"
    assert tree(replayed) == tree(run)
    assert decisions(replayed) == decisions(run)
    strip = ("ts",)
    assert [{k: v for k, v in e.items() if k not in strip} for e in _steer_events(replayed)] == [
        {k: v for k, v in e.items() if k not in strip} for e in steers
    ]


def test_block_keeps_a_node_from_being_expanded_until_unblocked(tmp_path, capsys):
    # stage 3 improves its best node, n0002 (carried from stage 1): while its first node n0011
    # runs, n0002 is blocked; while n0013 runs, unblocked: the later decisions are free of the
    # block (stage 4 ablates stage 3's best, n0002 or, since stage 3 has research ideas, a node
    # that improved on it)
    responder = SteeringResponder([], {"n0011": [["block", "n0002"]], "n0013": [["unblock", "n0002"]]})
    code, run = _run(tmp_path, responder, "agent.stages.stage3_max_iters=3", "agent.search.debug_prob=0.0")
    assert code == 0, capsys.readouterr().err
    block, unblock = _steer_events(run)
    assert (block["action"], unblock["action"]) == ("block", "unblock")
    lo, hi = node_sort_key(block["at"]), node_sort_key(unblock["at"])
    sel = [e for e in events(run) if e["type"] == "node_selected"]
    blocked = [e for e in sel if lo <= node_sort_key(e["node_id"]) < hi]
    assert blocked, "decisions were taken while n0002 was blocked"
    for e in blocked:
        assert e["parent_id"] != "n0002" and "steered: n0002 is not to be expanded" in e["reason"], e
    after = [e for e in sel if node_sort_key(e["node_id"]) > hi]
    assert after and not [e for e in after if "n0002 is not to be expanded" in e["reason"]], after
    best3 = json.loads((run / "state.json").read_text())["stages"]["3"]["best"]["node_id"]
    assert [e for e in after if e["parent_id"] == best3 and e["operation"] == "ablate"], (best3, after)
    capsys.readouterr()
    assert main(["steer", str(run), "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["blocked"] == [] and not status["pending"]


def test_pause_waits_for_the_nodes_in_flight_then_resume_finishes(tmp_path, capsys):
    responder = SteeringResponder([], {"n0002": [["pause"]]}, slow_nodes={"n0002": 1.0})
    run_box: list[Path] = []
    result: dict = {}

    def go() -> None:
        run, resources = setup_run(run_args(tmp_path, "agent.num_workers=2"))
        responder.run_dir = [run.dir]
        run_box.append(run.dir)
        result["code"] = execute(run, resources=resources, backend=ScriptedBackend(responder))

    t = threading.Thread(target=go, daemon=True)
    t.start()
    deadline = time.monotonic() + 120
    while not (run_box and any(e["type"] == "run_paused" for e in events(run_box[0]))):
        assert time.monotonic() < deadline, "the run never paused"
        time.sleep(0.1)
    run = run_box[0]
    # paused after its nodes in flight: none running, none created while paused
    time.sleep(0.5)
    before = journal_nodes(run)
    assert before and all(n["status"] in ("good", "buggy") for n in before.values()), before
    time.sleep(1.5)
    assert journal_nodes(run) == before and t.is_alive()
    assert main(["steer", str(run), "resume"]) == 0
    t.join(120)
    err = capsys.readouterr().err
    assert result.get("code") == 0, err
    assert "steering: pause" in err and f"paused: no node runs until `ai-scientist steer {run} resume`" in err
    finished = [e["node_id"] for e in events(run) if e["type"] == "node_finished"]
    assert sorted(finished) == sorted(journal_nodes(run)), "every node finished exactly once"
    assert len(finished) == len(set(finished)) > len(before)
    kinds = [e["type"] for e in events(run)]
    assert kinds.index("run_paused") < kinds.index("run_unpaused")


def test_gate_stops_the_run_until_approved(tmp_path, capsys):
    overrides = (
        "agent.gates=[stage_end]",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
    )
    run, resources = setup_run(run_args(tmp_path, *overrides))
    responder = ExampleResponder()
    code = execute(run, resources=resources, backend=ScriptedBackend(responder))
    gates = []
    while code == EXIT_GATE:
        err = capsys.readouterr().err
        assert "run stopped at an approval gate (exit 5)" in err and "steer" in err
        state = json.loads((run.dir / "state.json").read_text())
        gates.append(state["awaiting_gate"])
        # resuming without approval stops at the same gate again, running nothing
        n = len(journal_nodes(run.dir))
        again = open_locked(str(run.dir), [])
        assert execute(again, backend=ScriptedBackend(responder), resumed=True) == EXIT_GATE
        assert len(journal_nodes(run.dir)) == n
        assert main(["steer", str(run.dir), "approve"]) == 0
        resumed = open_locked(str(run.dir), [])
        code = execute(resumed, backend=ScriptedBackend(responder), resumed=True)
    assert code == 0, capsys.readouterr().err
    assert gates == ["stage_end:1", "stage_end:2", "stage_end:3"]
    passed = [e["gate"] for e in events(run.dir) if e["type"] == "gate_passed"]
    assert passed == gates
    # the replay passes the same gates with the recorded approvals
    assert main(["replay", str(run.dir), "--out", str(tmp_path / "replays")]) == 0
    replayed = tmp_path / "replays" / f"{run.dir.name}.replay"
    assert tree(replayed) == tree(run.dir)


def test_bad_requests_are_refused_with_exit_2(tmp_path, capsys):
    from ai_scientist.base.errors import UsageError

    with pytest.raises(UsageError, match="unknown steering action"):
        make_request("explode")
    with pytest.raises(UsageError, match="needs its text"):
        make_request("note", text="  ")
    with pytest.raises(UsageError, match="node id"):
        make_request("block", node="../x")
    assert main(["steer", str(tmp_path), "pause"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_a_bad_gate_is_a_config_error_naming_the_key(tmp_path, capsys):
    from pipeline_support import IDEA

    code = main(["run", "--idea", str(IDEA), "--out", str(tmp_path), "--set", "agent.gates=[stage_start]"])
    err = capsys.readouterr().err
    assert code == 2 and "agent.gates.0" in err and "stage_end" in err and not list(tmp_path.iterdir())

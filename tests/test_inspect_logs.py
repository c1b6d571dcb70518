"""``ai-scientist logs``: every subcommand against a small synthetic run directory."""

from __future__ import annotations

import json
import time

import pytest

from ai_scientist.base.fileio import append_jsonl, atomic_write_json, atomic_write_text
from ai_scientist.cli.main import main
from ai_scientist.context import Budget, assemble, counter_for, next_state
from ai_scientist.promptlog.record import PromptLogger

COUNTER = counter_for("gpt-4o-mini")
BASE = {
    "task": "# Idea\nDoes warmup help tiny MLPs?",
    "instructions": "Write train.py.",
    "response_format": "JSON.",
}


def _node(nid, parent, op, status, value, depth, state_op):
    return {
        "id": nid, "parent_id": parent, "stage": 1 if op == "draft" else 3, "operation": op, "status": status,
        "metric": None if value is None else {"name": "acc", "value": value, "direction": "maximize", "dataset": "toy"},
        "metrics": [], "error": "ValueError: shape" if status == "buggy" else None, "summary": f"{op} summary",
        "idea": None, "seed": None, "depth": depth, "tree": 0, "phases_done": ["phase0"], "state_op": state_op,
        "created_at": 0.0, "finished_at": None,
    }  # fmt: skip


@pytest.fixture
def run_dir(tmp_path):
    """n0001 draft -> n0002 debug (append) -> n0003 improve (replace); n0004 a second draft."""
    run = tmp_path / "run"
    logger = PromptLogger(run)
    plan = [("n0001", None, "draft", "buggy", None), ("n0002", "n0001", "debug", "good", 0.71),
            ("n0003", "n0002", "improve", "good", 0.83), ("n0004", None, "draft", "good", 0.65)]  # fmt: skip
    states: dict[str, str] = {}
    seq = 0
    for nid, parent, op, status, value in plan:
        depth = 0 if parent is None else 1 + (1 if parent == "n0002" else 0)
        state, state_op = next_state(
            states.get(parent), op, f"<think>musing {nid}</think>{op} result of {nid}. " * 20
        )
        states[nid] = state
        node = _node(nid, parent, op, "running", None, depth, state_op)
        append_jsonl(
            run / "journal.jsonl",
            {"seq": (seq := seq + 1), "ts": time.time(), "type": "node_created", "node": node},
        )
        values = {**BASE, "history": states.get(parent) or "", "state_op": state_op, "operation": op}
        if parent:
            values["execution_output"] = json.dumps(
                {"stdout": "epoch 1 loss 0.5\n" * (40 if nid == "n0002" else 400)}
            )
            values["prior_code"] = "import torch\n" * (10 if nid == "n0002" else 60)
        for label in ("plan", "code"):
            p = assemble(
                "phase234_code", values, Budget(2500), COUNTER, handles={"execution_output": f"{nid}/x"}
            )
            logger.write({"node_id": nid, "stage": "1", "phase": "phase2", "label": label, "role": "code",
                          "model": "gpt-4o-mini", "messages": p.messages, "ledger": p.ledger,
                          "response": {"raw": "<think>x</think>ok", "context": "ok"},
                          "usage": {"prompt_tokens": p.tokens, "completion_tokens": 5}})  # fmt: skip
        atomic_write_text(run / "nodes" / nid / "state.md", state)
        node = _node(nid, parent, op, status, value, depth, state_op)
        append_jsonl(
            run / "journal.jsonl",
            {"seq": (seq := seq + 1), "ts": time.time(), "type": "node_updated", "node": node},
        )
    atomic_write_json(
        run / "cost.json",
        {"total": {"usd": 0.0123, "prompt_tokens": 9000}, "by_role": {"code": {"usd": 0.0123}}},
    )
    return run


def _run(capsys, *argv):
    code = main(["logs", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_nodes_tree_and_json(run_dir, capsys):
    code, out, _ = _run(capsys, str(run_dir), "nodes")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("n0001") and "buggy" in lines[0]
    assert "└─ n0002" in lines[1] and "acc=0.71" in lines[1]
    assert lines[2].startswith("    └─ n0003") and "state:replace" in lines[2]
    assert "4 nodes, 3 good" in out
    code, out, _ = _run(capsys, str(run_dir), "nodes", "--json")
    data = json.loads(out)
    assert [n["id"] for n in data] == ["n0001", "n0002", "n0003", "n0004"]
    assert data[0]["status"] == "buggy" and data[0]["children"] == ["n0002"]  # latest record wins


def test_inspect_shows_last_500_chars_and_inspect_full_all(run_dir, capsys):
    state = (run_dir / "nodes" / "n0002" / "state.md").read_text()
    assert len(state) > 500
    code, out, _ = _run(capsys, str(run_dir), "inspect", "n0002")
    assert code == 0 and out.rstrip("\n").endswith(state[-500:].rstrip("\n"))
    assert state[:-500] not in out and f"state: {len(state)} chars (last 500 chars)" in out
    code, out, _ = _run(capsys, str(run_dir), "inspect-full", "n0002", "--json")
    data = json.loads(out)
    assert data["state"] == state and data["node"]["operation"] == "debug" and data["calls"] == 2
    assert "musing" not in state  # thinking never entered the state


def test_show_prompt_prints_exact_messages_of_a_call(run_dir, capsys):
    files = sorted((run_dir / "nodes" / "n0003" / "prompt_logs").glob("*.json"))
    first = json.loads(files[0].read_text())
    code, out, _ = _run(capsys, str(run_dir), "show-prompt", "n0003", "--call", "1")
    assert code == 0
    for msg in first["messages"]:
        assert msg["content"] in out  # byte for byte
    code, out, _ = _run(capsys, str(run_dir), "show-prompt", "n0003", "--json")
    assert json.loads(out)["call_id"] == "n0003/002"  # default: the last call
    assert json.loads(out)["messages"] == json.loads(files[-1].read_text())["messages"]


def test_show_prompt_single_layer(run_dir, capsys):
    code, out, _ = _run(capsys, str(run_dir), "show-prompt", "n0003", "--layer", "execution_output", "--json")
    data = json.loads(out)
    assert data["ledger"]["action"] == "previewed" and data["ledger"]["handle"] == "n0003/x"
    assert data["text"].startswith("## Execution output\n")
    last = sorted((run_dir / "nodes" / "n0003" / "prompt_logs").glob("*.json"))[-1]
    assert data["text"] in json.loads(last.read_text())["messages"][1]["content"]
    code, out, _ = _run(capsys, str(run_dir), "show-prompt", "n0003", "--layer", "memory")
    assert "dropped" in out and "(not in the prompt)" in out


def test_path_root_to_node_with_append_replace(run_dir, capsys):
    code, out, _ = _run(capsys, str(run_dir), "path", "n0003")
    lines = out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["n0001", "n0002", "n0003"]
    assert "draft" in lines[0] and "replace" in lines[0]
    assert "debug" in lines[1] and "append" in lines[1]
    assert "improve" in lines[2] and "replace" in lines[2]
    data = json.loads(_run(capsys, str(run_dir), "path", "n0003", "--json")[1])
    assert [r["state_op"] for r in data] == ["replace", "append", "replace"]


def test_diff_node_and_child_shows_changed_layers_with_sizes(run_dir, capsys):
    code, out, _ = _run(capsys, str(run_dir), "diff", "n0001", "n0002", "--json")
    rows = {r["layer"]: r for r in json.loads(out)["layers"]}
    assert rows["history"]["change"] in ("entered", "grew")  # the draft had no inherited history
    assert rows["execution_output"]["change"] == "entered" and rows["execution_output"]["tokens_b"] > 0
    assert rows["prior_code"]["change"] == "entered"
    assert rows["task"]["change"] == "same" and rows["task"]["tokens_delta"] == 0
    code, out, _ = _run(capsys, str(run_dir), "diff", "n0002", "n0003", "--json")
    rows = {r["layer"]: r for r in json.loads(out)["layers"]}
    assert rows["prior_code"]["change"] == "grew" and rows["prior_code"]["tokens_delta"] > 0
    assert rows["execution_output"]["action_b"] == "previewed"
    code, text, _ = _run(capsys, str(run_dir), "diff", "n0002", "n0003")
    line = next(ln for ln in text.splitlines() if ln.startswith("prior_code"))
    assert "grew" in line and f"+{rows['prior_code']['tokens_delta']}" in line


def test_cost_prints_cost_json(run_dir, capsys):
    code, out, _ = _run(capsys, str(run_dir), "cost", "--json")
    assert json.loads(out)["total"]["usd"] == 0.0123
    code, out, _ = _run(capsys, str(run_dir), "cost")
    assert code == 0 and "0.0123" in out


def test_memory_delegates_and_says_why_there_is_none(run_dir, capsys):
    # this run was written without memory: the inspector (ai_scientist.memory.inspection) says so,
    # naming the database it looked for, as a usage error (exit 2) with nothing on stdout
    code, out, err = _run(capsys, str(run_dir), "memory", "n0002")
    assert (code, out) == (2, "")
    assert f"{run_dir / 'memory.sqlite'}: no memory database (was memory.enabled false for this run?)" in err


def test_unknown_run_dir_and_node_are_usage_errors(run_dir, tmp_path, capsys):
    code, _, err = _run(capsys, str(tmp_path / "nope"), "nodes")
    assert code == 2 and "nope" in err and "does not exist" in err
    code, _, err = _run(capsys, str(run_dir), "inspect", "n0099")
    assert code == 2 and "n0099" in err and "n0001" in err
    code, _, err = _run(capsys, str(run_dir), "show-prompt", "n0002", "--call", "7")
    assert code == 2 and "no call 7" in err
    code, _, err = _run(capsys, str(run_dir), "show-prompt", "n0002", "--layer", "bogus")
    assert code == 2 and "bogus" in err


def test_markdown_rendering_has_one_section_per_layer(run_dir):
    last = sorted((run_dir / "nodes" / "n0003" / "prompt_logs").glob("*.json"))[-1]
    md, rec = last.with_suffix(".md").read_text(), json.loads(last.read_text())
    assert "## Ledger" in md and "## Layers" in md
    for e in rec["ledger"]:
        assert f"### {e['layer']} — {e['action']}" in md
    assert "full payload: `n0003/x`" in md

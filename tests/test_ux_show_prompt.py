"""Issue 19 item 7: ``logs show-prompt`` prints the ledger and the answer (as the README and the
``.md`` logs do), and ``logs diff A B`` compares like with like (same phase/label) and says
which calls it compares."""

from __future__ import annotations

import json
import time

import pytest

from ai_scientist.base.fileio import append_jsonl
from ai_scientist.cli.main import main
from ai_scientist.context import Budget, assemble, counter_for
from ai_scientist.promptlog.record import PromptLogger

COUNTER = counter_for("gpt-4o-mini")
VALUES = {"task": "# Idea\nDoes warmup help tiny MLPs?", "instructions": "Write train.py.",
          "response_format": "JSON.", "history": "", "state_op": "append", "operation": "draft"}  # fmt: skip


def _node(nid: str) -> dict:
    return {"id": nid, "parent_id": None, "stage": 1, "operation": "draft", "status": "buggy", "metric": None,
            "depth": 0, "tree": 0}  # fmt: skip


def _write(logger, nid, phase, label, answer, history="", **extra):
    p = assemble("phase234_code", {**VALUES, "history": history}, Budget(2500), COUNTER)
    return logger.write({"node_id": nid, "stage": "1", "phase": phase, "label": label, "role": "code",
                         "model": "gpt-4o-mini", "messages": p.messages, "ledger": p.ledger, "attempt": 1,
                         "response": {"raw": answer, "context": answer, "finish_reason": "stop"},
                         "usage": {"prompt_tokens": p.tokens, "completion_tokens": 7}, **extra})  # fmt: skip


@pytest.fixture
def run_dir(tmp_path):
    """n0001: phase0/plan, phase2/code; n0002: phase2/code, then phase1/step2_memory (its last call)."""
    run = tmp_path / "run"
    logger = PromptLogger(run)
    for seq, nid in enumerate(("n0001", "n0002"), 1):
        append_jsonl(
            run / "journal.jsonl", {"seq": seq, "ts": time.time(), "type": "node_created", "node": _node(nid)}
        )
    _write(logger, "n0001", "phase0", "plan", '{"goal_summary": "plan of n0001"}')
    _write(logger, "n0001", "phase2", "code", '{"files": "code of n0001"}')
    _write(
        logger,
        "n0002",
        "phase2",
        "code",
        '{"files": "code of n0002"}',
        history="earlier attempt failed. " * 30,
    )
    _write(logger, "n0002", "phase1", "step2_memory", '{"command": "true", "done": true}')
    return run


def _out(capsys, *argv):
    assert main(["logs", *argv]) == 0
    return capsys.readouterr().out


def test_show_prompt_prints_ledger_messages_and_answer(run_dir, capsys):
    rec = json.loads(sorted((run_dir / "nodes/n0001/prompt_logs").glob("*.json"))[-1].read_text())
    out = _out(capsys, str(run_dir), "show-prompt", "n0001")
    assert "## Ledger" in out
    for entry in rec["ledger"]:  # one row per layer, with its sizes and action
        row = next(line for line in out.splitlines() if line.startswith(f"| {entry['layer']} |"))
        assert (
            f"| {entry['action']} |" in row and f"{entry['tokens_before']} → {entry['tokens_after']}" in row
        )
    for msg in rec["messages"]:
        assert msg["content"] in out
    assert '{"files": "code of n0001"}' in out and "finish reason: stop" in out
    assert out.index("## Ledger") < out.index("===== message 0") < out.index("## Response")
    data = json.loads(_out(capsys, str(run_dir), "show-prompt", "n0001", "--json"))
    assert data["response"]["raw"] == '{"files": "code of n0001"}' and data["ledger"] == rec["ledger"]


def test_show_prompt_of_a_failed_attempt_says_it_got_no_answer(run_dir, capsys):
    logger = PromptLogger(run_dir)
    p = assemble("phase234_code", VALUES, Budget(2500), COUNTER)
    logger.write({"node_id": "n0001", "phase": "phase2", "label": "code", "model": "local:x.gguf",
                  "messages": p.messages, "ledger": p.ledger, "attempt": 2, "call": "n0001/002",
                  "response": None, "usage": None, "error": "CallTimeout: no answer within 1 s"})  # fmt: skip
    out = _out(capsys, str(run_dir), "show-prompt", "n0001")
    assert "call n0001/002 attempt 2 (file n0001/003)" in out
    assert "no answer: CallTimeout: no answer within 1 s" in out


def test_diff_compares_the_same_phase_and_label(run_dir, capsys):
    data = json.loads(_out(capsys, str(run_dir), "diff", "n0001", "n0002", "--json"))
    # the last calls are phase2/code (A) and phase1/step2_memory (B): unlike; the diff takes phase2/code
    assert (data["a"], data["b"]) == ("n0001/002", "n0002/001")
    assert "phase2/code" in data["compared"]
    rows = {r["layer"]: r for r in data["layers"]}
    assert rows["history"]["change"] in ("entered", "grew") and rows["task"]["change"] == "same"
    text = _out(capsys, str(run_dir), "diff", "n0001", "n0002")
    assert text.splitlines()[0] == "comparing the latest phase2/code call of each node:"


def test_diff_of_nodes_with_no_common_call_says_so(run_dir, capsys):
    logger = PromptLogger(run_dir)
    append_jsonl(
        run_dir / "journal.jsonl",
        {"seq": 3, "ts": time.time(), "type": "node_created", "node": _node("n0003")},
    )
    _write(logger, "n0003", "review", "exec_review", '{"is_bug": true}')
    text = _out(capsys, str(run_dir), "diff", "n0001", "n0003")
    assert "share no phase/label" in text.splitlines()[0]

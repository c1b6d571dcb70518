"""Replay backend: recorded calls come back byte for byte; unrecorded ones fail precisely."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ai_scientist.base.config import validate
from ai_scientist.base.redact import Redactor
from ai_scientist.llm.call import CallContext, UnrecordedPrompt
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.replay_backend import ReplayBackend, request_key
from ai_scientist.llm.scripted_backend import ScriptedBackend

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
# odd whitespace, unicode and a thinking block: all must survive byte for byte
ODD = '<think>count\tcarefully</think>\n  {"n": 3}  \r\n\u00e9\u4e2d '


def cfg() -> Any:
    return validate({"llm": {"model": "m-1"}})


def convo(question: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You count."}, {"role": "user", "content": question}]


def record_run(run: Path, answers: list[str], native: bool = True) -> list[Any]:
    queue = list(answers)
    backend = ScriptedBackend(lambda m, s, c: queue.pop(0), native_schema=native)
    client = make_client(cfg(), run, Redactor([], {}), backend=backend)
    results = [
        client.complete(
            convo("How many apples?"),
            role="code",
            ctx=CallContext("n0001", "1", "phase2", "count"),
            schema=SCHEMA,
        ),
        client.complete(convo("Say hi."), role="summary", ctx=CallContext("n0002", "1", "phase0", "hi")),
        client.complete(convo("Say hi."), role="summary", ctx=CallContext("n0002", "1", "phase0", "hi")),
    ]
    return results


def test_recorded_calls_are_answered_byte_identically(tmp_path: Path) -> None:
    original = record_run(tmp_path / "a", [ODD, "hi one", "hi two"])
    replay = make_client(cfg(), tmp_path / "b", Redactor([], {}), backend=ReplayBackend(tmp_path / "a"))
    r1 = replay.complete(
        convo("How many apples?"),
        role="code",
        ctx=CallContext("n0001", "1", "phase2", "count"),
        schema=SCHEMA,
    )
    assert r1.raw == ODD == original[0].raw and r1.parsed == {"n": 3} and r1.text == original[0].text
    # identical prompts are served in recorded order
    r2 = replay.complete(convo("Say hi."), role="summary", ctx=CallContext("n0002", "1", "phase0", "hi"))
    r3 = replay.complete(convo("Say hi."), role="summary", ctx=CallContext("n0002", "1", "phase0", "hi"))
    assert (r2.raw, r3.raw) == ("hi one", "hi two")
    a = json.loads(next((tmp_path / "a").glob("nodes/n0001/prompt_logs/*.json")).read_text())
    b = json.loads(next((tmp_path / "b").glob("nodes/n0001/prompt_logs/*.json")).read_text())
    assert a["response"]["raw"] == b["response"]["raw"] and a["messages"] == b["messages"]
    assert a["request_key"] == b["request_key"] == request_key(a["messages"], a["params"])
    assert b["backend"] == "replay" and b["usage"] == a["usage"]
    with pytest.raises(UnrecordedPrompt, match="already served"):
        replay.complete(convo("Say hi."), role="summary", ctx=CallContext("n0002", "1", "phase0", "hi"))


def test_unrecorded_prompt_names_node_phase_label_and_first_difference(tmp_path: Path) -> None:
    record_run(tmp_path / "a", ['{"n": 1}', "x", "y"])
    replay = make_client(cfg(), tmp_path / "b", Redactor([], {}), backend=ReplayBackend(tmp_path / "a"))
    with pytest.raises(UnrecordedPrompt) as info:
        replay.complete(
            convo("How many pears?"),
            role="code",
            ctx=CallContext("n0001", "1", "phase2", "count"),
            schema=SCHEMA,
        )
    msg = str(info.value)
    assert "node n0001" in msg and "phase phase2" in msg and "label count" in msg
    assert "message 1 (user)" in msg and "'How many apples?'" in msg and "'How many pears?'" in msg
    assert "n0001/001" in msg  # the nearest recorded call
    # same messages, other params: the message says which param changed
    other = validate({"llm": {"model": "m-2"}})
    replay2 = make_client(other, tmp_path / "c", None, backend=ReplayBackend(tmp_path / "a"))
    with pytest.raises(UnrecordedPrompt, match="model: recorded 'm-1' vs now 'm-2'"):
        replay2.complete(convo("Say hi."), role="summary", ctx=CallContext("n0002", "1", "phase0", "hi"))


def test_replay_of_a_repaired_prompt_mode_call(tmp_path: Path) -> None:
    # prompt mode + one repair round: the replay must walk the same two steps
    record_run(tmp_path / "a", ["not json", '{"n": 7}', "a", "b"], native=False)
    backend = ReplayBackend(tmp_path / "a")
    assert backend.structured_mode("m-1") == "prompt"
    replay = make_client(cfg(), tmp_path / "b", None, backend=backend)
    res = replay.complete(
        convo("How many apples?"),
        role="code",
        ctx=CallContext("n0001", "1", "phase2", "count"),
        schema=SCHEMA,
    )
    assert res.parsed == {"n": 7} and len(res.call_ids) == 2


def test_error_records_are_not_answers(tmp_path: Path) -> None:
    record_run(tmp_path / "a", ['{"n": 1}', "x", "y"])
    path = next((tmp_path / "a").glob("nodes/n0001/prompt_logs/*.json"))
    rec = json.loads(path.read_text())
    rec["error"] = "ServerError: boom"
    path.write_text(json.dumps(rec))
    backend = ReplayBackend(tmp_path / "a")
    assert len(backend.records) == 2


def test_a_call_a_kill_interrupted_is_not_an_answer(tmp_path: Path) -> None:
    # a prompt log is claimed (an empty file) before the call and written after it: a kill -9
    # during the call leaves it empty, and the replay must still load the run
    record_run(tmp_path / "a", ['{"n": 1}', "x", "y"])
    answers = [r["_path"] for r in ReplayBackend(tmp_path / "a").records]
    assert answers
    (tmp_path / "a/nodes/n0001/prompt_logs/009_phase5_vlm_plot_critique.json").write_text("")
    assert [r["_path"] for r in ReplayBackend(tmp_path / "a").records] == answers

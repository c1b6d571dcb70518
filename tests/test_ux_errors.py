"""Issue 19 item 4: errors that mislead.

* An answer cut at ``max_tokens`` failed as "at $: 'command' is a required property": the error
  must say it was cut (finish reason ``length``) and which config key to raise.
* Timed-out calls to the local model were logged as ``model: gpt-4o-mini``: record the model
  actually used.

Both are checked with the real SmolLM2 GGUF (a 16-token limit, a zero timeout) and, for the
finish-reason path of any backend, with a backend that reports ``length`` itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from components import needs_llama

from ai_scientist.base.config import validate
from ai_scientist.llm.backend import BackendReply, estimate_usage
from ai_scientist.llm.call import CallContext, LLMError, StructuredOutputError
from ai_scientist.llm.client import LLMClient
from ai_scientist.llm.cost import CostLedger
from ai_scientist.llm.local_backend import default_local_model_path
from ai_scientist.phases.schemas import PLAN_SCHEMA
from ai_scientist.promptlog.record import PromptLogger

MODEL = default_local_model_path()
needs_model = needs_llama()
ASK = [{"role": "user", "content": "Plan an experiment on label noise in logistic regression."}]


def _records(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run.glob("nodes/*/prompt_logs/*.json"))]


class CutBackend:
    """Answers with the first characters of a valid answer and finish_reason 'length'."""

    name = "cut"

    def structured_mode(self, model: str) -> str:
        return "native"

    def complete(self, messages, *, model, temperature, max_tokens, schema, timeout, ctx):
        text = '{"command": "pip install num'[: max_tokens * 4]
        return BackendReply(
            text, usage=estimate_usage(messages, text), native_structured=True, finish_reason="length"
        )


def _cut_client(tmp_path, backend, **context):
    cfg = validate({"agent": {"code": {"max_tokens": 300}}, "context": context})
    return LLMClient(cfg, backend, logger=PromptLogger(tmp_path), cost=CostLedger(None))


def _ask_install_step(client, messages=ASK):
    from ai_scientist.phases.schemas import INSTALL_STEP_SCHEMA

    return client.complete(
        messages, role="code", ctx=CallContext("n0001", "1", "phase1", "step1"), schema=INSTALL_STEP_SCHEMA
    )


def test_cut_answer_says_max_tokens_and_the_key_to_raise(tmp_path):
    client = _cut_client(tmp_path, CutBackend())
    with pytest.raises(StructuredOutputError) as err:
        _ask_install_step(client)
    recs = _records(tmp_path)
    assert [r["response"]["finish_reason"] for r in recs] == ["length", "length"]
    assert all("cut at max_tokens" in r["structured_error"] for r in recs)
    # the cut answer was asked again, same messages, with twice the room (a 128k window allows it)
    first, second = (r["params"]["max_tokens"] for r in recs)
    assert first == 300 and second == 2 * first
    assert recs[0]["messages"] == recs[1]["messages"]
    message = str(err.value)
    assert f"cut at max_tokens={second}" in message and "finish_reason 'length'" in message
    assert "agent.code.max_tokens" in message


class RoomBackend(CutBackend):
    """Cuts the answer unless it is given at least ``need`` tokens."""

    def __init__(self, need: int):
        self.need = need

    def complete(self, messages, *, model, temperature, max_tokens, schema, timeout, ctx):
        if max_tokens < self.need:
            return super().complete(
                messages, model=model, temperature=temperature, max_tokens=max_tokens, schema=schema,
                timeout=timeout, ctx=ctx,
            )  # fmt: skip
        text = '{"command": "pip install numpy", "done": true}'
        return BackendReply(text, usage=estimate_usage(messages, text), native_structured=True)


def test_cut_answer_gets_the_same_request_with_twice_the_room(tmp_path):
    result = _ask_install_step(_cut_client(tmp_path, RoomBackend(need=500)))
    recs = _records(tmp_path)
    assert result.parsed == json.loads(recs[-1]["response"]["raw"])
    assert [r["params"]["max_tokens"] for r in recs] == [300, 600]
    assert recs[0]["messages"] == recs[1]["messages"]  # not a repair conversation
    assert recs[1]["response"]["finish_reason"] != "length" and recs[1]["structured_error"] is None


def test_cut_answer_with_no_room_left_gets_the_repair_round(tmp_path):
    # a window that holds the prompt and barely more than the answer had: no more room to give
    ask = [{"role": "user", "content": ASK[0]["content"] + " Context:" + " the data" * 1000}]
    probe = _cut_client(tmp_path / "probe", CutBackend())
    with pytest.raises(StructuredOutputError):
        _ask_install_step(probe, ask)
    prompt = _records(tmp_path / "probe")[0]["prompt_tokens_with_images"]
    client = _cut_client(tmp_path / "small", RoomBackend(need=500), model_context_window=prompt + 300)
    with pytest.raises(StructuredOutputError) as err:
        _ask_install_step(client, ask)
    recs = _records(tmp_path / "small")
    assert [r["params"]["max_tokens"] for r in recs] == [300, 300]
    assert recs[1]["messages"][: len(recs[0]["messages"])] == recs[0]["messages"]
    assert len(recs[1]["messages"]) == len(recs[0]["messages"]) + 2  # the answer and the repair request
    assert "cut at max_tokens=300" in str(err.value)


def test_cut_answer_of_a_small_window_model_gets_the_repair_round(tmp_path):
    # twice 300 would fit beside the prompt in 1024 tokens, but not within a quarter of the window
    client = _cut_client(tmp_path, RoomBackend(need=500), model_context_window=1024)
    with pytest.raises(StructuredOutputError):
        _ask_install_step(client)
    recs = _records(tmp_path)
    assert recs[0]["prompt_tokens_with_images"] + 600 < 1024
    assert [r["params"]["max_tokens"] for r in recs] == [300, 300]


@needs_model
def test_local_answer_cut_at_max_tokens_is_reported_as_cut(tmp_path):
    from ai_scientist.llm.factory import make_client

    cfg = validate({"llm": {"backend": "local", "local_n_ctx": 2048, "timeout_s": 300},
                    "agent": {"code": {"max_tokens": 16, "temperature": 0.0}}})  # fmt: skip
    client = make_client(cfg, tmp_path, None)
    with pytest.raises(StructuredOutputError) as err:
        client.complete(ASK, role="code", ctx=CallContext("n0001", "1", "phase0", "plan"), schema=PLAN_SCHEMA)
    recs = _records(tmp_path)
    assert recs and all(r["response"]["finish_reason"] == "length" for r in recs)
    # really stopped by the limit: 16, then the same request with twice the room
    assert [r["usage"]["completion_tokens"] for r in recs] == [r["params"]["max_tokens"] for r in recs]
    assert [r["params"]["max_tokens"] for r in recs] == [16, 32]
    assert "cut at max_tokens=32" in str(err.value) and "agent.code.max_tokens" in str(err.value)


@needs_model
def test_timed_out_local_call_records_the_local_model(tmp_path):
    from ai_scientist.llm.factory import make_client

    cfg = validate({"llm": {"backend": "local", "local_n_ctx": 1024, "timeout_s": 1e-6, "max_attempts": 2,
                            "backoff_base_s": 0, "model": "gpt-4o-mini"}})  # fmt: skip
    client = make_client(cfg, tmp_path, None)
    with pytest.raises(LLMError, match="failed after 2 attempts"):
        client.complete(ASK, role="code", ctx=CallContext("n0001", "1", "phase0", "plan"))
    recs = _records(tmp_path)
    local = f"local:{Path(MODEL).name}"
    assert [r["attempt"] for r in recs] == [1, 2] and all(r["error"].startswith("CallTimeout") for r in recs)
    assert {r["model"] for r in recs} == {local}  # not the configured gpt-4o-mini
    cost = json.loads((tmp_path / "cost.json").read_text())
    assert list(cost["by_model"]) == [local] and cost["by_model"][local]["failed_attempts"] == 2

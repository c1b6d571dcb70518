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
from ai_scientist.llm.client import LLMClient
from ai_scientist.llm.cost import CostLedger
from ai_scientist.llm.local_backend import default_local_model_path
from ai_scientist.llm.types import CallContext, LLMError, StructuredOutputError
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


def test_cut_answer_says_max_tokens_and_the_key_to_raise(tmp_path):
    from ai_scientist.phases.schemas import INSTALL_STEP_SCHEMA

    cfg = validate({"agent": {"code": {"max_tokens": 300}}})
    client = LLMClient(cfg, CutBackend(), logger=PromptLogger(tmp_path), cost=CostLedger(None))
    with pytest.raises(StructuredOutputError) as err:
        client.complete(
            ASK, role="code", ctx=CallContext("n0001", "1", "phase1", "step1"), schema=INSTALL_STEP_SCHEMA
        )
    message = str(err.value)
    assert "cut at max_tokens=300" in message and "finish_reason 'length'" in message
    assert "agent.code.max_tokens" in message
    recs = _records(tmp_path)
    assert [r["response"]["finish_reason"] for r in recs] == ["length", "length"]
    assert all("cut at max_tokens" in r["structured_error"] for r in recs)


@needs_model
def test_local_answer_cut_at_max_tokens_is_reported_as_cut(tmp_path):
    from ai_scientist.llm.factory import make_client

    cfg = validate({"llm": {"backend": "local", "local_n_ctx": 2048, "timeout_s": 300},
                    "agent": {"code": {"max_tokens": 16, "temperature": 0.0}}})  # fmt: skip
    client = make_client(cfg, tmp_path, None)
    with pytest.raises(StructuredOutputError) as err:
        client.complete(ASK, role="code", ctx=CallContext("n0001", "1", "phase0", "plan"), schema=PLAN_SCHEMA)
    assert "cut at max_tokens=16" in str(err.value) and "agent.code.max_tokens" in str(err.value)
    recs = _records(tmp_path)
    assert recs and all(r["response"]["finish_reason"] == "length" for r in recs)
    assert all(r["usage"]["completion_tokens"] == 16 for r in recs)  # really stopped by the limit


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

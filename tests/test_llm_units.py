"""Pure parts of the LLM layer: reasoning stripping, JSON extraction, cost, retries, scripted backend."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ai_scientist.base.config import validate
from ai_scientist.base.reasoning import strip_reasoning
from ai_scientist.llm.backend import RateLimited, ServerError, estimate_usage
from ai_scientist.llm.call import CallContext, LLMError, Usage
from ai_scientist.llm.client import LLMClient
from ai_scientist.llm.cost import CostLedger, format_cost
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.llm.structured import AnswerError, check_schema, parse_answer, validate_answer


@pytest.mark.parametrize(
    ("text", "clean", "reasoning"),
    [
        ("plain answer\n", "plain answer\n", ""),  # untouched, byte for byte
        ("<think>hmm</think>\nAnswer", "Answer", "hmm"),
        ("<THINKING a='1'>x</THINKING> y <reasoning>z</reasoning> w", "y  w", "x\n\nz"),
        ("pre-opened thoughts</think>final", "final", "pre-opened thoughts"),
        ("Answer first <think>then ran out of tok", "Answer first", "then ran out of tok"),
        ("<think>a</think>B<think>c", "B", "a\n\nc"),
    ],
)
def test_strip_reasoning(text: str, clean: str, reasoning: str) -> None:
    assert strip_reasoning(text) == (clean, reasoning)


def test_strip_reasoning_leaves_no_tag() -> None:
    clean, _ = strip_reasoning("a</think>b</thinking>c<think>d")
    assert "<" not in clean and clean == "c"


def test_parse_answer_tolerates_fences_and_prose() -> None:
    assert parse_answer('{"a": 1}') == {"a": 1}
    assert parse_answer('Sure!\n```json\n{"a": [1, 2]}\n```\nDone.') == {"a": [1, 2]}
    assert parse_answer('The result is {"a": "}"} as asked.') == {"a": "}"}
    with pytest.raises(AnswerError, match="line 2 column"):
        parse_answer('```json\n{"a": 1,\n "b": }\n```')
    with pytest.raises(AnswerError, match="no JSON object"):
        parse_answer("I refuse.")
    with pytest.raises(AnswerError, match="empty"):
        parse_answer("  ")


def test_validate_answer_names_the_path() -> None:
    schema = {
        "type": "object",
        "properties": {"files": {"type": "array", "items": {"type": "string"}}},
        "required": ["files"],
    }
    with pytest.raises(AnswerError, match=r"at \$\.files\[1\]: 3 is not of type 'string'"):
        validate_answer({"files": ["a", 3]}, schema)
    with pytest.raises(AnswerError, match="'files' is a required property"):
        validate_answer({}, schema)
    validate_answer({"files": []}, schema)
    with pytest.raises(ValueError, match="invalid JSON schema"):
        check_schema({"type": "no-such-type"})


def test_cost_ledger_prices_prefix_unknown_and_local(tmp_path: Path) -> None:
    prices = {"gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}
    ledger = CostLedger(tmp_path / "cost.json", prices, None)
    usd = ledger.add("code", "phase2", "n0001", "gpt-4o-mini-2024-07-18", Usage(1_000_000, 1_000_000))
    assert usd == pytest.approx(0.75)
    assert ledger.add("code", "phase2", "n0001", "mystery", Usage(10, 10, estimated=True)) == 0.0
    assert ledger.add("review", "review", "run", "local:smol.gguf", Usage(5, 5)) == 0.0
    data = json.loads((tmp_path / "cost.json").read_text())
    assert data["unpriced_models"] == ["mystery"]
    assert data["total"]["calls"] == 3 and data["total"]["estimated_calls"] == 1
    table = format_cost(data)
    assert "TOTAL" in table and "mystery" in table and "0.7500" in table and "by role:" in table


def test_cost_ledger_threads_and_resume(tmp_path: Path) -> None:
    ledger = CostLedger(tmp_path / "cost.json", {"m": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}, None)

    def work() -> None:
        for _ in range(25):
            ledger.add("code", "p", "n0001", "m", Usage(100, 0))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = CostLedger(tmp_path / "cost.json", {}, None)
    assert again.snapshot()["total"]["prompt_tokens"] == 10_000
    again.add("code", "p", "n0002", "m", Usage(1, 1))
    assert json.loads((tmp_path / "cost.json").read_text())["total"]["calls"] == 101
    (tmp_path / "bad.json").write_text("{torn")
    with pytest.raises(ValueError, match="bad.json"):
        CostLedger(tmp_path / "bad.json")


def test_estimate_usage_is_marked() -> None:
    u = estimate_usage([{"role": "user", "content": "x" * 400}], "y" * 40)
    assert u.estimated and u.completion_tokens == 10 and u.prompt_tokens >= 100


def _client(backend: ScriptedBackend, sleeps: list[float], **llm: float) -> LLMClient:
    cfg = validate({"llm": {"backoff_base_s": 0.5, "backoff_max_s": 1.5, **llm}})
    return LLMClient(cfg, backend, logger=None, cost=CostLedger(None), sleep=sleeps.append)


def test_backoff_is_capped_and_attempts_bounded() -> None:
    def always_busy(messages, schema, ctx):
        raise ServerError("busy", status=503)

    sleeps: list[float] = []
    client = _client(ScriptedBackend(always_busy), sleeps, max_attempts=5)
    with pytest.raises(LLMError, match="failed after 5 attempts"):
        client.complete([{"role": "user", "content": "q"}], role="code", ctx=CallContext())
    assert sleeps == [0.5, 1.0, 1.5, 1.5]


def test_retry_after_wins_over_backoff() -> None:
    answers = iter([RateLimited("slow", status=429, retry_after=7.0), "ok"])

    def responder(messages, schema, ctx):
        item = next(answers)
        if isinstance(item, Exception):
            raise item
        return item

    sleeps: list[float] = []
    res = _client(ScriptedBackend(responder), sleeps).complete(
        [{"role": "user", "content": "q"}], role="code", ctx=CallContext()
    )
    assert res.text == "ok" and sleeps == [7.0] and res.usage.estimated


def test_scripted_backend_is_thread_safe() -> None:
    backend = ScriptedBackend(lambda m, s, c: f"echo {c.label}")
    client = _client(backend, [])
    out: list[str] = []
    lock = threading.Lock()

    def call(i: int) -> None:
        res = client.complete([{"role": "user", "content": "q"}], role="code", ctx=CallContext(label=str(i)))
        with lock:
            out.append(res.text)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == sorted(f"echo {i}" for i in range(16)) and backend.calls == 16


def test_prompt_mode_instruction_and_reasoning_stripped_text() -> None:
    seen: list[list[dict]] = []

    def responder(messages, schema, ctx):
        seen.append(messages)
        assert schema is None  # prompt mode: no native constraint
        return '<think>easy</think>{"ok": true}'

    client = _client(ScriptedBackend(responder, native_schema=False), [])
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    res = client.complete([{"role": "user", "content": "go"}], role="code", ctx=CallContext(), schema=schema)
    assert res.parsed == {"ok": True} and res.text == '{"ok": true}' and res.raw.startswith("<think>")
    assert seen[0][-1]["content"].startswith("go\n\n") and '"boolean"' in seen[0][-1]["content"]


def test_parse_answer_accepts_raw_newlines_in_strings():
    from ai_scientist.llm.structured import parse_answer

    raw = '{"files": [{"path": "a.py", "content": "import json\nprint(1)\n"}], "run": {"commands": ["x"]}}'
    value = parse_answer(raw)
    assert value["files"][0]["content"] == "import json\nprint(1)\n"
    assert isinstance(value, dict)  # not an inner array picked after a strict-mode failure

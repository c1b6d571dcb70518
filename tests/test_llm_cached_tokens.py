"""Cached prompt tokens: recorded as the server reports them, priced with ``llm.prices.<m>.cached_per_mtok``,
totalled in ``cost.json`` and shown by ``ai-scientist logs RUN cost`` — against a fake OpenAI-compatible
server on 127.0.0.1 that reports ``usage.prompt_tokens_details.cached_tokens`` (or Anthropic-style
``cache_read_input_tokens``). Values that cannot be true are recorded as unknown, with a note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_llm_openai import GOOD, KEY, MSGS, SCHEMA, FakeOpenAI, client_for, make_cfg, records

from ai_scientist.base.redact import Redactor
from ai_scientist.cli.main import main
from ai_scientist.llm.call import CallContext, Usage
from ai_scientist.llm.cost import CostLedger
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.replay_backend import ReplayBackend

PRICES = {"fake-model": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cached_per_mtok": 0.3}}


def answer(content: str, prompt: int, completion: int, **usage_extra: Any) -> dict[str, Any]:
    """A chat completion whose ``usage`` carries ``usage_extra`` as the server sent it."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {
        "status": 200,
        "body": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {**usage, **usage_extra},
        },
    }


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FAKE_LLM_KEY", KEY)
    return KEY


def usd_of(usage: dict[str, Any], price: dict[str, float]) -> float:
    """USD of a recorded usage at ``price`` (the cached price defaulting to the input price)."""
    cached = usage["cached_tokens"] or 0
    cached_price = price.get("cached_per_mtok", price["input_per_mtok"])
    fresh = usage["prompt_tokens"] - cached
    return (
        fresh * price["input_per_mtok"]
        + cached * cached_price
        + usage["completion_tokens"] * price["output_per_mtok"]
    ) / 1e6


def logs_cost(run: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    assert main(["logs", str(run), "cost", *extra]) == 0
    return capsys.readouterr().out


def test_cached_tokens_are_recorded_priced_and_shown(
    tmp_path: Path, env_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [
        answer(GOOD, 1200, 40, prompt_tokens_details={"cached_tokens": 1024}),
        answer("plain", 2000, 10, cache_read_input_tokens=1536),  # Anthropic-style field
        answer(GOOD, 900, 30),  # reports nothing about the cache
        answer(GOOD, 700, 20, prompt_tokens_details={"cached_tokens": 0}),
    ]
    with FakeOpenAI(script) as srv:
        cfg = make_cfg(srv.url, prices=PRICES)
        client = client_for(cfg, tmp_path)
        first = client.complete(
            MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "a"), schema=SCHEMA
        )
        client.complete(MSGS, role="summary", ctx=CallContext("n0001", "1", "phase4", "b"))
        client.complete(MSGS, role="code", ctx=CallContext("n0002", "1", "phase2", "c"), schema=SCHEMA)
        client.complete(MSGS, role="code", ctx=CallContext("n0002", "1", "phase2", "d"), schema=SCHEMA)
    assert first.usage.cached_tokens == 1024  # the result the phase sees
    recs = records(tmp_path)
    sent = [s["body"]["usage"] for s in script]
    # the prompt log holds what the server said, field for field
    for rec, usage in zip(recs, sent, strict=True):
        reported = (usage.get("prompt_tokens_details") or {}).get(
            "cached_tokens", usage.get("cache_read_input_tokens")
        )
        assert rec["usage"]["prompt_tokens"] == usage["prompt_tokens"]
        assert rec["usage"]["cached_tokens"] == reported and "cached_note" not in rec["usage"]
    price = cfg.llm.prices["fake-model"].model_dump()
    for rec in recs:
        assert rec["cost_usd"] == pytest.approx(usd_of(rec["usage"], price))
    data = json.loads((tmp_path / "cost.json").read_text())
    total = data["total"]
    cached = sum(r["usage"]["cached_tokens"] or 0 for r in recs)
    saved = cached * (price["input_per_mtok"] - price["cached_per_mtok"]) / 1e6
    assert total["cached_tokens"] == cached and total["cached_unknown"] == 0
    assert total["usd"] == pytest.approx(sum(r["cost_usd"] for r in recs))
    assert total["usd_saved"] == pytest.approx(saved) and saved > 0
    for bucket in ("by_role", "by_phase", "by_node", "by_model"):
        assert sum(b["cached_tokens"] for b in data[bucket].values()) == cached
        assert sum(b["usd_saved"] for b in data[bucket].values()) == pytest.approx(saved)
    n1 = [r for r in recs if r["node_id"] == "n0001"]
    assert data["by_node"]["n0001"]["cached_tokens"] == sum(r["usage"]["cached_tokens"] for r in n1)
    # `logs cost`: the TOTAL row shows the cached tokens and the saving; --json is cost.json
    text = logs_cost(tmp_path, capsys)
    header = text.splitlines()[0].split()
    assert "cached" in header and "saved" in header
    row = next(ln for ln in text.splitlines() if ln.startswith("TOTAL")).split()
    assert str(cached) in row and f"{saved:.4f}" in row and f"{total['usd']:.4f}" in row
    assert json.loads(logs_cost(tmp_path, capsys, "--json")) == data


def test_without_a_cached_price_cached_tokens_cost_the_input_price(tmp_path: Path, env_key: str) -> None:
    prices = {"fake-model": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}
    with FakeOpenAI([answer(GOOD, 3000, 100, prompt_tokens_details={"cached_tokens": 2048})]) as srv:
        client = client_for(make_cfg(srv.url, prices=prices), tmp_path)
        client.complete(MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "a"), schema=SCHEMA)
    (rec,) = records(tmp_path)
    total = json.loads((tmp_path / "cost.json").read_text())["total"]
    assert rec["usage"]["cached_tokens"] == total["cached_tokens"] == 2048  # still counted
    no_discount = (rec["usage"]["prompt_tokens"] * 2.0 + rec["usage"]["completion_tokens"] * 8.0) / 1e6
    assert rec["cost_usd"] == pytest.approx(no_discount) == total["usd"]
    assert total["usd_saved"] == 0


# (the openai SDK itself reads JSON true as 1 and "12" as 12 before the backend sees them)
HOSTILE = [
    ({"prompt_tokens_details": {"cached_tokens": -5}}, "outside 0..prompt_tokens"),
    ({"prompt_tokens_details": {"cached_tokens": 5000}}, "outside 0..prompt_tokens"),
    ({"prompt_tokens_details": {"cached_tokens": "lots"}}, "not a whole number"),
    ({"prompt_tokens_details": {"cached_tokens": 12.5}}, "not a whole number"),
    ({"prompt_tokens_details": {"cached_tokens": {"n": 3}}}, "not a whole number"),
    ({"prompt_tokens_details": {"cached_tokens": [1]}}, "not a whole number"),
    ({"prompt_tokens_details": "everything"}, "not an object"),
    ({"cache_read_input_tokens": 10**12}, "outside 0..prompt_tokens"),
    ({"cache_read_input_tokens": -1}, "outside 0..prompt_tokens"),
]


@pytest.mark.parametrize(("extra", "why"), HOSTILE)
def test_hostile_cached_values_are_unknown_with_a_note(
    tmp_path: Path, env_key: str, extra: dict, why: str
) -> None:
    with FakeOpenAI([answer(GOOD, 1000, 10, **extra)]) as srv:
        client = client_for(make_cfg(srv.url, prices=PRICES), tmp_path)
        res = client.complete(MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "a"), schema=SCHEMA)
    assert res.parsed == json.loads(GOOD)  # the answer is used; only the cache count is not trusted
    (rec,) = records(tmp_path)
    field = next(iter(extra))
    assert rec["usage"]["cached_tokens"] is None
    assert field in rec["usage"]["cached_note"] and why in rec["usage"]["cached_note"]
    price = PRICES["fake-model"]
    assert rec["cost_usd"] == pytest.approx(usd_of(rec["usage"], price))  # priced as no cache hit
    total = json.loads((tmp_path / "cost.json").read_text())["total"]
    assert total["cached_unknown"] == 1 and total["cached_tokens"] == 0 and total["usd_saved"] == 0


@pytest.mark.parametrize("extra", [{}, {"prompt_tokens_details": None}, {"prompt_tokens_details": {}}])
def test_absent_cached_count_is_none_without_a_note(tmp_path: Path, env_key: str, extra: dict) -> None:
    with FakeOpenAI([answer("hi", 50, 5, **extra)]) as srv:
        client_for(make_cfg(srv.url, prices=PRICES), tmp_path).complete(MSGS, role="code", ctx=CallContext())
    (rec,) = records(tmp_path)
    assert rec["usage"]["cached_tokens"] is None and "cached_note" not in rec["usage"]
    total = json.loads((tmp_path / "cost.json").read_text())["total"]
    assert total["cached_unknown"] == 0 and total["cached_tokens"] == 0


def test_all_cached_is_accepted_and_replay_reproduces_usage_and_cost(tmp_path: Path, env_key: str) -> None:
    script = [
        answer("hi", 640, 5, prompt_tokens_details={"cached_tokens": 640}),
        answer("ho", 640, 5, prompt_tokens_details={"cached_tokens": -1}),
    ]
    with FakeOpenAI(script) as srv:
        cfg = make_cfg(srv.url, prices=PRICES)
        client = client_for(cfg, tmp_path / "a")
        client.complete(MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "x"))
        client.complete(MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "x"))
    replay = make_client(cfg, tmp_path / "b", Redactor([], {}), backend=ReplayBackend(tmp_path / "a"))
    for _ in script:
        replay.complete(MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "x"))
    recorded, replayed = records(tmp_path / "a"), records(tmp_path / "b")
    assert recorded[0]["usage"]["cached_tokens"] == 640 and recorded[1]["usage"]["cached_tokens"] is None
    assert [r["usage"] for r in replayed] == [r["usage"] for r in recorded]
    assert [r["cost_usd"] for r in replayed] == pytest.approx([r["cost_usd"] for r in recorded])


def test_a_cost_json_from_before_cached_tokens_continues(tmp_path: Path) -> None:
    old = {"prompt_tokens": 10, "completion_tokens": 2, "usd": 0.5, "calls": 1, "attempts": 1,
           "failed_attempts": 0, "estimated_calls": 0}  # fmt: skip
    path = tmp_path / "cost.json"
    path.write_text(json.dumps({"total": old, "by_role": {"code": dict(old)}, "by_phase": {}, "by_node": {},
                                "by_model": {}, "unpriced_models": []}))  # fmt: skip
    ledger = CostLedger(path, PRICES, None)
    usd = ledger.add("code", "p", "n1", "fake-model", Usage(1000, 0, cached_tokens=400))
    assert usd == pytest.approx((600 * 3.0 + 400 * 0.3) / 1e6)
    data = json.loads(path.read_text())
    assert data["by_role"]["code"]["cached_tokens"] == data["total"]["cached_tokens"] == 400
    assert data["total"]["usd"] == pytest.approx(0.5 + usd)

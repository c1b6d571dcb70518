"""The openai backend + client against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ai_scientist.base.config import ConfigError, validate
from ai_scientist.base.redact import Redactor
from ai_scientist.llm.backend import RequestRejected, VisionUnsupported
from ai_scientist.llm.call import CallContext, LLMError, StructuredOutputError
from ai_scientist.llm.cost import CostLedger
from ai_scientist.llm.factory import make_client, resolve_backend_name
from ai_scientist.llm.openai_backend import parse_retry_after
from ai_scientist.llm.probe import check_llm

KEY = "sk-testKEY0123456789abcdefSECRET"
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "why": {"type": "string"}},
    "required": ["answer", "why"],
}


def completion(content: str, prompt_tokens: int = 100, completion_tokens: int = 20, **extra: Any) -> dict:
    message = {"role": "assistant", "content": content, **extra}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class FakeOpenAI:
    """Scripted answers, one per request, in order; records every request it gets.

    A script entry: ``{"status": int, "body": dict, "headers": dict, "sleep": float}`` (``"raw":
    bytes`` instead of ``body`` sends those bytes as they are) or a callable ``(request_json) -> entry``.
    """

    def __init__(self, script: list[Any]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
            ) -> None:
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_GET(self) -> None:
                fake.auth.append(self.headers.get("Authorization", ""))
                self._send(200, {"object": "list", "data": [{"id": "fake-model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                req = json.loads(self.rfile.read(length))
                fake.auth.append(self.headers.get("Authorization", ""))
                with fake.lock:
                    fake.requests.append(req)
                    entry = (
                        fake.script.pop(0)
                        if fake.script
                        else {"status": 500, "body": {"error": "script empty"}}
                    )
                if callable(entry):
                    entry = entry(req)
                if entry.get("sleep"):
                    time.sleep(entry["sleep"])
                self._send(
                    entry.get("status", 200), entry.get("body"), entry.get("headers"), entry.get("raw")
                )

        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def ok(content: str, **kw: Any) -> dict:
    return {"status": 200, "body": completion(content, **kw)}


def err(status: int, message: str, headers: dict | None = None) -> dict:
    return {"status": status, "body": {"error": {"message": message, "type": "x"}}, "headers": headers or {}}


GOOD = json.dumps({"answer": 42, "why": "because"})


def make_cfg(url: str, **llm: Any) -> Any:
    base = {
        "backend": "openai",
        "base_url": url,
        "api_key_env": "FAKE_LLM_KEY",
        "model": "fake-model",
        "timeout_s": 5,
        "max_attempts": 3,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "prices": {"fake-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
    }
    base.update(llm)
    return validate({"llm": base})


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FAKE_LLM_KEY", KEY)
    return KEY


def client_for(cfg: Any, run: Path, sleeps: list[float] | None = None) -> Any:
    client = make_client(cfg, run, Redactor(["FAKE_LLM_KEY"]))
    if sleeps is not None:
        client._sleep = sleeps.append  # record the waits instead of sleeping
    return client


def records(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run.glob("nodes/*/prompt_logs/*.json"))]


def ctx(label: str = "q") -> CallContext:
    return CallContext(node_id="n0001", stage="1", phase="phase2", label=label)


MSGS = [{"role": "system", "content": "You answer."}, {"role": "user", "content": "What is 6*7?"}]


def test_success_native_schema(tmp_path: Path, env_key: str) -> None:
    with FakeOpenAI([ok(GOOD, reasoning_content="I multiply.")]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path)
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert res.parsed == {"answer": 42, "why": "because"}
    assert res.usage.prompt_tokens == 100 and not res.usage.estimated
    fmt = srv.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA
    assert srv.requests[0]["max_tokens"] == 4096 and srv.requests[0]["temperature"] == 0.7
    (rec,) = records(tmp_path)
    assert rec["messages"] == MSGS and rec["error"] is None and rec["attempt"] == 1
    assert rec["response"]["raw"] == GOOD and rec["response"]["reasoning"] == "I multiply."
    assert rec["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "estimated": False,
        "cached_tokens": None,
    }
    assert res.call_ids == [rec["call_id"]]


def test_429_retry_after_then_success(tmp_path: Path, env_key: str) -> None:
    sleeps: list[float] = []
    with FakeOpenAI([err(429, "slow down", {"Retry-After": "1"}), ok(GOOD)]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, sleeps)
        res = client.complete(MSGS, role="feedback", ctx=ctx(), schema=SCHEMA)
    assert res.parsed["answer"] == 42
    first, second = records(tmp_path)
    assert first["error"].startswith("RateLimited") and first["wait_s"] == 1.0 and first["response"] is None
    assert second["error"] is None and second["attempt"] == 2
    assert sleeps == [1.0]  # the wait came from Retry-After, not from the (0.01 s) backoff


def test_500_then_success_uses_backoff(tmp_path: Path, env_key: str) -> None:
    sleeps: list[float] = []
    with FakeOpenAI([err(500, "boom"), err(503, "busy"), ok(GOOD)]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, sleeps)
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert res.parsed["why"] == "because"
    assert [r["error"].split(":")[0] if r["error"] else None for r in records(tmp_path)] == [
        "ServerError",
        "ServerError",
        None,
    ]
    assert sleeps == [0.01, 0.02]  # exponential: base, then doubled


def test_timeout_retries_then_clear_error(tmp_path: Path, env_key: str) -> None:
    slow = {"status": 200, "body": completion(GOOD), "sleep": 1.5}
    with FakeOpenAI([slow, slow]) as srv:
        client = client_for(make_cfg(srv.url, timeout_s=0.3, max_attempts=2), tmp_path, [])
        with pytest.raises(LLMError) as info:
            client.complete(MSGS, role="code", ctx=ctx("slow"), schema=SCHEMA)
    msg = str(info.value)
    assert "failed after 2 attempts" in msg and "n0001" in msg and "timeout" in msg.lower()
    recs = records(tmp_path)
    assert len(recs) == 2 and all(r["error"].startswith("CallTimeout") for r in recs)
    assert len(srv.requests) == 2


def test_malformed_json_then_repaired(tmp_path: Path, env_key: str) -> None:
    with FakeOpenAI([ok('Here you go: {"answer": 42, "why": }'), ok("```json\n" + GOOD + "\n```")]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path)
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert res.parsed == {"answer": 42, "why": "because"}
    first, second = records(tmp_path)
    assert first["structured_error"].startswith("invalid JSON") and "column" in first["structured_error"]
    assert first["error"] is None  # the model did answer: replay must serve it
    repair = second["messages"]
    assert repair[:2] == MSGS and repair[2] == {"role": "assistant", "content": first["response"]["raw"]}
    assert first["structured_error"] in repair[3]["content"]
    assert second["structured_error"] is None and res.call_ids == [first["call_id"], second["call_id"]]
    assert res.usage.prompt_tokens == 200  # both answered attempts counted


def test_schema_violation_twice_is_structured_output_error(tmp_path: Path, env_key: str) -> None:
    wrong = json.dumps({"answer": "forty-two", "why": "x"})
    with FakeOpenAI([ok("not json at all"), ok(wrong)]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path)
        with pytest.raises(StructuredOutputError) as info:
            client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert "after one repair round" in str(info.value)
    assert "$.answer" in str(info.value) and "not of type 'integer'" in str(info.value)
    assert info.value.raw == wrong
    assert len(records(tmp_path)) == 2 and len(srv.requests) == 2


def test_validator_error_goes_to_repair(tmp_path: Path, env_key: str) -> None:
    def check(value: dict) -> None:
        if value["answer"] != 42:
            raise ValueError(f"answer must be 42, got {value['answer']}")

    with FakeOpenAI([ok(json.dumps({"answer": 41, "why": "off by one"})), ok(GOOD)]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path)
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA, validator=check)
    assert res.parsed["answer"] == 42
    assert "answer must be 42, got 41" in srv.requests[1]["messages"][-1]["content"]


def test_server_without_json_schema_falls_back_to_prompt_mode(tmp_path: Path, env_key: str) -> None:
    def strict_server(req: dict) -> dict:
        if "response_format" in req:
            return err(400, "Unsupported parameter: response_format json_schema")
        return ok(GOOD)

    with FakeOpenAI([strict_server] * 5) as srv:
        client = client_for(make_cfg(srv.url), tmp_path)
        res = client.complete(MSGS, role="code", ctx=ctx("a"), schema=SCHEMA)
        res2 = client.complete(MSGS, role="code", ctx=ctx("b"), schema=SCHEMA)
    assert res.parsed == res2.parsed == {"answer": 42, "why": "because"}
    # down the ladder once (json_schema, json_object + schema, json_object refused), then remembered
    assert ["response_format" in r for r in srv.requests] == [True, True, True, False, False]
    instructed = srv.requests[3]["messages"][-1]["content"]
    assert instructed.startswith("What is 6*7?") and '"required"' in instructed
    recs = records(tmp_path)
    assert all(r["error"].startswith("StructuredOutputUnsupported") for r in recs[:3])
    assert [r["params"]["structured"] for r in recs] == [
        "json_schema",
        "json_object_schema",
        "json_object",
        "prompt",
        "prompt",
    ]
    assert recs[3]["params"]["schema"] is None


def test_json_schema_mode_does_not_fall_back(tmp_path: Path, env_key: str) -> None:
    with FakeOpenAI([err(400, "Unsupported parameter: response_format")]) as srv:
        client = client_for(make_cfg(srv.url, structured_output="json_schema"), tmp_path)
        with pytest.raises(RequestRejected) as info:
            client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert "llm.structured_output" in str(info.value)


def test_prompt_mode_never_sends_response_format(tmp_path: Path, env_key: str) -> None:
    with FakeOpenAI([ok("Sure! " + GOOD + " Hope it helps.")]) as srv:
        client = client_for(make_cfg(srv.url, structured_output="prompt"), tmp_path)
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert res.parsed["answer"] == 42 and "response_format" not in srv.requests[0]


def test_non_retryable_4xx_and_vision(tmp_path: Path, env_key: str) -> None:
    image_msg = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "describe"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ]
    with FakeOpenAI([err(401, "bad key"), err(400, "this model does not support image input")]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, [])
        with pytest.raises(RequestRejected) as info:
            client.complete(MSGS, role="code", ctx=ctx("auth"))
        assert "FAKE_LLM_KEY" in str(info.value) and KEY not in str(info.value)
        with pytest.raises(VisionUnsupported):
            client.complete(image_msg, role="vlm_feedback", ctx=ctx("img"))
    assert len(srv.requests) == 2 and len(records(tmp_path)) == 2  # no retries of a 4xx


def test_cost_accounting_adds_up(tmp_path: Path, env_key: str) -> None:
    script = [
        ok(GOOD, prompt_tokens=1000, completion_tokens=100),
        ok("plain text", prompt_tokens=2000, completion_tokens=300),
        ok(GOOD, prompt_tokens=500, completion_tokens=50),
    ]
    with FakeOpenAI(script) as srv:
        client = client_for(make_cfg(srv.url), tmp_path)
        client.complete(MSGS, role="code", ctx=CallContext("n0001", "1", "phase2", "a"), schema=SCHEMA)
        client.complete(MSGS, role="summary", ctx=CallContext("n0002", "1", "phase4", "b"))
        client.complete(MSGS, role="code", ctx=CallContext("n0002", "1", "phase2", "c"), schema=SCHEMA)
    data = json.loads((tmp_path / "cost.json").read_text())
    total = data["total"]
    assert total["prompt_tokens"] == 3500 and total["completion_tokens"] == 450 and total["calls"] == 3
    assert total["usd"] == pytest.approx((3500 * 1.0 + 450 * 2.0) / 1e6)
    for bucket in ("by_role", "by_phase", "by_node", "by_model"):
        assert sum(b["usd"] for b in data[bucket].values()) == pytest.approx(total["usd"])
        assert sum(b["prompt_tokens"] for b in data[bucket].values()) == 3500
    assert data["by_role"]["code"]["calls"] == 2 and data["by_node"]["n0002"]["prompt_tokens"] == 2500
    recs = records(tmp_path)
    assert sum(r["cost_usd"] for r in recs) == pytest.approx(total["usd"])
    # a resumed run continues the totals
    again = CostLedger(tmp_path / "cost.json", {}, None)
    assert again.total_usd == pytest.approx(total["usd"])


def test_cost_cap_stops_before_the_call(tmp_path: Path, env_key: str) -> None:
    from ai_scientist.llm.call import CostCapExceeded

    with FakeOpenAI([ok(GOOD, prompt_tokens=1_000_000, completion_tokens=0), ok(GOOD)]) as srv:
        client = client_for(make_cfg(srv.url, max_cost_usd=0.5), tmp_path)
        client.complete(MSGS, role="code", ctx=ctx())
        with pytest.raises(CostCapExceeded, match="llm.max_cost_usd"):
            client.complete(MSGS, role="code", ctx=ctx())
    assert len(srv.requests) == 1


def test_key_never_written_to_run_dir(tmp_path: Path, env_key: str) -> None:
    leaky = [ok(f"my key is {KEY}"), err(500, f"echo {KEY}"), ok(json.dumps({"answer": 1, "why": KEY}))]
    with FakeOpenAI(leaky) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, [])
        res = client.complete([{"role": "user", "content": f"the key is {KEY}"}], role="code", ctx=ctx())
        client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert srv.auth and all(a == f"Bearer {KEY}" for a in srv.auth)  # it was really used...
    assert KEY not in srv.requests[0]["messages"][0]["content"]  # ...but never sent in a prompt
    assert res.raw == "my key is [REDACTED:FAKE_LLM_KEY]"  # an echoed key does not travel on
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 6  # 3 records (.json + .md) and cost.json
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path


def test_every_attempt_has_a_record(tmp_path: Path, env_key: str) -> None:
    script = [err(429, "x", {"Retry-After": "0"}), err(502, "y"), ok("{broken"), ok(GOOD)]
    with FakeOpenAI(script) as srv:
        client = client_for(make_cfg(srv.url, max_attempts=4), tmp_path, [])
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    recs = records(tmp_path)
    assert len(recs) == len(srv.requests) == 4
    assert [r["attempt"] for r in recs] == [1, 2, 3, 4]
    assert res.call_ids == [r["call_id"] for r in recs]
    for r in recs:
        assert r["node_id"] == "n0001" and r["phase"] == "phase2" and r["role"] == "code"
        assert r["backend"] == "openai" and r["messages"] and "ledger" in r and "memory_snapshot" in r


def test_retry_after_parsing() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None


# ------------------------------------------------------------------ factory --


def test_auto_backend_choice_and_config_errors(tmp_path: Path) -> None:
    cfg = validate({"llm": {"api_key_env": "FAKE_LLM_KEY"}})
    assert resolve_backend_name(cfg, {"FAKE_LLM_KEY": "abcdefgh"})[0] == "openai"
    assert resolve_backend_name(cfg, {})[0] == "local"
    with pytest.raises(ConfigError, match="llm.replay_dir"):
        make_client(validate({"llm": {"backend": "replay"}}), tmp_path, None)
    with pytest.raises(ConfigError, match="FAKE_LLM_KEY"):
        from ai_scientist.llm.factory import make_backend

        make_backend(validate({"llm": {"backend": "openai", "api_key_env": "FAKE_LLM_KEY"}}), {})


def test_check_llm_reports_without_the_key(env_key: str) -> None:
    with FakeOpenAI([ok(json.dumps({"ok": True})), ok("red")]) as srv:
        rows = check_llm(make_cfg(srv.url))
    by = {r["name"]: r for r in rows}
    assert by["api key"]["ok"] and by["llm endpoint"]["ok"] and "fake-model" in by["llm endpoint"]["detail"]
    assert by["api key"]["status"] == "set" and by["structured output"]["status"] == "json_schema"
    assert len(srv.auth) >= 3 and all(a == f"Bearer {KEY}" for a in srv.auth)  # GETs and the two probes
    assert KEY not in json.dumps(rows)
    assert {"local model", "llama_cpp", "llm backend"} <= set(by)


def test_check_llm_unreachable_endpoint() -> None:
    cfg = make_cfg("http://127.0.0.1:9/v1")
    rows = {r["name"]: r for r in check_llm(cfg, {"FAKE_LLM_KEY": KEY})}
    assert not rows["llm endpoint"]["ok"] and "not reachable" in rows["llm endpoint"]["detail"]


def test_connection_refused_is_retried_then_clear_error(tmp_path: Path, env_key: str) -> None:
    sleeps: list[float] = []
    client = client_for(make_cfg("http://127.0.0.1:9/v1", max_attempts=2), tmp_path, sleeps)
    with pytest.raises(LLMError, match="failed after 2 attempts.*cannot connect"):
        client.complete(MSGS, role="code", ctx=ctx())
    recs = records(tmp_path)
    assert [r["error"].split(":")[0] for r in recs] == ["ConnectionFailed", "ConnectionFailed"]
    assert sleeps == [0.01] and recs[0]["retryable"] is True

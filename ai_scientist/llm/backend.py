"""The backend contract: how the client talks to one LLM provider, and how a provider fails.

A backend sends one request and returns one :class:`BackendReply`. It never retries,
never logs and never parses: the :class:`~ai_scientist.llm.client.LLMClient` does that
for every backend alike. Failures are raised as :class:`BackendError` subclasses whose
``retryable`` flag (and ``retry_after`` for 429) the client's retry loop relies on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .call import CallContext, LLMError, Message, Usage

# Rough size of an image in prompt tokens when a backend does not report usage.
IMAGE_TOKEN_ESTIMATE = 85


@dataclass
class BackendReply:
    """What a backend returned for one request.

    ``text`` is the message content exactly as received (thinking tags included);
    ``reasoning`` is separate reasoning the server reported (``reasoning_content``);
    ``usage`` is None when the backend did not report token counts;
    ``native_structured`` is True when the server constrained the answer to the schema;
    ``model`` names the model that answered when it differs from the requested name;
    ``finish_reason`` is why generation stopped as the server said (``"length"``: cut at
    ``max_tokens``), None when it did not say.
    """

    text: str
    reasoning: str | None = None
    usage: Usage | None = None
    native_structured: bool = False
    model: str | None = None
    finish_reason: str | None = None


@runtime_checkable
class Backend(Protocol):
    """One LLM provider. Implementations must be safe to call from several threads."""

    name: str

    def structured_mode(self, model: str) -> str:
        """``"native"`` if ``complete(schema=...)`` constrains the answer, else ``"prompt"``."""
        ...

    # Optional: ``served_model(requested) -> str``, the model a request for ``requested`` really
    # goes to when the backend ignores the configured name (the local GGUF); see served_model().

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
    ) -> BackendReply: ...


# ------------------------------------------------------------------ errors --


class BackendError(LLMError):
    """One request failed. ``retryable`` tells the client whether another attempt may succeed."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class RateLimited(BackendError):
    """HTTP 429; ``retry_after`` holds the server's Retry-After in seconds when it sent one."""

    retryable = True


class ServerError(BackendError):
    """HTTP 5xx: the server failed; retry."""

    retryable = True


class ConnectionFailed(BackendError):
    """The endpoint could not be reached (refused, reset, DNS)."""

    retryable = True


class CallTimeout(BackendError):
    """No answer within ``llm.timeout_s``."""

    retryable = True


class RequestRejected(BackendError):
    """HTTP 4xx other than 429: the request itself is wrong (bad model, bad key, too long)."""


class VisionUnsupported(RequestRejected):
    """The backend or server cannot take image input."""


class StructuredOutputUnsupported(RequestRejected):
    """The server rejected ``response_format`` json_schema; the client falls back to prompt mode."""


# ----------------------------------------------------------------- helpers --


def served_model(backend: Backend, requested: str) -> str:
    """The model that really answers a request for ``requested`` (the local backend runs its
    GGUF whatever the configured name); recorded even when the attempt fails."""
    serve = getattr(backend, "served_model", None)
    return serve(requested) if callable(serve) else requested


def has_images(messages: list[Message]) -> bool:
    """True when any message carries an ``image_url`` part."""
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "image_url" for p in content
        ):
            return True
    return False


def message_text(message: Message) -> str:
    """The text of one message (text parts joined; images left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def checked_cached_tokens(value: Any, prompt_tokens: int, source: str) -> tuple[int | None, str | None]:
    """(cached tokens, note) from a server-reported cache count: a whole number from 0 to
    ``prompt_tokens`` is taken; absent (None) is (None, None); anything else — negative, larger
    than the prompt, not a number — is not trusted: (None, a note naming ``source`` and the value)."""
    if value is None:
        return None, None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None, f"{source} = {str(value)[:40]!r} is not a whole number; cached tokens unknown"
    if value < 0 or value > prompt_tokens:
        return None, (
            f"{source} = {value} is outside 0..prompt_tokens ({prompt_tokens}); cached tokens unknown"
        )
    return value, None


def estimate_tokens(text: str) -> int:
    """About four characters per token: the estimate used when a backend reports no usage."""
    return (len(text) + 3) // 4


def estimate_usage(messages: list[Message], answer: str) -> Usage:
    """Estimated usage of a call (marked ``estimated``)."""
    prompt = sum(estimate_tokens(message_text(m)) + 4 for m in messages)
    images = sum(
        1
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    )
    return Usage(
        prompt_tokens=prompt + images * IMAGE_TOKEN_ESTIMATE,
        completion_tokens=estimate_tokens(answer),
        estimated=True,
    )

"""Any OpenAI-compatible chat endpoint through the ``openai`` SDK (OpenAI, vLLM, Ollama,
llama.cpp server, LM Studio, OpenRouter).

The SDK's own retries are off (``max_retries=0``): the client's retry loop decides,
and records every attempt. Structured output uses ``response_format`` json_schema
unless ``llm.structured_output`` is ``prompt``; in ``auto`` mode a server that rejects
``response_format`` is remembered for the rest of the process (per base URL and
model) and the client switches to prompt mode.
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
from typing import Any

from .backend import (
    BackendReply,
    CallTimeout,
    ConnectionFailed,
    RateLimited,
    RequestRejected,
    ServerError,
    StructuredOutputUnsupported,
    VisionUnsupported,
    has_images,
)
from .types import CallContext, Message, Usage

_SCHEMA_WORDS = re.compile(r"response_format|json_schema|structured|guided|grammar", re.I)
_VISION_WORDS = re.compile(r"image|vision|multimodal|multi-modal", re.I)

# (base_url, model) pairs whose server rejected response_format: prompt mode from then on.
_PROMPT_MODE: set[tuple[str, str]] = set()
_PROMPT_MODE_LOCK = threading.Lock()


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or HTTP date) or ``retry-after-ms``."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIBackend:
    """``complete`` sends one chat completion; errors are mapped to the backend error types."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        structured_output: str = "auto",
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
    ):
        from openai import OpenAI

        self.base_url = base_url
        self.structured_output = structured_output
        self.key_env = key_env
        self._client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
        self._url = str(self._client.base_url)

    def structured_mode(self, model: str) -> str:
        if self.structured_output == "prompt":
            return "prompt"
        with _PROMPT_MODE_LOCK:
            fallen_back = (self._url, model) in _PROMPT_MODE
        return "prompt" if fallen_back and self.structured_output == "auto" else "native"

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
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "timeout": timeout,
        }
        if schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": False},
            }
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except Exception as exc:  # mapped to typed errors below; anything unknown re-raised
            raise self._map_error(exc, model, schema is not None, has_images(messages)) from exc
        return self._reply(resp, schema is not None)

    def _reply(self, resp: Any, native: bool) -> BackendReply:
        if not getattr(resp, "choices", None):
            raise ServerError(f"{self._url}: the answer has no choices (server returned {str(resp)[:200]!r})")
        message = resp.choices[0].message
        extra = getattr(message, "model_extra", None) or {}
        reasoning = (
            getattr(message, "reasoning_content", None)
            or extra.get("reasoning_content")
            or extra.get("reasoning")
        )
        usage = None
        if getattr(resp, "usage", None) is not None and resp.usage.prompt_tokens is not None:
            usage = Usage(int(resp.usage.prompt_tokens), int(resp.usage.completion_tokens or 0), False)
        return BackendReply(
            text=message.content or "",
            reasoning=reasoning if isinstance(reasoning, str) else None,
            usage=usage,
            native_structured=native,
            model=getattr(resp, "model", None) or None,
        )

    def _map_error(self, exc: Exception, model: str, with_schema: bool, images: bool) -> Exception:
        import openai

        where = f"{self._url} (model {model})"
        if isinstance(exc, openai.APITimeoutError):
            return CallTimeout(f"{where}: no answer within the timeout (llm.timeout_s)")
        if isinstance(exc, openai.APIConnectionError):
            return ConnectionFailed(
                f"{where}: cannot connect ({exc.__cause__ or exc}); "
                "check llm.base_url / OPENAI_BASE_URL and that the server runs"
            )
        if not isinstance(exc, openai.APIStatusError):
            return exc
        status = exc.status_code
        text = f"{exc.message} {exc.body}"
        if status == 429:
            wait = parse_retry_after(exc.response.headers)
            return RateLimited(f"{where}: rate limited (429): {exc.message}", status=429, retry_after=wait)
        if status >= 500:
            return ServerError(f"{where}: server error {status}: {exc.message}", status=status)
        if with_schema and self.structured_output == "auto" and _SCHEMA_WORDS.search(text):
            with _PROMPT_MODE_LOCK:
                _PROMPT_MODE.add((self._url, model))
            return StructuredOutputUnsupported(
                f"{where}: server rejected response_format json_schema ({status}: {exc.message}); "
                "switching to prompt mode for this process",
                status=status,
            )
        if images and _VISION_WORDS.search(text):
            return VisionUnsupported(
                f"{where}: the model does not accept images ({status}: {exc.message})", status=status
            )
        hint = ""
        if status in (401, 403):
            hint = f"; check the key in the environment variable {self.key_env} (llm.api_key_env)"
        elif with_schema and self.structured_output == "json_schema":
            hint = "; if the server cannot do json_schema, set llm.structured_output: auto or prompt"
        return RequestRejected(f"{where}: request rejected ({status}): {exc.message}{hint}", status=status)

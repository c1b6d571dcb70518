"""Any OpenAI-compatible chat endpoint through the ``openai`` SDK (OpenAI, vLLM, Ollama,
llama.cpp server, llama-cpp-python, LM Studio, OpenRouter).

The SDK's own retries are off (``max_retries=0``): the client's retry loop decides, and
records every attempt. Structured output follows ``llm.structured_output``: ``prompt``
never sends ``response_format``; ``json_schema`` always sends json_schema; ``auto``
negotiates per (base URL, model) down the ladder of :mod:`.negotiation` (json_schema →
json_object with schema → json_object → prompt). A rejection is recognised from the error
body at any status and raised as :class:`StructuredOutputUnsupported` (never retried);
the outcome is kept in ``llm_negotiation.json`` of the run directory.

In ``json_object_schema`` mode (llama-cpp-python, which compiles the schema into a llama.cpp
grammar) the schema is sent in its grammar form, without ``maxLength`` bounds above 1000
(:func:`.negotiation.grammar_form`; a 60,000 bound kills the server); the client still validates
every bound on the answer.

A 200 answer whose body is not a chat completion (empty, not JSON, no choices) is a
:class:`ServerError` naming the endpoint: retried like any server failure.
"""

from __future__ import annotations

import email.utils
import re
import time
from pathlib import Path
from typing import Any

from ..base.paths import RunPaths
from .backend import (
    BackendReply,
    CallTimeout,
    ConnectionFailed,
    RateLimited,
    RequestRejected,
    ServerError,
    StructuredOutputUnsupported,
    VisionUnsupported,
    checked_cached_tokens,
    has_images,
)
from .call import CallContext, Message, Usage
from .negotiation import LADDER, Negotiation, is_rejection, response_format

_VISION_WORDS = re.compile(r"image|vision|multimodal|multi-modal", re.I)
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object", re.I)


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


def server_message(exc: Any) -> str:
    """The server's own words in an error answer: ``error.message`` (OpenAI, Ollama, llama.cpp),
    a top-level ``message`` (vLLM before 0.10), a bare ``error`` string (LM Studio), else the SDK's."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        for said in (body.get("message"), inner, inner.get("message") if isinstance(inner, dict) else None):
            if isinstance(said, str) and said.strip():
                return " ".join(said.split())[:500]
    if isinstance(body, str) and body.strip():
        return " ".join(body.split())[:500]
    return str(getattr(exc, "message", exc))


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` of an SDK model, or ``obj[name]`` of a plain dict the SDK left unparsed."""
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def cached_tokens(usage: Any) -> tuple[int | None, str | None]:
    """(cached prompt tokens, note) of a chat completion's ``usage``: OpenAI's
    ``prompt_tokens_details.cached_tokens``, else Anthropic-style ``cache_read_input_tokens``
    (both counted within ``prompt_tokens``). Absent: (None, None); a value that cannot be true
    (negative, above ``prompt_tokens``, not a number) is not trusted: (None, a note)."""
    prompt = int(usage.prompt_tokens)
    details = _field(usage, "prompt_tokens_details")
    if isinstance(details, (str, bytes, int, float, list)):
        shown = str(details)[:40]
        return None, f"usage.prompt_tokens_details = {shown!r} is not an object; cached tokens unknown"
    value = _field(details, "cached_tokens") if details is not None else None
    if value is not None:
        return checked_cached_tokens(value, prompt, "usage.prompt_tokens_details.cached_tokens")
    value = _field(usage, "cache_read_input_tokens")
    return checked_cached_tokens(value, prompt, "usage.cache_read_input_tokens")


class OpenAIBackend:
    """``complete`` sends one chat completion; errors are mapped to the backend error types."""

    name = "openai"
    # The client passes ``structured=<mode>`` to ``complete`` so the request sent is the one
    # its prompt log describes, even when another worker stepped the negotiation down meanwhile.
    negotiates_structured_output = True

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        structured_output: str = "auto",
        key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        negotiation: Negotiation | None = None,
    ):
        from openai import OpenAI

        self.base_url = base_url
        self.structured_output = structured_output
        self.key_env = key_env
        self._client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
        self._url = str(self._client.base_url)
        self.negotiation = negotiation or Negotiation()

    @property
    def url(self) -> str:
        """The endpoint's base URL as the SDK uses it (no key in it)."""
        return self._url

    def use_run_dir(self, run_dir: str | Path) -> None:
        """Keep the negotiation in ``run_dir/llm_negotiation.json`` (loaded if it exists)."""
        self.negotiation = Negotiation(RunPaths(run_dir).llm_negotiation)

    def structured_mode(self, model: str) -> str:
        """The ladder mode the next structured call to ``model`` uses."""
        if self.structured_output in ("prompt", "json_schema"):
            return self.structured_output
        return self.negotiation.mode(self._url, model)

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
        structured: str | None = None,
    ) -> BackendReply:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "timeout": timeout,
        }
        mode = None
        if schema is not None:
            mode = structured if structured in LADDER else self.structured_mode(model)
            fmt = response_format(mode, schema)
            if fmt is not None:
                kwargs["response_format"] = fmt
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except Exception as exc:  # mapped to typed errors below; anything unknown re-raised
            sent = mode if "response_format" in kwargs else None
            raise self._map_error(exc, model, sent, has_images(messages)) from exc
        reply = self._reply(resp, model, native=mode in ("json_schema", "json_object_schema"))
        if mode is not None and self.structured_output == "auto":
            self.negotiation.accept(self._url, model, mode)
        return reply

    def _reply(self, resp: Any, model: str, native: bool) -> BackendReply:
        where = f"{self._url} (model {model})"
        if not getattr(resp, "choices", None):
            raise ServerError(
                f"{where}: the server answered, but not with a chat completion (no choices; body "
                f"begins {str(resp)[:200]!r}); treated as a server error"
            )
        try:
            choice = resp.choices[0]
            message = choice.message
            finish = getattr(choice, "finish_reason", None)
            text = message.content or ""
            extra = getattr(message, "model_extra", None) or {}
            reasoning = (
                getattr(message, "reasoning_content", None)
                or extra.get("reasoning_content")
                or extra.get("reasoning")
            )
            usage = None
            if getattr(resp, "usage", None) is not None and resp.usage.prompt_tokens is not None:
                usage = Usage(int(resp.usage.prompt_tokens), int(resp.usage.completion_tokens or 0), False)
                usage.cached_tokens, usage.cached_note = cached_tokens(resp.usage)
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise ServerError(
                f"{where}: the server answered with a malformed chat completion ({type(exc).__name__}: "
                f"{exc}); treated as a server error"
            ) from None
        return BackendReply(
            text=text,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            usage=usage,
            native_structured=native,
            model=getattr(resp, "model", None) or None,
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def _map_error(self, exc: Exception, model: str, sent_mode: str | None, images: bool) -> Exception:
        """The backend error for ``exc``; ``sent_mode`` is the structured mode sent, if any."""
        import openai

        where = f"{self._url} (model {model})"
        if isinstance(exc, openai.APITimeoutError):
            return CallTimeout(f"{where}: no answer within the timeout (llm.timeout_s)")
        if isinstance(exc, openai.APIConnectionError):
            return ConnectionFailed(
                f"{where}: cannot connect ({exc.__cause__ or exc}); "
                "check llm.base_url / OPENAI_BASE_URL and that the server runs"
            )
        # an HTTP 200 whose body is not JSON (JSONDecodeError) or not a chat completion (pydantic)
        if isinstance(exc, (ValueError, openai.APIResponseValidationError)):
            return ServerError(
                f"{where}: the server answered with a body that is not a chat completion "
                f"({type(exc).__name__}: {str(exc)[:200]}); treated as a server error"
            )
        if not isinstance(exc, openai.APIStatusError):
            return exc
        status = exc.status_code
        text = f"{exc.message} {exc.body}"
        said = server_message(exc)
        if status == 429:
            wait = parse_retry_after(exc.response.headers)
            return RateLimited(f"{where}: rate limited (429): {said}", status=429, retry_after=wait)
        if images and _VISION_WORDS.search(text) and not _FORMAT_WORDS.search(text):
            return VisionUnsupported(
                f"{where}: the model does not accept images ({status}: {said})", status=status
            )
        if sent_mode is not None and is_rejection(status, text):
            return self._rejection(where, model, sent_mode, status, said)
        if status >= 500:
            return ServerError(f"{where}: server error {status}: {said}", status=status)
        hint = ""
        if status in (401, 403):
            hint = f"; check the key in the environment variable {self.key_env} (llm.api_key_env)"
        return RequestRejected(f"{where}: request rejected ({status}): {said}{hint}", status=status)

    def _rejection(self, where: str, model: str, mode: str, status: int, message: str) -> Exception:
        if self.structured_output != "auto":
            return RequestRejected(
                f"{where}: the server refused response_format {mode} ({status}: {message}); "
                "set llm.structured_output: auto to negotiate a form it accepts, or prompt",
                status=status,
            )
        now = self.negotiation.reject(self._url, model, mode, status=status, reason=message)
        return StructuredOutputUnsupported(
            f"{where}: the server refused response_format {mode} ({status}: {message}); "
            f"structured output now uses {now} for this endpoint and model",
            status=status,
        )

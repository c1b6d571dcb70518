"""One LLM call's data crossing the LLM boundary: what a caller sends (CallContext) and what it gets
back (LLMResult, Usage, the errors). Named `call`, not `types`: no module of the package takes a
standard-library module's name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base import errors as _errors

Message = dict[str, Any]  # OpenAI chat message: {"role": ..., "content": str | list[parts]}


class LLMError(Exception):
    """An LLM call failed after its bounded attempts; the message says why."""


class StructuredOutputError(LLMError):
    """The answer did not parse or validate against the schema, even after repair."""

    def __init__(self, message: str, raw: str = ""):
        super().__init__(message)
        self.raw = raw


# Run-stopping conditions are not LLM errors: a phase that catches LLMError to mark its node
# buggy must not catch them (see ai_scientist.base.errors.RunStop). Re-exported here for callers.
CostCapExceeded = _errors.CostCapExceeded
UnrecordedPrompt = _errors.UnrecordedPrompt


@dataclass
class Usage:
    """Token counts of one answered attempt.

    ``cached_tokens`` is the part of ``prompt_tokens`` the server served from its prefix cache
    (OpenAI ``prompt_tokens_details.cached_tokens``; the local backend: tokens reused from the
    llama.cpp KV state). None when the server did not report it, or reported a value that cannot
    be true (then ``cached_note`` says what it was); None is priced as no cache hit.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    cached_tokens: int | None = None
    cached_note: str | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class CallContext:
    """Where a call comes from; names its prompt log and its cost.json bucket."""

    node_id: str = "run"
    stage: str = ""
    phase: str = ""
    label: str = ""
    ledger: list[dict[str, Any]] = field(default_factory=list)  # from context assembly
    memory_snapshot: dict[str, Any] | None = None


@dataclass
class LLMResult:
    """One completed logical call (possibly several attempts / a repair round)."""

    text: str  # what later prompts may see: reasoning stripped
    raw: str  # exactly what the model returned, reasoning included
    parsed: Any = None  # the validated JSON when a schema was given
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    model: str = ""
    backend: str = ""
    call_ids: list[str] = field(default_factory=list)  # prompt-log ids of every attempt

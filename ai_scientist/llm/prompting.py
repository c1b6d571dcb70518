"""One path for every LLM call of a run: assemble a declared prompt, then complete it.

Node phases (``phases/prompts.py`` builds on :class:`Prompter`), run-level calls and the
reporting calls all go through :func:`ask`: the prompt named in ``context.spec.PROMPTS`` is
assembled from its layers under the run's token budget (``context.max_prompt_tokens`` and the
model's window), with the target model's token counter, and the ledger of that assembly travels
with the call into its prompt log. Nothing builds messages by hand.

The ``response_format`` layer: when the backend sends a structured call's schema in the request
itself (``response_format`` json_schema, a llama.cpp grammar), the text only points to it; in the
prompt-only modes (``json_object``, ``prompt``) the schema text is in the layer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.templates import render
from ..context.assemble import Prompt, assemble
from ..context.budget import ESTIMATE_MARGIN, Budget
from ..context.spec import layout
from ..context.tokens import IMAGE_TOKENS, TokenCounter, counter_for
from .negotiation import INSTRUCTED
from .types import CallContext, LLMResult

if TYPE_CHECKING:
    from ..base.config import Config


class Prompter:
    """Assembles declared prompts for one run: its budget, its counters, its backend's schema mode."""

    def __init__(self, cfg: Config, llm: Any):
        self.cfg = cfg
        backend = getattr(llm, "backend", None)
        self._backend = backend
        self._count_fn = getattr(backend, "count_tokens", None)
        self.budget = Budget.from_config(cfg.context, getattr(backend, "context_window", None))
        self._counters: dict[str, TokenCounter] = {}

    def counter(self, role: str) -> TokenCounter:
        model = self.cfg.model_for(role)
        if model not in self._counters:
            self._counters[model] = counter_for(model, self._count_fn)
        return self._counters[model]

    def schema_in_request(self, role: str) -> bool:
        """Whether the backend sends a structured call's schema in the request itself
        (``response_format`` json_schema, a grammar) rather than in the prompt text."""
        mode_fn = getattr(self._backend, "structured_mode", None)
        if mode_fn is None:
            return False
        return mode_fn(self.cfg.model_for(role)) not in INSTRUCTED

    def schema_text(self, schema: dict[str, Any], role: str) -> str:
        """The response-format text: a short pointer when the schema travels in the request (its
        tokens are not paid twice), the schema itself in prompt-only modes."""
        if layout() != "legacy" and self.schema_in_request(role):
            return render("phases/response_format.j2", schema_json="", in_request=True)
        return render(
            "phases/response_format.j2",
            schema_json=json.dumps(schema, separators=(",", ":")),
            in_request=False,
        )

    def assemble(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        role: str,
        conversation: list[dict[str, Any]] | None = None,
        reserve_tokens: int = 0,
    ) -> Prompt:
        """Assemble ``prompt`` under the run's budget less ``reserve_tokens`` (what the caller adds
        to the messages afterwards, e.g. images), so the request as sent fits the budget."""
        counter = self.counter(role)
        budget = self.budget
        if reserve_tokens:
            # an estimating counter keeps a margin of the budget free: keep it of the reserve too
            extra = reserve_tokens if counter.exact else math.ceil(reserve_tokens / (1 - ESTIMATE_MARGIN))
            budget = Budget(budget.max_tokens - extra, f"{budget.source} - {reserve_tokens} tokens of images")
        return assemble(prompt, values, budget, counter, self.cfg.context, conversation=conversation)


def ask(
    llm: Any,
    prompter: Prompter,
    prompt: str,
    values: dict[str, Any],
    *,
    role: str,
    ctx: CallContext,
    schema: dict[str, Any] | None = None,
    validator: Callable[[Any], None] | None = None,
    conversation: list[dict[str, Any]] | None = None,
    images: list[dict[str, Any]] | None = None,
) -> LLMResult:
    """Assemble ``prompt`` from ``values`` (plus the response-format layer of ``schema``) and
    complete it; the call's prompt log gets the assembly's ledger. ``images`` (``image_url``
    content parts) go into the last message (see :func:`with_images`); their fixed cost
    (``IMAGE_TOKENS`` each) is kept free of the budget, so the request as sent fits."""
    v = dict(values)
    if schema is not None and "response_format" not in v:
        v["response_format"] = prompter.schema_text(schema, role)
    reserve = IMAGE_TOKENS * len(images or [])
    p = prompter.assemble(prompt, v, role=role, conversation=conversation, reserve_tokens=reserve)
    messages = with_images(p, images) if images else p.messages
    call = replace(ctx, ledger=[*p.ledger, *ctx.ledger])  # the caller's own entries (few-shot, ...) after
    return llm.complete(messages, role=role, ctx=call, schema=schema, validator=validator)


def with_images(prompt: Prompt, images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``prompt.messages`` with ``images`` in its last message: after everything but the
    ``node_brief`` section, when that section ends the message (the call's own request stays last,
    and a figure asked about twice, e.g. with two captions, shares the prefix up to its image);
    otherwise after the text."""
    *head, last = prompt.messages
    content = last["content"]
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    brief = prompt.sections.get("node_brief")
    text = parts[-1].get("text") if parts[-1].get("type") == "text" else None
    if brief and isinstance(text, str) and text.endswith(brief) and len(text) > len(brief):
        before = text[: -len(brief)]
        parts = [*parts[:-1], {"type": "text", "text": before}, *images, {"type": "text", "text": brief}]
    else:
        parts = [*parts, *images]
    return [*head, {**last, "content": parts}]

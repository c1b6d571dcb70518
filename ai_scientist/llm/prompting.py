"""One path for every LLM call of a run: assemble a declared prompt, then complete it.

Node phases (``phases/prompts.py`` builds on :class:`Prompter`), run-level calls and the
reporting calls all go through :func:`ask`: the prompt named in ``context.spec.PROMPTS`` is
assembled from its layers under the token budget of the model the call goes to (its context window,
``context.max_prompt_tokens`` / ``context.budget_policy``: :class:`~ai_scientist.context.budget.Budget`),
with that model's token counter, and the ledger of that assembly travels with the call into its
prompt log. Nothing builds messages by hand.

The ``response_format`` layer: when the backend sends a structured call's schema in the request
itself (``response_format`` json_schema, a llama.cpp grammar), the text only points to it; in the
prompt-only modes (``json_object``, ``prompt``) the schema text is in the layer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.templates import render
from ..context.assemble import Prompt, assemble
from ..context.assemble import with_images as _with_images
from ..context.budget import Budget, answer_tokens
from ..context.schema_limits import field_limits
from ..context.spec import layout
from ..context.tokens import TokenCounter, counter_for
from .call import CallContext, LLMResult
from .negotiation import INSTRUCTED

if TYPE_CHECKING:
    from ..base.config import Config


class Prompter:
    """Assembles declared prompts for one run: per model its budget and its token counter, and the
    backend's schema mode."""

    def __init__(self, cfg: Config, llm: Any):
        self.cfg = cfg
        backend = getattr(llm, "backend", None)
        self._backend = backend
        self._count_fn = getattr(backend, "count_tokens", None)
        self._window = getattr(backend, "context_window", None)  # the local model's n_ctx
        self._counters: dict[str, TokenCounter] = {}
        self._budgets: dict[tuple[str, int], Budget] = {}

    def budget_for(self, role: str) -> Budget:
        """The budget of a call by ``role``: it follows that role's model (its window, less the
        role's ``max_tokens`` for the answer)."""
        key = (self.cfg.model_for(role), self.answer_tokens(role))
        if key not in self._budgets:
            self._budgets[key] = Budget.from_config(
                self.cfg.context, self._window, model=key[0], output_tokens=key[1]
            )
        return self._budgets[key]

    def answer_tokens(self, role: str) -> int:
        """The ``max_tokens`` a call by ``role`` is sent with (:func:`~..context.budget.answer_tokens`)."""
        return answer_tokens(self.cfg, role, self._window)

    @property
    def budget(self) -> Budget:
        """The budget of the run's main (``code``) model."""
        return self.budget_for("code")

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

    def schema_text(self, schema: dict[str, Any], role: str, limits_of: dict[str, Any] | None = None) -> str:
        """The response-format text: a short pointer when the schema travels in the request (its
        tokens are not paid twice) with the length limits of ``limits_of`` (a prompt's base
        schema: one text for all its calls) or of ``schema`` in words, the schema itself in
        prompt-only modes."""
        # the answer's own limit: the role's max_tokens (a whole program with its analysis can
        # run past it, and a JSON answer cut short is lost)
        limit = self.answer_tokens(role)
        if layout() != "legacy" and self.schema_in_request(role):
            # most servers do not enforce a schema's maxLength: the text says them (issue 28)
            said = field_limits(schema if limits_of is None else limits_of)
            return render(
                "phases/response_format.j2",
                schema_json="",
                in_request=True,
                limits=said,
                answer_tokens=limit,
            )
        return render(
            "phases/response_format.j2",
            schema_json=json.dumps(schema, separators=(",", ":")),
            in_request=False,
            answer_tokens=limit,
        )

    def assemble(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        role: str,
        conversation: list[dict[str, Any]] | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> Prompt:
        """Assemble ``prompt`` under the budget of ``role``'s model; ``images`` (``image_url``
        parts) go into the last message and their tokens are set aside before the text is packed,
        so the request as sent fits the budget."""
        return assemble(
            prompt,
            values,
            self.budget_for(role),
            self.counter(role),
            self.cfg.context,
            conversation=conversation,
            images=images,
        )


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
    (``IMAGE_TOKENS`` each) is set aside before the text is packed, so the request as sent fits."""
    v = dict(values)
    if schema is not None and "response_format" not in v:
        v["response_format"] = prompter.schema_text(schema, role)
    p = prompter.assemble(prompt, v, role=role, conversation=conversation, images=images)
    call = replace(ctx, ledger=[*p.ledger, *ctx.ledger])  # the caller's own entries (few-shot, ...) after
    return llm.complete(p.messages, role=role, ctx=call, schema=schema, validator=validator)


def with_images(prompt: Prompt, images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``prompt.messages`` with ``images`` placed as :func:`~ai_scientist.context.assemble.assemble`
    places them (which also counts them: prefer ``assemble(..., images=...)``)."""
    return _with_images(prompt.messages, prompt.sections.get("node_brief"), images)

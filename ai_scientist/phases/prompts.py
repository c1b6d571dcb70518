"""The pipeline's side of prompt assembly: phase instructions and response formats.

Which layers a prompt has is declared in :mod:`ai_scientist.context.spec`; this
adapter fills the two layers that belong to the calling phase —
``instructions`` (``prompt/phases/<prompt>.j2``) and ``response_format`` (the
JSON schema, plus the memory protocol when memory is on), gives the system layer the
run's persona (``agent.role_description``) — and hands the rest
to :func:`ai_scientist.context.assemble.assemble` with the target model's token
counter and budget.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..base.templates import render
from ..context.assemble import assemble
from ..context.budget import Budget
from ..context.tokens import TokenCounter, counter_for
from ..llm.negotiation import INSTRUCTED

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

# values every phase template may test without StrictUndefined tripping
_DEFAULTS = {
    "operation": "",
    "stage_name": "",
    "stage_idea": "",
    "step_info": "",
    "kind": "",
    "best_summary": "",
    "python": "/usr/bin/python3",
}


class PromptAdapter:
    """``build(prompt, values, node_id=..., role=...) -> (messages, ledger)``."""

    def __init__(self, cfg: Config, llm: LLMClient):
        self.cfg = cfg
        backend = getattr(llm, "backend", None)
        self._backend = backend
        self._count_fn = getattr(backend, "count_tokens", None)
        window = getattr(backend, "context_window", None)
        self.budget = Budget.from_config(cfg.context, window)
        self._counters: dict[str, TokenCounter] = {}
        self._memory_rules: str | None = None
        self._brief_templates: dict[str, str] = {}

    def counter(self, role: str) -> TokenCounter:
        model = self.cfg.model_for(role)
        if model not in self._counters:
            self._counters[model] = counter_for(model, self._count_fn)
        return self._counters[model]

    def _brief(self, prompt: str, values: dict[str, Any]) -> str:
        if prompt not in self._brief_templates:
            from ..base.templates import prompt_dir

            own = f"phases/{prompt}_brief.j2"
            self._brief_templates[prompt] = own if (prompt_dir() / own).exists() else "phases/_node.j2"
        return render(self._brief_templates[prompt], **values).strip()

    def schema_in_request(self, role: str) -> bool:
        """Whether the backend sends a structured call's schema in the request itself
        (``response_format`` json_schema, a grammar) rather than in the prompt text."""
        mode_fn = getattr(self._backend, "structured_mode", None)
        if mode_fn is None:
            return False
        return mode_fn(self.cfg.model_for(role)) not in INSTRUCTED

    def _schema_text(self, schema: dict[str, Any], role: str) -> str:
        """The response-format text: the full schema when it travels in the prompt (prompt-only
        modes), else a short pointer — the schema is in the request's ``response_format``, and
        repeating it would cost its tokens twice on every call."""
        from ..context.spec import layout

        if layout() != "legacy" and self.schema_in_request(role):
            return render("phases/response_format.j2", schema_json="", in_request=True)
        return render(
            "phases/response_format.j2",
            schema_json=json.dumps(schema, separators=(",", ":")),
            in_request=False,
        )

    def _memory_protocol(self) -> str:
        if self._memory_rules is None:
            from ..memory.protocol import protocol_instructions

            self._memory_rules = protocol_instructions(self.cfg.memory)
        return self._memory_rules

    def build(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        node_id: str,
        role: str = "code",
        conversation: list[dict[str, Any]] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # the persona (agent.role_description): one value per run, so every system message opens
        # with the same bytes
        v = {**_DEFAULTS, "role_description": self.cfg.agent.role_description, **values}
        schema = v.pop("response_schema", None)
        v["instructions"] = render(f"phases/{prompt}.j2", **v)
        # what this call is about: its own layer, last (the instructions above stay byte-stable)
        # (``phases/<prompt>_brief.j2`` adds what the node's operation asks, when the prompt has one)
        v.setdefault("node_brief", self._brief(prompt, v))
        fmt = []
        if schema is not None:
            fmt.append(self._schema_text(schema, role))
        if v.get("memory") is not None and self.cfg.memory.enabled:
            fmt.append(
                render(
                    "phases/memory_format.j2", structured=schema is not None, protocol=self._memory_protocol()
                )
            )
        if fmt:
            v["response_format"] = "\n\n".join(fmt)
        p = assemble(prompt, v, self.budget, self.counter(role), self.cfg.context, conversation=conversation)
        return p.messages, p.ledger

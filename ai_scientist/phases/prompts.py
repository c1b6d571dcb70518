"""The pipeline's side of prompt assembly: phase instructions and response formats.

Which layers a prompt has is declared in :mod:`ai_scientist.context.spec`; this
adapter fills the two layers that belong to the calling phase —
``instructions`` (``prompt/phases/<prompt>.j2``) and ``response_format`` (the
JSON schema, plus the memory protocol when memory is on), gives the system layer the
run's persona (``agent.role_description``) and the ``node_brief`` layer (what this call is
about) — and assembles the prompt with :class:`ai_scientist.llm.prompting.Prompter` (the
run's budget and the target model's token counter), the same assembler the run-level and
reporting calls use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.templates import prompt_dir, render
from ..llm.prompting import Prompter
from .schemas import MERGED_CODE_SCHEMA, REVIEW_METRICS_SCHEMA

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

# values every phase template may test without StrictUndefined tripping
_DEFAULTS = {
    "operation": "",
    "stage": 0,  # a search node's stage number: its brief states the stage's goal
    "stage_name": "",
    "stage_idea": "",
    "step_info": "",
    "kind": "",
    "best_summary": "",
    "siblings": "",
    "python": "/usr/bin/python3",
}


# the schema whose length limits a prompt's text states, so the response format is the same
# bytes for every call of the prompt (the prefix cache): a code call's schema varies (a child's
# answer adds its plan; edits and new packages are offered by call), a review's may parse the
# metrics. A field a call's schema lacks is one its answer does not write; the per-call extras
# (edits, new packages) keep their bounds in the schema only
_LIMITS_OF: dict[str, dict[str, Any]] = {
    "phase234_code": MERGED_CODE_SCHEMA,
    "exec_review": REVIEW_METRICS_SCHEMA,
}


class PromptAdapter(Prompter):
    """``build(prompt, values, node_id=..., role=...) -> (messages, ledger)``."""

    def __init__(self, cfg: Config, llm: LLMClient):
        super().__init__(cfg, llm)
        self._memory_rules: dict[bool, str] = {}
        self._brief_templates: dict[str, str] = {}

    def schema_as_grammar(self, role: str) -> bool:
        """Whether the backend turns a structured call's schema into a decoding grammar (the local
        model: ``native``), where an enum is what keeps a small model from inventing a name; a
        server's json_schema and the prompt-only modes leave such checks to the code."""
        mode_fn = getattr(self._backend, "structured_mode", None)
        return mode_fn is not None and mode_fn(self.cfg.model_for(role)) == "native"

    def _memory_protocol(self, structured: bool) -> str:
        """The memory protocol for the way this answer carries it, and only that way: the JSON
        answer's ``memory_update`` field (``structured``) or a ``<memory_update>`` block."""
        if structured not in self._memory_rules:
            m = self.cfg.memory
            self._memory_rules[structured] = render(
                "memory/protocol.j2",
                structured=structured,
                core_max_chars=m.core_max_chars,
                max_read_rounds=m.max_memory_read_rounds,
            ).strip()
        return self._memory_rules[structured]

    def _brief(self, prompt: str, values: dict[str, Any]) -> str:
        if prompt not in self._brief_templates:
            own = f"phases/{prompt}_brief.j2"
            self._brief_templates[prompt] = own if (prompt_dir() / own).exists() else "phases/_node.j2"
        return render(self._brief_templates[prompt], **values).strip()

    def build(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        node_id: str,
        role: str = "code",
        conversation: list[dict[str, Any]] | None = None,
        images: list[dict[str, Any]] | None = None,
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
            fmt.append(self.schema_text(schema, role, limits_of=_LIMITS_OF.get(prompt)))
        if v.get("memory") is not None and self.cfg.memory.enabled:
            fmt.append(self._memory_protocol(schema is not None))
        if fmt:
            v["response_format"] = "\n\n".join(fmt)
        p = self.assemble(prompt, v, role=role, conversation=conversation, images=images)
        return p.messages, p.ledger

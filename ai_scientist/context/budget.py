"""Prompt token budget: the ceiling a whole assembled prompt must stay under."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .tokens import TokenCounter

if TYPE_CHECKING:
    from ..base.config import ContextConfig

# When tokens are only estimated, keep this share of the budget free as a safety margin.
ESTIMATE_MARGIN = 0.10


class ContextBudgetError(ValueError):
    """The pinned layers alone do not fit the budget (the message says which and by how much)."""


@dataclass(frozen=True)
class Budget:
    """``max_tokens`` for the whole request (messages + framing) and where that limit came from."""

    max_tokens: int
    source: str = "context.max_prompt_tokens"

    @classmethod
    def from_config(cls, cfg_context: ContextConfig, model_context_window: int | None = None) -> Budget:
        """min(context.max_prompt_tokens, window - context.reserved_output_tokens).

        ``model_context_window`` (e.g. the local model's n_ctx) wins over
        ``context.model_context_window`` when both are given.
        """
        limit, source = int(cfg_context.max_prompt_tokens), "context.max_prompt_tokens"
        window = model_context_window or getattr(cfg_context, "model_context_window", None)
        if window:
            room = int(window) - int(cfg_context.reserved_output_tokens)
            if room < limit:
                limit = room
                source = f"model context window {window} - context.reserved_output_tokens"
        if limit <= 0:
            raise ContextBudgetError(
                f"no room for a prompt: {source} leaves {limit} tokens; raise the context window "
                "or lower context.reserved_output_tokens"
            )
        return cls(limit, source)

    def limit_for(self, counter: TokenCounter) -> int:
        """The usable ceiling with ``counter``: a margin is kept when counts are estimates."""
        if counter.exact:
            return self.max_tokens
        return int(self.max_tokens * (1 - ESTIMATE_MARGIN))

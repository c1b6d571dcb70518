"""Prompt token budget: the ceiling a whole assembled prompt must stay under.

The budget follows the model a call goes to (docs/context.md, "Budgets"): its context window
(the backend's own, e.g. the local model's n_ctx; else ``context.model_context_window``; else
the table below; else a conservative 8192) less the room kept for the answer (the larger of
``context.reserved_output_tokens`` and the calling role's ``max_tokens``), capped by the cost
policy ``context.budget_policy`` when ``context.max_prompt_tokens`` is ``auto``, or by that number
when it is one (an explicit int is a hard cap).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .tokens import TokenCounter

if TYPE_CHECKING:
    from ..base.config import ContextConfig

# When tokens are only estimated, keep this share of the budget free as a safety margin.
ESTIMATE_MARGIN = 0.10

# An unknown model with no configured window: assume a small one (llama-3 / smollm2 class) rather
# than overrun a server that would cut or reject the request.
DEFAULT_CONTEXT_WINDOW = 8192

# Cost policies for ``max_prompt_tokens: auto``: the most prompt tokens a call may use (None: the
# whole window less the answer). Bigger prompts cost money and time on every call of a run; 32k
# holds every layer of a node prompt uncut in the runs measured for issue 28.
BUDGET_POLICIES: dict[str, int | None] = {"economy": 12_000, "balanced": 32_000, "full": None}

# Context windows (tokens) by model name, first match wins; matched against the lower-cased name
# without its provider prefix ("openai/gpt-4o" -> "gpt-4o", "Qwen/Qwen2.5-7B" -> "qwen2.5-7b").
MODEL_WINDOWS: tuple[tuple[str, int], ...] = (
    (r"^(gpt-4o|chatgpt-4o)", 128_000),
    (r"^gpt-4\.1", 1_047_576),
    (r"^gpt-4\.5", 128_000),
    (r"^gpt-5", 400_000),
    (r"^gpt-4-(turbo|1106|0125)", 128_000),
    (r"^gpt-4-32k", 32_768),
    (r"^gpt-4", 8_192),
    (r"^gpt-3\.5", 16_385),
    (r"^o1-(mini|preview)", 128_000),
    (r"^(o1|o3|o4)", 200_000),
    (r"^claude", 200_000),
    (r"^gemini-1\.0", 32_760),
    (r"^gemini", 1_048_576),
    (r"^(meta-)?llama-?3\.[1-9]", 128_000),
    (r"^(meta-)?llama-?3", 8_192),
    (r"^qwen", 32_768),
    (r"^(mistral-(large|medium|small-3|nemo)|ministral|codestral)", 128_000),
    (r"^(mistral|mixtral)", 32_768),
    (r"^smollm2", 8_192),
    (r"^gemma-?3", 32_768),
)


def known_window(model: str | None) -> int | None:
    """The context window the table gives for ``model``, or None when it is not listed."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]
    for pattern, window in MODEL_WINDOWS:
        if re.match(pattern, name):
            return window
    return None


class ContextBudgetError(ValueError):
    """The pinned layers alone do not fit the budget (the message says which and by how much)."""


@dataclass(frozen=True)
class Budget:
    """``max_tokens`` for the whole request (messages + framing + images) and where that limit came
    from (``source``: the prompt log's ``budget`` ledger entry gives it as its reason)."""

    max_tokens: int
    source: str = "context.max_prompt_tokens"

    @classmethod
    def from_config(
        cls,
        cfg_context: ContextConfig,
        model_context_window: int | None = None,
        *,
        model: str | None = None,
        output_tokens: int | None = None,
    ) -> Budget:
        """The budget of a call to ``model`` whose answer may take ``output_tokens`` (the role's
        ``max_tokens``; see the module doc).

        ``model_context_window`` (what the backend reports, e.g. the local model's n_ctx) wins over
        ``context.model_context_window``, which wins over the table for ``model``.
        """
        # the answer shares the window: a local 8192-token model asked for 2048 keeps 2048 free
        reserve = max(int(cfg_context.reserved_output_tokens), int(output_tokens or 0))
        what = "reserved_output_tokens" if reserve == cfg_context.reserved_output_tokens else "max_tokens"
        window, where = model_window(cfg_context, model_context_window, model)
        cap = cfg_context.max_prompt_tokens
        if cap == "auto":
            if window is None:
                window, where = DEFAULT_CONTEXT_WINDOW, f"default window {DEFAULT_CONTEXT_WINDOW}"
            policy = getattr(cfg_context, "budget_policy", "balanced")
            limit = window - reserve
            source = f"auto ({policy}): {where} - {what} {reserve}"
            policy_cap = BUDGET_POLICIES[policy]
            if policy_cap is not None and policy_cap < limit:
                limit, source = policy_cap, f"auto ({policy}): policy cap {policy_cap}, under {where}"
        else:
            # an explicit number is a hard cap, lowered only by a window that is known
            limit, source = int(cap), "context.max_prompt_tokens"
            if window is not None and window - reserve < limit:
                limit = window - reserve
                source = f"{where} - {what} {reserve}"
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


def model_window(
    cfg_context: ContextConfig, backend_window: int | None, model: str | None
) -> tuple[int | None, str]:
    """The model's context window and where it came from: the backend's own, else
    ``context.model_context_window``, else the table; (None, "") when none says."""
    if backend_window:
        return int(backend_window), f"backend window {int(backend_window)}"
    configured = getattr(cfg_context, "model_context_window", None)
    if configured:
        return int(configured), f"context.model_context_window {int(configured)}"
    table = known_window(model)
    if table is not None:
        return table, f"{model} window {table}"
    return None, ""


# the roles whose answer is a whole program, plotting script or paper: a capable model with a
# large window was told "cut off after 4,096 tokens" for a 17 kB C program and its analysis (relay
# s8 mm 005), so these get more room when the window allows it
LONG_ANSWER_ROLES = ("code", "plotting", "writeup")
LONG_ANSWER_FLOOR = 4096  # a role configured below this keeps its own limit
LONG_ANSWER_SHARE = 8  # at most an eighth of the window


def answer_tokens(cfg: Any, role: str, backend_window: int | None) -> int:
    """The ``max_tokens`` a call by ``role`` is sent with: the role's ``max_tokens``, raised for
    :data:`LONG_ANSWER_ROLES` configured at :data:`LONG_ANSWER_FLOOR` or more to
    ``min(context.long_answer_tokens, window / 8)`` when the model's window is known and that is
    more (gpt-4o-mini's 128,000: 16,000; a local 8,192-token model keeps its 4,096)."""
    base = int(cfg.role(role).max_tokens)
    cap = int(cfg.context.long_answer_tokens)
    if role not in LONG_ANSWER_ROLES or not cap or base < LONG_ANSWER_FLOOR:
        return base
    window, _ = model_window(cfg.context, backend_window, cfg.model_for(role))
    if not window:
        return base
    return max(base, min(cap, window // LONG_ANSWER_SHARE))

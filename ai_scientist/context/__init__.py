"""Layered prompt assembly under token budgets (see docs/context.md).

Public API used by the pipeline::

    from ai_scientist.context import assemble, Budget, counter_for, next_state, state_op_for
"""

from __future__ import annotations

from ..base.templates import TemplateError, render
from .assemble import ContextAssemblyError, Prompt, assemble
from .budget import Budget, ContextBudgetError
from .history import orphaned_tool_results, prune_messages
from .json_preview import PreviewParams, preview_json
from .layer import Layer
from .ledger import LedgerEntry
from .policies import LAYER_POLICIES, PolicyParams, get_layer_policy
from .reasoning import strip_reasoning
from .spec import LAYERS, PROMPTS, layers_for
from .state import STATE_OPS, next_state, state_op_for
from .tokens import TokenCounter, counter_for

__all__ = [
    "LAYERS",
    "LAYER_POLICIES",
    "PROMPTS",
    "STATE_OPS",
    "Budget",
    "ContextAssemblyError",
    "ContextBudgetError",
    "Layer",
    "LedgerEntry",
    "PolicyParams",
    "PreviewParams",
    "Prompt",
    "TemplateError",
    "TokenCounter",
    "assemble",
    "counter_for",
    "get_layer_policy",
    "layers_for",
    "next_state",
    "orphaned_tool_results",
    "preview_json",
    "prune_messages",
    "render",
    "state_op_for",
    "strip_reasoning",
]

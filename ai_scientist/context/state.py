"""Cumulative vs replacement node state (seed 000), declared per node operation.

A node's state (``nodes/<id>/state.md``) is what its children's ``history``
layer is made from. Some operations *append* their result to the inherited
state, others *replace* it with a fresh one:

=========  =======  ==========================================================
operation  op       why
=========  =======  ==========================================================
draft      replace  a new approach: nothing inherited applies (seed's DECOMPOSE)
debug      append   the failed attempt and its error are exactly what the fix
                    needs; a debug chain must remember what was already tried
improve    replace  refines a working node into a better one: the summary of
                    the improved result supersedes the path (seed's REFINE),
                    which keeps improve chains from growing without bound
tune       append   hyper-parameter trials accumulate so none is repeated
ablate     append   each ablation adds a finding to the study
seed_eval  append   a re-run with another seed adds a measurement, loses nothing
=========  =======  ==========================================================

Reasoning is stripped from every summary before it enters a state.
"""

from __future__ import annotations

from typing import Literal

from ..base.templates import render
from .reasoning import strip_reasoning

StateOp = Literal["append", "replace"]

STATE_OPS: dict[str, StateOp] = {
    "draft": "replace",
    "debug": "append",
    "improve": "replace",
    "tune": "append",
    "ablate": "append",
    "seed_eval": "append",
}
_HEADINGS = {
    "draft": "Draft",
    "debug": "Debug",
    "improve": "Improvement",
    "tune": "Hyper-parameter tuning",
    "ablate": "Ablation",
    "seed_eval": "Seed evaluation",
}


def state_op_for(operation: str) -> StateOp:
    """Whether ``operation`` appends to or replaces the inherited state (unknown ops: error)."""
    try:
        return STATE_OPS[operation]
    except KeyError:
        raise ValueError(f"unknown node operation {operation!r}; known: {', '.join(STATE_OPS)}") from None


def next_state(parent_state: str | None, operation: str, response_summary: str) -> tuple[str, StateOp]:
    """The child's state text and the op used; thinking is removed from the summary.

    ``append`` keeps the parent state byte for byte as a prefix; ``replace`` starts
    over from the summary alone. A root node (no parent state) appends to nothing.
    """
    op = state_op_for(operation)
    summary, _ = strip_reasoning(response_summary or "")
    parent = (parent_state or "").rstrip()
    text = render(
        "context/state_entry.j2",
        op=op if parent else "replace",
        heading=_HEADINGS[operation],
        summary=summary.strip(),
        parent_state=parent,
    )
    return text + "\n", op

"""Reasoning stripping for prompt layers: thinking never reaches a later prompt (the log keeps it).

The rules live in one place, :func:`ai_scientist.base.reasoning.strip_reasoning` (``<think>``,
``<thinking>``, ``<reasoning>`` pairs, unclosed opening tags, orphan closing tags); this module
applies them to layer values, including strings nested in lists and dicts and a message's
``reasoning_content`` field.
"""

from __future__ import annotations

from typing import Any

from ..base.reasoning import strip_reasoning

__all__ = ["strip_reasoning", "strip_value"]


def strip_value(value: Any) -> tuple[Any, int]:
    """Strip thinking from a string, or from every string inside lists/dicts.

    Returns the cleaned value and how many characters of thinking were removed.
    A dict's ``reasoning_content`` key is dropped (and counted).
    """
    if isinstance(value, str):
        clean, reasoning = strip_reasoning(value)
        if not reasoning and clean == value.strip():
            return value, 0  # nothing to strip: leave the text byte for byte
        return clean, len(value) - len(clean)
    if isinstance(value, list):
        out, removed = [], 0
        for item in value:
            c, n = strip_value(item)
            out.append(c)
            removed += n
        return out, removed
    if isinstance(value, dict):
        out_d, removed = {}, 0
        for k, v in value.items():
            if k == "reasoning_content":
                removed += len(str(v or ""))
                continue
            c, n = strip_value(v)
            out_d[k] = c
            removed += n
        return out_d, removed
    return value, 0

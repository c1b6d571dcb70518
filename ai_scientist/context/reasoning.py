"""Reasoning stripping: thinking text never reaches a later prompt (the prompt log keeps it).

Uses ``ai_scientist.llm.reasoning.strip_reasoning`` when that module exists so
the LLM client and the context layers agree on one definition; otherwise the
local implementation below applies the same rules:

* ``<think>…</think>``, ``<thinking>…</thinking>``, ``<reasoning>…</reasoning>``
  (any case, any attributes) are removed;
* an opening tag never closed (the model ran out of tokens while thinking)
  removes everything from the tag to the end;
* a closing tag with no opening tag (templates that pre-open ``<think>``)
  removes everything before it;
* a message's ``reasoning_content`` field is dropped.
"""

from __future__ import annotations

import re
from typing import Any

_TAGS = r"(?:think|thinking|reasoning)"
_PAIR = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>(.*?)</\1\s*>", re.I | re.S)
_OPEN = re.compile(rf"<{_TAGS}(?:\s[^>]*)?>", re.I)
_CLOSE = re.compile(rf"</{_TAGS}\s*>", re.I)


def _local_strip(text: str) -> tuple[str, str]:
    reasoning: list[str] = []

    def take(m: re.Match[str]) -> str:
        reasoning.append(m.group(2).strip())
        return ""

    clean = _PAIR.sub(take, text)
    closes = list(_CLOSE.finditer(clean))
    if closes:
        close = closes[-1]  # orphan closing tag: everything before it was thinking
        reasoning.insert(0, _CLOSE.sub("", clean[: close.start()]).strip())
        clean = clean[close.end() :]
    opened = _OPEN.search(clean)
    if opened is not None:  # unclosed opening tag: the rest is thinking
        reasoning.append(clean[opened.end() :].strip())
        clean = clean[: opened.start()]
    return clean.strip(), "\n\n".join(r for r in reasoning if r)


try:  # one definition for the whole project when the LLM layer provides it
    from ai_scientist.llm.reasoning import strip_reasoning as _strip  # type: ignore[attr-defined]
except ImportError:
    _strip = _local_strip


def strip_reasoning(text: str) -> tuple[str, str]:
    """(text without thinking, the thinking removed); ``clean`` has no thinking tag left."""
    clean, reasoning = _strip(text)
    if _OPEN.search(clean) or _CLOSE.search(clean):  # belt and braces across implementations
        clean, more = _local_strip(clean)
        reasoning = "\n\n".join(r for r in (reasoning, more) if r)
    return clean, reasoning


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

"""Separating a model's thinking from its answer.

``strip_reasoning(text) -> (clean, reasoning)`` applies these rules, in order:

1. ``<think>…</think>``, ``<thinking>…</thinking>`` and ``<reasoning>…</reasoning>``
   (any letter case, attributes allowed) are removed; their contents become reasoning.
2. A closing tag with no opening tag (chat templates that pre-open ``<think>`` so the
   model's output starts inside its thinking) makes everything before the last such
   tag reasoning.
3. An opening tag that is never closed (the model ran out of tokens while thinking)
   makes everything from the tag to the end reasoning: text after an unclosed tag
   cannot be told apart from thinking, and leaking thinking into later prompts is
   the worse mistake.

Text with no tag at all is returned unchanged (byte for byte) with reasoning ``""``;
otherwise ``clean`` is whitespace-trimmed and holds no thinking tag. Pieces of
reasoning are joined with blank lines. The client uses this for ``LLMResult.text``
and the context layer reuses it as its thinking-stripping policy.
"""

from __future__ import annotations

import re

_TAGS = r"(?:think|thinking|reasoning)"
_PAIR = re.compile(rf"<({_TAGS})(?:\s[^>]*)?>(.*?)</\1\s*>", re.I | re.S)
_OPEN = re.compile(rf"<{_TAGS}(?:\s[^>]*)?>", re.I)
_CLOSE = re.compile(rf"</{_TAGS}\s*>", re.I)
_ANY = re.compile(rf"</?{_TAGS}(?:\s[^>]*)?>", re.I)


def strip_reasoning(text: str) -> tuple[str, str]:
    """Return ``(clean_text, reasoning_text)``; see the module docstring for the rules."""
    if not text or not _ANY.search(text):
        return text, ""
    pieces: list[str] = []

    def take(match: re.Match[str]) -> str:
        pieces.append(match.group(2).strip())
        return ""

    clean = _PAIR.sub(take, text)
    closes = list(_CLOSE.finditer(clean))
    if closes:  # orphan closing tag(s): everything before the last one was thinking
        last = closes[-1]
        pieces.insert(0, _ANY.sub("", clean[: last.start()]).strip())
        clean = clean[last.end() :]
    opened = _OPEN.search(clean)
    if opened is not None:  # unclosed opening tag: the rest is thinking
        pieces.append(_ANY.sub("", clean[opened.end() :]).strip())
        clean = clean[: opened.start()]
    return clean.strip(), "\n\n".join(p for p in pieces if p)


def join_reasoning(*parts: str | None) -> str | None:
    """Join reasoning pieces (server-reported and inline); None when there is none."""
    text = "\n\n".join(p for p in parts if p)
    return text or None

"""Duplicate ideas: the same name, or titles that say the same thing in nearly the same words.

Pure functions. Two ideas are duplicates when their ``Name`` slugs are equal,
or their titles' content words overlap by ``TITLE_JACCARD`` or more, or the
titles differ only by a few characters (``TITLE_RATIO``).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any

from .schema import slug_name

TITLE_JACCARD = 0.8
TITLE_RATIO = 0.92
_STOP = frozenset("a an and as at by for from in into is of on or the to via with without".split())


def _words(title: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9]+", title.lower()) if w not in _STOP)


def duplicate_of(idea: dict[str, Any], others: list[dict[str, Any]]) -> tuple[int, str] | None:
    """(index in ``others``, reason) of the first idea ``idea`` repeats, or None."""
    name = slug_name(str(idea.get("Name") or idea.get("Title") or ""))
    title = " ".join(str(idea.get("Title") or "").lower().split())
    words = _words(title)
    for i, other in enumerate(others):
        if not isinstance(other, dict):
            continue
        if name == slug_name(str(other.get("Name") or other.get("Title") or "")):
            return i, f"same Name {name!r}"
        o_title = " ".join(str(other.get("Title") or "").lower().split())
        o_words = _words(o_title)
        if words and o_words and len(words & o_words) / len(words | o_words) >= TITLE_JACCARD:
            return i, f"title repeats {other.get('Title')!r}"
        if title and o_title and SequenceMatcher(None, title, o_title).ratio() >= TITLE_RATIO:
            return i, f"title nearly equal to {other.get('Title')!r}"
    return None

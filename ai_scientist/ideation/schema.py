"""The ideation answer: one JSON object with an ``action`` (search / finalize) and the draft idea.

Every round the model returns its current draft together with the action it
takes next, so a draft always exists even when the rounds run out. Every
string and array is bounded (``maxLength`` / ``maxItems``): a model cannot
stream an unbounded answer, and the local grammar stays finite.
"""

from __future__ import annotations

import re
from typing import Any

# AI-Scientist-v2 idea keys, in its order
V2_KEYS = (
    "Name",
    "Title",
    "Short Hypothesis",
    "Related Work",
    "Abstract",
    "Experiments",
    "Risk Factors and Limitations",
)
EVIDENCE_KEY = "Novelty Evidence"  # ours: the literature behind the idea (idea.py keeps it as a section)
ACTIONS = ("search", "finalize")


def _text(n: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": n}


def _list(items: int, n: int) -> dict[str, Any]:
    return {"type": "array", "items": _text(n), "minItems": 1, "maxItems": items}


IDEA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "Name": _text(60),
        "Title": _text(200),
        "Short Hypothesis": _text(800),
        "Related Work": _text(1500),
        "Abstract": _text(2000),
        "Experiments": _list(6, 600),
        "Risk Factors and Limitations": _list(6, 400),
    },
    "required": list(V2_KEYS),
    "additionalProperties": False,
}

ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": _text(1000),
        "action": {"type": "string", "enum": list(ACTIONS)},
        "query": _text(300),
        "idea": IDEA_SCHEMA,
    },
    "required": ["thought", "action", "query", "idea"],
    "additionalProperties": False,
}


def slug_name(text: str) -> str:
    """v2's ``Name``: lower case, digits and underscores only."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "idea"


def to_v2(draft: dict[str, Any]) -> dict[str, Any]:
    """The draft as a v2 idea: keys in v2 order, text stripped, ``Name`` made a slug."""
    idea: dict[str, Any] = {}
    for key in V2_KEYS:
        value = draft.get(key)
        if isinstance(value, list):
            idea[key] = [str(x).strip() for x in value if str(x).strip()]
        else:
            idea[key] = str(value or "").strip()
    idea["Name"] = slug_name(idea["Name"] or idea["Title"])
    return idea


def check_v2(idea: Any) -> list[str]:
    """Problems of ``idea`` as an AI-Scientist-v2 idea (empty when valid)."""
    if not isinstance(idea, dict):
        return ["an idea must be a JSON object"]
    problems = []
    for key in V2_KEYS:
        value = idea.get(key)
        if isinstance(value, list):
            if not value or not all(isinstance(x, str) and x.strip() for x in value):
                problems.append(f"{key}: must be a non-empty list of non-empty strings")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"{key}: missing or empty")
    if isinstance(idea.get("Name"), str) and not re.fullmatch(r"[a-z0-9_]+", idea["Name"]):
        problems.append("Name: only lower-case letters, digits and underscores")
    return problems


def check_answer(answer: Any) -> None:
    """The LLM client's ``validator`` for an ideation answer: raises ValueError naming what is
    wrong (an empty idea field, a search without a query), which goes back in the repair round."""
    problems = [f"idea.{p}" for p in check_v2(to_v2(answer.get("idea") or {}))]
    if answer.get("action") == "search" and not str(answer.get("query") or "").strip():
        problems.append('query: "search" needs a query (or choose "finalize")')
    if problems:
        raise ValueError("; ".join(problems))

"""The length limits of a JSON schema, said in words for the response-format text.

A backend that constrains the answer by its schema (llama.cpp's grammar) enforces ``maxLength`` /
``maxItems``; most servers do not, and a model that never reads the schema's bounds (a capable
model given only the request's text) writes past them and the answer fails validation. So the
text states them, generated from the schema itself: one source, never two numbers that drift.
"""

from __future__ import annotations

from typing import Any

# described elsewhere (the memory protocol states its own bounds) or no answer field of its own
SKIPPED = frozenset({"memory_update"})


# a bound the text states: prose a model writes at length (a summary, a plan, a list of risks or
# commands); not names and ids (under 200 characters, never near their bound), nor a file's content
# (60,000), nor the item counts of lists of objects
PROSE_MIN, PROSE_MAX = 200, 20_000


def _limit(schema: dict[str, Any]) -> str | None:
    """A field's own bound: ``500`` (a string), ``8x200`` (a list of bounded strings); None when
    unbounded or outside the prose range."""
    kind = schema.get("type")
    if kind == "string":
        n = schema.get("maxLength")
        return str(n) if isinstance(n, int) and PROSE_MIN <= n <= PROSE_MAX else None
    if kind == "array":
        raw = schema.get("items")
        items: dict[str, Any] = raw if isinstance(raw, dict) else {}
        each = items.get("maxLength") if items.get("type") == "string" else None
        if not isinstance(each, int) or not PROSE_MIN <= each <= PROSE_MAX:
            return None
        n = schema.get("maxItems")
        return f"{n}x{each}" if n is not None else f"any x {each}"
    return None


def _walk(schema: dict[str, Any], path: str, out: list[tuple[str, str, str]]) -> None:
    for name, sub in (schema.get("properties") or {}).items():
        if name in SKIPPED or not isinstance(sub, dict):
            continue
        where = f"{path}.{name}" if path else name
        limit = _limit(sub)
        if limit:
            out.append((path, where, limit))
        items = sub.get("items") if sub.get("type") == "array" else None
        if isinstance(items, dict) and items.get("properties"):
            _walk(items, f"{where}[]", out)
        elif sub.get("properties"):
            _walk(sub, where, out)


def field_limits(schema: dict[str, Any] | None) -> str:
    """``"findings 500, remarks 400, phase_guidance.* 400, ideas 8x200"``: every bounded prose
    field of ``schema`` (strings, characters; lists of strings, items x characters) by its path, in
    the schema's order, three or more siblings with one bound as ``parent.*``; "" when none."""
    found: list[tuple[str, str, str]] = []
    if isinstance(schema, dict):
        _walk(schema, "", found)
    out: list[str] = []
    i = 0
    while i < len(found):
        parent, _, limit = found[i]
        j = i
        while j < len(found) and found[j][0] == parent and found[j][2] == limit:
            j += 1
        if parent and j - i >= 3:
            out.append(f"{parent}.* {limit}")
        else:
            out += [f"{where} {lim}" for _, where, lim in found[i:j]]
        i = j
    return ", ".join(out)

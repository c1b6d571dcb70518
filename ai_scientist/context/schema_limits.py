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


def _limit(schema: dict[str, Any]) -> str | None:
    """A field's own bound: ``500`` (a string), ``8x200`` (a list of bounded strings), ``50
    items`` (a list of anything else); None when unbounded."""
    kind = schema.get("type")
    if kind == "string":
        return str(schema["maxLength"]) if "maxLength" in schema else None
    if kind == "array":
        raw = schema.get("items")
        items: dict[str, Any] = raw if isinstance(raw, dict) else {}
        n = schema.get("maxItems")
        each = items.get("maxLength") if items.get("type") == "string" else None
        if n is not None and each is not None:
            return f"{n}x{each}"
        if each is not None:
            return f"any x {each}"
        return f"{n} items" if n is not None else None
    return None


def _walk(schema: dict[str, Any], path: str, out: list[str]) -> None:
    for name, sub in (schema.get("properties") or {}).items():
        if name in SKIPPED or not isinstance(sub, dict):
            continue
        where = f"{path}.{name}" if path else name
        limit = _limit(sub)
        if limit:
            out.append(f"{where} {limit}")
        items = sub.get("items") if sub.get("type") == "array" else None
        if isinstance(items, dict) and items.get("properties"):
            _walk(items, f"{where}[]", out)
        elif sub.get("properties"):
            _walk(sub, where, out)


def field_limits(schema: dict[str, Any] | None) -> str:
    """``"findings 500, remarks 400, ideas 8x200, files 50 items, files[].path 200"``: every
    bounded string (characters) and list (items x characters) of ``schema`` by its path, in the
    schema's order; "" when nothing is bounded."""
    out: list[str] = []
    if isinstance(schema, dict):
        _walk(schema, "", out)
    return ", ".join(out)

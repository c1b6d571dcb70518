"""Structured answers: find the JSON in a model's text, validate it, word the repair request.

Pure functions. ``parse_answer`` tolerates code fences and prose around the JSON;
``validate_answer`` checks the JSON schema (``jsonschema``) and then the caller's
``validator``. Both raise :class:`AnswerError` whose message is precise enough to
send back to the model in the one repair round (line/column and a snippet for
parse errors; the JSON path for schema errors).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
from jsonschema.exceptions import relevance
from jsonschema.validators import validator_for

from ..base.templates import render
from .call import Message

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n?(.*?)```", re.S)
_MAX_CANDIDATES = 20
_SNIPPET = 60


class AnswerError(ValueError):
    """The answer is not usable JSON; the message says exactly why and where."""


def _snippet(text: str, pos: int) -> str:
    start = max(0, pos - _SNIPPET // 2)
    piece = text[start : pos + _SNIPPET // 2].replace("\n", "\\n")
    return f"...{piece}..." if start > 0 or pos + _SNIPPET // 2 < len(text) else piece


def _describe_decode_error(exc: json.JSONDecodeError, where: str) -> str:
    return (
        f"invalid JSON {where}: {exc.msg} at line {exc.lineno} column {exc.colno} "
        f"(near: {_snippet(exc.doc, exc.pos)!r})"
    )


def parse_answer(text: str) -> Any:
    """The JSON value in ``text``: whole text, else a fenced block, else the first ``{``/``[`` value.

    Raw control characters inside strings (a literal newline in a code string, which models and
    llama.cpp grammars produce) are accepted (``strict=False``).
    Raises :class:`AnswerError` naming the first parse error of the most likely candidate.
    """
    stripped = text.strip()
    if not stripped:
        raise AnswerError("the answer is empty; a JSON value was expected")
    try:
        return json.loads(stripped, strict=False)
    except json.JSONDecodeError as exc:
        first_error = _describe_decode_error(exc, "in the answer")
    fences = [m.group(1).strip() for m in _FENCE.finditer(stripped)]
    for block in fences:
        try:
            return json.loads(block, strict=False)
        except json.JSONDecodeError as exc:
            first_error = _describe_decode_error(exc, "inside the ``` code block")
            break
    decoder = json.JSONDecoder(strict=False)
    starts = [m.start() for m in re.finditer(r"[\[{]", stripped)][:_MAX_CANDIDATES]
    for i, start in enumerate(starts):
        try:
            value, _ = decoder.raw_decode(stripped, start)
            return value
        except json.JSONDecodeError as exc:
            if i == 0 and not fences:
                first_error = _describe_decode_error(exc, "starting at the first '{' or '['")
    if not starts and not fences:
        raise AnswerError(f"no JSON object or array found in the answer (it begins: {stripped[:80]!r})")
    raise AnswerError(first_error)


def _json_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def check_schema(schema: dict[str, Any]) -> None:
    """Raise ValueError when ``schema`` itself is not a valid JSON schema (a caller bug)."""
    key = json.dumps(schema, sort_keys=True)
    if key in _CHECKED:  # the same few schemas come back on every call
        return
    try:
        validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"invalid JSON schema given to the LLM client: {exc.message}") from None
    if len(_CHECKED) < 256:
        _CHECKED.add(key)


_CHECKED: set[str] = set()


def _error_text(error: jsonschema.ValidationError) -> str:
    """``at PATH: MESSAGE (DESCRIPTION)``; an ``anyOf``/``oneOf`` failure names why each
    alternative failed (jsonschema alone says only "is not valid under any of the given schemas")."""
    text = f"at {_json_path(error.absolute_path)}: {error.message}{_described(error)}"
    if error.validator in ("anyOf", "oneOf") and error.context:
        by_option: dict[int, list[jsonschema.ValidationError]] = {}
        for sub in error.context:
            by_option.setdefault(int(sub.schema_path[0]), []).append(sub)
        why = []
        for option, subs in sorted(by_option.items()):
            best = sorted(subs, key=relevance, reverse=True)[0]
            why.append(f"option {option + 1}: at {_json_path(best.absolute_path)}: {best.message}")
        text += " — " + "; ".join(why)
    return text


def _described(error: jsonschema.ValidationError) -> str:
    """The failing schema's own ``description`` (why the rule is there), when it has one."""
    desc = error.schema.get("description") if isinstance(error.schema, dict) else None
    return f" ({str(desc)[:200]})" if desc else ""


def validate_answer(
    value: Any,
    schema: dict[str, Any] | None,
    validator: Callable[[Any], Any] | None = None,
) -> None:
    """Raise :class:`AnswerError` if ``value`` breaks ``schema`` (up to 3 errors named by path)
    or if ``validator(value)`` raises ValueError."""
    if schema is not None:
        checker = validator_for(schema)(schema)
        errors = sorted(checker.iter_errors(value), key=relevance, reverse=True)  # most relevant first
        if errors:
            parts = [_error_text(e) for e in errors[:3]]
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise AnswerError("the JSON does not match the schema: " + "; ".join(parts) + more)
    if validator is not None:
        try:
            validator(value)
        except ValueError as exc:
            raise AnswerError(f"the JSON is not acceptable: {exc}") from None


def with_schema_instruction(messages: list[Message], schema: dict[str, Any]) -> list[Message]:
    """A copy of ``messages`` whose last user message ends with the prompt-mode JSON instruction.

    Appending to the last user message (not adding a new one) keeps user/assistant
    alternation, which some chat templates require.
    """
    instruction = render("llm/json_instruction.j2", schema=schema)
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                m["content"] = [*content, {"type": "text", "text": instruction}]
            else:
                m["content"] = f"{content or ''}\n\n{instruction}" if content else instruction
            return out
    return [*out, {"role": "user", "content": instruction}]


def repair_messages(
    messages: list[Message], raw_answer: str, error: str, *, schema_in_prompt: bool
) -> list[Message]:
    """``messages`` + the unusable answer (assistant) + the repair request naming ``error`` (user)."""
    request = render("llm/repair.j2", error=error, schema_in_prompt=schema_in_prompt)
    return [*messages, {"role": "assistant", "content": raw_answer}, {"role": "user", "content": request}]

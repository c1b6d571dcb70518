"""The one jinja2 environment over the prompt templates.

Every template is rendered with ``StrictUndefined``: a variable the caller did
not pass is an error naming the template, never silently blank text. The
templates live in the package (``ai_scientist/prompt``, which the repository's
top-level ``prompt/`` links to), so a plain ``pip install`` ships them;
``AI_SCIENTIST_PROMPT_DIR`` points elsewhere.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PACKAGED_PROMPTS = Path(__file__).resolve().parent.parent / "prompt"


class TemplateError(ValueError):
    """A prompt template is missing or needs a value the caller did not give."""


def prompt_dir() -> Path:
    """Where prompt templates live (``AI_SCIENTIST_PROMPT_DIR`` overrides the packaged ones)."""
    override = os.environ.get("AI_SCIENTIST_PROMPT_DIR")
    if override:
        return Path(override)
    return PACKAGED_PROMPTS


def as_text(value: Any) -> str:
    """Strings as they are; any other JSON-able value as indented JSON (stable key order)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@lru_cache(maxsize=4)
def _environment(root: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["as_text"] = as_text
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
    # JSON on one line (as ``phases.base.short_json`` renders a node's outputs): what a model
    # answered, shown again in a later prompt, pays no tokens for indentation
    env.filters["tojson_line"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env


def render(name: str, **values: Any) -> str:
    """Render ``prompt/<name>`` with ``values``; leading/trailing whitespace is removed."""
    root = prompt_dir()
    try:
        template = _environment(str(root)).get_template(name)
    except jinja2.TemplateNotFound:
        raise TemplateError(f"prompt template {name!r} not found under {root}") from None
    try:
        return template.render(**values).strip()
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"prompt template {name!r}: {exc.message}; pass that value") from None

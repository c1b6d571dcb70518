"""Loads the reporting prompt templates from ``prompt/reporting/`` (jinja2).

Python decides which template and which values; the words live in the files.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPT_DIR = Path(__file__).resolve().parents[1] / "prompt" / "reporting"


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPT_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
    return env


def render(name: str, **values: Any) -> str:
    """Render ``prompt/reporting/<name>``; a missing variable is an error, not blank text."""
    return _env().get_template(name).render(**values).strip() + "\n"


def messages(system_template: str, user_template: str, **values: Any) -> list[dict[str, Any]]:
    """A two-message chat (system + user) from two templates sharing ``values``."""
    return [
        {"role": "system", "content": render(system_template, **values)},
        {"role": "user", "content": render(user_template, **values)},
    ]

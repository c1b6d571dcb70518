"""Loads the reporting prompt templates from ``prompt/reporting/`` (base/templates.py's environment).

Python decides which template and which values; the words live in the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base.templates import render as _render

# the LaTeX templates (copied, not rendered) live here; the prompt templates are found through
# base/templates.py like every other prompt, so ``AI_SCIENTIST_PROMPT_DIR`` overrides them too
PROMPT_DIR = Path(__file__).resolve().parents[1] / "prompt" / "reporting"


def render(name: str, **values: Any) -> str:
    """Render ``prompt/reporting/<name>``; a missing variable is an error, not blank text."""
    return _render(f"reporting/{name}", **values) + "\n"


def messages(system_template: str, user_template: str, **values: Any) -> list[dict[str, Any]]:
    """A two-message chat (system + user) from two templates sharing ``values``."""
    return [
        {"role": "system", "content": render(system_template, **values)},
        {"role": "user", "content": render(user_template, **values)},
    ]

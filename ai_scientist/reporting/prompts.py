"""Loads the reporting prompt templates from ``prompt/reporting/`` (base/templates.py's environment).

Python decides which template and which values; the words live in the files. The messages of a
call are assembled by ``llm.prompting.ask`` from the layers of ``context.spec.PROMPTS``.
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

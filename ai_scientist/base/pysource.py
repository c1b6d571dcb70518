"""Parsing a generated Python program without letting it take the orchestrator down.

A node's program is hostile input: ``ast.parse`` of ``return ------...X`` (100,000 unary
minuses) or of deeply nested brackets raises ``MemoryError`` / ``RecursionError``, not
``SyntaxError``, and the readers of a program (its parameters, components, data constants, a
plotting script's file names) caught only the latter.
"""

from __future__ import annotations

import ast


def parse_python(text: str) -> ast.Module | None:
    """``ast.parse(text)``, or None when the text is no Python the parser can hold (a syntax
    error, a NUL byte, nesting past the parser's limits)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None

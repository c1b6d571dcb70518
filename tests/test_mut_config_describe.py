"""A config error shows a long text value by its start (base/config.py ``_describe``), at the exact
limit: the repr up to 120 characters whole, longer ones as their first 80 and the value's length.
Survivors of ``scripts/mutation.sh base/config.py`` at 6bf777b (the limit and the cut untested)."""

from __future__ import annotations

from ai_scientist.base.config import _describe


def describe(value: str) -> str:
    return _describe({"loc": ("idea", "title"), "type": "string_type", "msg": "bad text", "input": value})


def test_a_value_whose_repr_is_120_characters_is_shown_whole():
    value = "v" * 118  # repr adds the two quotes: 120
    assert len(repr(value)) == 120
    assert describe(value) == f"idea.title: bad text, got {value!r}"


def test_a_longer_value_shows_its_first_80_characters_and_its_length():
    value = "w" * 119  # repr: 121
    assert describe(value) == f"idea.title: bad text, got {repr(value)[:80]}... (119 characters)"
    big = "".join(chr(ord("a") + i % 26) for i in range(1234))
    assert describe(big) == f"idea.title: bad text, got {repr(big)[:80]}... (1,234 characters)"

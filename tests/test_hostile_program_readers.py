"""A generated program the parser cannot hold does not take the orchestrator down (issue 28).

``ast.parse`` of a program with 100,000 unary minuses raises ``MemoryError`` (deep brackets a
``RecursionError``), not ``SyntaxError``; every reader of a node's program or of the report's
aggregation script (parameters, components, the data-making constants, a figure's file names)
treated only the latter as "not Python", so a hostile answer crashed the proposal, the protocol
or the report instead of being read as text."""

from __future__ import annotations

import ast

import pytest

from ai_scientist.base.pysource import parse_python
from ai_scientist.reporting.vlm import FigureUse
from ai_scientist.runloop.protocol import data_constants
from ai_scientist.treesearch.components import components
from ai_scientist.treesearch.parameters import parameters

HOSTILE = [
    "N_TRAIN = 200\ndef make_data():\n    return " + "-" * 100_000 + "N_TRAIN\n",
    "N_TRAIN = 200\ndef make_data():\n    return " + "(" * 5_000 + "N_TRAIN" + ")" * 5_000 + "\n",
]


@pytest.mark.parametrize("src", HOSTILE, ids=["unary", "brackets"])
def test_a_program_the_parser_cannot_hold_is_read_as_text(src):
    with pytest.raises((MemoryError, RecursionError, SyntaxError)):
        ast.parse(src)  # what the readers met: not a SyntaxError for every such program
    assert parse_python(src) is None
    files = {"experiment.py": src}
    # each reader answers (the generic reading of a file that is no Python), none raises
    assert [p.name for p in parameters(files)] == ["N_TRAIN"]
    assert components(files) == []
    assert data_constants(files) == frozenset()
    use = FigureUse("val_accuracy 0.91", src, "fig.png", [])
    assert use.text == src

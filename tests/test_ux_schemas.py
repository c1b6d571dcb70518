"""Issue 19 item 3: every array and string of every answer schema is bounded (maxItems / maxLength).

A weak model that repeats itself under a grammar runs to max_tokens unless the schema stops it
(SmolLM2 emitted {"op": "archival_get"} 200+ times into an unbounded ``memory_update``).
The test finds the schemas itself: every module-level ``*_SCHEMA`` dict in the package, plus
each of them as the memory bridge extends it with ``memory_update``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re

import pytest
from components import llama_or_skip
from grammar_support import assert_llama_parses

import ai_scientist
from ai_scientist.phases.node_memory import schema_with_memory
from ai_scientist.phases.schemas import unbounded_fields


def _answer_schemas() -> dict[str, dict]:
    found: dict[str, dict] = {}
    for mod in pkgutil.walk_packages(ai_scientist.__path__, "ai_scientist."):
        if mod.name.endswith(("__main__", ".cli")):
            continue
        try:
            module = importlib.import_module(mod.name)
        except ImportError:  # an optional extra (e.g. docker SDK) missing: nothing to walk there
            continue
        for name, value in vars(module).items():
            if name.endswith("SCHEMA") and isinstance(value, dict) and value.get("type") == "object":
                found.setdefault(f"{module.__name__}.{name}", value)
    return found


SCHEMAS = _answer_schemas()


def test_the_walk_finds_the_answer_schemas():
    names = {n.rsplit(".", 1)[1] for n in SCHEMAS}
    # the ones the issue names: node phases, memory protocol (via the bridge), reporting
    assert {"PLAN_SCHEMA", "INSTALL_STEP_SCHEMA", "CODE_SCHEMA", "METRICS_PARSER_SCHEMA", "IDEAS_SCHEMA",
            "REVIEW_SCHEMA", "CRITIQUE_SCHEMA", "FIGURE_SCHEMA", "WRITEUP_SCHEMA", "QUERY_SCHEMA",
            "PLOT_SCHEMA"} <= names  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_array_and_string_is_bounded(name):
    schema = SCHEMAS[name]
    assert unbounded_fields(schema) == [], name
    assert unbounded_fields(schema_with_memory(schema)) == [], f"{name} + memory_update"


def test_the_walker_finds_what_is_unbounded():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "array", "items": {"type": "string", "maxLength": 3}},
            "c": {
                "type": "array",
                "maxItems": 2,
                "items": {"type": "object", "properties": {"d": {"type": "string"}}},
            },
            "e": {"type": "string", "enum": ["x", "y"]},
            "f": {"type": ["string", "null"], "maxLength": 4},
        },
    }
    assert unbounded_fields(schema) == [
        "$.a: string without maxLength",
        "$.b: array without maxItems",
        "$.c[].d: string without maxLength",
    ]


def test_memory_update_caps_a_repeating_model():
    """The exact failure of the issue: 200 repeated operations are refused by the schema."""
    from ai_scientist.llm.structured import AnswerError, validate_answer
    from ai_scientist.phases.schemas import INSTALL_STEP_SCHEMA

    schema = schema_with_memory(INSTALL_STEP_SCHEMA)
    answer = {
        "command": "true",
        "done": False,
        "memory_update": [{"op": "archival_search", "query": "x"}] * 200,
    }
    with pytest.raises(AnswerError, match="memory_update"):
        validate_answer(answer, schema, None)
    answer["memory_update"] = answer["memory_update"][:3]
    validate_answer(answer, schema, None)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_local_grammar_keeps_item_bounds_and_builds(name):
    """llama.cpp gets every maxItems and the short maxLengths; a long text's bound (a source file)
    is enforced by validation instead of one grammar rule per character."""
    from ai_scientist.llm.local_backend import GRAMMAR_MAX_LENGTH, grammar_schema

    schema = schema_with_memory(SCHEMAS[name])
    sent = grammar_schema(schema)
    text = json.dumps(sent)
    assert json.dumps(schema).count('"maxItems"') == text.count('"maxItems"')
    assert all(int(n) <= GRAMMAR_MAX_LENGTH for n in re.findall(r'"maxLength": (\d+)', text))
    assert_llama_parses(schema)  # llama.cpp parses the grammar the local backend sends


_SAMPLER = """
import json, sys, llama_cpp
from llama_cpp import Llama
from llama_cpp.llama_grammar import LlamaGrammar
from ai_scientist.llm.local_backend import default_local_model_path
llm = Llama(model_path=default_local_model_path(), vocab_only=True, verbose=False)
grammar = LlamaGrammar.from_json_schema(sys.stdin.read(), verbose=False)
assert llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar._grammar.encode(), b"root")
print("grammar ok")
"""


def test_llama_cpp_takes_the_bounded_code_schema():
    """A 60,000-character bound in the grammar crashes llama.cpp's grammar parser (SIGSEGV, one
    recursion per character); ``grammar_schema`` leaves it to validation, so the sampler builds."""
    import subprocess
    import sys

    from ai_scientist.llm.local_backend import grammar_schema
    from ai_scientist.phases.schemas import CODE_SCHEMA

    llama_or_skip()
    schema = json.dumps(grammar_schema(schema_with_memory(CODE_SCHEMA)))
    proc = subprocess.run(
        [sys.executable, "-c", _SAMPLER], input=schema, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "grammar ok" in proc.stdout, proc.stderr[-2000:]

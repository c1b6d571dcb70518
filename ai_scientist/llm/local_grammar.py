"""JSON schema -> llama.cpp grammar (GBNF), checked before it reaches the sampler.

Two faults of llama-cpp-python 0.3 that this module stands between:

- its schema converter escapes the double quote, CR and LF in a literal but not the backslash,
  so an ``enum`` value holding a backslash or a quote (an edit anchor that is a docstring's line,
  or a ``print`` of a string with an escape), JSON-encoded first, ends its GBNF literal early;
- llama.cpp reports a grammar it cannot parse only by returning a NULL sampler, which
  ``LlamaSampler.add_grammar`` chains anyway: the process then dies with SIGSEGV at the first
  sampled token.

:func:`schema_gbnf` converts with the backslash escaped too; :func:`check_gbnf` asks llama.cpp to
parse the grammar against the loaded model's vocabulary and raises :class:`GrammarRefused` (an
``LLMError``, recorded on the call) instead of letting a NULL sampler through.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .call import LLMError

_LITERAL_ESCAPE = re.compile(r'[\\\r\n"]')
_LITERAL_ESCAPES = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", '"': '\\"'}


MAX_INT_ENUM = 1000  # integer ranges up to this many values become enums in the grammar


class GrammarRefused(LLMError):
    """llama.cpp could not parse the grammar made from an answer schema."""


def schema_gbnf(schema: dict[str, Any]) -> str:
    """The GBNF grammar of ``schema`` (llama-cpp-python's converter, literals escaped fully)."""
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, SchemaConverter

    class _Converter(SchemaConverter):
        def _format_literal(self, literal: str) -> str:
            return '"' + _LITERAL_ESCAPE.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], literal) + '"'

        def visit(self, schema: Any, name: str) -> Any:
            # a length bound as GBNF's own repetition (char{0,N}), which llama.cpp expands as it
            # parses; the converter writes one nested optional group per character, which its
            # recursive parser cannot take past a few thousand (a 60,000 bound: SIGSEGV)
            if (
                isinstance(schema, dict)
                and schema.get("type") == "string"
                and ("maxLength" in schema or "minLength" in schema)
                and not ({"enum", "const", "pattern", "format"} & set(schema))
            ):
                rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
                char = self._add_primitive("char", PRIMITIVE_RULES["char"])
                low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
                reps = f"{{{low},{int(high)}}}" if high is not None else f"{{{low},}}"
                return self._add_rule(rule_name, f'"\\"" {char}{reps} "\\"" space')
            # an integer range (a review's scores): its values as an enum — this converter ignores
            # minimum and maximum, and the embedded model's meta-review answered soundness 100 of 4
            if (
                isinstance(schema, dict)
                and schema.get("type") == "integer"
                and isinstance(schema.get("minimum"), int)
                and isinstance(schema.get("maximum"), int)
                and 0 <= schema["maximum"] - schema["minimum"] <= MAX_INT_ENUM
                and not ({"enum", "const", "exclusiveMinimum", "exclusiveMaximum"} & set(schema))
            ):
                values = list(range(schema["minimum"], schema["maximum"] + 1))
                return super().visit({"enum": values}, name)
            return super().visit(schema, name)

    converter = _Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "schema")
    converter.visit(resolved, "")
    return str(converter.format_grammar())


def check_gbnf(vocab: Any, gbnf: str, root: str = "root") -> None:
    """Raise :class:`GrammarRefused` unless llama.cpp parses ``gbnf`` for ``vocab`` (a loaded
    model's ``llama_vocab`` pointer); the trial sampler is freed."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), root.encode("utf-8"))
    if not sampler:
        raise GrammarRefused(
            f"llama.cpp could not parse the grammar made from the answer schema ({len(gbnf)} characters); "
            "the schema's enum or pattern values are the usual cause"
        )
    llama_cpp.llama_sampler_free(sampler)


def grammar_for(llama: Any, schema: dict[str, Any]) -> Any:
    """A ``LlamaGrammar`` for ``schema`` that llama.cpp has parsed for ``llama``'s vocabulary."""
    from llama_cpp.llama_grammar import LlamaGrammar

    gbnf = schema_gbnf(schema)
    check_gbnf(llama._model.vocab, gbnf)
    return LlamaGrammar.from_string(gbnf, verbose=False)

"""``assert_llama_parses(schema)``: llama.cpp itself parses the grammar the local backend would
send for ``schema`` (``LlamaGrammar.from_string`` parses nothing; ``llama_sampler_init_grammar``
does, against a model's vocabulary, and returns NULL on a grammar it refuses). Skips without
llama-cpp-python or the SmolLM2 package."""

from __future__ import annotations

import functools
from typing import Any

from components import llama_or_skip


@functools.cache
def _vocab_model(path: str) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=path, vocab_only=True, verbose=False)


def assert_llama_parses(schema: dict[str, Any]) -> str:
    """The GBNF grammar of ``schema`` as the local backend makes it, after llama.cpp parsed it."""
    path = llama_or_skip()
    from ai_scientist.llm.local_grammar import check_gbnf, schema_gbnf

    gbnf = schema_gbnf(schema)  # every bound kept (LocalBackend.complete)
    check_gbnf(_vocab_model(path)._model.vocab, gbnf)  # raises GrammarRefused otherwise
    return gbnf

"""Chat formats the local backend writes itself, where llama-cpp-python's own would be wrong.

Gemma has no system role. Its chat template (the one Google ships with Gemma 3) puts the system
text, then a blank line, at the start of the first user turn, calls the assistant ``model``, and
requires user and model turns to alternate. llama-cpp-python 0.3 gets this wrong twice: its
built-in ``gemma`` format drops every system message (it only logs at debug level), and a Gemma
GGUF without a ``tokenizer.chat_template`` (the ``gemma3-270m`` package's has none) falls back to
the Llama-2 ``[INST]`` format. Every prompt of ai_scientist opens with a system layer, so for a GGUF
whose ``general.architecture`` is a Gemma one the backend formats the prompt with
:func:`gemma_prompt` instead. Grammar-constrained output (``response_format``) works with it as with
any llama-cpp-python chat handler: the grammar comes from the request, not from the format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GEMMA_TURN_END = "<end_of_turn>"


def gemma_prompt(messages: list[dict[str, str]]) -> str:
    """The Gemma chat prompt for ``messages`` (string contents), ending with the opening of the
    model's turn; no BOS (the tokenizer adds it). System messages are user text, as in Gemma's own
    template (the first one becomes the start of the first user turn), and consecutive turns of
    one speaker are joined with a blank line, so the turns always alternate."""
    turns: list[tuple[str, list[str]]] = []
    for m in messages:
        role = "model" if m["role"] == "assistant" else "user"
        text = m["content"].strip()
        if turns and turns[-1][0] == role:
            turns[-1][1].append(text)
        else:
            turns.append((role, [text]))
    body = "".join(
        f"<start_of_turn>{role}\n" + "\n\n".join(texts) + f"{GEMMA_TURN_END}\n" for role, texts in turns
    )
    return body + "<start_of_turn>model\n"


def chat_handler_for(metadata: Mapping[str, str]) -> Any | None:
    """A llama-cpp-python chat handler for a GGUF whose format this module writes (Gemma), from
    its metadata; None: llama-cpp-python's own choice is right."""
    if not metadata.get("general.architecture", "").startswith("gemma"):
        return None
    from llama_cpp import llama_chat_format

    def formatter(*, messages: list[Any], **_: Any) -> llama_chat_format.ChatFormatterResponse:
        # the backend sends string contents only (local_backend._flatten)
        return llama_chat_format.ChatFormatterResponse(prompt=gemma_prompt(messages), stop=[GEMMA_TURN_END])

    return llama_chat_format.chat_formatter_to_chat_completion_handler(formatter)

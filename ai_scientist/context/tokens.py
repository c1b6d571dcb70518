"""Token counting for prompt budgets.

A :class:`TokenCounter` says how many tokens a text costs for the target model
and whether that number is exact. OpenAI-family models are counted with the
offline ``bpe_openai`` tables (no download at run time); a local llama.cpp model
is counted by its own tokenizer through any ``count(text) -> int`` callable;
anything else gets a conservative characters/4 estimate marked ``exact=False``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

# Chat framing per message (role markers, separators). OpenAI documents 3-4 tokens;
# we count more so the budget errs on the safe side for every backend.
PER_MESSAGE_OVERHEAD = 8
PER_REQUEST_OVERHEAD = 8  # reply priming (<|start|>assistant<|message|>) plus slack
IMAGE_TOKENS = 1105  # a high-detail 1024x1024 image on gpt-4o costs 765; rounded up

# bpe_openai refuses single inputs of 1M characters or more; count in pieces.
_CHUNK_CHARS = 400_000

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text for one model; ``exact`` is False for estimates."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...


class _Memo:
    """Counts of recently seen texts: the system, environment, task and format layers come back
    unchanged in every prompt of a run, and the packer measures a layer several times."""

    def __init__(self, limit: int = 4096):
        self._d: dict[str, int] = {}
        self._limit = limit

    def get(self, text: str) -> int | None:
        return self._d.get(text)

    def put(self, text: str, n: int) -> None:
        if len(self._d) >= self._limit:
            self._d.clear()  # cheap bound; the hot texts come straight back
        self._d[text] = n


class BPECounter:
    """Exact counts with an OpenAI BPE table shipped inside ``bpe_openai``."""

    exact = True

    def __init__(self, encoding: str):
        self.name = f"bpe:{encoding}"
        self._enc = _encoding(encoding)
        self._memo = _Memo()

    def count(self, text: str) -> int:
        if not text:
            return 0
        hit = self._memo.get(text)
        if hit is not None:
            return hit
        if len(text) < _CHUNK_CHARS:
            n = len(self._enc.encode_ordinary(text))
        else:
            n = sum(len(self._enc.encode_ordinary(piece)) for piece in _pieces(text))
        self._memo.put(text, n)
        return n


class CallableCounter:
    """Wraps a model's own tokenizer, e.g. the local llama backend's ``count_tokens``."""

    exact = True

    def __init__(self, fn: Callable[[str], int], name: str = "callable"):
        self._fn = fn
        self.name = name
        self._memo = _Memo()

    def count(self, text: str) -> int:
        if not text:
            return 0
        hit = self._memo.get(text)
        if hit is None:
            hit = int(self._fn(text))
            self._memo.put(text, hit)
        return hit


class EstimateCounter:
    """ceil(chars / chars_per_token): used when no tokenizer for the model is available."""

    exact = False

    def __init__(self, chars_per_token: float = 4.0):
        self.chars_per_token = chars_per_token
        self.name = f"estimate:chars/{chars_per_token:g}"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token) if text else 0


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)


def _pieces(text: str) -> list[str]:
    """Split at line ends so each piece stays under the tokenizer's input limit."""
    out, start = [], 0
    while start < len(text):
        end = min(start + _CHUNK_CHARS, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + _CHUNK_CHARS // 2, end)
            end = cut + 1 if cut > 0 else end
        out.append(text[start:end])
        start = end
    return out


def encoding_for(model_name: str) -> str | None:
    """The BPE table name for an OpenAI-family model, or None when unknown."""
    name = model_name.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" (OpenRouter) -> "gpt-4o"
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return None


def counter_for(model_name: str, local_count_fn: Callable[[str], int] | None = None) -> TokenCounter:
    """The best counter available offline for ``model_name``.

    Order: the model's own tokenizer (``local_count_fn``), an OpenAI BPE table,
    otherwise a characters/4 estimate (``exact=False``).
    """
    if local_count_fn is not None:
        return CallableCounter(local_count_fn, name=f"model:{model_name}")
    enc = encoding_for(model_name)
    if enc is not None:
        try:
            return BPECounter(enc)
        except Exception:  # noqa: BLE001 - a broken bpe_openai install degrades to an estimate
            return EstimateCounter()
    return EstimateCounter()


def message_tokens(message: dict[str, Any], counter: TokenCounter) -> int:
    """Tokens one chat message costs, framing included (images at a fixed high-detail cost)."""
    total = PER_MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        total += counter.count(content)
    elif isinstance(content, list):
        for part in content:
            if part.get("type") == "text":
                total += counter.count(part.get("text", ""))
            elif part.get("type") == "image_url":
                total += IMAGE_TOKENS
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {})
        total += counter.count(str(fn.get("name", ""))) + counter.count(str(fn.get("arguments", "")))
    return total


def messages_tokens(messages: list[dict[str, Any]], counter: TokenCounter) -> int:
    """Tokens a whole request's messages cost, counted conservatively."""
    return PER_REQUEST_OVERHEAD + sum(message_tokens(m, counter) for m in messages)

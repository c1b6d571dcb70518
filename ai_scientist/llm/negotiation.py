"""Which structured-output form an OpenAI-compatible server accepts, negotiated once per
(base URL, model) and remembered in the run directory.

Servers differ: OpenAI, vLLM, Ollama and LM Studio take ``response_format`` json_schema;
llama-cpp-python's server takes only ``json_object`` with a ``schema`` field (and answers a
json_schema request with HTTP 500); some take only plain ``json_object``; some take nothing.
The ladder, strongest first:

===================== ============================================================ ==================
mode                  what is sent                                                  schema in prompt
===================== ============================================================ ==================
``json_schema``       ``response_format: {type: json_schema, json_schema: {...}}``  no
``json_object_schema`` ``response_format: {type: json_object, schema: {...}}`` [1]  no
``json_object``       ``response_format: {type: json_object}``                      yes
``prompt``            no ``response_format``                                        yes
===================== ============================================================ ==================

[1] the schema's grammar form (:func:`grammar_form`: no ``maxLength`` above 1000).

A rejection is recognised by what the error body says (:func:`is_rejection`), at any HTTP
status: a 500 whose body names ``response_format`` is a rejection, not an outage. The
client then steps down one rung without counting a failed try; every answer, in every mode,
still gets the client's one repair round. :class:`Negotiation` holds the outcome and writes
it to ``llm_negotiation.json`` in the run directory, so ``resume`` starts where the run
left off instead of probing again.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from ..base.fileio import atomic_write_json, read_json
from ..base.paths import NEGOTIATION_FILE as NEGOTIATION_FILE  # re-exported (tests name the file by it)

LADDER = ("json_schema", "json_object_schema", "json_object", "prompt")
# Modes in which the schema travels in the prompt (the client appends the JSON instruction).
INSTRUCTED = frozenset({"json_object", "prompt"})

# Words a server uses when it refuses the structured-output part of a request.
_REJECTION_WORDS = re.compile(
    r"response_format|response format|json_schema|json_object|structured output|guided|grammar"
    r"|\bformat\b|\bschema\b",
    re.I,
)
# Statuses that say something else went wrong, whatever the body says.
_NOT_A_REJECTION = frozenset({401, 403, 404, 408, 429})


def is_rejection(status: int | None, body_text: str) -> bool:
    """True when an error answer to a request with ``response_format`` refuses that format.

    Decided from the body, at any status (llama-cpp-python answers with 500, vLLM and
    OpenAI with 400, LM Studio with 400 and a bare string); auth, unknown-model, timeout
    and rate-limit statuses never count.
    """
    if status in _NOT_A_REJECTION:
        return False
    return bool(_REJECTION_WORDS.search(body_text or ""))


def response_format(mode: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` value sent in ``mode`` (None: send none)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": False}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": grammar_form(schema)}
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "prompt":
        return None
    raise ValueError(f"unknown structured-output mode {mode!r}; one of {', '.join(LADDER)}")


def grammar_form(schema: Any) -> Any:
    """``schema`` as sent in ``json_object_schema`` mode: ``maxLength`` bounds above
    ``GRAMMAR_MAX_LENGTH`` (1000) left out, exactly as the local backend does.

    That mode is llama-cpp-python's, which compiles the schema into a llama.cpp grammar that
    expands a length bound into one nested rule per character: a source file's bound (60,000)
    kills the server process (seen with 0.3.36), while bounds up to 1000 cost nothing measurable
    (``bench/llm_server.py``). ``max_tokens`` bounds such a string while decoding and the client
    validates every bound on the answer (repair round included).
    """
    from .local_backend import grammar_schema

    return grammar_schema(schema)


def step_below(mode: str) -> str:
    """The next weaker mode (``prompt`` stays ``prompt``)."""
    i = LADDER.index(mode)
    return LADDER[min(i + 1, len(LADDER) - 1)]


class Negotiation:
    """The mode per (base URL, model), persisted to ``path`` when one is given. Thread safe.

    ``mode(url, model)`` is the strongest rung not yet rejected. ``reject(url, model, mode,
    ...)`` records a rejection of ``mode``; it is idempotent, so two workers rejected at the
    same time step down once. ``accept`` marks the current mode as confirmed by an answer.
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, Any]] = {}
        if self.path is not None:
            loaded = read_json(self.path, default=None)
            if isinstance(loaded, dict) and isinstance(loaded.get("endpoints"), dict):
                self._data = {
                    k: v
                    for k, v in loaded["endpoints"].items()
                    if isinstance(v, dict) and v.get("mode") in LADDER
                }

    @staticmethod
    def key(url: str, model: str) -> str:
        return f"{url} {model}"

    def mode(self, url: str, model: str) -> str:
        with self._lock:
            entry = self._data.get(self.key(url, model))
        return entry["mode"] if entry else LADDER[0]

    def entry(self, url: str, model: str) -> dict[str, Any] | None:
        """A copy of what is known about (url, model): mode, confirmed, rejections."""
        with self._lock:
            entry = self._data.get(self.key(url, model))
            return None if entry is None else {**entry, "rejected": list(entry.get("rejected", []))}

    def reject(self, url: str, model: str, mode: str, *, status: int | None, reason: str) -> str:
        """Record that the server refused ``mode``; returns the mode to use from now on."""
        with self._lock:
            entry = self._data.setdefault(
                self.key(url, model),
                {"base_url": url, "model": model, "mode": LADDER[0], "confirmed": False, "rejected": []},
            )
            if LADDER.index(mode) < LADDER.index(entry["mode"]):
                return entry["mode"]  # an older rung, already stepped past
            if all(r.get("mode") != mode for r in entry["rejected"]):
                entry["rejected"].append(
                    {"mode": mode, "status": status, "reason": reason[:500], "at": round(time.time(), 3)}
                )
            entry["mode"] = step_below(mode)
            entry["confirmed"] = False
            self._save_locked()
            return entry["mode"]

    def accept(self, url: str, model: str, mode: str) -> None:
        """An answer came back in ``mode``: the negotiation for (url, model) is settled."""
        with self._lock:
            entry = self._data.get(self.key(url, model))
            if entry is not None and entry["confirmed"] and entry["mode"] == mode:
                return
            if entry is None:
                entry = self._data[self.key(url, model)] = {
                    "base_url": url,
                    "model": model,
                    "mode": mode,
                    "confirmed": False,
                    "rejected": [],
                }
            if entry["mode"] != mode:
                return  # a concurrent rejection moved on; the answer was in an older mode
            entry["confirmed"] = True
            self._save_locked()

    def _save_locked(self) -> None:
        if self.path is None:
            return
        atomic_write_json(self.path, {"ladder": list(LADDER), "endpoints": self._data})

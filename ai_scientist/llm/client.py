"""The one LLM client every role uses: retries, structured output, cost, prompt logs.

``LLMClient.complete`` takes OpenAI chat messages and returns an :class:`LLMResult`.
Per call it:

* takes model / temperature / max_tokens from the role's config (``agent.<role>``);
* refuses to start once ``llm.max_cost_usd`` is reached (:class:`CostCapExceeded`);
* retries retryable failures (429, 5xx, connection errors, timeouts) with exponential
  backoff (``llm.backoff_base_s`` doubling, capped at ``llm.backoff_max_s``; a 429's
  ``Retry-After`` wins), up to ``llm.max_attempts`` attempts;
* with a schema: uses the backend's native constraint when it has one, else adds the
  JSON instruction (``prompt/llm/json_instruction.j2``) to the last user message;
  parses and validates the answer; on failure runs ONE second round and then raises
  :class:`StructuredOutputError`. The second round is the repair request
  (``prompt/llm/repair.j2``), except when the answer was cut at ``max_tokens``
  (finish_reason 'length'): then the same request goes again with twice the room for the answer,
  as far as the model's window allows (a capable model writing a long program is not asked to
  re-write it into the room that cut it);
* writes one prompt-log record per attempt (failures, retries and the repair round
  included) and adds every answered attempt to the cost ledger.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.errors import RunStop
from ..base.reasoning import join_reasoning, strip_reasoning
from ..base.redact import Redactor
from ..context.budget import DEFAULT_CONTEXT_WINDOW, answer_tokens, model_window
from ..promptlog.record import request_key
from .backend import (
    Backend,
    BackendError,
    BackendReply,
    StructuredOutputUnsupported,
    estimate_usage,
    served_model,
)
from .call import CallContext, CostCapExceeded, LLMError, LLMResult, Message, StructuredOutputError, Usage
from .cost import CostLedger
from .negotiation import INSTRUCTED
from .structured import (
    AnswerError,
    check_schema,
    parse_answer,
    repair_messages,
    validate_answer,
    with_schema_instruction,
)

if TYPE_CHECKING:
    from ..base.config import Config
    from ..promptlog.record import PromptLogger


@dataclass
class _Call:
    """What one logical call has accumulated over its attempts."""

    role: str
    model: str
    ctx: CallContext
    attempt: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    call_ids: list[str] = field(default_factory=list)
    max_tokens: int | None = None  # set when a cut answer is asked again with more room


@dataclass
class _Answer:
    reply: BackendReply
    messages: list[Message]
    params: dict[str, Any]
    latency_s: float


class LLMClient:
    """Thread safe: holds no per-call state; the logger and cost ledger lock themselves."""

    def __init__(
        self,
        cfg: Config,
        backend: Backend,
        *,
        logger: PromptLogger | None = None,
        cost: CostLedger,
        redactor: Redactor | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.cfg = cfg
        self.backend = backend
        self.logger = logger
        self.cost = cost
        self.redactor = redactor or Redactor()
        self._sleep = sleep
        self._counters: dict[str, Any] = {}  # model -> token counter, for the prompt log's totals
        # progress display (reporting.progress.Progress): attempt_started / _retrying / _ended
        self.observer: Any = None

    # ------------------------------------------------------------ public --
    def complete(
        self,
        messages: list[Message],
        *,
        role: str,
        ctx: CallContext,
        schema: dict[str, Any] | None = None,
        validator: Callable[[Any], Any] | None = None,
    ) -> LLMResult:
        """One logical call; see the module docstring. Raises LLMError (or a subclass) on failure."""
        if schema is not None:
            check_schema(schema)
        call = _Call(role=role, model=self.cfg.model_for(role), ctx=ctx)
        convo = self._redact(messages)
        mode = None
        fresh = True  # the round sends the request itself (not a repair conversation)
        for round_no in (0, 1):
            ans, mode = self._answer(call, convo, schema, mode, first_round=fresh)
            # a secret the model echoes must not travel on (live and replayed runs then agree)
            ans.reply.text = raw = self.redactor.redact(ans.reply.text)
            text, inline = strip_reasoning(raw)
            parsed, problem = None, None
            if schema is not None:
                try:
                    parsed = parse_answer(text)
                    validate_answer(parsed, schema, validator)
                except AnswerError as exc:
                    problem = _cut_problem(ans, role, str(exc))
            self._account(call, ans, text, join_reasoning(ans.reply.reasoning, inline), problem)
            if problem is None:
                return LLMResult(
                    text=text,
                    raw=raw,
                    parsed=parsed,
                    usage=call.usage,
                    cost_usd=call.cost_usd,
                    latency_s=call.latency_s,
                    model=ans.reply.model or call.model,
                    backend=self.backend.name,
                    call_ids=call.call_ids,
                )
            if round_no == 1:
                raise StructuredOutputError(
                    f"{role} call for node {ctx.node_id} ({ctx.phase}/{ctx.label}): the answer is still "
                    f"unusable after one repair round: {problem}",
                    raw=raw,
                )
            room = self._more_room(call, ans) if ans.reply.finish_reason == "length" else None
            if room is not None:
                call.max_tokens = room  # the same request again; its log record shows the new limit
                continue
            fresh = False
            convo = repair_messages(ans.messages, raw, problem, schema_in_prompt=mode in INSTRUCTED)
        raise AssertionError("unreachable")

    def _more_room(self, call: _Call, ans: _Answer) -> int | None:
        """Twice the answer's ``max_tokens`` for a request whose answer was cut, bounded by what the
        model's window leaves beside the prompt and by a quarter of the window; None when that is no
        more than it had."""
        from ..context.tokens import counter_for, messages_tokens

        had = int(ans.params["max_tokens"])
        window, _ = model_window(self.cfg.context, getattr(self.backend, "context_window", None), call.model)
        counter = counter_for(call.model, getattr(self.backend, "count_tokens", None))
        prompt = messages_tokens(ans.messages, counter)
        if not counter.exact:
            prompt = int(prompt * 1.1)  # an estimate: keep a margin, as the prompt budget does
        window = window or DEFAULT_CONTEXT_WINDOW
        # at most a quarter of the window: a small model that loops until it is cut (the embedded
        # one, 8k) gets the repair round, which names the problem, not a longer loop
        room = min(2 * had, window - prompt, window // 4)
        return room if room > had else None

    # --------------------------------------------------------- attempts --
    def _answer(
        self,
        call: _Call,
        convo: list[Message],
        schema: dict[str, Any] | None,
        mode: str | None,
        *,
        first_round: bool,
    ) -> tuple[_Answer, str | None]:
        """Send until an answer comes back, retrying what may succeed; logs failed attempts."""
        llm_cfg = self.cfg.llm
        tries = 0
        while True:
            self._check_cap()
            if first_round and schema is not None:
                mode = self.backend.structured_mode(call.model)
            instructed = mode in INSTRUCTED  # json_object and prompt modes carry the schema in the prompt
            msgs = (
                with_schema_instruction(convo, schema)
                if first_round and instructed and schema is not None
                else convo
            )
            params = self._params(call, schema if mode not in (None, "prompt") else None, mode)
            call.attempt += 1
            tries += 1
            start = time.monotonic()
            where = (call.ctx.node_id, call.ctx.phase, call.ctx.label)
            self._observe("attempt_started", *where, call.attempt)
            try:
                reply = self.backend.complete(
                    msgs,
                    model=call.model,
                    temperature=params["temperature"],
                    max_tokens=params["max_tokens"],
                    schema=params["schema"],
                    timeout=llm_cfg.timeout_s,
                    ctx=call.ctx,
                    **self._mode_arg(mode),
                )
            except StructuredOutputUnsupported as exc:
                self._log_failure(call, msgs, params, time.monotonic() - start, exc, None)
                if not first_round or mode is None or self.backend.structured_mode(call.model) == mode:
                    raise
                tries -= 1  # stepping down the structured-output ladder is not a failed try
                continue
            except BackendError as exc:
                wait = self._delay(tries, exc) if exc.retryable and tries < llm_cfg.max_attempts else None
                self._log_failure(call, msgs, params, time.monotonic() - start, exc, wait)
                if wait is not None:
                    self._observe(
                        "attempt_retrying", *where, call.attempt, f"{type(exc).__name__}: {exc}", wait
                    )
                if wait is None:
                    if not exc.retryable:
                        raise
                    # the count is the call's attempts, as numbered in its prompt-log files
                    again = f"; its {'repair ' if not first_round else ''}request was tried {tries} times"
                    raise LLMError(
                        f"{call.role} call for node {call.ctx.node_id} ({call.ctx.phase}/{call.ctx.label}) "
                        f"failed after {call.attempt} attempts{again if tries != call.attempt else ''} "
                        f"(llm.max_attempts={llm_cfg.max_attempts} per request); last error: {exc}"
                    ) from exc
                self._sleep(wait)
                continue
            except (Exception, RunStop) as exc:  # recorded, then raised unchanged (e.g. UnrecordedPrompt)
                self._log_failure(call, msgs, params, time.monotonic() - start, exc, None)
                raise
            finally:
                self._observe("attempt_ended")
            return _Answer(reply, msgs, params, time.monotonic() - start), mode

    def _observe(self, what: str, *args: Any) -> None:
        if self.observer is not None:
            getattr(self.observer, what)(*args)

    def _mode_arg(self, mode: str | None) -> dict[str, Any]:
        """``structured=mode`` for a negotiating backend, so it sends the mode this attempt is logged with."""
        return {"structured": mode} if getattr(self.backend, "negotiates_structured_output", False) else {}

    def _params(self, call: _Call, schema: dict[str, Any] | None, mode: str | None) -> dict[str, Any]:
        rc = self.cfg.role(call.role)
        return {
            "model": call.model,
            "temperature": rc.temperature,
            "max_tokens": call.max_tokens
            or answer_tokens(self.cfg, call.role, getattr(self.backend, "context_window", None)),
            "schema": schema,
            "structured": mode,
            "timeout_s": self.cfg.llm.timeout_s,
        }

    def _delay(self, tries: int, exc: BackendError) -> float:
        """Seconds to wait before the next try: Retry-After when given, else capped exponential."""
        if exc.retry_after is not None:
            return float(exc.retry_after)
        llm_cfg = self.cfg.llm
        return float(min(llm_cfg.backoff_max_s, llm_cfg.backoff_base_s * 2 ** (tries - 1)))

    def _check_cap(self) -> None:
        cap = self.cfg.llm.max_cost_usd
        spent = self.cost.total_usd
        if cap is not None and spent >= cap:
            raise CostCapExceeded(
                f"llm.max_cost_usd={cap:g} reached (spent ${spent:.4f}); the run stops here and can be "
                "resumed with a higher cap"
            )

    def _redact(self, messages: list[Message]) -> list[Message]:
        """Secrets never reach a prompt: text is redacted, image data is left intact."""
        out = []
        for m in messages:
            m = dict(m)
            content = m.get("content")
            if isinstance(content, str):
                m["content"] = self.redactor.redact(content)
            elif isinstance(content, list):
                m["content"] = [
                    dict(p, text=self.redactor.redact(p["text"]))
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                    else p
                    for p in content
                ]
            out.append(m)
        return out

    # --------------------------------------------------------- records --
    def _account(
        self, call: _Call, ans: _Answer, text: str, reasoning: str | None, problem: str | None
    ) -> None:
        """Cost and prompt log of one answered attempt."""
        usage = ans.reply.usage or estimate_usage(ans.messages, ans.reply.text)
        model = ans.reply.model or call.model
        cost = self.cost.add(
            call.role, call.ctx.phase, call.ctx.node_id, model, usage, new_call=call.attempt == 1
        )
        call.usage = Usage(
            call.usage.prompt_tokens + usage.prompt_tokens,
            call.usage.completion_tokens + usage.completion_tokens,
            call.usage.estimated or usage.estimated,
            cached_tokens=_add_known(call.usage.cached_tokens, usage.cached_tokens),
        )
        call.cost_usd += cost
        call.latency_s += ans.latency_s
        response = {
            "raw": ans.reply.text,
            "context": text,
            "reasoning": reasoning,
            "server_reasoning": ans.reply.reasoning,
            "finish_reason": ans.reply.finish_reason,
        }
        usage_rec: dict[str, Any] = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "estimated": usage.estimated,
            "cached_tokens": usage.cached_tokens,  # None: not reported, or not trusted (see the note)
        }
        if usage.cached_note:
            usage_rec["cached_note"] = usage.cached_note
        self._write(
            call,
            ans.messages,
            ans.params,
            model=model,
            response=response,
            usage=usage_rec,
            cost_usd=cost,
            latency_s=ans.latency_s,
            error=None,
            structured_error=problem,
        )

    def _log_failure(
        self,
        call: _Call,
        msgs: list[Message],
        params: dict[str, Any],
        latency: float,
        exc: BaseException,
        wait: float | None,
    ) -> None:
        call.latency_s += latency
        model = served_model(self.backend, call.model)  # a timed-out local call names the GGUF
        self.cost.add_failed(call.role, call.ctx.phase, call.ctx.node_id, model, new_call=call.attempt == 1)
        self._write(
            call,
            msgs,
            params,
            model=model,
            response=None,
            usage=None,
            cost_usd=0.0,
            latency_s=latency,
            error=f"{type(exc).__name__}: {exc}",
            structured_error=None,
            wait_s=wait,
            retryable=getattr(exc, "retryable", False),
        )

    def _write(self, call: _Call, msgs: list[Message], params: dict[str, Any], **fields: Any) -> None:
        if self.logger is None:
            return
        ctx = call.ctx
        model = fields.pop("model")
        record = {
            "node_id": ctx.node_id,
            "stage": ctx.stage,
            "phase": ctx.phase,
            "label": ctx.label,
            "role": call.role,
            "backend": self.backend.name,
            "model": model,
            "params": params,
            "messages": msgs,
            **fields,
            "attempt": call.attempt,
            "call": call.call_ids[0] if call.call_ids else None,  # None: this is the first attempt
            "request_key": request_key(msgs, params),
            "ledger": ctx.ledger,
            "memory_snapshot": ctx.memory_snapshot,
            **self._budget_fields(model, msgs, ctx.ledger),
        }
        written = self.logger.write(record)
        call.call_ids.append(written.get("call_id", ""))

    def _budget_fields(self, model: str, msgs: list[Message], ledger: list[dict[str, Any]]) -> dict[str, Any]:
        """The budget the prompt was assembled under (its ledger's ``budget`` entry: limit, tokens
        the assembly counted, where the limit came from) and the tokens of the messages as sent,
        images included, counted again with the model's counter."""
        from ..context.tokens import counter_for, messages_tokens

        counters = self._counters
        if model not in counters:
            counters[model] = counter_for(model, getattr(self.backend, "count_tokens", None))
        entry = next((e for e in ledger if e.get("layer") == "budget"), None)
        budget = None
        if entry is not None:
            budget = {
                "limit": entry["tokens_before"],
                "tokens": entry["tokens_after"],
                "source": entry["reason"],
            }
        return {"budget": budget, "prompt_tokens_with_images": messages_tokens(msgs, counters[model])}


def backend_name(client: Any) -> str | None:
    """The name of the backend behind ``client`` (``"local"``, ``"openai"``, ...), or None for a
    client without one (a test double)."""
    return getattr(getattr(client, "backend", None), "name", None)


def _add_known(a: int | None, b: int | None) -> int | None:
    """Sum of two cached-token counts where either may be unknown (None only if both are)."""
    return None if a is None and b is None else (a or 0) + (b or 0)


def _cut_problem(ans: _Answer, role: str, problem: str) -> str:
    """A schema failure of an answer the server cut at ``max_tokens`` says so (the parse error of a
    half-written JSON alone, e.g. "'command' is a required property", would mislead)."""
    if ans.reply.finish_reason != "length":
        return problem
    return (
        f"the answer was cut at max_tokens={ans.params['max_tokens']} (finish_reason 'length') before "
        f"it was complete; raise agent.{role}.max_tokens or ask for a shorter answer ({problem})"
    )

"""Answers from a recorded run's prompt logs, so a run can be re-run with no LLM.

Every prompt-log record without ``error`` is an answer, keyed by :func:`request_key`
(a sha256 of canonical JSON of the messages and the params model, temperature,
max_tokens and schema). Identical keys are served in recorded order, preferring a
record of the asking node (two nodes may send the same prompt and get different
answers). The reply text is the recorded ``response.raw``, byte for byte. A prompt
that was never recorded raises :class:`UnrecordedPrompt` naming the node, phase,
label and the first message that differs from the nearest recorded call.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..base.paths import RunPaths
from ..promptlog.record import KEY_PARAMS, request_key
from .backend import BackendReply, checked_cached_tokens, message_text
from .call import CallContext, LLMError, Message, UnrecordedPrompt, Usage
from .negotiation import LADDER

_SNIP = 70


def _recorded_usage(usage: dict[str, Any]) -> Usage:
    """The usage a record holds, cached tokens and their note included, so a replayed run counts
    and costs what the recorded one did (an edited count is checked again, not trusted)."""
    out = Usage(
        int(usage.get("prompt_tokens", 0)),
        int(usage.get("completion_tokens", 0)),
        bool(usage.get("estimated")),
    )
    out.cached_tokens, note = checked_cached_tokens(
        usage.get("cached_tokens"), out.prompt_tokens, "cached_tokens"
    )
    recorded = usage.get("cached_note")
    out.cached_note = recorded if isinstance(recorded, str) else note
    return out


def load_answers(run_dir: str | Path) -> list[dict[str, Any]]:
    """The answer records of a run (no ``error``), in node then call order."""
    paths = RunPaths(run_dir)
    if not paths.nodes.is_dir():
        raise LLMError(f"replay: {run_dir} has no nodes/ folder; is it a run directory?")
    out = []
    for path in paths.prompt_log_files():
        try:
            if path.stat().st_size == 0:
                continue  # a call a kill -9 interrupted: its claimed record was never written
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LLMError(f"replay: cannot read prompt log {path}: {exc}") from None
        if (
            isinstance(rec, dict)
            and not rec.get("error")
            and isinstance(rec.get("response"), dict)
            and isinstance(rec.get("messages"), list)
        ):
            rec["_path"] = str(path)
            out.append(rec)
    return out


def _first_difference(recorded: list[Message], now: list[Message]) -> str:
    for i in range(max(len(recorded), len(now))):
        if i >= len(recorded):
            return f"message {i} ({now[i].get('role')}) is new: {message_text(now[i])[:_SNIP]!r}"
        if i >= len(now):
            return f"message {i} ({recorded[i].get('role')}) was recorded but is not sent now"
        a, b = recorded[i], now[i]
        if a == b:
            continue
        ta, tb = message_text(a), message_text(b)
        pos = next((k for k, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y), min(len(ta), len(tb)))
        start = max(0, pos - 20)
        role = b.get("role") if a.get("role") == b.get("role") else f"{a.get('role')} -> {b.get('role')}"
        return (
            f"message {i} ({role}) differs at char {pos}: recorded {ta[start : start + _SNIP]!r} "
            f"vs now {tb[start : start + _SNIP]!r}"
        )
    return "messages are identical"


def _common_prefix(a: list[Message], b: list[Message]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class ReplayBackend:
    """A backend answering only recorded prompts (thread safe)."""

    name = "replay"

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.records = load_answers(self.run_dir)
        self._queues: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rec in self.records:
            self._queues[request_key(rec["messages"], rec.get("params") or {})].append(rec)
        self._lock = threading.Lock()

    def structured_mode(self, model: str) -> str:
        """The mode the recorded run used for ``model``, so replayed messages match: the weakest
        rung of the structured-output ladder its answers were given in (``native`` for grammar
        backends and records older than the ladder)."""
        used = {
            (rec.get("params") or {}).get("structured")
            for rec in self.records
            if (rec.get("params") or {}).get("model") == model
        }
        return next((mode for mode in reversed(LADDER) if mode in used), "native")

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
        params = {"model": model, "temperature": temperature, "max_tokens": max_tokens, "schema": schema}
        key = request_key(messages, params)
        with self._lock:
            queue = self._queues.get(key) or []
            pick = next(
                (i for i, r in enumerate(queue) if r.get("node_id") == ctx.node_id), 0 if queue else None
            )
            rec = queue.pop(pick) if pick is not None else None
        if rec is None:
            raise UnrecordedPrompt(self._explain(messages, params, key, ctx))
        usage = rec.get("usage") or None
        response = rec["response"]
        return BackendReply(
            text=response.get("raw") or "",
            reasoning=response.get("server_reasoning"),
            usage=_recorded_usage(usage) if isinstance(usage, dict) else None,
            native_structured=(rec.get("params") or {}).get("structured") == "native",
            model=rec.get("model"),
        )

    def _explain(self, messages: list[Message], params: dict[str, Any], key: str, ctx: CallContext) -> str:
        head = (
            f"replay: no recorded answer for node {ctx.node_id}, phase {ctx.phase or '-'}, "
            f"label {ctx.label or '-'} (request key {key[:12]}) in {self.run_dir}"
        )
        used = sum(1 for r in self.records if request_key(r["messages"], r.get("params") or {}) == key)
        if used:
            return f"{head}: all {used} recorded answers for this exact prompt were already served"
        same = [
            r
            for r in self.records
            if (r.get("node_id"), r.get("phase"), r.get("label")) == (ctx.node_id, ctx.phase, ctx.label)
        ]
        pool = (
            same
            or [r for r in self.records if (r.get("phase"), r.get("label")) == (ctx.phase, ctx.label)]
            or self.records
        )
        if not pool:
            return f"{head}: the recorded run has no answered calls"
        nearest = max(pool, key=lambda r: _common_prefix(r["messages"], messages))
        where = f"nearest recorded call {nearest.get('call_id')} ({Path(nearest['_path']).name})"
        diff = _first_difference(nearest["messages"], messages)
        if diff == "messages are identical":
            old = nearest.get("params") or {}
            changed = [
                f"{k}: recorded {old.get(k)!r} vs now {params.get(k)!r}"
                for k in KEY_PARAMS
                if old.get(k) != params.get(k)
            ]
            diff = "messages are identical but params differ: " + "; ".join(changed)
        return f"{head}; {where}: first difference: {diff}"

"""How one node uses the run's memory: its branch, the memory layer, the protocol, events.

Structured answers cannot carry a free-text ``<memory_update>`` block when the
backend constrains output to a JSON schema (llama.cpp grammars, server-side
``json_schema``). So for schema calls the schema gains an optional
``memory_update`` property — a list of the same operations — which is turned
into a block and handled by the same protocol code (parsing, one re-ask on an
invalid block, bounded read rounds). Free-text answers use the block directly.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..context.history import exchange_turn
from ..llm.call import LLMResult
from ..memory import events as mem_events
from ..memory.protocol import handle_response, memory_update_schema
from ..memory.render import MemoryView, render_memory
from ..memory.search import query_for

if TYPE_CHECKING:
    from ..base.run import Run
    from ..memory.store import MemoryStore
    from ..treesearch.node import Node

MEMORY_FIELD = "memory_update"


def schema_with_memory(schema: dict | None) -> dict | None:
    """``schema`` plus an optional ``memory_update`` list (None stays None)."""
    if schema is None or schema.get("type") != "object":
        return schema
    out = copy.deepcopy(schema)
    out.setdefault("properties", {})[MEMORY_FIELD] = memory_update_schema()  # bounded: see protocol
    return out


def _with_block(result: LLMResult) -> str:
    """The answer as the protocol reads it: a schema answer's ``memory_update`` list (taken out
    of ``parsed``, so the phase never sees it) becomes a ``<memory_update>`` block."""
    ops = result.parsed.pop(MEMORY_FIELD, None) if isinstance(result.parsed, dict) else None
    if ops:
        return f"<memory_update>{json.dumps(ops)}</memory_update>\n{result.text}"
    return result.raw


class NodeMemory:
    """The memory view of one node; safe to use from its worker thread."""

    def __init__(self, store: MemoryStore, run: Run, node: Node, parent: Node | None):
        self.store = store
        self.run = run
        self.node = node
        self.branch = open_branch(store, node, parent.id if parent is not None else None)

    def render(self, values: dict[str, Any], history: Any = None) -> MemoryView:
        """The memory layer for a prompt whose stage inputs are ``values``: its text, its ledger
        entries (``memory.core``, ...) and the snapshot the prompt log keeps. A recall note whose
        text the prompt's ``history`` holds points there instead of repeating it."""
        query = query_for(
            idea=" ".join(x for x in (self.run.idea.title, self.node.idea or "") if x),
            plan=values.get("plan_snippet"),
            error=values.get("execution_output") if self.node.operation == "debug" else self.node.error,
            metric=self.node.metric.name if self.node.metric else None,
        )
        from ..context.spec import LAYERS

        shown = {LAYERS["history"].heading: history} if isinstance(history, str) else None
        return render_memory(self.store, self.branch, query, elsewhere=shown)

    def exchange(self, first: LLMResult, follow_up: Callable[[list[dict[str, str]]], LLMResult]) -> LLMResult:
        """Apply the answer's memory operations (with read rounds); returns the final answer.

        ``follow_up(conversation)`` makes the next call of the exchange: the prompt followed by
        ``conversation``, each earlier answer (assistant) and the protocol's reply to it (user).
        """
        answers = [first]  # the exchange's transcript: the last one is the final answer
        conversation: list[dict[str, str]] = []

        def ask(text: str) -> str:
            conversation.extend(exchange_turn(answers[-1].text, text))
            answers.append(follow_up(list(conversation)))
            return _with_block(answers[-1])

        ex = handle_response(
            self.store,
            self.branch,
            _with_block(first),
            ask,
            self.run.cfg.memory.max_memory_read_rounds,
            self.node.id,
        )
        if ex.errors:
            self.run.event(
                "memory_protocol", node_id=self.node.id, errors=ex.errors[:10], extra_calls=ex.extra_calls
            )
        return answers[-1]

    def record_outcome(self, node: Node) -> None:
        """Pipeline events for the finished node: see :func:`record_outcome`."""
        record_outcome(self.store, node)


def open_branch(store: MemoryStore, node: Node, parent_id: str | None) -> str:
    """The node's memory branch (forked from ``parent_id``'s) with its ``node_created`` event, in
    one transaction, so a kill -9 leaves both or neither; an existing branch is returned as is."""
    with store.transaction():
        existed = store.has_branch(node.id)
        branch = store.fork(parent_id, node.id)
        if not existed:
            mem_events.node_created(store, branch, node.to_dict())
    return branch


def record_outcome(store: MemoryStore, node: Node) -> None:
    """The finished node's outcome events (its metric, or its error with the cause) and its
    outcome mark, in one transaction; nothing when they are already recorded (a resumed run)."""
    with store.transaction():
        if store.outcome_recorded(node.id):
            return
        if node.is_good and node.metric is not None:
            m = node.metric
            mem_events.metric(store, node.id, node.id, m.name, m.value, m.direction, m.dataset)
            mem_events.phase_result(store, node.id, node.id, "node", True, node.summary or "")
        elif node.error:
            where, _, message = node.error.partition(": ")
            mem_events.error(store, node.id, node.id, where, message[:1500])
        store.mark_outcome(node.id)

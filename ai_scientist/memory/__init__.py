"""MemGPT-style memory: core / recall / archival in SQLite, one branch per tree node (see docs/memory.md).

Pipeline usage::

    store = MemoryStore.open_run(run_dir, cfg)               # <run>/memory.sqlite (+ memory.faiss)
    branch = store.fork(parent_node_id, node_id)              # once per node (root: parent None)
    events.node_created(store, branch, node_dict)             # pipeline events -> recall
    view = render_memory(store, branch, query_for(idea=..., plan=..., error=..., metric=...))
    # view.text -> memory layer; view.ledger -> prompt-log ledger; view.snapshot -> memory_snapshot
    ex = handle_response(store, branch, llm_text, ask, cfg.memory.max_memory_read_rounds, node_id)
    # ex.final_text is the answer without memory blocks
    md = digest_markdown(store, best_node_id)                 # for the writeup
"""

from __future__ import annotations

from . import events
from .db import MemoryStoreError
from .digest import digest_markdown
from .protocol import (
    ApplyResult,
    MemoryExchange,
    MemoryOp,
    ParseResult,
    apply_updates,
    handle_response,
    parse_memory_update,
    protocol_instructions,
    strip_memory_blocks,
)
from .records import Consolidation, CoreEntry, RecallEvent
from .render import MemoryView, render_memory
from .search import Hit, query_for
from .store import ROOT, MemoryStore

__all__ = [
    "ROOT",
    "ApplyResult",
    "Consolidation",
    "CoreEntry",
    "Hit",
    "MemoryExchange",
    "MemoryOp",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryView",
    "ParseResult",
    "RecallEvent",
    "apply_updates",
    "digest_markdown",
    "events",
    "handle_response",
    "parse_memory_update",
    "protocol_instructions",
    "query_for",
    "render_memory",
    "strip_memory_blocks",
]

"""Pipeline events recorded into recall memory automatically, without self-referential noise.

The pipeline calls these helpers at the points that matter (node created, phase finished,
error with its cause, metric measured, decision taken). Two guards keep recall useful:
events *about memory itself* (``memory injected``, render/snapshot events) are refused, and an
event identical to the branch's previous visible event is not stored twice.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from .store import MemoryStore

log = logging.getLogger(__name__)

KINDS = ("node_created", "phase", "error", "metric", "decision", "note")
_NOISE = re.compile(
    r"\bmemory[\s_-]*(injected|rendered|render|snapshot|context)\b|\bmemory_(results|update)\b", re.I
)
_NOISE_KINDS = frozenset({"memory_injected", "memory_render", "memory_snapshot", "render"})


def is_noise(kind: str, text: str) -> bool:
    """True for events about memory plumbing, which would only echo the memory back to itself."""
    return kind.lower() in _NOISE_KINDS or bool(_NOISE.search(text[:200]))


def record_event(
    store: MemoryStore, branch: str, kind: str, text: str, node_id: str | None = None
) -> str | None:
    """Append a pipeline event to ``branch``'s recall; returns its id, or None when skipped
    (noise, empty, or identical to the previous visible event). Never raises: memory must not
    fail a node, so a store error is logged and None returned."""
    text = (text or "").strip()
    if not text or is_noise(kind, text):
        return None
    try:
        last = store.recall_events(branch)[-1:]
        if last and last[0].kind == kind and last[0].text == store.redactor.redact(text):
            return None
        return store.recall_append(branch, kind, text, node_id)
    except Exception as exc:
        log.warning("memory: could not record %s event on %s: %s", kind, branch, exc)
        return None


def node_created(store: MemoryStore, branch: str, node: dict[str, Any]) -> str | None:
    op, parent = node.get("operation", "?"), node.get("parent_id") or "root"
    idea = f"; idea: {node['idea']}" if node.get("idea") else ""
    return record_event(
        store,
        branch,
        "node_created",
        f"node {node.get('id')} ({op}, stage {node.get('stage')}) from {parent}{idea}",
        node.get("id"),
    )


def phase_result(
    store: MemoryStore, branch: str, node_id: str, phase: str, ok: bool, summary: str
) -> str | None:
    status = "succeeded" if ok else "failed"
    return record_event(store, branch, "phase", f"{phase} {status}: {summary}", node_id)


def error(
    store: MemoryStore, branch: str, node_id: str, where: str, message: str, cause: str | None = None
) -> str | None:
    text = f"error in {where}: {message}" + (f"; cause: {cause}" if cause else "")
    return record_event(store, branch, "error", text, node_id)


def metric(
    store: MemoryStore,
    branch: str,
    node_id: str,
    name: str,
    value: float,
    direction: str,
    dataset: str | None = None,
) -> str | None:
    on = f" on {dataset}" if dataset else ""
    return record_event(store, branch, "metric", f"{name}{on} = {value:g} ({direction})", node_id)


def decision(store: MemoryStore, branch: str, node_id: str | None, what: str, reason: str) -> str | None:
    return record_event(store, branch, "decision", f"{what}; because {reason}", node_id)

"""Pure overflow policies: which core entries to evict, and the extractive recall summary.

Both are deterministic so a replayed run makes the same choices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .records import CoreEntry, RecallEvent
from .search import identifiers

Summarizer = Callable[[Sequence[RecallEvent]], str]

EVENT_HEAD_CHARS = 200


def choose_evictions(entries: Sequence[CoreEntry], limit: int, protect: str | None = None) -> list[CoreEntry]:
    """Entries to evict so the total fits ``limit``: lowest importance first, then oldest.

    ``protect`` (the key just written) goes last, only if evicting everything else is not enough.
    """
    total = sum(e.chars for e in entries)
    if total <= limit:
        return []
    order = sorted(entries, key=lambda e: (e.key == protect, e.importance, e.seq))
    out: list[CoreEntry] = []
    for e in order:
        if total <= limit:
            break
        out.append(e)
        total -= e.chars
    return out


def evicted_core_text(entry: CoreEntry) -> str:
    """The archival text of an evicted core entry: its full key and value."""
    return f"core memory entry evicted (importance {entry.importance}): {entry.key} = {entry.value}"


def extractive_summary(events: Sequence[RecallEvent]) -> str:
    """One line per event: its id, kind and head, plus any identifiers from the cut tail.

    Identifiers (UUIDs, paths, hashes) survive the cut so the exact search lane still finds
    the summary by them; ``expand(event_id)`` returns each event's full text.
    """
    lines = []
    for ev in events:
        text = " ".join(ev.text.split())
        head = text[:EVENT_HEAD_CHARS]
        line = f"- {ev.id} [{ev.kind}] {head}"
        if len(text) > EVENT_HEAD_CHARS:
            tail_ids = [i for i in identifiers(text[EVENT_HEAD_CHARS:]) if i not in head]
            line += " …" + (f" (ids: {', '.join(tail_ids)})" if tail_ids else "")
        lines.append(line)
    return "\n".join(lines)


def consolidation_text(events: Sequence[RecallEvent], summary: str) -> str:
    first, last = events[0].id, events[-1].id
    ids = ", ".join(e.id for e in events)
    return f"Summary of recall events {first}..{last} ({len(events)} events; replaces {ids}):\n{summary}"

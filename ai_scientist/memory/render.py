"""Render a node's memory for a prompt within ``memory_budget_chars``, with a ledger and a snapshot.

Sections: core (grouped by key prefix, each group showing ``chars_current/limit``), recall (the
last ``recall_max_events`` visible events plus the summaries of consolidated ranges, each citing
the event ids it replaces; shown oldest first, so a node's recall extends its parent's and the
prompt's prefix stays shared — docs/context.md), archival (top ``retrieval_k`` hits for the node's content, each
capped at ``archival_snippet_budget_chars``) and resource memory (optional caller text).

The budget is shared by water-filling: each section gets an equal share, and what a section does
not need goes to the others. Inside a section whole items are dropped from the least useful end
(lowest-ranked hit, oldest event, least important core entry) before any item is cut, and every
cut names the ids so ``expand(id)`` can bring the text back. Rendering never writes to memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .records import CoreEntry
from .store import MemoryStore

if TYPE_CHECKING:
    from ..context.tokens import TokenCounter

SECTIONS = ("core", "recall", "archival", "resource")
POLICY = "memory_waterfill"


@dataclass
class Item:
    text: str
    handle: str | None = None  # id a cut item can be expanded from


@dataclass
class Section:
    name: str
    header: str
    items: list[Item]  # most important first
    # shown oldest first (the reverse of ``items``): a later prompt's section then extends an
    # earlier one, a prefix a provider's cache can reuse; cuts still drop the least important
    chronological: bool = False

    @property
    def chars(self) -> int:
        return len(self.header) + sum(len(i.text) + 1 for i in self.items) + 1 if self.items else 0


@dataclass
class MemoryView:
    """What a node sees: ``text`` for the memory layer, ``ledger`` entries (one per section)
    and a JSON-able ``snapshot`` to store in the prompt log as ``memory_snapshot``."""

    text: str
    ledger: list[dict[str, Any]] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)


def _cap(text: str, limit: int, handle: str | None) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    note = f" …[cut; expand {handle}]" if handle else " …[cut]"
    return text[: max(0, limit - len(note))] + note


def _core_section(entries: list[CoreEntry], limit: int) -> Section:
    used = sum(e.chars for e in entries)
    groups: dict[str, list[CoreEntry]] = {}
    for e in sorted(entries, key=lambda e: (-e.importance, e.seq)):
        groups.setdefault(e.group, []).append(e)
    items = []
    for g, es in groups.items():
        lines = [f"[{g}] {sum(e.chars for e in es)}/{limit} chars"]
        lines += [f"- {e.key} = {e.value} (importance {e.importance})" for e in es]
        items.append(Item("\n".join(lines), handle=f"core:{g}"))
    return Section("core", f"### Core memory ({used}/{limit} chars)", items)


def _recall_section(store: MemoryStore, branch: str, n: int, cap: int) -> tuple[Section, dict[str, Any]]:
    # the node's own creation is what its prompt's node_brief says; without it, the recall a node
    # sees first is its lineage's, the same bytes for all its siblings (a shared prompt prefix)
    visible = [
        e for e in store.recall_events(branch) if not (e.kind == "node_created" and e.node_id == branch)
    ]
    events, older = visible[-n:], visible[:-n] if len(visible) > n else []
    folds = store.consolidations(branch)
    # most important first (newest events, then older ranges); shown in the reverse order
    items = [Item(f"- {e.id} [{e.kind}] {_cap(e.text, cap, e.id)}", e.id) for e in reversed(events)]
    if older:  # outside the window but not consolidated yet: say so instead of hiding them
        span = older[0].id if len(older) == 1 else f"{older[0].id}..{older[-1].id}"
        items.append(Item(f"- {span}: {len(older)} older event(s) not shown (expand an id)"))
    for c in reversed(folds):  # newest ranges first: they matter more than old ones
        ids = c.event_ids
        span = f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else ids[0]
        body = _cap(c.summary, cap, c.archival_id).replace("\n", "\n  ")
        items.append(
            Item(
                f"- {c.archival_id}: summary of {span} ({c.reason}, {len(ids)} events):\n  {body}",
                c.archival_id,
            )
        )
    snap = {"recall_ids": [e.id for e in events], "summary_ids": [c.archival_id for c in folds]}
    # no counts in the header: it stays the same bytes as the branch grows
    header = "### Recall (oldest first; older ranges summarised, then the latest events)"
    return Section("recall", header, items, chronological=True), snap


def _archival_section(
    store: MemoryStore, branch: str, query: str, k: int, cap: int, skip: set[str]
) -> Section:
    hits = [h for h in store.archival_search(query, k + len(skip), branch=branch) if h.id not in skip][:k]
    lineage = set(store.lineage(branch))
    items = []
    for h in hits:
        src = "this lineage" if h.branch in lineage else f"other branch {h.branch}"
        items.append(Item(f"- {h.id} ({src}; {'+'.join(h.lanes)}): {_cap(h.text, cap, h.id)}", h.id))
    return Section("archival", f"### Archival (top {len(items)} for this node's content)", items)


def _waterfill(needs: dict[str, int], budget: int) -> dict[str, int]:
    alloc, left, open_ = {}, budget, dict(needs)
    while open_:
        share = left // len(open_)
        small = {s: n for s, n in open_.items() if n <= share}
        if not small:
            alloc.update({s: share for s in open_})
            break
        for s, n in small.items():
            alloc[s] = n
            left -= n
            del open_[s]
    return alloc


def _fit(sec: Section, allowed: int) -> tuple[str, list[str], set[str]]:
    """The section's text within ``allowed`` chars, the handles of what was cut or dropped, and
    the handles of items dropped whole (not shown at all)."""
    if not sec.items or allowed <= len(sec.header) + 20:
        handles = [i.handle for i in sec.items if i.handle]
        return "", handles, set(handles)
    lines, used, cut, dropped = [], len(sec.header) + 1, [], set()
    for item in sec.items:
        room = allowed - used - 1
        if len(item.text) <= room:
            lines.append(item.text)
            used += len(item.text) + 1
        elif room > 80 and not lines:  # the first item alone is too big: cut it, keep its head
            lines.append(_cap(item.text, room, item.handle))
            used += room + 1
            cut.append(item.handle or "")
        else:
            cut.append(item.handle or "")
            dropped.add(item.handle or "")
    if sec.chronological:
        lines.reverse()
    return "\n".join([sec.header, *lines]), [c for c in cut if c], dropped


def _ledger(
    name: str,
    before: int,
    after: int,
    cut: list[str],
    allowed: int,
    counter: TokenCounter | None,
    full: str,
    text: str,
) -> dict:
    if before == 0:
        action, reason = "kept", "empty"
    elif after == 0:
        action, reason = "dropped", f"no room: share {allowed} chars of memory_budget_chars"
    elif cut:
        action, reason = (
            "truncated",
            f"{len(cut)} item(s) cut to fit the {allowed}-char share; expand their ids",
        )
    else:
        action, reason = "kept", "fits its share"
    tb, ta = (counter.count(full), counter.count(text)) if counter else (-(-before // 4), -(-after // 4))
    return {
        "layer": f"memory.{name}",
        "action": action,
        "policy": POLICY,
        "chars_before": before,
        "chars_after": after,
        "tokens_before": tb,
        "tokens_after": ta,
        "tokens_exact": bool(counter and getattr(counter, "exact", False)),
        "reason": reason,
        "handle": ",".join(cut) or None,
    }


def render_memory(
    store: MemoryStore,
    branch: str,
    query: str = "",
    resource_memory: str | None = None,
    counter: TokenCounter | None = None,
) -> MemoryView:
    """The memory layer of ``branch`` for a prompt whose node content is ``query``
    (build it with :func:`~ai_scientist.memory.search.query_for`; an empty query skips archival)."""
    cfg = store.cfg
    if not cfg.enabled:  # memory.enabled=false: an empty layer, and nothing to snapshot
        return MemoryView("", [], {"branch": branch, "enabled": False})
    core = store.core_entries(branch)
    recall, rsnap = _recall_section(
        store, branch, cfg.recall_max_events, cfg.archival_snippet_budget_chars // 2
    )
    skip = set(rsnap["summary_ids"])
    arch = (
        _archival_section(store, branch, query, cfg.retrieval_k, cfg.archival_snippet_budget_chars, skip)
        if query.strip()
        else Section("archival", "", [])
    )
    res = Section(
        "resource",
        "### Resource memory",
        [Item(resource_memory.strip(), "resource")] if resource_memory and resource_memory.strip() else [],
    )
    sections = [_core_section(core, cfg.core_max_chars), recall, arch, res]
    # the blank lines joining the sections come out of the budget too
    alloc = _waterfill({s.name: s.chars for s in sections}, cfg.memory_budget_chars - 2 * (len(sections) - 1))
    parts, ledger, shown = [], [], {}
    for sec in sections:
        full = "\n".join([sec.header] + [i.text for i in sec.items]) if sec.items else ""
        text, cut, dropped = _fit(sec, alloc[sec.name])
        shown[sec.name] = {i.handle for i in sec.items if i.handle and i.handle not in dropped}
        if text:
            parts.append(text)
        ledger.append(_ledger(sec.name, len(full), len(text), cut, alloc[sec.name], counter, full, text))
    snapshot = {
        "branch": branch,
        "lineage": store.lineage(branch),
        "query": query,
        "budget_chars": cfg.memory_budget_chars,
        "core": [
            {"key": e.key, "value": e.value, "importance": e.importance, "seq": e.seq, "branch": e.branch}
            for e in core
            if f"core:{e.group}" in shown["core"]
        ],
        "recall_ids": [i for i in rsnap["recall_ids"] if i in shown["recall"]],
        "summary_ids": [i for i in rsnap["summary_ids"] if i in shown["recall"]],
        "archival_ids": [i.handle for i in arch.items if i.handle in shown["archival"]],
        "resource": bool(shown["resource"]),
    }
    text = "\n\n".join(parts)
    snapshot["chars"] = len(text)
    return MemoryView(text, ledger, snapshot)

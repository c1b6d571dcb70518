"""Render a node's memory for a prompt within ``memory_budget_chars``, with a ledger and a snapshot.

Sections: core (grouped by key prefix, each group showing ``chars_current/limit``), recall (the
last ``recall_max_events`` visible events plus the summaries of consolidated ranges, each citing
the event ids it replaces; shown oldest first, so a node's recall extends its parent's and the
prompt's prefix stays shared — docs/context.md), archival (top ``retrieval_k`` hits for the node's content, each
capped at ``archival_snippet_budget_chars``) and resource memory (optional caller text).

The budget is shared by water-filling: each section gets an equal share, and what a section does
not need goes to the others. Inside a section whole items (a core entry, an event, a hit) are
dropped from the least useful end (lowest-ranked hit, oldest event, least important core entry);
an item is never cut inside (issue 28: "memory is never cut mid-fact"), and a section that drops
items says how many and names their ids so ``expand(id)`` can bring them back. Headers count what
is stored and say what is shown. A single event or hit longer than its cap is cut at a sentence,
line or word boundary, with a marker naming its id. Rendering never writes to memory.

The text is a :class:`MemoryText`: a ``str`` that can render itself again within fewer characters
(``refit``), which the prompt layer's ``whole_items`` policy uses when the packer has to shrink the
memory layer, so even then whole items are dropped, never characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
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
    # the section's lines for the items kept (most important first); default: header + item texts
    layout: Callable[[list[Item]], list[str]] | None = None

    def lines(self, kept: list[Item]) -> list[str]:
        if self.layout is not None:
            return self.layout(kept)
        texts = [i.text for i in kept]
        return [self.header, *(reversed(texts) if self.chronological else texts)]

    @property
    def chars(self) -> int:
        return len("\n".join(self.lines(self.items))) if self.items else 0


class MemoryText(str):
    """The memory layer's text, able to render itself again within ``max_chars`` (whole items
    dropped, see the module doc). Plain ``str`` everywhere else."""

    _refit: Callable[[int], str] | None = None

    def refit(self, max_chars: int) -> str:
        if self._refit is None or max_chars >= len(self):
            return str(self)
        return self._refit(max_chars)


def _memory_text(text: str, refit: Callable[[int], str]) -> MemoryText:
    out = MemoryText(text)
    out._refit = refit
    return out


@dataclass
class MemoryView:
    """What a node sees: ``text`` for the memory layer, ``ledger`` entries (one per section)
    and a JSON-able ``snapshot`` to store in the prompt log as ``memory_snapshot``."""

    text: str
    ledger: list[dict[str, Any]] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)


_BOUNDARIES = ("\n", ". ", "; ", ", ", " ")


def _cap(text: str, limit: int, handle: str | None) -> str:
    """``text`` within ``limit`` chars, cut after the last line, sentence, clause or word that fits
    (never inside a word or number), with a marker naming ``handle``."""
    text = text.strip()
    if len(text) <= limit:
        return text
    note = f" …[cut; expand {handle}]" if handle else " …[cut]"
    room = max(0, limit - len(note))
    for sep in _BOUNDARIES:  # the coarsest boundary that keeps at least half of the room
        at = text.rfind(sep, 0, room + 1)
        if at >= room // 2:
            return text[: at + (1 if sep.strip() else 0)].rstrip() + note
    at = text.rfind(" ", 0, room + 1)
    return (text[:at].rstrip() if at > 0 else "") + note


def _core_section(entries: list[CoreEntry], limit: int) -> Section:
    """One item per entry (most important first), shown by group; counts are of what is stored,
    and a group or the section says how many of its entries are shown when not all are."""
    used = sum(e.chars for e in entries)
    ranked = sorted(entries, key=lambda e: (-e.importance, e.seq))
    by_text: dict[str, CoreEntry] = {}
    items = []
    for e in ranked:
        text = f"- {e.key} = {e.value} (importance {e.importance})"
        by_text[text] = e
        items.append(Item(text, handle=f"core:{e.key}"))
    group_of = {i.text: by_text[i.text].group for i in items}
    group_sizes: dict[str, list[CoreEntry]] = {}
    for e in ranked:
        group_sizes.setdefault(e.group, []).append(e)
    header = f"### Core memory ({used}/{limit} chars)"

    def layout(kept: list[Item]) -> list[str]:
        shown: dict[str, list[str]] = {}
        for i in kept:
            shown.setdefault(group_of[i.text], []).append(i.text)
        head = header
        if len(kept) < len(items):
            head = f"### Core memory ({used}/{limit} chars; {len(kept)} of {len(items)} entries shown)"
        out = [head]
        for g, texts in shown.items():
            es = group_sizes[g]
            line = f"[{g}] {sum(e.chars for e in es)}/{limit} chars"
            if len(texts) < len(es):
                line += f"; {len(texts)} of {len(es)} entries shown"
            out += [line, *texts]
        return out

    return Section("core", header, items, layout=layout)


SHOWN_PROBE_CHARS = 60  # an event whose text's first characters another layer holds repeats it


def _shown_in(text: str, shown: Mapping[str, str]) -> str | None:
    """The title of the layer of this prompt that already holds ``text`` (an event's text after
    its ``node succeeded: `` head), None when none does or the text is too short to be worth a
    reference. A capable model's code prompt held the best node's findings in the recall notes
    and again, byte for byte, in the history below them (issue 28: say each fact once)."""
    one = " ".join(text.split())
    if len(one) < SHOWN_PROBE_CHARS:
        return None
    # and without its opening headline sentence: a child's history refers that to the protocol's
    # line (runloop/stage_inputs.py without_headline)
    rest = re.sub(r"^Headline: \S+ is for .*?\.(?:\s+|$)", "", one, count=1)
    probes = [p for p in (one[:SHOWN_PROBE_CHARS], rest[:SHOWN_PROBE_CHARS]) if p]
    return next(
        (t for t, body in shown.items() if body and any(p in " ".join(body.split()) for p in probes)), None
    )


def _event_text(e: Any, cap: int, shown: Mapping[str, str]) -> str:
    head, sep, body = e.text.partition(": ")
    where = _shown_in(body, shown) if sep else None
    if where is not None:
        who = f" ({e.node_id})" if e.node_id else ""
        return f'{head}{who}: its text is under "{where}"'
    return _cap(e.text, cap, e.id)


def _recall_section(
    store: MemoryStore, branch: str, n: int, cap: int, shown: Mapping[str, str] | None = None
) -> tuple[Section, dict[str, Any]]:
    # the node's own creation is what its prompt's node_brief says; without it, the recall a node
    # sees first is its lineage's, the same bytes for all its siblings (a shared prompt prefix)
    visible = [
        e for e in store.recall_events(branch) if not (e.kind == "node_created" and e.node_id == branch)
    ]
    events, older = visible[-n:], visible[:-n] if len(visible) > n else []
    folds = store.consolidations(branch)
    # most important first (newest events, then older ranges); shown in the reverse order
    items = [Item(f"- {e.id} [{e.kind}] {_event_text(e, cap, shown or {})}", e.id) for e in reversed(events)]
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
    # no counts or ids in the header: it stays the same bytes as the branch grows (a child's recall
    # extends its parent's). It says whose events these are: a relay run's stage-3 node read its
    # recall (its parent's creation alone) as a memory gone stale (s7 ln1 016, 020)
    header = (
        "### Recall (the events of this node's ancestors only, not of other branches; oldest first; "
        "older ranges summarised, then the latest events)"
    )
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


_NOT_SHOWN_IDS = 3  # ids named in a "not shown" line


def _not_shown(dropped: list[Item]) -> str:
    """The line saying how many items a section left out, naming what brings them back: ``expand``
    takes recall/archival ids; core entries are named by key."""
    ids = [i.handle for i in dropped if i.handle and i.handle != "resource"]
    keys = [h.removeprefix("core:") for h in ids if h.startswith("core:")]
    ids = [h for h in ids if not h.startswith("core:")]

    def names(xs: list[str]) -> str:
        return ", ".join(xs[:_NOT_SHOWN_IDS]) + (", ..." if len(xs) > _NOT_SHOWN_IDS else "")

    how = ([f"keys {names(keys)}"] if keys else []) + ([f"expand {names(ids)}"] if ids else [])
    return f"[{len(dropped)} more not shown" + (f"; {'; '.join(how)}]" if how else "]")


def _fit(sec: Section, allowed: int) -> tuple[str, list[str], set[str]]:
    """The section's text within ``allowed`` chars, the handles of what was left out, and the
    handles of items dropped whole (here: every item left out; an item is never cut)."""
    if not sec.items:
        return "", [], set()
    full = "\n".join(sec.lines(sec.items))
    if len(full) <= allowed:
        return full, [], set()
    kept: list[Item] = []
    dropped: list[Item] = []
    for n, item in enumerate(sec.items):  # most important first; the "not shown" line counted in
        rest = [*dropped, *sec.items[n + 1 :]]
        trial = [*kept, item]
        text = _with_not_shown(sec, trial, rest)
        if len(text) <= allowed:
            kept.append(item)
        else:
            dropped.append(item)
    if not kept:
        handles = [i.handle for i in sec.items if i.handle]
        return "", handles, set(handles)
    handles = [i.handle for i in dropped if i.handle]
    return _with_not_shown(sec, kept, dropped), handles, set(handles)


def _with_not_shown(sec: Section, kept: list[Item], dropped: list[Item]) -> str:
    lines = sec.lines(kept)
    if dropped:  # where the left-out items would be: before the oldest shown, or after the last
        at = 1 if sec.chronological else len(lines)
        lines = [*lines[:at], _not_shown(dropped), *lines[at:]]
    return "\n".join(lines)


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
    elsewhere: Mapping[str, str] | None = None,
) -> MemoryView:
    """The memory layer of ``branch`` for a prompt whose node content is ``query``
    (build it with :func:`~ai_scientist.memory.search.query_for`; an empty query skips archival).
    ``elsewhere`` maps the titles of the prompt's other layers to their text: a recall event whose
    text one of them holds says where it is instead of repeating it (its id still expands it)."""
    cfg = store.cfg
    if not cfg.enabled:  # memory.enabled=false: an empty layer, and nothing to snapshot
        return MemoryView("", [], {"branch": branch, "enabled": False})
    core = store.core_entries(branch)
    recall, rsnap = _recall_section(
        store, branch, cfg.recall_max_events, cfg.archival_snippet_budget_chars // 2, elsewhere
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
    parts, ledger, shown = [], [], {}
    alloc = _allot(sections, cfg.memory_budget_chars)
    for sec in sections:
        full = "\n".join(sec.lines(sec.items)) if sec.items else ""
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
            if f"core:{e.key}" in shown["core"]
        ],
        "recall_ids": [i for i in rsnap["recall_ids"] if i in shown["recall"]],
        "summary_ids": [i for i in rsnap["summary_ids"] if i in shown["recall"]],
        "archival_ids": [i.handle for i in arch.items if i.handle in shown["archival"]],
        "resource": bool(shown["resource"]),
    }
    text = "\n\n".join(parts)
    snapshot["chars"] = len(text)
    return MemoryView(_memory_text(text, lambda n: _render(sections, n)), ledger, snapshot)


def _allot(sections: list[Section], budget_chars: int) -> dict[str, int]:
    # the blank lines joining the sections come out of the budget too
    return _waterfill({s.name: s.chars for s in sections}, budget_chars - 2 * (len(sections) - 1))


def _render(sections: list[Section], budget_chars: int) -> str:
    """The memory text within ``budget_chars``, whole items dropped (``MemoryText.refit``)."""
    alloc = _allot(sections, budget_chars)
    return "\n\n".join(t for t in (_fit(sec, alloc[sec.name])[0] for sec in sections) if t)

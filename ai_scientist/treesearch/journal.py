"""The append-only journal of search nodes (``journal.jsonl``) and read-only views of it.

Every change to a node is one JSON line ``{"seq", "ts", "type", "node"}`` appended
and fsync'd; the latest record per id is the node's state, so replaying the file
rebuilds the tree exactly (ids, parents, statuses). :class:`JournalView` answers
the AIDE-style questions the policies ask (drafts, buggy leaves, good nodes,
ancestors ...) from an immutable snapshot; :class:`Journal` adds the writes.

Concurrency: writes are serialised by a lock, so file order equals ``seq`` order
and node ids are never handed out twice. Each write publishes a new immutable
snapshot, so readers on other threads never see a half-applied change; take
``journal.snapshot()`` when several reads must agree with each other.

Crash safety: a kill -9 during an append can leave a torn last line. Opening
the journal truncates that tail (reported in ``Journal.recovered``) before
anything new is appended. A damaged line that is *not* the last one is real
corruption and raises :class:`JournalError` naming the line.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.fileio import append_jsonl
from .best import TIE_ABS_TOL, TIE_REL_TOL, Choice, TieBreak, select_best, select_best_sorted
from .node import Node, format_node_id, values_close

RECORD_TYPES = ("node_created", "node_updated")


class JournalError(Exception):
    """The journal file or a requested change is inconsistent (says which line / node)."""


# Categories indexed per stage (and for all stages under the stage ``None``). A node's
# categories are a function of the node and of whether it has a search child, so
# every write can move it between indexes in O(log n) instead of rescanning the stage.
_CATS = (
    "all",  # every node, seed re-runs included
    "search",  # search nodes (seed re-runs excluded): the stage's iterations
    "draft",
    "good",
    "good_nometric",  # good search nodes without a valid metric (selection cannot rank them)
    "buggy",
    "buggy_leaf",  # buggy search nodes without a search child
    "finished",  # good or buggy search nodes
    "flight",  # pending or running, seed re-runs included (they occupy a worker)
    "idea",  # tune / ablate nodes that carry an idea, any status
    "idea_finished",
)


def _cats_of(node: Node, leaf: bool) -> tuple[str, ...]:
    out = ["all"]
    if node.in_flight:
        out.append("flight")
    if node.is_seed_eval:
        return tuple(out)
    out.append("search")
    if node.is_draft:
        out.append("draft")
    if node.is_good:
        out += ["good", "finished"]
        if node.metric is None or not node.metric.is_valid:
            out.append("good_nometric")
    elif node.is_buggy:
        out += ["buggy", "finished"] + (["buggy_leaf"] if leaf else [])
    if node.idea and node.operation in ("tune", "ablate"):
        out += ["idea", "idea_finished"] if node.is_finished else ["idea"]
    return tuple(out)


def _rank_entry(node: Node, order: int) -> tuple | None:
    """``(stage, metric key, (-score, order, id))`` of a good search node with a valid metric."""
    m = node.metric
    if node.is_seed_eval or not node.is_good or m is None or not m.is_valid:
        return None
    return node.stage, m.key, (-m.score, order, node.id)


@dataclass(frozen=True)
class _Data:
    """One state of the journal, never mutated once published (``order``, ``roots`` and
    ``debug_depth`` are append-only and shared between states: their values are fixed at
    creation, and a state never looks up an id it does not contain)."""

    nodes: dict  # id -> Node, in creation order
    order: dict  # id -> creation ordinal (0-based)
    roots: dict  # id -> id of its root draft
    debug_depth: dict  # id -> consecutive debug steps ending at it
    children: dict  # id -> tuple of child ids, in creation order
    search_children: dict  # id -> number of children that are search steps
    cats: dict  # (stage | None, category) -> tuple of ids, in creation order
    ranked: dict  # (stage, metric key) -> tuple of (-score, order, id), best first
    first: dict  # (stage, metric key) -> smallest order among ``ranked``
    good_roots: dict  # stage -> {root id: good search nodes in that tree}
    seq: int  # seq of the last record
    refinished: int  # how often an already finished node changed status or metric
    # memoised view answers for this state only (a write makes a new _Data, hence a new cache)
    memo: dict = field(init=False, default_factory=dict, repr=False, compare=False)


def _empty() -> _Data:
    return _Data({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, 0, 0)


# Fields a node keeps from creation on; the indexes above depend on them.
_FIXED = ("parent_id", "stage", "operation", "tree", "depth")


class _Edit:
    """Builds the next state from ``d``: copies what a write changes, never touches ``d``."""

    def __init__(self, d: _Data, seq: int):
        self.d = d
        self.seq = seq
        self.nodes = d.nodes.copy()
        self.cats = d.cats.copy()
        self.ranked, self.first = d.ranked, d.first
        self.good_roots = d.good_roots
        self.children, self.search_children = d.children, d.search_children
        self.refinished = d.refinished

    def _key_order(self, node_id: str) -> int:
        return self.d.order[node_id]

    def _move(self, node_id: str, stage: int, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        o = self.d.order[node_id]
        for cat in old:
            if cat not in new:
                for s in (stage, None):
                    t = self.cats[(s, cat)]
                    i = bisect.bisect_left(t, o, key=self._key_order)
                    self.cats[(s, cat)] = t[:i] + t[i + 1 :]
        for cat in new:
            if cat not in old:
                for s in (stage, None):
                    t = self.cats.get((s, cat), ())
                    i = bisect.bisect_left(t, o, key=self._key_order)
                    self.cats[(s, cat)] = t[:i] + (node_id,) + t[i:]
        if ("good" in old) != ("good" in new):
            if self.good_roots is self.d.good_roots:
                self.good_roots = dict(self.good_roots)
            per = dict(self.good_roots.get(stage, {}))
            root = self.d.roots[node_id]
            per[root] = per.get(root, 0) + (1 if "good" in new else -1)
            if not per[root]:
                del per[root]
            self.good_roots[stage] = per

    def _rank(self, old: tuple | None, new: tuple | None) -> None:
        if old == new:
            return
        if self.ranked is self.d.ranked:
            self.ranked, self.first = dict(self.ranked), dict(self.first)
        if old is not None:
            k = old[:2]
            t = self.ranked[k]
            i = bisect.bisect_left(t, old[2])
            t = t[:i] + t[i + 1 :]
            if t:
                self.ranked[k] = t
                if self.first[k] == old[2][1]:
                    self.first[k] = min(e[1] for e in t)
            else:
                del self.ranked[k], self.first[k]
        if new is not None:
            k = new[:2]
            t = self.ranked.get(k, ())
            i = bisect.bisect_left(t, new[2])
            self.ranked[k] = t[:i] + (new[2],) + t[i:]
            self.first[k] = min(self.first.get(k, new[2][1]), new[2][1])

    def create(self, node: Node) -> None:
        d = self.d
        if node.id in d.nodes:
            raise JournalError(f"node {node.id} already exists; a node is created once")
        pid = node.parent_id
        if pid is not None and pid not in d.nodes:
            raise JournalError(f"node {node.id}: parent {pid} is not in the journal")
        order = len(d.nodes)
        # append-only, shared with older states (see _Data)
        d.order[node.id] = order
        d.roots[node.id] = d.roots[pid] if pid is not None else node.id
        d.debug_depth[node.id] = (
            1 + (d.debug_depth[pid] if pid is not None else 0) if node.operation == "debug" else 0
        )
        self.nodes[node.id] = node
        self.children, self.search_children = d.children.copy(), d.search_children.copy()
        if pid is not None:
            self.children[pid] = self.children.get(pid, ()) + (node.id,)
            if not node.is_seed_eval:
                self.search_children[pid] = self.search_children.get(pid, 0) + 1
                if self.search_children[pid] == 1:  # the parent stops being a leaf
                    parent = d.nodes[pid]
                    self._move(pid, parent.stage, _cats_of(parent, True), _cats_of(parent, False))
        self._move(node.id, node.stage, (), _cats_of(node, True))
        self._rank(None, _rank_entry(node, order))

    def update(self, node: Node) -> None:
        d = self.d
        old = d.nodes.get(node.id)
        if old is None:
            raise JournalError(f"cannot update node {node.id}: it was never created")
        for f in _FIXED:
            if getattr(old, f) != getattr(node, f):
                raise JournalError(
                    f"node {node.id}: {f} is fixed at creation ({getattr(old, f)!r} -> {getattr(node, f)!r})"
                )
        self.nodes[node.id] = node
        leaf = not d.search_children.get(node.id)
        self._move(node.id, node.stage, _cats_of(old, leaf), _cats_of(node, leaf))
        order = d.order[node.id]
        self._rank(_rank_entry(old, order), _rank_entry(node, order))
        if old.is_finished and (old.status != node.status or old.metric != node.metric):
            self.refinished += 1

    def done(self) -> _Data:
        d = self.d
        return _Data(
            self.nodes, d.order, d.roots, d.debug_depth, self.children, self.search_children,
            self.cats, self.ranked, self.first, self.good_roots, self.seq, self.refinished,
        )  # fmt: skip


def _with_created(d: _Data, node: Node, seq: int) -> _Data:
    e = _Edit(d, seq)
    e.create(node)
    return e.done()


def _with_updated(d: _Data, node: Node, seq: int) -> _Data:
    e = _Edit(d, seq)
    e.update(node)
    return e.done()


class JournalView:
    """Read-only questions about the search tree (a consistent snapshot per call)."""

    def __init__(self, nodes: list[Node] | None = None) -> None:
        data = _empty()
        for n in nodes or []:
            data = _with_created(data, n, data.seq + 1)
        self._data = data
        # incremental answers shared by a journal and its snapshots (see ``derived``)
        self._derived: dict[Any, Any] = {}
        self._derived_lock = threading.Lock()

    # --------------------------------------------------------------- basic --
    @property
    def nodes(self) -> list[Node]:
        """All nodes in creation order."""
        return list(self._data.nodes.values())

    def __len__(self) -> int:
        return len(self._data.nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._data.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    @property
    def last_seq(self) -> int:
        return self._data.seq

    def get(self, node_id: str) -> Node:
        try:
            return self._data.nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in the journal ({len(self)} nodes)") from None

    def next_node_id(self) -> str:
        """The id the next created node gets: ``n0001``, ``n0002`` ... (count-based, replayable)."""
        return format_node_id(len(self._data.nodes) + 1)

    def snapshot(self) -> JournalView:
        """An immutable view of the current state."""
        view = JournalView.__new__(JournalView)
        view._data = self._data
        view._derived, view._derived_lock = self._derived, self._derived_lock
        return view

    def derived(self, key: Any, compute: Callable[[Any], Any]) -> Any:
        """``compute(previous)`` stored under ``key``: a cache for answers that are updated
        incrementally from their previous value (``previous`` is None the first time).
        Shared by the journal and its snapshots; ``compute`` must check that the
        previous value still applies to this view's state."""
        with self._derived_lock:
            value = compute(self._derived.get(key))
            self._derived[key] = value
            return value

    @property
    def refinished(self) -> int:
        """Changes to already finished nodes so far (incremental answers restart after one)."""
        return self._data.refinished

    # ----------------------------------------------------------- structure --
    def children(self, node_id: str) -> list[Node]:
        """Every child (including seed re-runs), in creation order."""
        d = self._data
        return [d.nodes[c] for c in d.children.get(node_id, ())]

    def search_children(self, node_id: str) -> list[Node]:
        """Children that are search steps (seed re-runs excluded)."""
        return [c for c in self.children(node_id) if not c.is_seed_eval]

    def is_leaf(self, node_id: str) -> bool:
        """No search child (seed re-runs do not count)."""
        self.get(node_id)
        return not self._data.search_children.get(node_id)

    @property
    def leaves(self) -> list[Node]:
        d = self._data
        return [n for n in d.nodes.values() if not n.is_seed_eval and not d.search_children.get(n.id)]

    def ancestors(self, node_id: str) -> list[Node]:
        """Parent, grandparent, ... up to the root (nearest first)."""
        d = self._data
        out: list[Node] = []
        cur = self.get(node_id).parent_id
        while cur is not None:
            n = d.nodes[cur]
            out.append(n)
            cur = n.parent_id
        return out

    def root_of(self, node_id: str) -> Node:
        """The draft at the top of the node's tree (the node itself for a draft)."""
        self.get(node_id)
        return self._data.nodes[self._data.roots[node_id]]

    def root_id(self, node_id: str) -> str:
        """Id of :meth:`root_of` (no lookup of the root node)."""
        self.get(node_id)
        return self._data.roots[node_id]

    def debug_depth(self, node_id: str) -> int:
        """Number of consecutive debug steps ending at this node (0 if it is not a debug)."""
        self.get(node_id)
        return self._data.debug_depth[node_id]

    # --------------------------------------------------------------- views --
    def ids(self, category: str, stage: int | None = None) -> tuple[str, ...]:
        """Ids of one indexed category (see ``_CATS``) in creation order; O(1)."""
        if category not in _CATS:
            raise ValueError(f"unknown category {category!r}; one of {_CATS}")
        return self._data.cats.get((stage, category), ())

    def count(self, category: str, stage: int | None = None) -> int:
        """Number of nodes in a category; O(1)."""
        return len(self.ids(category, stage))

    def _select(self, category: str, stage: int | None) -> list[Node]:
        """Nodes of one category in one state, memoised on that state."""
        d = self._data
        key = (category, stage)
        if key not in d.memo:
            nodes = d.nodes
            d.memo[key] = [nodes[i] for i in d.cats.get((stage, category), ())]
        return list(d.memo[key])

    def stage_nodes(self, stage: int | None = None, include_seed_eval: bool = False) -> list[Node]:
        """Nodes of ``stage`` (all stages when None) in creation order."""
        return self._select("all" if include_seed_eval else "search", stage)

    def draft_nodes(self, stage: int | None = None) -> list[Node]:
        return self._select("draft", stage)

    def buggy_nodes(self, stage: int | None = None) -> list[Node]:
        return self._select("buggy", stage)

    def buggy_leaves(self, stage: int | None = None) -> list[Node]:
        """Buggy search nodes without a search child, in creation order."""
        return self._select("buggy_leaf", stage)

    def good_nodes(self, stage: int | None = None) -> list[Node]:
        return self._select("good", stage)

    def finished_nodes(self, stage: int | None = None) -> list[Node]:
        """Good or buggy search nodes, in creation order."""
        return self._select("finished", stage)

    def in_flight(self, stage: int | None = None) -> list[Node]:
        """Pending or running nodes (seed re-runs included: they still occupy a worker)."""
        return self._select("flight", stage)

    def seed_runs(self, node_id: str) -> list[Node]:
        """The multi-seed re-runs of a node."""
        return [c for c in self.children(node_id) if c.is_seed_eval]

    def best_node(self, stage: int | None = None) -> Node | None:
        """Best good node of the stage by metric; ties go to the earliest (no LLM here)."""
        choice = self.best_choice(stage) if stage is not None else select_best(self.good_nodes(stage))
        return self.get(choice.node_id) if choice.node_id else None

    # ------------------------------------------------------------ selection --
    def primary_metric_key(
        self, stage: int, carried_id: str | None = None
    ) -> tuple[str, str, str | None] | None:
        """:func:`best.primary_metric_key` of the stage's good nodes plus the carried one,
        from the index (O(number of distinct metric keys))."""
        d = self._data
        counts = {k[1]: (len(t), d.first[k]) for k, t in d.ranked.items() if k[0] == stage}
        c = d.nodes.get(carried_id) if carried_id else None
        if c is not None and c.is_good and c.metric is not None and c.metric.is_valid:
            n, first = counts.get(c.metric.key, (0, 1 << 62))
            counts[c.metric.key] = (n + 1, min(first, d.order[c.id]))
        if not counts:
            return None
        return min(counts, key=lambda k: (-counts[k][0], counts[k][1]))

    def best_choice(
        self,
        stage: int,
        carried_id: str | None = None,
        *,
        avoid_roots: Collection[str] = (),
        tie_break: TieBreak | None = None,
    ) -> Choice:
        """``select_best`` over the stage's good nodes plus the carried node, passing over
        nodes whose root draft is in ``avoid_roots`` unless that leaves no candidate.

        Answers from the metric index when every candidate has a valid metric of one
        key (the usual case): O(ties + 10) instead of O(nodes). Otherwise, and when
        ``avoid_roots`` removes only some candidates, it runs :func:`select_best` on
        the filtered list; both give the same Choice.
        """
        d = self._data
        carried = d.nodes.get(carried_id) if carried_id else None
        pool_roots = set(d.good_roots.get(stage, ()))
        if carried is not None:
            pool_roots.add(d.roots[carried.id])
        avoid = pool_roots.intersection(avoid_roots)
        key = self.primary_metric_key(stage, carried_id)
        if (avoid and avoid != pool_roots) or not self._ranked_alone(stage, key, carried):
            pool = ([carried] if carried is not None else []) + self.good_nodes(stage)
            if avoid and avoid != pool_roots:
                pool = [n for n in pool if d.roots[n.id] not in avoid] or pool
            return select_best(pool, tie_break=tie_break)
        entries = d.ranked.get((stage, key), ())
        if carried is not None and carried.is_good:
            e = (-carried.metric.score, d.order[carried.id], carried.id)  # type: ignore[union-attr]
            i = bisect.bisect_left(entries, e)
            entries = entries[:i] + (e,) + entries[i:]
        return select_best_sorted([d.nodes[e[2]] for e in _top(entries)], key, tie_break=tie_break)

    def _ranked_alone(self, stage: int, key: tuple | None, carried: Node | None) -> bool:
        """Whether the ranking of ``key`` holds every good candidate in candidate order: no good
        node without a valid metric, no other metric key, and a carried node (first in the
        pool) from an earlier stage with a valid metric of ``key`` if it is good."""
        d = self._data
        if d.cats.get((stage, "good_nometric")) or any(k[0] == stage and k[1] != key for k in d.ranked):
            return False
        if carried is None:
            return True
        m = carried.metric
        return carried.stage < stage and (
            not carried.is_good or (m is not None and m.is_valid and m.key == key)
        )


def _top(entries: tuple) -> tuple:
    """The first 10 entries and every entry tied with the first (within the best.py tolerance)."""
    if not entries:
        return ()
    top = -entries[0][0]
    n = 10
    while n < len(entries) and values_close(-entries[n][0], top, TIE_REL_TOL, TIE_ABS_TOL):
        n += 1
    return entries[:n]


@dataclass(frozen=True)
class Recovery:
    """What opening the journal repaired: a torn tail of ``bytes_dropped`` bytes at ``line``."""

    line: int
    bytes_dropped: int


class Journal(JournalView):
    """The run's journal file plus its current state; see the module docstring."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._lock = threading.Lock()
        self.recovered: Recovery | None = None
        if self.path.exists():
            self._data, self.recovered = _read(self.path)

    # -------------------------------------------------------------- writes --
    def create(self, node: Node) -> Node:
        """Append a ``node_created`` record for a fully specified node (e.g. replay)."""
        with self._lock:
            expected = self.next_node_id()
            if node.id != expected:
                raise JournalError(
                    f"node id {node.id} out of order: the next id is {expected} (ids follow creation order)"
                )
            data = _with_created(self._data, node, self._data.seq + 1)
            self._append("node_created", node, data.seq)
            self._data = data
            return node

    def new_node(
        self,
        *,
        stage: int,
        operation: str,
        parent_id: str | None = None,
        tree: int | None = None,
        idea: str | None = None,
        seed: int | None = None,
        now: float | None = None,
    ) -> Node:
        """Create a pending node with the next id; depth and tree follow the parent.

        Atomic: concurrent callers get distinct ids.
        """
        with self._lock:
            parent = self.get(parent_id) if parent_id is not None else None
            node = Node(
                id=self.next_node_id(),
                parent_id=parent_id,
                stage=stage,
                operation=operation,
                idea=idea,
                seed=seed,
                depth=parent.depth + 1 if parent else 0,
                tree=tree if tree is not None else (parent.tree if parent else 0),
                created_at=time.time() if now is None else now,
            )
            data = _with_created(self._data, node, self._data.seq + 1)
            self._append("node_created", node, data.seq)
            self._data = data
            return node

    def update(self, node_id: str, **changes: Any) -> Node:
        """Apply ``changes`` to a node and append a ``node_updated`` record; returns the new node."""
        with self._lock:
            node = self.get(node_id).with_changes(**changes)
            data = _with_updated(self._data, node, self._data.seq + 1)
            self._append("node_updated", node, data.seq)
            self._data = data
            return node

    def put(self, node: Node) -> Node:
        """Record ``node`` (an updated copy of an existing node) as its new state."""
        with self._lock:
            data = _with_updated(self._data, node, self._data.seq + 1)
            self._append("node_updated", node, data.seq)
            self._data = data
            return node

    def _append(self, rtype: str, node: Node, seq: int) -> None:
        append_jsonl(self.path, {"seq": seq, "ts": time.time(), "type": rtype, "node": node.to_dict()})


def load(path: str | Path) -> Journal:
    """Open an existing journal (torn tail repaired); FileNotFoundError if it does not exist."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no journal here (is this a run directory?)")
    return Journal(p)


def _read(path: Path) -> tuple[_Data, Recovery | None]:
    raw = path.read_bytes()
    data, offset, line_no = _empty(), 0, 0
    while offset < len(raw):
        end = raw.find(b"\n", offset)
        line_no += 1
        if end == -1:  # no newline: the append was torn
            break
        line = raw[offset:end]
        try:
            if line.strip():
                data = _apply(data, json.loads(line))
        except (ValueError, JournalError) as exc:  # NodeError is a ValueError
            if end + 1 == len(raw):  # a damaged *final* line is a torn append too
                break
            raise JournalError(
                f"{path}:{line_no}: unreadable journal record ({exc}); the file is damaged "
                "before its last line, so it cannot be repaired automatically"
            ) from None
        offset = end + 1
    if offset == len(raw):
        return data, None
    os.truncate(path, offset)  # drop the torn tail so the next append starts a fresh line
    return data, Recovery(line=line_no, bytes_dropped=len(raw) - offset)


def _apply(d: _Data, rec: Any) -> _Data:
    if not isinstance(rec, dict) or rec.get("type") not in RECORD_TYPES:
        raise JournalError(f"not a journal record: {str(rec)[:80]!r}")
    seq = rec.get("seq")
    if not isinstance(seq, int) or seq <= d.seq:
        raise JournalError(f"seq {seq!r} does not follow {d.seq}")
    node = Node.from_dict(rec.get("node"))
    if rec["type"] == "node_created":
        expected = format_node_id(len(d.nodes) + 1)
        if node.id != expected:
            raise JournalError(f"node {node.id} created out of order (expected {expected})")
        return _with_created(d, node, seq)
    return _with_updated(d, node, seq)

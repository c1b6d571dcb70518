"""The append-only journal of search nodes (``journal.jsonl``) and read-only views of it.

Every change to a node is one JSON line ``{"seq", "ts", "type", "node"}`` appended
and fsync'd before the write returns (group commit: concurrent writers share an fsync,
waited for outside the lock); the latest record per id is the node's state, so replaying the file
rebuilds the tree exactly (ids, parents, statuses). :class:`JournalView` answers
the AIDE-style questions the policies ask (drafts, buggy leaves, good nodes,
ancestors ...) from an immutable :class:`~.index.SearchIndex` (the incremental
indexes live there, with their definitions); :class:`Journal` adds the writes.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.fileio import append_jsonl_nowait, wait_durable
from .best import (
    TIE_ABS_TOL,
    TIE_REL_TOL,
    Choice,
    TieBreak,
    ablation_stage_best,
    select_best,
    select_best_sorted,
)
from .index import InconsistentChange, SearchIndex
from .node import Node, format_node_id, values_close

RECORD_TYPES = ("node_created", "node_updated")


class JournalError(Exception):
    """The journal file or a requested change is inconsistent (says which line / node)."""


@dataclass(frozen=True, slots=True)
class _State:
    """One published state: the index of the nodes and the seq of the last record applied.
    Replaced as a whole on each write, so a reader always sees a matching pair."""

    index: SearchIndex
    seq: int


def _created(state: _State, node: Node, seq: int) -> _State:
    try:
        return _State(state.index.with_created(node), seq)
    except InconsistentChange as exc:
        raise JournalError(str(exc)) from None


def _updated(state: _State, node: Node, seq: int) -> _State:
    try:
        return _State(state.index.with_updated(node), seq)
    except InconsistentChange as exc:
        raise JournalError(str(exc)) from None


_EMPTY = _State(SearchIndex(), 0)


class JournalView:
    """Read-only questions about the search tree (a consistent snapshot per call)."""

    def __init__(self, nodes: list[Node] | None = None) -> None:
        state = _EMPTY
        for n in nodes or []:
            state = _created(state, n, state.seq + 1)
        self._state = state
        # per-state memo of node lists: (state it belongs to, {key: nodes}), replaced as a whole
        self._memo: tuple[_State, dict[Any, list[Node]]] = (state, {})
        # incremental answers shared by a journal and its snapshots (see ``derived``)
        self._derived: dict[Any, Any] = {}
        self._derived_lock = threading.Lock()

    @property
    def index(self) -> SearchIndex:
        """The search index of the current state (immutable; see :mod:`.index`)."""
        return self._state.index

    # --------------------------------------------------------------- basic --
    @property
    def nodes(self) -> list[Node]:
        """All nodes in creation order."""
        return list(self._state.index.nodes.values())

    def __len__(self) -> int:
        return len(self._state.index.nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._state.index.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    @property
    def last_seq(self) -> int:
        return self._state.seq

    def get(self, node_id: str) -> Node:
        try:
            return self._state.index.nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in the journal ({len(self)} nodes)") from None

    def next_node_id(self) -> str:
        """The id the next created node gets: ``n0001``, ``n0002`` ... (count-based, replayable)."""
        return format_node_id(len(self._state.index.nodes) + 1)

    def snapshot(self) -> JournalView:
        """An immutable view of the current state."""
        view = JournalView.__new__(JournalView)
        view._state = state = self._state
        memo = self._memo
        view._memo = memo if memo[0] is state else (state, {})
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
        return self._state.index.refinished

    # ----------------------------------------------------------- structure --
    def children(self, node_id: str) -> list[Node]:
        """Every child (including seed re-runs), in creation order."""
        ix = self._state.index
        return [ix.nodes[c] for c in ix.children.get(node_id, ())]

    def search_children(self, node_id: str) -> list[Node]:
        """Children that are search steps (seed re-runs excluded)."""
        return [c for c in self.children(node_id) if not c.is_seed_eval]

    def is_leaf(self, node_id: str) -> bool:
        """No search child (seed re-runs do not count)."""
        self.get(node_id)
        return self._state.index.is_leaf(node_id)

    @property
    def leaves(self) -> list[Node]:
        ix = self._state.index
        return [n for n in ix.nodes.values() if not n.is_seed_eval and ix.is_leaf(n.id)]

    def ancestors(self, node_id: str) -> list[Node]:
        """Parent, grandparent, ... up to the root (nearest first)."""
        nodes = self._state.index.nodes
        out: list[Node] = []
        cur = self.get(node_id).parent_id
        while cur is not None:
            n = nodes[cur]
            out.append(n)
            cur = n.parent_id
        return out

    def root_of(self, node_id: str) -> Node:
        """The draft at the top of the node's tree (the node itself for a draft)."""
        ix = self._state.index
        return ix.nodes[self.root_id(node_id)]

    def root_id(self, node_id: str) -> str:
        """Id of :meth:`root_of` (no lookup of the root node)."""
        self.get(node_id)
        return self._state.index.facts[node_id].root

    def debug_depth(self, node_id: str) -> int:
        """Number of consecutive debug steps ending at this node (0 if it is not a debug)."""
        self.get(node_id)
        return self._state.index.facts[node_id].debug_depth

    # --------------------------------------------------------------- views --
    def ids(self, category: str, stage: int | None = None) -> tuple[str, ...]:
        """Ids of one indexed category (see ``index.CATEGORIES``) in creation order; O(1)."""
        return self._state.index.ids(category, stage)

    def count(self, category: str, stage: int | None = None) -> int:
        """Number of nodes in a category; O(1)."""
        return len(self.ids(category, stage))

    def _select(self, category: str, stage: int | None) -> list[Node]:
        """Nodes of one category in one state, memoised on that state."""
        state = self._state
        memo = self._memo
        if memo[0] is not state:  # a write happened: start a memo for the new state
            memo = self._memo = (state, {})
        key = (category, stage)
        found = memo[1].get(key)
        if found is None:
            nodes = state.index.nodes
            found = memo[1][key] = [nodes[i] for i in state.index.ids(category, stage)]
        return list(found)

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
        ix = self._state.index
        counts = {k[1]: (len(t), ix.first[k]) for k, t in ix.ranked.items() if k[0] == stage}
        c = ix.nodes.get(carried_id) if carried_id else None
        if c is not None and c.is_good and c.metric is not None and c.metric.is_valid:
            n, first = counts.get(c.metric.key, (0, 1 << 62))
            counts[c.metric.key] = (n + 1, min(first, ix.facts[c.id].order))
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

        The ablation stage is the exception: its best is the carried node, the node its
        ablations were run against (:func:`best.ablation_stage_best`).
        """
        ix = self._state.index
        carried = ix.nodes.get(carried_id) if carried_id else None
        fixed = ablation_stage_best(
            stage, carried.id if carried is not None else None, self.good_nodes(stage)
        )
        if fixed is not None:
            return fixed
        pool_roots = set(ix.good_roots.get(stage, ()))
        if carried is not None:
            pool_roots.add(ix.facts[carried.id].root)
        avoid = pool_roots.intersection(avoid_roots)
        key = self.primary_metric_key(stage, carried_id)
        if (avoid and avoid != pool_roots) or not self._ranked_alone(stage, key, carried):
            pool = ([carried] if carried is not None else []) + self.good_nodes(stage)
            if avoid and avoid != pool_roots:
                pool = [n for n in pool if ix.facts[n.id].root not in avoid] or pool
            return select_best(pool, tie_break=tie_break)
        entries = ix.ranked.get((stage, key), ()) if key is not None else ()
        if carried is not None and carried.is_good:
            e = (-carried.metric.score, ix.facts[carried.id].order, carried.id)  # type: ignore[union-attr]
            i = bisect.bisect_left(entries, e)
            entries = entries[:i] + (e,) + entries[i:]
        return select_best_sorted([ix.nodes[e[2]] for e in _top(entries)], key, tie_break=tie_break)

    def tree_ids(self, stage: int, tree: int) -> tuple[str, ...]:
        """Ids of the stage's search nodes in forest tree ``tree``, in creation order; O(1)."""
        return self._state.index.trees.get((stage, tree), ())

    def tree_best(self, stage: int, tree: int, carried_id: str | None = None) -> str | None:
        """``select_best(good nodes of the stage in tree ``tree`` + the carried node).node_id``
        (no tie-break: the earliest of the tied wins), from the tree's metric rankings:
        O(metric keys + ties) instead of O(nodes of the tree)."""
        ix = self._state.index
        carried = self.get(carried_id) if carried_id else None
        cm = carried.metric if carried is not None and carried.is_good else None
        if cm is not None and not cm.is_valid:
            cm = None
        counts = {
            k[2]: (len(t), ix.tree_first[k]) for k, t in ix.tree_ranked.items() if k[:2] == (stage, tree)
        }
        if carried is not None and cm is not None:
            n, first = counts.get(cm.key, (0, 1 << 62))
            counts[cm.key] = (n + 1, min(first, ix.facts[carried.id].order))
        if not counts:  # no candidate has a valid metric: every good one ties, the earliest wins
            pool = [ix.nodes[i] for i in self.tree_ids(stage, tree)] + ([carried] if carried else [])
            return select_best(pool).node_id
        key = min(counts, key=lambda k: (-counts[k][0], counts[k][1]))
        entries = ix.tree_ranked.get((stage, tree, key), ())
        if carried is not None and cm is not None and cm.key == key:
            e = (-cm.score, ix.facts[carried.id].order, carried.id)
            i = bisect.bisect_left(entries, e)
            entries = entries[:i] + (e,) + entries[i:]
        # the nodes tied with the top are a prefix of the ranking (as in ``_top``)
        top, best, i = -entries[0][0], entries[0], 1
        while i < len(entries) and values_close(-entries[i][0], top, TIE_REL_TOL, TIE_ABS_TOL):
            best = min(best, entries[i], key=lambda x: x[1])
            i += 1
        return best[2]

    def _ranked_alone(self, stage: int, key: tuple | None, carried: Node | None) -> bool:
        """Whether the ranking of ``key`` holds every good candidate in candidate order: no good
        node without a valid metric, no other metric key, and a carried node (first in the
        pool) from an earlier stage with a valid metric of ``key`` if it is good."""
        ix = self._state.index
        if ix.ids("good_nometric", stage) or any(k[0] == stage and k[1] != key for k in ix.ranked):
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
            self._state, self.recovered = _read(self.path)

    # -------------------------------------------------------------- writes --
    def create(self, node: Node) -> Node:
        """Append a ``node_created`` record for a fully specified node (e.g. replay)."""
        with self._lock:
            expected = self.next_node_id()
            if node.id != expected:
                raise JournalError(
                    f"node id {node.id} out of order: the next id is {expected} (ids follow creation order)"
                )
            state = _created(self._state, node, self._state.seq + 1)
            ticket = self._append("node_created", node, state.seq)
            self._state = state
        wait_durable(self.path, ticket)  # outside the lock: concurrent writers share one fsync
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
            state = _created(self._state, node, self._state.seq + 1)
            ticket = self._append("node_created", node, state.seq)
            self._state = state
        wait_durable(self.path, ticket)  # outside the lock: concurrent writers share one fsync
        return node

    def update(self, node_id: str, **changes: Any) -> Node:
        """Apply ``changes`` to a node and append a ``node_updated`` record; returns the new node."""
        with self._lock:
            node = self.get(node_id).with_changes(**changes)
            state = _updated(self._state, node, self._state.seq + 1)
            ticket = self._append("node_updated", node, state.seq)
            self._state = state
        wait_durable(self.path, ticket)  # outside the lock: concurrent writers share one fsync
        return node

    def put(self, node: Node) -> Node:
        """Record ``node`` (an updated copy of an existing node) as its new state."""
        with self._lock:
            state = _updated(self._state, node, self._state.seq + 1)
            ticket = self._append("node_updated", node, state.seq)
            self._state = state
        wait_durable(self.path, ticket)  # outside the lock: concurrent writers share one fsync
        return node

    def _append(self, rtype: str, node: Node, seq: int) -> int:
        """Write the record (under the lock: file order is seq order); the caller waits for its
        durability after releasing the lock (group commit, see ``base.fileio.append_jsonl``)."""
        record = {"seq": seq, "ts": time.time(), "type": rtype, "node": node.to_dict()}
        return append_jsonl_nowait(self.path, record)


def load(path: str | Path) -> Journal:
    """Open an existing journal (torn tail repaired); FileNotFoundError if it does not exist."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no journal here (is this a run directory?)")
    return Journal(p)


def _read(path: Path) -> tuple[_State, Recovery | None]:
    raw = path.read_bytes()
    data, offset, line_no = _EMPTY, 0, 0
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


def _apply(d: _State, rec: Any) -> _State:
    if not isinstance(rec, dict) or rec.get("type") not in RECORD_TYPES:
        raise JournalError(f"not a journal record: {str(rec)[:80]!r}")
    seq = rec.get("seq")
    if not isinstance(seq, int) or seq <= d.seq:
        raise JournalError(f"seq {seq!r} does not follow {d.seq}")
    raw = rec.get("node")
    if not isinstance(raw, dict):
        raise JournalError(f"record seq {seq} carries no node: {str(rec)[:80]!r}")
    node = Node.from_dict(raw)
    if rec["type"] == "node_created":
        expected = format_node_id(len(d.index.nodes) + 1)
        if node.id != expected:
            raise JournalError(f"node {node.id} created out of order (expected {expected})")
        return _created(d, node, seq)
    return _updated(d, node, seq)

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

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..util.io import append_jsonl
from .best import select_best
from .node import Node, format_node_id

RECORD_TYPES = ("node_created", "node_updated")


class JournalError(Exception):
    """The journal file or a requested change is inconsistent (says which line / node)."""


@dataclass(frozen=True)
class _Data:
    """One immutable state. The indexes hold facts fixed at creation (parent, stage,
    operation), so updates only replace ``nodes``."""

    nodes: MappingProxyType  # id -> Node, in creation order
    children: MappingProxyType  # id -> tuple of child ids, in creation order
    roots: MappingProxyType  # id -> id of its root draft
    debug_depth: MappingProxyType  # id -> consecutive debug steps ending at it
    by_stage: MappingProxyType  # stage -> tuple of ids, in creation order
    seq: int  # seq of the last record
    # memoised view answers for this state only (a write makes a new _Data, hence a new cache)
    memo: dict = field(init=False, default_factory=dict, repr=False, compare=False)


_EMPTY = _Data(*(MappingProxyType({}) for _ in range(5)), 0)
# Fields a node keeps from creation on; the indexes above depend on them.
_FIXED = ("parent_id", "stage", "operation", "tree", "depth")


class JournalView:
    """Read-only questions about the search tree (a consistent snapshot per call)."""

    def __init__(self, nodes: list[Node] | None = None) -> None:
        data = _EMPTY
        for n in nodes or []:
            data = _with_created(data, n, data.seq + 1)
        self._data = data

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
        view = JournalView()
        view._data = self._data
        return view

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
        return not self.search_children(node_id)

    @property
    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if not n.is_seed_eval and self.is_leaf(n.id)]

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

    def debug_depth(self, node_id: str) -> int:
        """Number of consecutive debug steps ending at this node (0 if it is not a debug)."""
        self.get(node_id)
        return self._data.debug_depth[node_id]

    # --------------------------------------------------------------- views --
    def _select(
        self, name: str, stage: int | None, keep: Callable[[Node], bool], seeds: bool = False
    ) -> list[Node]:
        """Nodes of one state (read once, so a concurrent write cannot mix two states),
        memoised on that state."""
        d = self._data
        key = (name, stage, seeds)
        if key not in d.memo:
            nodes = d.nodes.values() if stage is None else [d.nodes[i] for i in d.by_stage.get(stage, ())]
            d.memo[key] = [n for n in nodes if (seeds or not n.is_seed_eval) and keep(n)]
        return list(d.memo[key])

    def stage_nodes(self, stage: int | None = None, include_seed_eval: bool = False) -> list[Node]:
        """Nodes of ``stage`` (all stages when None) in creation order."""
        return self._select("stage", stage, lambda n: True, include_seed_eval)

    def draft_nodes(self, stage: int | None = None) -> list[Node]:
        return self._select("draft", stage, lambda n: n.is_draft)

    def buggy_nodes(self, stage: int | None = None) -> list[Node]:
        return self._select("buggy", stage, lambda n: n.is_buggy)

    def good_nodes(self, stage: int | None = None) -> list[Node]:
        return self._select("good", stage, lambda n: n.is_good)

    def in_flight(self, stage: int | None = None) -> list[Node]:
        """Pending or running nodes (seed re-runs included: they still occupy a worker)."""
        return self._select("flight", stage, lambda n: n.in_flight, seeds=True)

    def seed_runs(self, node_id: str) -> list[Node]:
        """The multi-seed re-runs of a node."""
        return [c for c in self.children(node_id) if c.is_seed_eval]

    def best_node(self, stage: int | None = None) -> Node | None:
        """Best good node of the stage by metric; ties go to the earliest (no LLM here)."""
        choice = select_best(self.good_nodes(stage))
        return self.get(choice.node_id) if choice.node_id else None


def _with_created(d: _Data, node: Node, seq: int) -> _Data:
    if node.id in d.nodes:
        raise JournalError(f"node {node.id} already exists; a node is created once")
    pid = node.parent_id
    if pid is not None and pid not in d.nodes:
        raise JournalError(f"node {node.id}: parent {pid} is not in the journal")
    children = dict(d.children)
    if pid is not None:
        children[pid] = children.get(pid, ()) + (node.id,)
    dd = 0
    if node.operation == "debug":
        dd = 1 + (d.debug_depth[pid] if pid is not None else 0)
    return _Data(
        nodes=MappingProxyType({**d.nodes, node.id: node}),
        children=MappingProxyType(children),
        roots=MappingProxyType({**d.roots, node.id: d.roots[pid] if pid is not None else node.id}),
        debug_depth=MappingProxyType({**d.debug_depth, node.id: dd}),
        by_stage=MappingProxyType({**d.by_stage, node.stage: d.by_stage.get(node.stage, ()) + (node.id,)}),
        seq=seq,
    )


def _with_updated(d: _Data, node: Node, seq: int) -> _Data:
    old = d.nodes.get(node.id)
    if old is None:
        raise JournalError(f"cannot update node {node.id}: it was never created")
    for f in _FIXED:
        if getattr(old, f) != getattr(node, f):
            raise JournalError(
                f"node {node.id}: {f} is fixed at creation ({getattr(old, f)!r} -> {getattr(node, f)!r})"
            )
    nodes = dict(d.nodes)
    nodes[node.id] = node
    return replace(d, nodes=MappingProxyType(nodes), seq=seq)


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

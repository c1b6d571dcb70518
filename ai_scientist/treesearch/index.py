"""The search index: what policies and stage checks ask of the tree, kept up to date per write.

A :class:`SearchIndex` is an immutable value. ``with_created(node)`` and
``with_updated(node)`` return a new index and never touch the old one, so the
journal can publish each state to readers on other threads without a lock, and
a snapshot keeps answering for its own state however many writes follow. A
write copies the maps it changes (a few dict copies, small next to one LLM
call) and moves the node between sorted tuples with bisect, so no question
needs a scan of the stage.

What each field holds, by definition (``tests/test_search_index.py`` recomputes
every one from the node list after random histories and compares):

``nodes``
    id -> latest :class:`Node`, in creation order.
``facts``
    id -> :class:`NodeFacts`: creation ordinal (0-based), id of the root draft
    of its tree, and the number of consecutive debug steps ending at it.
``children``
    id -> ids of its children (seed re-runs included), in creation order; only
    ids that have a child.
``search_children``
    id -> number of children that are search steps (not seed re-runs); only ids
    that have one.
``cats``
    (stage, category) -> ids in creation order; stage ``None`` means all
    stages; see :data:`CATEGORIES`. Empty categories have no key.
``ranked``
    (stage, metric key) -> ``(-score, order, id)`` of every good search node
    with a valid metric of that key, best first (ties in creation order).
``first``
    (stage, metric key) -> the smallest ``order`` among ``ranked[...]``.
``good_roots``
    stage -> {root id: number of good search nodes of the stage in that tree};
    stages and roots without a good node have no key.
``trees``
    (stage, forest tree) -> ids of the stage's search nodes with that ``tree``, in
    creation order (the scopes of ``mcts``); empty ones have no key.
``tree_ranked``, ``tree_first``
    (stage, forest tree, metric key) -> ``ranked`` / ``first`` restricted to that tree.
``refinished``
    number of updates that changed the status or metric of an already
    finished node (answers kept incrementally elsewhere restart after one).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from .node import Node

MetricKey = tuple[str, str, str | None]  # Metric.key: name, direction, dataset

# What a node may belong to. A node's categories are a function of the node and of
# whether it has a search child (:func:`categories_of`).
CATEGORIES = (
    "all",  # every node, seed re-runs included
    "search",  # search nodes (seed re-runs excluded): the stage's iterations
    "draft",
    "good",
    "good_nometric",  # good search nodes without a valid metric (selection cannot rank them)
    "incomparable",  # working search nodes that changed the stage's evaluation protocol (never ranked)
    "buggy",
    "buggy_leaf",  # buggy search nodes without a search child
    "finished",  # good or buggy search nodes
    "flight",  # pending or running, seed re-runs included (they occupy a worker)
    "idea",  # tune / ablate / stage-3 improve search nodes that carry an idea, any status
    "idea_finished",  # the finished ones among ``idea``
)

# Fields a node keeps from creation on; ``facts``, ``children`` and the stage keys depend on them.
FIXED_FIELDS = ("parent_id", "stage", "operation", "tree", "depth")


class InconsistentChange(ValueError):
    """A write the index cannot apply (duplicate id, unknown parent, a fixed field changed)."""


class NodeFacts(NamedTuple):
    """What the index knows about a node from its creation on (never changes)."""

    order: int  # creation ordinal, 0-based
    root: str  # id of the draft at the top of its tree (its own id for a draft)
    debug_depth: int  # consecutive debug steps ending at it (0 if it is not a debug)


def categories_of(node: Node, leaf: bool) -> tuple[str, ...]:
    """The categories of ``node``; ``leaf``: it has no search child."""
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
    elif node.is_incomparable:
        out += ["incomparable", "finished"]
    elif node.is_buggy:
        out += ["buggy", "finished"] + (["buggy_leaf"] if leaf else [])
    # a stage-3 improve node carries a research idea (runloop/run_calls.py), a stage-1 one never
    if node.idea and (
        node.operation in ("tune", "ablate") or (node.operation == "improve" and node.stage == 3)
    ):
        out += ["idea", "idea_finished"] if node.is_finished else ["idea"]
    return tuple(out)


RankEntry = tuple[float, int, str]  # (-score, order, id): sorts best first, ties in creation order


def rank_entry(node: Node, order: int) -> tuple[int, MetricKey, RankEntry] | None:
    """``(stage, metric key, (-score, order, id))`` of a good search node with a valid metric, else None."""
    m = node.metric
    if node.is_seed_eval or not node.is_good or m is None or not m.is_valid:
        return None
    return node.stage, m.key, (-m.score, order, node.id)


@dataclass(frozen=True)
class SearchIndex:
    """The indexes of one state of the tree (see the module docstring); never mutated."""

    nodes: Mapping[str, Node] = field(default_factory=dict)
    facts: Mapping[str, NodeFacts] = field(default_factory=dict)
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    search_children: Mapping[str, int] = field(default_factory=dict)
    cats: Mapping[tuple[int | None, str], tuple[str, ...]] = field(default_factory=dict)
    ranked: Mapping[tuple[int, MetricKey], tuple[RankEntry, ...]] = field(default_factory=dict)
    first: Mapping[tuple[int, MetricKey], int] = field(default_factory=dict)
    good_roots: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    trees: Mapping[tuple[int, int], tuple[str, ...]] = field(default_factory=dict)
    tree_ranked: Mapping[tuple[int, int, MetricKey], tuple[RankEntry, ...]] = field(default_factory=dict)
    tree_first: Mapping[tuple[int, int, MetricKey], int] = field(default_factory=dict)
    refinished: int = 0

    @classmethod
    def of(cls, nodes: list[Node]) -> SearchIndex:
        """The index of ``nodes`` created in this order (each in its final state)."""
        index = cls()
        for n in nodes:
            index = index.with_created(n)
        return index

    # -------------------------------------------------------------- writes --
    def with_created(self, node: Node) -> SearchIndex:
        """The index after ``node`` is created (its parent must exist, its id must be new)."""
        e = _Edit(self)
        e.create(node)
        return e.done()

    def with_updated(self, node: Node) -> SearchIndex:
        """The index after ``node`` replaces the node of the same id (fixed fields unchanged)."""
        e = _Edit(self)
        e.update(node)
        return e.done()

    # ------------------------------------------------------------- queries --
    def ids(self, category: str, stage: int | None = None) -> tuple[str, ...]:
        """Ids of one category in creation order; O(1)."""
        if category not in CATEGORIES:
            raise ValueError(f"unknown category {category!r}; one of {CATEGORIES}")
        return self.cats.get((stage, category), ())

    def is_leaf(self, node_id: str) -> bool:
        """No search child (seed re-runs do not count)."""
        return not self.search_children.get(node_id)


class _Edit:
    """Builds the next index from ``old``. Mutable on purpose and private: it copies a map of
    ``old`` before its first change to it, so ``old`` is never touched."""

    def __init__(self, old: SearchIndex):
        self.old = old
        self.nodes = dict(old.nodes)  # every write replaces or adds a node
        self.facts = old.facts
        self.children, self.search_children = old.children, old.search_children
        self.trees = old.trees
        self.cats = dict(old.cats)  # small: stages x categories
        self.refinished = old.refinished
        # copies made on the first change (most writes change neither)
        self._ranked: tuple[dict, dict] | None = None
        self._tree_ranked: tuple[dict, dict] | None = None
        self._good_roots: dict[int, Mapping[str, int]] | None = None

    def _order(self, node_id: str) -> int:
        return self.facts[node_id].order

    def _move(self, node_id: str, stage: int, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        """Move a node from categories ``old`` to ``new`` (its creation order keeps tuples sorted)."""
        o = self._order(node_id)
        for cat in old:
            if cat not in new:
                for s in (stage, None):
                    t = self.cats[(s, cat)]
                    i = bisect.bisect_left(t, o, key=self._order)
                    if len(t) == 1:
                        del self.cats[(s, cat)]
                    else:
                        self.cats[(s, cat)] = t[:i] + t[i + 1 :]
        for cat in new:
            if cat not in old:
                for s in (stage, None):
                    t = self.cats.get((s, cat), ())
                    i = bisect.bisect_left(t, o, key=self._order)
                    self.cats[(s, cat)] = t[:i] + (node_id,) + t[i:]
        if ("good" in old) != ("good" in new):
            if self._good_roots is None:
                self._good_roots = dict(self.old.good_roots)
            per = dict(self._good_roots.get(stage, {}))
            root = self.facts[node_id].root
            per[root] = per.get(root, 0) + (1 if "good" in new else -1)
            if not per[root]:
                del per[root]
            if per:
                self._good_roots[stage] = per
            else:
                del self._good_roots[stage]

    def _rank(self, old: tuple | None, new: tuple | None, tree: int) -> None:
        if old == new:
            return
        if self._ranked is None or self._tree_ranked is None:
            self._ranked = dict(self.old.ranked), dict(self.old.first)
            self._tree_ranked = dict(self.old.tree_ranked), dict(self.old.tree_first)
        _rerank(*self._ranked, old, new)
        _rerank(  # the same entries under (stage, tree, key)
            *self._tree_ranked,
            None if old is None else (old[0], tree, *old[1:]),
            None if new is None else (new[0], tree, *new[1:]),
        )

    def create(self, node: Node) -> None:
        old = self.old
        if node.id in old.nodes:
            raise InconsistentChange(f"node {node.id} already exists; a node is created once")
        pid = node.parent_id
        if pid is not None and pid not in old.nodes:
            raise InconsistentChange(f"node {node.id}: parent {pid} is not in the journal")
        parent = old.facts[pid] if pid is not None else None
        depth = (1 + (parent.debug_depth if parent else 0)) if node.operation == "debug" else 0
        self.facts = {
            **old.facts,
            node.id: NodeFacts(len(old.nodes), parent.root if parent else node.id, depth),
        }
        self.nodes[node.id] = node
        if pid is not None:
            self.children = {**old.children, pid: old.children.get(pid, ()) + (node.id,)}
            if not node.is_seed_eval:
                n = old.search_children.get(pid, 0) + 1
                self.search_children = {**old.search_children, pid: n}
                if n == 1:  # the parent stops being a leaf
                    p = old.nodes[pid]
                    self._move(pid, p.stage, categories_of(p, True), categories_of(p, False))
        self._move(node.id, node.stage, (), categories_of(node, True))
        if not node.is_seed_eval:
            k = (node.stage, node.tree)
            self.trees = {**old.trees, k: old.trees.get(k, ()) + (node.id,)}
        self._rank(None, rank_entry(node, len(old.nodes)), node.tree)

    def update(self, node: Node) -> None:
        old_node = self.old.nodes.get(node.id)
        if old_node is None:
            raise InconsistentChange(f"cannot update node {node.id}: it was never created")
        for f in FIXED_FIELDS:
            if getattr(old_node, f) != getattr(node, f):
                raise InconsistentChange(
                    f"node {node.id}: {f} is fixed at creation "
                    f"({getattr(old_node, f)!r} -> {getattr(node, f)!r})"
                )
        self.nodes[node.id] = node
        leaf = self.old.is_leaf(node.id)
        self._move(node.id, node.stage, categories_of(old_node, leaf), categories_of(node, leaf))
        order = self._order(node.id)
        self._rank(rank_entry(old_node, order), rank_entry(node, order), node.tree)
        if old_node.is_finished and (
            old_node.status != node.status
            or old_node.metric != node.metric
            or old_node.incomparable != node.incomparable
        ):
            self.refinished += 1

    def done(self) -> SearchIndex:
        return SearchIndex(
            nodes=self.nodes,
            facts=self.facts,
            children=self.children,
            search_children=self.search_children,
            cats=self.cats,
            ranked=self._ranked[0] if self._ranked else self.old.ranked,
            first=self._ranked[1] if self._ranked else self.old.first,
            good_roots=self.old.good_roots if self._good_roots is None else self._good_roots,
            trees=self.trees,
            tree_ranked=self._tree_ranked[0] if self._tree_ranked else self.old.tree_ranked,
            tree_first=self._tree_ranked[1] if self._tree_ranked else self.old.tree_first,
            refinished=self.refinished,
        )


def _rerank(ranked: dict, first: dict, old: tuple | None, new: tuple | None) -> None:
    """Move one entry in ``ranked`` / ``first``: ``old`` and ``new`` are ``(*map key, entry)``."""
    if old is not None:
        k, e = old[:-1], old[-1]
        t = ranked[k]
        i = bisect.bisect_left(t, e)
        t = t[:i] + t[i + 1 :]
        if t:
            ranked[k] = t
            if first[k] == e[1]:
                first[k] = min(x[1] for x in t)
        else:
            del ranked[k], first[k]
    if new is not None:
        k, e = new[:-1], new[-1]
        t = ranked.get(k, ())
        i = bisect.bisect_left(t, e)
        ranked[k] = t[:i] + (e,) + t[i:]
        first[k] = min(first.get(k, e[1]), e[1])

"""The journal's incremental indexes give the same answers as scanning the nodes.

Random histories of creates and updates (statuses changing back and forth,
metrics of two keys, missing and NaN metrics, seed re-runs, a carried node from
an earlier stage) are applied to a journal; after every write the indexed
views, ``best_choice`` (with and without roots to avoid) and the stage-3
no-improvement streak are compared with brute-force versions written from the
definitions in best.py / stages.py.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_scientist.treesearch import Journal, Metric, Node
from ai_scientist.treesearch.best import (
    TIE_ABS_TOL,
    TIE_REL_TOL,
    comparable_metric,
    primary_metric_key,
    select_best,
)
from ai_scientist.treesearch.index import CATEGORIES, InconsistentChange, SearchIndex
from ai_scientist.treesearch.node import format_node_id
from ai_scientist.treesearch.stages import no_improvement_streak

KEYS = [("acc", "maximize", "val"), ("loss", "minimize", "val")]
VALUES = [0.5, 0.7, 0.7, 0.9, 0.9000000001, 1.0, math.nan, -0.0, 0.0, math.inf]


def _metric(draw_key: int, value: float) -> Metric:
    name, direction, dataset = KEYS[draw_key]
    return Metric(name, value, direction, dataset)


step = st.one_of(
    # create: (kind, parent choice, stage choice, op choice)
    st.tuples(st.just("create"), st.integers(0, 10**6), st.integers(0, 2), st.integers(0, 4)),
    # update: (kind, node choice, status, metric key, value index or -1 for none)
    st.tuples(
        st.just("update"),
        st.integers(0, 10**6),
        st.sampled_from(["running", "good", "buggy", "good"]),
        st.sampled_from([0, 0, 0, 1]),
        st.integers(-1, len(VALUES) - 1),
    ),
)


def _reference_streak(view, stage, carried):
    finished = [n for n in view.nodes if n.stage == stage and not n.is_seed_eval and n.is_finished]
    pool = [n for n in finished if n.is_good] + ([carried] if carried and carried.is_good else [])
    key = primary_metric_key(pool)
    best = comparable_metric(carried, key) if carried else None
    streak = 0
    for n in finished:
        m = comparable_metric(n, key) if n.is_good else None
        if m is not None and (best is None or m.better_than(best, TIE_REL_TOL, TIE_ABS_TOL)):
            best, streak = m, 0
        else:
            streak += 1
    return streak


def _check(j: Journal, carried_id: str) -> None:
    nodes = j.nodes
    for stage in (None, 2, 3):
        mine = [n for n in nodes if stage is None or n.stage == stage]
        search = [n for n in mine if not n.is_seed_eval]
        assert j.stage_nodes(stage) == search
        assert j.stage_nodes(stage, include_seed_eval=True) == mine
        assert j.good_nodes(stage) == [n for n in search if n.is_good]
        assert j.buggy_nodes(stage) == [n for n in search if n.is_buggy]
        assert j.finished_nodes(stage) == [n for n in search if n.is_finished]
        assert j.in_flight(stage) == [n for n in mine if n.in_flight]
        assert j.draft_nodes(stage) == [n for n in search if n.is_draft]
        assert j.buggy_leaves(stage) == [
            n for n in search if n.is_buggy and not any(not c.is_seed_eval for c in j.children(n.id))
        ]
        assert j.count("search", stage) == len(search)
    carried = j.get(carried_id)
    roots = sorted({j.root_id(n.id) for n in nodes})
    for stage in (2, 3):
        pool = [carried] + j.good_nodes(stage)
        for avoid in ([], roots[:1], roots[1:2], roots):
            idle = [n for n in pool if j.root_id(n.id) not in avoid] or pool
            assert j.best_choice(stage, carried_id, avoid_roots=avoid) == select_best(idle), (stage, avoid)
        asked, expected_asked = [], []

        def last_of(cands, log):
            log.append([c.id for c in cands])
            return cands[-1].id, "last"

        expected = select_best(pool, tie_break=lambda c, log=expected_asked: last_of(c, log))
        assert j.best_choice(stage, carried_id, tie_break=lambda c, log=asked: last_of(c, log)) == expected
        assert asked == expected_asked
        assert j.primary_metric_key(stage, carried_id) == primary_metric_key([n for n in pool if n.is_good])
    assert no_improvement_streak(j, 3, carried) == _reference_streak(j, 3, carried)
    assert no_improvement_streak(j.snapshot(), 3, carried) == _reference_streak(j, 3, carried)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=60), carried_good=st.booleans())
def test_indexes_match_brute_force(tmp_path_factory, steps, carried_good):
    j = Journal(tmp_path_factory.mktemp("idx") / "journal.jsonl")
    # stage 1: two drafts (two trees); the carried node comes from it
    a = j.new_node(stage=1, operation="draft")
    j.new_node(stage=1, operation="draft")
    status = "good" if carried_good else "buggy"
    j.update(a.id, status=status, metric=_metric(0, 0.8) if carried_good else None)
    ops = ["improve", "debug", "tune", "seed_eval", "draft"]
    for s in steps:
        nodes = j.nodes
        if s[0] == "create":
            _, pick, stage_i, op_i = s
            stage = (2, 3, 3)[stage_i]
            op = ops[op_i]
            parent = nodes[pick % len(nodes)].id
            if op == "draft":
                j.new_node(stage=stage, operation="improve", parent_id=parent)
            else:
                j.new_node(
                    stage=stage, operation=op, parent_id=parent, idea="lr 0.1" if op == "tune" else None
                )
        else:
            _, pick, status, key_i, v_i = s
            later = [n for n in nodes if n.stage > 1]
            if not later:
                continue
            n = later[pick % len(later)]
            metric = None if v_i < 0 else _metric(key_i, VALUES[v_i])
            j.update(n.id, status=status, metric=metric if status == "good" else None)
        _check(j, a.id)


def test_reopened_journal_has_the_same_indexes(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    a = j.new_node(stage=1, operation="draft")
    j.update(a.id, status="good", metric=_metric(0, 0.5))
    prev = a.id
    for i in range(30):
        n = j.new_node(stage=3, operation="improve" if i % 3 else "debug", parent_id=prev)
        if i % 4 == 0:
            j.update(n.id, status="buggy")
        else:
            j.update(n.id, status="good", metric=_metric(0, 0.5 + (i % 7) / 10))
            prev = n.id
    again = Journal(tmp_path / "journal.jsonl")
    for cat in ("search", "good", "buggy", "buggy_leaf", "finished", "flight"):
        assert again.ids(cat, 3) == j.ids(cat, 3)
    assert again.best_choice(3, a.id) == j.best_choice(3, a.id)
    assert no_improvement_streak(again, 3, again.get(a.id)) == no_improvement_streak(j, 3, j.get(a.id))


# ------------------------------------------------ the index against its definitions --
# SearchIndex on its own: after every write of a random history (the writes the journal
# makes: new nodes under any parent, updates of status / metric / idea / summary, finished
# nodes changing again), every field equals its definition in index.py recomputed from the
# node list. Every earlier state is checked again at the end: a write must never change an
# index already published (the journal hands them to readers on other threads).

OPS = ("draft", "debug", "improve", "tune", "ablate", "seed_eval")
index_step = st.one_of(
    # create: (kind, parent pick, stage, operation)
    st.tuples(st.just("create"), st.integers(0, 10**6), st.integers(1, 4), st.sampled_from(OPS)),
    # update: (kind, node pick, status, metric key, value index or -1 for none, idea change)
    st.tuples(
        st.just("update"),
        st.integers(0, 10**6),
        st.sampled_from(["pending", "running", "good", "buggy", "good", "incomparable"]),
        st.sampled_from([0, 0, 1]),
        st.integers(-1, len(VALUES) - 1),
        st.sampled_from(["keep", "keep", "none", "lr 0.2"]),
    ),
)


def _naive(nodes: list[Node], refinished: int) -> dict:
    """Every field of SearchIndex from its definition (module docstring of index.py)."""
    by_id = {n.id: n for n in nodes}

    def root(n):
        while n.parent_id is not None:
            n = by_id[n.parent_id]
        return n.id

    def debug_depth(n):
        depth = 0
        while n is not None and n.operation == "debug":
            depth, n = depth + 1, by_id.get(n.parent_id)
        return depth

    kids = {n.id: [c for c in nodes if c.parent_id == n.id] for n in nodes}
    search = [n for n in nodes if n.operation != "seed_eval"]

    def is_idea(n: Node) -> bool:  # a stage-3 improve node carries a research idea
        return bool(n.idea) and (
            n.operation in ("tune", "ablate") or (n.operation == "improve" and n.stage == 3)
        )

    members = {
        "all": nodes,
        "search": search,
        "draft": [n for n in search if n.operation == "draft"],
        "good": [n for n in search if n.status == "good" and n.incomparable is None],
        "good_nometric": [
            n
            for n in search
            if n.status == "good"
            and n.incomparable is None
            and (n.metric is None or not math.isfinite(n.metric.value))
        ],
        "incomparable": [n for n in search if n.status == "good" and n.incomparable is not None],
        "buggy": [n for n in search if n.status == "buggy"],
        "buggy_leaf": [
            n for n in search if n.status == "buggy" and all(c.operation == "seed_eval" for c in kids[n.id])
        ],
        "finished": [n for n in search if n.status in ("good", "buggy")],
        "flight": [n for n in nodes if n.status in ("pending", "running")],
        "idea": [n for n in search if is_idea(n)],
        "idea_finished": [n for n in search if is_idea(n) and n.status in ("good", "buggy")],
    }
    assert set(members) == set(CATEGORIES)
    cats = {}
    for cat, ms in members.items():
        for stage in (None, 1, 2, 3, 4):
            ids = tuple(n.id for n in ms if stage is None or n.stage == stage)
            if ids:
                cats[(stage, cat)] = ids
    order = {n.id: i for i, n in enumerate(nodes)}
    ranked: dict = {}
    tree_ranked: dict = {}
    good_roots: dict = {}
    for n in members["good"]:
        good_roots.setdefault(n.stage, Counter())[root(n)] += 1
        if n.metric is not None and math.isfinite(n.metric.value):
            m = n.metric
            score = m.value if m.direction == "maximize" else -m.value
            key = (m.name, m.direction, m.dataset)
            ranked.setdefault((n.stage, key), []).append((-score, order[n.id], n.id))
            tree_ranked.setdefault((n.stage, n.tree, key), []).append((-score, order[n.id], n.id))
    trees: dict = {}
    for n in search:
        trees.setdefault((n.stage, n.tree), []).append(n.id)
    return {
        "nodes": by_id,
        "facts": {n.id: (order[n.id], root(n), debug_depth(n)) for n in nodes},
        "children": {p: tuple(c.id for c in cs) for p, cs in kids.items() if cs},
        "search_children": {
            p: k for p, cs in kids.items() if (k := sum(c.operation != "seed_eval" for c in cs))
        },
        "cats": cats,
        "ranked": {k: tuple(sorted(v)) for k, v in ranked.items()},
        "first": {k: min(e[1] for e in v) for k, v in ranked.items()},
        "good_roots": {s: dict(c) for s, c in good_roots.items()},
        "trees": {k: tuple(v) for k, v in trees.items()},
        "tree_ranked": {k: tuple(sorted(v)) for k, v in tree_ranked.items()},
        "tree_first": {k: min(e[1] for e in v) for k, v in tree_ranked.items()},
        "refinished": refinished,
    }


def _fields(ix: SearchIndex) -> dict:
    out = {f.name: getattr(ix, f.name) for f in dataclasses.fields(ix)}
    for name, value in out.items():
        if isinstance(value, Mapping):
            out[name] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
    return out


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(index_step, min_size=1, max_size=50))
def test_every_index_equals_its_definition(steps):
    ix = SearchIndex().with_created(Node(id="n0001", parent_id=None, stage=1, operation="draft"))
    history = [(ix, list(ix.nodes.values()), 0)]
    refinished = 0
    for s in steps:
        nodes = list(ix.nodes.values())
        if s[0] == "create":
            _, pick, stage, op = s
            parent = None if op == "draft" else nodes[pick % len(nodes)]
            node = Node(
                id=format_node_id(len(nodes) + 1),
                parent_id=parent.id if parent else None,
                stage=stage,
                operation=op,
                idea="lr 0.1" if op in ("tune", "ablate") else None,
                seed=1 if op == "seed_eval" else None,
                depth=parent.depth + 1 if parent else 0,
                tree=parent.tree if parent else pick % 3,
            )
            ix = ix.with_created(node)
        else:
            _, pick, status, key_i, v_i, idea = s
            old = nodes[pick % len(nodes)]
            # "incomparable": a working node marked as having changed the evaluation protocol
            marked = "changed the protocol" if status == "incomparable" else None
            status = "good" if marked else status
            metric = _metric(key_i, VALUES[v_i]) if status == "good" and v_i >= 0 else None
            changes = {"status": status, "metric": metric, "summary": f"step {len(history)}"}
            changes["incomparable"] = marked
            if idea != "keep":
                changes["idea"] = None if idea == "none" else idea
            new = old.with_changes(**changes)
            refinished += old.is_finished and (
                old.status != new.status or old.metric != new.metric or old.incomparable != new.incomparable
            )
            ix = ix.with_updated(new)
        history.append((ix, list(ix.nodes.values()), refinished))
        assert _fields(ix) == _naive(*history[-1][1:])
    for ix_then, nodes_then, refinished_then in history:  # earlier states are untouched
        assert _fields(ix_then) == _naive(nodes_then, refinished_then)


def test_an_inconsistent_write_is_refused_and_changes_nothing():
    a = Node(id="n0001", parent_id=None, stage=1, operation="draft")
    ix = SearchIndex.of([a, Node(id="n0002", parent_id="n0001", stage=1, operation="debug", depth=1)])
    before = _fields(ix)
    bad = [
        (ix.with_created, a, "n0001 already exists"),
        (ix.with_created, Node(id="n0003", parent_id="n0009", stage=1, operation="debug"), "parent n0009"),
        (ix.with_updated, Node(id="n0007", parent_id=None, stage=1, operation="draft"), "never created"),
        (ix.with_updated, a.with_changes(stage=2), "stage is fixed at creation (1 -> 2)"),
    ]
    for write, node, message in bad:
        with pytest.raises(InconsistentChange, match=re.escape(message)):
            write(node)
    assert _fields(ix) == before == _naive(list(ix.nodes.values()), 0)
    assert ix.ids("buggy_leaf") == () and ix.facts["n0002"] == (1, "n0001", 1)
    with pytest.raises(ValueError, match="unknown category 'bugy'"):
        ix.ids("bugy")

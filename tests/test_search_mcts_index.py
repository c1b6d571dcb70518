"""Forest/MCTS decisions from the journal's indexes equal an independent reference's.

Seeded random histories (two stages searched by mcts, three forest trees, children of random
parents, statuses changing back and forth, metrics of two keys with ties, NaN, inf and
-0.0, a carried node from stage 2 that may be good, buggy or carry an odd metric) are
written through a real journal; after every write the indexed ``MCTSPolicy`` (UCB
statistics of every tree, the chosen action with its evidence) and the forest's tree
votes are compared with ``testsupport/ai_scientist_testing/mcts_reference.py``, an independent
implementation of the policy's definitions (node records only, ancestor chains, exact sums), on
the journal and on a snapshot. Its values are exact sums rounded once, the policy's are float
sums: the UCB numbers agree to 1e-12, the decisions exactly.
"""

from __future__ import annotations

import math
import random

import pytest
from ai_scientist_testing import mcts_reference as reference

from ai_scientist.treesearch import Journal, Metric, StageState
from ai_scientist.treesearch.policies import MCTSPolicy, final_choice, tree_stats
from ai_scientist.treesearch.policies.forest import tree_bests

KEYS = [("acc", "maximize", "val"), ("loss", "minimize", "val")]
VALUES = [0.5, 0.7, 0.7, 0.9, 0.9000000001, 1.0, math.nan, -0.0, 0.0, math.inf]
TREES = 3

CARRIED = {  # the carried node (stage 2): status and metric
    "good": ("good", Metric("acc", 0.8, "maximize", "val")),
    "good_other_key": ("good", Metric("loss", 0.3, "minimize", "val")),
    "good_nan": ("good", Metric("acc", math.nan, "maximize", "val")),
    "buggy": ("buggy", None),
    "buggy_with_metric": ("buggy", Metric("acc", 0.95, "maximize", "val")),  # it competes all the same
}


def _metric(rng: random.Random) -> Metric | None:
    if rng.random() < 0.1:
        return None
    name, direction, dataset = KEYS[0] if rng.random() < 0.8 else KEYS[1]
    return Metric(name, rng.choice(VALUES), direction, dataset)


def _same_stats(mine, exact) -> None:
    assert (mine.tree, mine.anchor, mine.visits, mine.parent_visits, mine.children) == (
        exact.tree, exact.anchor, exact.visits, exact.parent_visits, exact.children,
    )  # fmt: skip
    for field in ("reward", "value", "ucb"):
        a, b = getattr(mine, field), getattr(exact, field)
        assert a.keys() == b.keys(), field
        bad = {k: (a[k], b[k]) for k in a if not math.isclose(a[k], b[k], rel_tol=1e-12, abs_tol=1e-12)}
        assert not bad, (field, bad)


def _compare(
    view, carried_id: str, policies: tuple[MCTSPolicy, reference.ReferenceMCTS], step_no: int
) -> None:
    fast, ref = policies
    for state in (StageState(1), StageState(3, carried_id=carried_id)):
        for t in range(TREES):
            _same_stats(
                tree_stats(view, state, t, fast.c, fast.gamma),
                reference.tree_stats(view, state, t, ref.c, ref.gamma),
            )
        seed = step_no * 7 + state.stage
        mine = fast.next_action(view, state, random.Random(seed))
        theirs = ref.next_action(view, state, random.Random(seed))
        assert mine == theirs, state
        assert tree_bests(view, state, TREES) == reference.tree_bests(view, state, TREES), state


def _history(j: Journal, rng: random.Random, steps: int, carried: str, policies) -> None:
    """``steps`` random writes; after each, the indexed and the reference answers are compared."""
    a = j.new_node(stage=1, operation="draft", tree=0)
    c = j.new_node(stage=2, operation="tune", parent_id=a.id, idea="lr 0.1")
    status, metric = CARRIED[carried]
    j.update(c.id, status=status, metric=metric)
    for i in range(steps):
        nodes = j.nodes
        if rng.random() < 0.45:  # create
            stage = rng.choice([1, 3, 3])
            parents = [n for n in nodes if n.stage == stage]
            if stage == 1 and (not parents or rng.random() < 0.2):
                j.new_node(stage=1, operation="draft", tree=rng.randrange(TREES))
                continue
            # stage 3 hangs under the carried node; a child keeps its parent's tree, mostly
            parent = (
                rng.choice(parents)
                if parents and rng.random() < 0.85
                else j.get(c.id if stage == 3 else a.id)
            )
            op = rng.choice(["improve", "debug", "debug", "seed_eval"])
            j.new_node(
                stage=stage,
                operation=op,
                parent_id=parent.id,
                tree=rng.randrange(TREES) if rng.random() < 0.3 else None,
            )
        else:  # update: statuses change back and forth, metrics tie often
            n = rng.choice([n for n in nodes if n.id not in (a.id, c.id)] or [None])
            if n is None:
                continue
            st = rng.choice(["running", "good", "good", "good", "buggy"])
            j.update(n.id, status=st, metric=_metric(rng) if st == "good" else None)
        _compare(j, c.id, policies, i)
    _compare(j.snapshot(), c.id, policies, steps)


@pytest.mark.parametrize("carried", sorted(CARRIED))
def test_indexed_mcts_decides_as_the_reference(tmp_path, carried):
    for seed in range(12):
        rng = random.Random(f"{carried}-{seed}")
        kw = dict(
            num_drafts=rng.choice([1, 2, 5]),
            max_debug_depth=2,
            max_expand=rng.choice([1, 2, 3]),
            tree_nums=TREES,
        )
        policies = (MCTSPolicy(**kw), reference.ReferenceMCTS(**kw))
        _history(Journal(tmp_path / f"journal-{seed}.jsonl"), rng, 70, carried, policies)


def test_consensus_on_a_large_forest_matches_the_reference():
    """A 2,000-node stage 3 with many equal metrics: every final choice agrees with the votes
    the reference gives (the consensus and its evidence are computed from those votes)."""
    rng = random.Random(3)
    from ai_scientist.treesearch import JournalView, Node

    nodes = [
        Node(
            id="n0001",
            parent_id=None,
            stage=2,
            operation="draft",
            status="good",
            metric=Metric("acc", 0.8, "maximize"),
        )
    ]
    for i in range(2, 2001):
        parent = rng.choice(nodes[-50:]) if i > 2 and rng.random() < 0.8 else nodes[0]
        good = rng.random() < 0.7
        nodes.append(
            Node(
                id=f"n{i:04d}",
                parent_id=parent.id,
                stage=3,
                operation="improve",
                tree=rng.randrange(TREES),
                depth=parent.depth + 1,
                status="good" if good else "buggy",
                metric=Metric("acc", rng.choice([0.8, 0.85, 0.85, 0.9, 0.9]), "maximize") if good else None,
            )
        )
    view = JournalView(nodes)
    state = StageState(3, carried_id="n0001")
    assert tree_bests(view, state, TREES) == reference.tree_bests(view, state, TREES)
    for method in ("consensus", "score"):
        assert (
            final_choice(view, state, TREES, method=method).node_id
            in reference.tree_bests(view, state, TREES).values()
        )
    policies = (MCTSPolicy(tree_nums=TREES), reference.ReferenceMCTS(tree_nums=TREES))
    _compare(view, "n0001", policies, 0)

"""MCTS numbers on a hand-built tree, discounting, the mature-node filter, the forest,
input diversity and the final choice (consensus / expert tie-break / score / random)."""

from __future__ import annotations

import math
import random

import pytest

from ai_scientist.treesearch import JournalView, Metric, Node, StageState
from ai_scientist.treesearch.policies import (
    MCTSPolicy,
    final_choice,
    nearest_solved_example,
    tree_stats,
    ucb_score,
)
from ai_scientist.treesearch.policies.forest import consensus_groups, tfidf_similarities


def n(
    nid,
    parent=None,
    op="draft",
    status="good",
    value=None,
    stage=1,
    tree=0,
    depth=0,
    summary="",
    direction="maximize",
):
    m = Metric("acc", value, direction) if value is not None else None
    return Node(nid, parent, stage, op, status, metric=m, tree=tree, depth=depth, summary=summary)


# Stage 1, tree 0:  n0001 (0.5) ─┬─ n0002 (0.9) ── n0005 (pending)
#                                └─ n0003 (buggy)
#                   n0004 (0.7)
HAND = [
    n("n0001", value=0.5),
    n("n0002", "n0001", "improve", value=0.9, depth=1),
    n("n0003", "n0001", "improve", status="buggy", depth=1),
    n("n0004", value=0.7),
    n("n0005", "n0002", "improve", status="pending", depth=2),
]


def test_ucb_formula():
    assert ucb_score(0.5, 4, 2, 1.4) == pytest.approx(0.5 + 1.4 * math.sqrt(math.log(4) / 2))
    assert ucb_score(0.3, 1, 1, 1.4) == pytest.approx(0.3)  # ln 1 = 0
    with pytest.raises(ValueError):
        ucb_score(0.1, 3, 0, 1.4)


def test_hand_computed_rewards_visits_values_and_ucb():
    st = tree_stats(JournalView(HAND), StageState(1), tree=0, c=1.4, gamma=0.85)
    # rewards: acc normalised over good nodes {0.5, 0.7, 0.9}; buggy and pending = 0
    assert st.reward == pytest.approx({"n0001": 0.0, "n0002": 1.0, "n0003": 0.0, "n0004": 0.5, "n0005": 0.0})
    assert st.visits == {"n0001": 4, "n0002": 2, "n0003": 1, "n0004": 1, "n0005": 1}
    # Q(n0001) = (0 + 0.85 * (1 + 0.85 * 0) + 0.85 * 0) / 4 = 0.2125
    assert st.value == pytest.approx(
        {"n0001": 0.2125, "n0002": 0.5, "n0003": 0.0, "n0004": 0.5, "n0005": 0.0}
    )
    assert st.parent_visits == {"n0001": 5, "n0002": 4, "n0003": 4, "n0004": 5, "n0005": 2}
    assert st.ucb["n0001"] == pytest.approx(1.100545, abs=1e-6)  # 0.2125 + 1.4*sqrt(ln5/4)
    assert st.ucb["n0002"] == pytest.approx(1.665576, abs=1e-6)  # 0.5 + 1.4*sqrt(ln4/2)
    assert st.ucb["n0003"] == pytest.approx(1.648374, abs=1e-6)  # 0 + 1.4*sqrt(ln4/1)
    assert st.ucb["n0004"] == pytest.approx(2.276091, abs=1e-6)  # 0.5 + 1.4*sqrt(ln5/1)


def test_selection_takes_highest_ucb_and_names_the_evidence():
    pol = MCTSPolicy(num_drafts=2, tree_nums=1, max_expand=3)
    a = pol.next_action(JournalView(HAND), StageState(1), random.Random(0))
    assert (a.operation, a.parent_id, a.tree) == ("improve", "n0004", 0)
    assert a.evidence["ucb"][0]["id"] == "n0004"
    assert [r["id"] for r in a.evidence["ucb"]] == ["n0004", "n0002", "n0003", "n0001"]
    # without n0004, the best UCB is n0002 (improve), then the buggy leaf n0003 (debug)
    view = JournalView(HAND[:3] + [n("n0004", value=0.7, status="pending"), HAND[4]])
    assert pol.next_action(view, StageState(1), random.Random(0)).parent_id == "n0002"


@pytest.mark.parametrize("gamma", [1.0, 0.85, 0.5])
def test_discount_gamma_per_level(gamma):
    chain = [
        n("n0001", value=0.1),
        n("n0002", "n0001", "improve", value=0.1, depth=1),
        n("n0003", "n0002", "improve", value=0.9, depth=2),
    ]
    st = tree_stats(JournalView(chain), StageState(1), 0, 1.4, gamma)
    # rewards 0, 0, 1: the leaf's reward reaches the root discounted twice
    assert st.value["n0003"] == pytest.approx(1.0)
    assert st.value["n0002"] == pytest.approx(gamma / 2)
    assert st.value["n0001"] == pytest.approx(gamma**2 / 3)


def test_rewards_are_direction_aware():
    nodes = [n("n0001", value=0.2, direction="minimize"), n("n0002", value=0.6, direction="minimize")]
    st = tree_stats(JournalView(nodes), StageState(1), 0, 1.4, 0.85)
    assert st.reward == {"n0001": 1.0, "n0002": 0.0}


def test_mature_nodes_are_not_expanded():
    view = JournalView(HAND)
    st = tree_stats(view, StageState(1), 0, 1.4, 0.85)
    assert MCTSPolicy(max_expand=3).candidates(view, StageState(1), st) == {
        "n0001": "improve",
        "n0002": "improve",
        "n0003": "debug",
        "n0004": "improve",
    }
    # n0001 has 2 children, n0002 has 1 (pending counts): with max_expand=1 both are mature
    assert MCTSPolicy(max_expand=1).candidates(view, StageState(1), st) == {
        "n0003": "debug",
        "n0004": "improve",
    }
    a = MCTSPolicy(num_drafts=2, tree_nums=1, max_expand=1).next_action(view, StageState(1), random.Random(0))
    assert "n0001" in a.evidence["mature"] and "n0002" in a.evidence["mature"]


def test_buggy_past_max_debug_depth_is_not_a_candidate():
    nodes = [n("n0001", status="buggy"), n("n0002", "n0001", "debug", status="buggy", depth=1)]
    view = JournalView(nodes)
    st = tree_stats(view, StageState(1), 0, 1.4, 0.85)
    assert MCTSPolicy(max_debug_depth=2).candidates(view, StageState(1), st) == {"n0002": "debug"}
    assert MCTSPolicy(max_debug_depth=1).candidates(view, StageState(1), st) == {}
    a = MCTSPolicy(num_drafts=1, tree_nums=1, max_debug_depth=1).next_action(
        view, StageState(1), random.Random(0)
    )
    assert a.operation == "draft"  # nothing expandable: a fresh root


def test_forest_spreads_drafts_and_takes_turns():
    pol = MCTSPolicy(num_drafts=3, tree_nums=2)
    assert [pol.draft_target(t) for t in (0, 1)] == [2, 1]
    assert [MCTSPolicy(num_drafts=1, tree_nums=3).draft_target(t) for t in range(3)] == [1, 1, 1]
    nodes, trees = [], []
    for i in range(1, 4):
        a = pol.next_action(JournalView(nodes), StageState(1), random.Random(0))
        assert a.operation == "draft"
        trees.append(a.tree)
        nodes.append(n(f"n{i:04d}", value=0.1 * i, tree=a.tree))
    assert trees == [0, 1, 0]
    a = pol.next_action(JournalView(nodes), StageState(1), random.Random(0))
    assert a.operation == "improve" and a.tree == 1  # tree 1 has fewer nodes


def test_stage3_anchors_each_tree_on_the_carried_node():
    nodes = [
        n("n0001", value=0.6),
        n("n0002", "n0001", "improve", stage=3, value=0.8, depth=1, tree=0),
        n("n0003", "n0001", "improve", stage=3, status="buggy", depth=1, tree=1),
    ]
    view = JournalView(nodes)
    state = StageState(3, carried_id="n0001")
    st = tree_stats(view, state, 0, 1.4, 0.85)
    assert st.visits == {"n0001": 2, "n0002": 1}
    # carried reward 0 (0.6 is the low end of {0.6, 0.8}), child 1 discounted: (0 + 0.85) / 2
    assert st.value["n0001"] == pytest.approx(0.425)
    assert st.parent_visits == {"n0001": 2, "n0002": 2}
    pol = MCTSPolicy(tree_nums=2)
    a = pol.next_action(view, state, random.Random(0))
    assert a.operation in ("improve", "debug") and a.tree in (0, 1)
    assert a.parent_id in {"n0001", "n0002", "n0003"}


# ---------------------------------------------------------------- diversity --


def test_tfidf_and_nearest_solved_example():
    sims = tfidf_similarities(
        "convolutional network on cifar", ["cifar convolutional net", "linear regression"]
    )
    assert sims[0] > 0.3 and sims[1] == 0.0
    nodes = [
        n("n0001", tree=0, value=0.5, summary="linear regression baseline on housing prices"),
        n("n0002", tree=0, value=0.6, summary="small convolutional network on cifar images"),
        n("n0003", tree=1, value=0.7, summary="convolutional network tree one"),
        n("n0004", tree=0, status="buggy", summary="convolutional network on cifar images crashed"),
    ]
    view = JournalView(nodes)
    assert nearest_solved_example(view, 1, "train a convolutional network on cifar") == "n0002"
    assert nearest_solved_example(view, 1, "predict housing prices") == "n0001"
    assert (
        nearest_solved_example(view, 1, "zzz unrelated") == "n0001"
    )  # always the nearest: earliest on a tie
    assert nearest_solved_example(view, 0, "anything") is None  # the first tree gets the plain query
    assert nearest_solved_example(JournalView(nodes[:2]), 2, "x") in {"n0001", "n0002"}
    assert nearest_solved_example(JournalView([nodes[2]]), 1, "x") is None  # only its own tree solved


# ------------------------------------------------------------- final choice --


def forest(values):
    """One good node per tree with the given metric values (stage 1)."""
    return JournalView([n(f"n{i + 1:04d}", value=v, tree=i) for i, v in enumerate(values)])


def test_consensus_majority():
    view = forest([0.90, 0.5, 0.9040])
    c = final_choice(view, StageState(1), 3, method="consensus")
    assert c.method == "consensus" and c.node_id == "n0003"  # best of the agreeing pair
    assert c.evidence["groups"] == [["n0003", "n0001"], ["n0002"]]
    assert c.evidence["group_votes"] == [2, 1]


def test_consensus_tie_goes_to_the_expert_and_keeps_its_reasoning():
    view = forest([0.9, 0.5])
    seen = []

    def expert(cands):
        seen.append([c.id for c in cands])
        return "n0002", "n0002 generalises better according to its summary"

    c = final_choice(view, StageState(1), 2, method="consensus", expert=expert)
    assert seen == [["n0001", "n0002"]]
    assert (c.node_id, c.method) == ("n0002", "consensus")
    assert c.reasoning == "n0002 generalises better according to its summary"
    no_expert = final_choice(view, StageState(1), 2, method="consensus")
    assert (no_expert.node_id, no_expert.method) == ("n0001", "score")
    liar = final_choice(view, StageState(1), 2, expert=lambda cands: ("n0099", "made up"))
    assert liar.node_id == "n0001" and "n0099" in liar.reason and liar.reasoning == "made up"


def test_score_and_random_choices():
    view = forest([0.9, 0.5, 0.7])
    assert final_choice(view, StageState(1), 3, method="score").node_id == "n0001"
    picks = {
        final_choice(view, StageState(1), 3, method="random", rng=random.Random(s)).node_id for s in range(40)
    }
    assert picks == {"n0001", "n0002", "n0003"}
    again = [
        final_choice(view, StageState(1), 3, method="random", rng=random.Random(5)).node_id for _ in range(3)
    ]
    assert len(set(again)) == 1
    with pytest.raises(ValueError, match="rng"):
        final_choice(view, StageState(1), 3, method="random")
    with pytest.raises(ValueError, match="final_choice"):
        final_choice(view, StageState(1), 3, method="vote")


def test_consensus_groups_and_stage_best():
    nodes = [n("n0001", value=1.0), n("n0002", value=0.995), n("n0003", value=0.97)]
    assert [[x.id for x in g] for g in consensus_groups(nodes)] == [["n0001", "n0002"], ["n0003"]]
    pol = MCTSPolicy(tree_nums=3, final_choice="consensus")
    assert pol.stage_best(forest([0.8, 0.8, 0.3]), StageState(1)).node_id == "n0001"
    empty = final_choice(JournalView([n("n0001", status="buggy")]), StageState(1), 2)
    assert empty.node_id is None and empty.method == "none"

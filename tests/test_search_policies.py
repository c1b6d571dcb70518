"""bfts and greedy policies (deterministic with a seeded rng) and idea deduplication."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ai_scientist.base.config import validate
from ai_scientist.treesearch import (
    JournalView,
    Metric,
    Node,
    StageState,
    decision_rng,
    dedupe_ideas,
    make_policy,
)
from ai_scientist.treesearch.policies import BFTSPolicy, GreedyPolicy, MCTSPolicy, idea_similarity


def n(nid, parent=None, op="draft", status="good", value=None, stage=1, tree=0, idea=None, depth=0):
    m = Metric("acc", value, "maximize") if value is not None else None
    return Node(nid, parent, stage, op, status, metric=m, tree=tree, idea=idea, depth=depth)


GREEDY_FAMILY = [BFTSPolicy, GreedyPolicy]


@pytest.mark.parametrize("cls", GREEDY_FAMILY)
def test_drafts_until_num_drafts_exist(cls):
    pol = cls(num_drafts=3, debug_prob=0.0)
    rng = random.Random(0)
    view = JournalView()
    assert pol.next_action(view, StageState(1), rng).operation == "draft"
    # pending drafts count: the policy does not over-draft while they run
    view = JournalView([n("n0001", status="pending"), n("n0002", value=0.5)])
    a = pol.next_action(view, StageState(1), rng)
    assert (a.operation, a.parent_id) == ("draft", None)
    assert "2 of num_drafts=3" in a.reason
    view = JournalView([n("n0001", status="pending"), n("n0002", value=0.5), n("n0003", value=0.6)])
    a = pol.next_action(view, StageState(1), rng)
    assert (a.operation, a.parent_id) == ("improve", "n0003")


@pytest.mark.parametrize("cls", GREEDY_FAMILY)
def test_falls_back_to_drafting_when_nothing_is_good(cls):
    pol = cls(num_drafts=1, debug_prob=0.0)
    view = JournalView([n("n0001", status="buggy")])
    a = pol.next_action(view, StageState(1), random.Random(0))
    assert a.operation == "draft" and "no good node" in a.reason


@pytest.mark.parametrize("cls", GREEDY_FAMILY)
@pytest.mark.parametrize("prob", [0.2, 0.5, 0.8])
def test_debug_frequency_matches_debug_prob(cls, prob):
    pol = cls(num_drafts=2, debug_prob=prob, max_debug_depth=3)
    view = JournalView(
        [n("n0001", status="buggy"), n("n0002", value=0.4), n("n0003", "n0002", "improve", value=0.6)]
    )
    rng = random.Random(1234)
    ops = Counter(pol.next_action(view, StageState(1), rng).operation for _ in range(1000))
    assert set(ops) == {"debug", "improve"}
    assert abs(ops["debug"] / 1000 - prob) < 0.05


@pytest.mark.parametrize("cls", GREEDY_FAMILY)
def test_debug_only_buggy_leaves_below_max_debug_depth(cls):
    nodes = [
        n("n0001", status="buggy"),
        n("n0002", "n0001", "debug", status="buggy", depth=1),
        n("n0003", "n0002", "debug", status="buggy", depth=2),  # debug depth 2
        n("n0004", status="buggy"),
        n("n0005", "n0004", "improve", status="pending", depth=1),  # n0004 is not a leaf
        n("n0006", value=0.3),
    ]
    view = JournalView(nodes)
    assert view.debug_depth("n0003") == 2
    picked = {
        pol_depth: {
            cls(num_drafts=1, debug_prob=1.0, max_debug_depth=pol_depth)
            .next_action(view, StageState(1), random.Random(s))
            .parent_id
            for s in range(50)
        }
        for pol_depth in (2, 3)
    }
    assert picked[3] == {"n0003"}  # the only buggy leaf, depth 2 < 3
    assert picked[2] == {"n0006"}  # depth 2 is not < 2: improve the good node instead
    a = cls(num_drafts=1, debug_prob=1.0, max_debug_depth=0).next_action(
        view, StageState(1), random.Random(0)
    )
    assert a.operation == "improve"


def test_bfts_stage2_always_tunes_the_carried_node_greedy_hill_climbs():
    nodes = [n("n0001", value=0.5), n("n0002", "n0001", "tune", value=0.8, stage=2, idea="lr 0.1", depth=1)]
    view = JournalView(nodes)
    state = StageState(2, carried_id="n0001")
    rng = random.Random(0)
    a = BFTSPolicy(debug_prob=0.0).next_action(view, state, rng)
    assert (a.operation, a.parent_id, a.idea) == ("tune", "n0001", None)
    assert a.evidence["tried_count"] == 1 and a.evidence["recent_tried"] == ["lr 0.1"]
    g = GreedyPolicy(debug_prob=0.0).next_action(view, state, rng)
    assert (g.operation, g.parent_id) == ("tune", "n0002")


@pytest.mark.parametrize("cls", GREEDY_FAMILY + [MCTSPolicy])
def test_stage4_ablates_the_carried_node_with_planned_ideas_in_order(cls):
    nodes = [
        n("n0001", value=0.5),
        n("n0002", "n0001", "ablate", stage=4, value=0.4, idea="no dropout", depth=1),
        n("n0003", "n0001", "ablate", stage=4, status="pending", idea="No dropout!", depth=1),
    ]
    view = JournalView(nodes)
    state = StageState(4, carried_id="n0001", ideas=("no dropout", "no batch norm", "no augmentation"))
    a = cls(debug_prob=0.0).next_action(view, state, random.Random(0))
    assert (a.operation, a.parent_id, a.idea) == ("ablate", "n0001", "no batch norm")
    no_plan = cls(debug_prob=0.0).next_action(view, StageState(4, carried_id="n0001"), random.Random(0))
    assert no_plan.idea is None and no_plan.parent_id == "n0001"


def test_bfts_prefers_trees_with_nothing_in_flight_greedy_does_not():
    nodes = [
        n("n0001", value=0.4),
        n("n0002", value=0.9),
        n("n0003", "n0002", "improve", status="running", depth=1),
    ]
    view = JournalView(nodes)
    b = BFTSPolicy(num_drafts=2, debug_prob=0.0).next_action(view, StageState(1), random.Random(0))
    g = GreedyPolicy(num_drafts=2, debug_prob=0.0).next_action(view, StageState(1), random.Random(0))
    assert b.parent_id == "n0001"  # n0002's tree is busy
    assert g.parent_id == "n0002"


@pytest.mark.parametrize("cls", GREEDY_FAMILY)
def test_stage3_improves_best_of_stage_and_carried(cls):
    nodes = [
        n("n0001", value=0.9),
        n("n0002", "n0001", "improve", stage=3, value=0.7, depth=1),
    ]
    view = JournalView(nodes)
    a = cls(debug_prob=0.0).next_action(view, StageState(3, carried_id="n0001"), random.Random(0))
    assert (a.operation, a.parent_id) == ("improve", "n0001")
    view = JournalView(nodes + [n("n0003", "n0002", "improve", stage=3, value=0.95, depth=2)])
    a = cls(debug_prob=0.0).next_action(view, StageState(3, carried_id="n0001"), random.Random(0))
    assert a.parent_id == "n0003"


def test_same_rng_same_decisions():
    view = JournalView([n("n0001", status="buggy"), n("n0002", status="buggy"), n("n0003", value=0.2)])
    pol = BFTSPolicy(num_drafts=1, debug_prob=0.5)
    runs = [
        [pol.next_action(view, StageState(1), decision_rng(3, f"n{i:04d}")).to_dict() for i in range(30)]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert len({(a["operation"], a["parent_id"]) for a in runs[0]}) == 3  # both bugs and the improve


def test_make_policy_reads_the_config():
    cfg = validate({"search": {"policy": "mcts", "mcts": {"tree_nums": 4, "exploration_c": 2.0}}})
    pol = make_policy(cfg)
    assert isinstance(pol, MCTSPolicy) and pol.tree_nums == 4 and pol.c == 2.0
    cfg = validate(
        {"search": {"policy": "greedy"}, "agent": {"search": {"num_drafts": 5, "debug_prob": 0.1}}}
    )
    pol = make_policy(cfg)
    assert isinstance(pol, GreedyPolicy) and not isinstance(pol, BFTSPolicy)
    assert (pol.num_drafts, pol.debug_prob) == (5, 0.1)
    assert isinstance(make_policy(validate({})), BFTSPolicy)


# ------------------------------------------------------------------ dedupe --


def test_dedupe_ideas_against_tried_and_each_other():
    tried = ["Increase the learning rate to 0.01", "use AdamW optimizer"]
    cands = [
        "increase learning rate to 0.01.",  # same idea, different punctuation
        "Increase the learning rate to 0.001",  # different value: a different experiment
        "Use the AdamW optimiser",  # near duplicate wording
        "add dropout 0.3",
        "Add dropout 0.3 ",  # duplicate of the previous candidate
        "",
        "batch size 64",
    ]
    assert dedupe_ideas(cands, tried) == [
        "Increase the learning rate to 0.001",
        "add dropout 0.3",
        "batch size 64",
    ]
    assert dedupe_ideas(["a b c"], []) == ["a b c"]
    assert idea_similarity("lr 0.01", "lr 0.02") == 0.0
    assert idea_similarity("Weight decay 1e-4", "weight decay 1e-4") == 1.0

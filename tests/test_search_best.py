"""Direct tests of best.py: primary metric key, ranking, ties, the tie-break callback, evidence.

Each rule of the module docstring on its boundary; the journal's fast path
(``select_best_sorted`` via ``Journal.best_choice``) must keep the callback on a tie.
"""

from __future__ import annotations

import math

from ai_scientist.treesearch import Journal, Metric, Node
from ai_scientist.treesearch.best import (
    Choice,
    comparable_metric,
    primary_metric_key,
    rank_nodes,
    select_best,
    select_best_sorted,
)

ACC = ("acc", "maximize", "val")
LOSS = ("loss", "minimize", "val")


def node(nid, value=None, key=ACC, status="good"):
    m = None if value is None else Metric(key[0], value, key[1], key[2])
    return Node(nid, None, 1, "draft", status, metric=m)


class Recorder:
    """A tie-break callback that records its candidates and picks a fixed answer."""

    def __init__(self, answer=None, reasoning="because"):
        self.answer, self.reasoning, self.calls = answer, reasoning, []

    def __call__(self, cands):
        self.calls.append([c.id for c in cands])
        return (self.answer or cands[-1].id), self.reasoning


# ---- primary metric key ----------------------------------------------------------------------


def test_primary_key_is_the_most_common_valid_key():
    nodes = [node("n0001", 1.0, LOSS), node("n0002", 0.5), node("n0003", 0.6), node("n0004", math.nan, LOSS)]
    assert primary_metric_key(nodes) == ACC  # the NaN loss does not count
    assert primary_metric_key([node("n0001"), node("n0002", math.inf)]) is None
    assert primary_metric_key([]) is None
    assert primary_metric_key([node("n0001"), node("n0002", math.nan), node("n0003", 0.5)]) == ACC


def test_a_tie_between_keys_goes_to_the_earliest_node_by_id_not_list_position():
    # 2 acc and 2 loss; acc's earliest node is n0001 even though a loss node is listed first.
    nodes = [node("n0009", 0.5), node("n0003", 1.0, LOSS), node("n0004", 2.0, LOSS), node("n0001", 0.7)]
    assert primary_metric_key(nodes) == ACC
    assert primary_metric_key(list(reversed(nodes))) == ACC
    # without n0001, loss (n0003) is earlier than acc (n0009)
    assert primary_metric_key(nodes[:3] + [node("n0010", 0.7)]) == LOSS
    # ids compare by number: n0010 is later than n0002
    assert primary_metric_key([node("n0010", 1.0, LOSS), node("n0002", 0.5)]) == ACC


def test_comparable_metric_needs_a_valid_metric_of_the_key():
    good = node("n0001", 0.5)
    assert comparable_metric(good, ACC) is good.metric
    assert comparable_metric(good, LOSS) is None
    assert comparable_metric(good, None) is None
    assert comparable_metric(node("n0002"), ACC) is None
    assert comparable_metric(node("n0003", math.nan), ACC) is None


# ---- ranking -------------------------------------------------------------------------------


def test_rank_nodes_best_first_incomparable_last_ties_in_creation_order():
    nodes = [
        node("n0006", 0.1, LOSS),
        node("n0005", 0.9),
        node("n0004"),
        node("n0003", 0.9),
        node("n0002", 0.95),
        node("n0001", 0.2),
    ]
    order = ["n0002", "n0003", "n0005", "n0001", "n0004", "n0006"]
    assert [n.id for n in rank_nodes(nodes)] == order
    for limit in (1, 3, 6, 10):
        assert [n.id for n in rank_nodes(nodes, limit)] == order[:limit]
    mins = [node("n0001", 0.3, LOSS), node("n0002", 0.1, LOSS), node("n0004"), node("n0003", 0.2, LOSS)]
    assert [n.id for n in rank_nodes(mins)] == ["n0002", "n0003", "n0001", "n0004"]  # incomparable last


# ---- select_best ----------------------------------------------------------------------------


def test_no_good_node_is_a_none_choice():
    c = select_best([node("n0001", 0.9, status="buggy"), node("n0002", status="running")])
    assert c == Choice(None, "none", "no good node among the candidates")
    assert select_best([]) == c


def test_clear_winner_and_its_evidence():
    nodes = [node("n0001", 0.5), node("n0002", 0.9), node("n0003", 0.7, status="buggy"), node("n0004")]
    c = select_best(nodes, tie_break=Recorder())
    assert (c.node_id, c.method, c.reason) == ("n0002", "metric", "n0002 has the best metric")
    assert c.candidates == ("n0002",) and c.reasoning is None
    assert c.evidence == {
        "metric_key": ["acc", "maximize", "val"],
        "ranking": [
            {"id": "n0002", "value": 0.9},
            {"id": "n0001", "value": 0.5},
            {"id": "n0004", "value": None},
        ],
    }
    assert c.to_dict() == {
        "node_id": "n0002",
        "method": "metric",
        "reason": "n0002 has the best metric",
        "candidates": ["n0002"],
        "reasoning": None,
        "evidence": c.evidence,
    }


def test_ranking_evidence_holds_the_top_ten_then_incomparable_ones():
    scored = [node(f"n{i:04d}", i / 100) for i in range(1, 13)]
    c = select_best(scored + [node("n0100")])
    assert [r["id"] for r in c.evidence["ranking"]] == [f"n{i:04d}" for i in range(12, 2, -1)]
    few = [node(f"n{i:04d}", i / 100) for i in range(1, 9)] + [node(f"n{i:04d}") for i in range(20, 25)]
    c = select_best(few)
    assert [r["id"] for r in c.evidence["ranking"]] == [f"n{i:04d}" for i in range(8, 0, -1)] + [
        "n0020",
        "n0021",
    ]
    assert c.evidence["ranking"][-1] == {"id": "n0021", "value": None}


def test_tie_without_callback_goes_to_the_earliest_node():
    nodes = [node("n0007", 1.0), node("n0003", 1.0), node("n0005", 1.0 - 1e-9), node("n0001", 0.99)]
    c = select_best(nodes)
    assert (c.node_id, c.method) == ("n0003", "lowest_id")
    assert c.candidates == ("n0003", "n0005", "n0007")
    assert c.reason == "3 nodes tie within tolerance; earliest (n0003) wins"
    assert c.evidence == {
        "metric_key": list(ACC),
        "ranking": [
            {"id": i, "value": v}
            for i, v in [("n0007", 1.0), ("n0003", 1.0), ("n0005", 1.0 - 1e-9), ("n0001", 0.99)]
        ],
    }


def test_tolerance_boundaries_and_parameters():
    near, apart = (
        [node("n0002", 1.0), node("n0001", 1.0 + 5e-7)],
        [node("n0002", 1.0), node("n0001", 1.0 + 5e-6)],
    )
    assert select_best(near).method == "lowest_id"
    assert (select_best(apart).node_id, select_best(apart).method) == ("n0001", "metric")
    assert select_best(apart, rel_tol=1e-5).method == "lowest_id"
    assert select_best(near, rel_tol=0.0).method == "metric"
    zeros = [node("n0002", 0.0), node("n0001", 1e-13)]
    assert select_best(zeros).method == "lowest_id"
    assert select_best(zeros, abs_tol=0.0).node_id == "n0001"
    assert select_best(zeros, abs_tol=0.0).method == "metric"


def test_tie_goes_to_the_callback_with_candidates_in_creation_order():
    nodes = [node("n0004", 1.0), node("n0002", 1.0), node("n0001", 0.5)]
    rec = Recorder(answer="n0004", reasoning=42)
    c = select_best(nodes, tie_break=rec)
    assert rec.calls == [["n0002", "n0004"]]
    assert (c.node_id, c.method, c.reasoning) == ("n0004", "tie_break", "42")
    assert c.reason == "2 nodes tie within tolerance; tie-break chose n0004"
    assert c.candidates == ("n0002", "n0004")


def test_callback_answer_outside_the_tie_is_not_trusted():
    nodes = [node("n0004", 1.0), node("n0002", 1.0), node("n0001", 0.5)]
    c = select_best(nodes, tie_break=Recorder(answer="n0001", reasoning="n0001 is simpler"))
    assert (c.node_id, c.method, c.reasoning) == ("n0002", "lowest_id", "n0001 is simpler")
    assert (
        c.reason == "tie-break answered 'n0001', not one of ['n0002', 'n0004']; earliest (n0002) wins instead"
    )
    assert c.candidates == ("n0002", "n0004")
    assert [r["id"] for r in c.evidence["ranking"]] == ["n0004", "n0002", "n0001"]


def test_without_comparable_metrics_every_good_node_ties():
    nodes = [node("n0003"), node("n0002", math.nan), node("n0004", status="buggy")]
    rec = Recorder(answer="n0003")
    c = select_best(nodes, tie_break=rec)
    assert rec.calls == [["n0002", "n0003"]] and (c.node_id, c.method) == ("n0003", "tie_break")
    assert c.evidence["metric_key"] is None


def test_incomparable_nodes_never_join_a_tie():
    nodes = [node("n0001", 1.0, LOSS), node("n0002", 1.0), node("n0003", 1.0), node("n0004", 0.2)]
    c = select_best(nodes)
    assert c.candidates == ("n0002", "n0003")


# ---- select_best_sorted: the journal's fast path --------------------------------------------


def test_sorted_selection_matches_select_best_and_keeps_the_callback():
    ranked = [node("n0005", 1.0), node("n0002", 1.0), node("n0003", 1.0 - 1e-8), node("n0001", 0.4)]
    for tie_break in (None, Recorder(answer="n0005", reasoning="smaller model")):
        fast = select_best_sorted(ranked, ACC, tie_break=tie_break)
        assert fast == select_best(ranked, tie_break=tie_break)
    assert (fast.node_id, fast.method, fast.reasoning) == ("n0005", "tie_break", "smaller model")
    assert tie_break.calls == [["n0002", "n0003", "n0005"], ["n0002", "n0003", "n0005"]]
    assert select_best_sorted([], ACC) == Choice(None, "none", "no good node among the candidates")
    assert select_best_sorted(ranked, ACC, rel_tol=0.0, abs_tol=0.0).candidates == ("n0002", "n0005")
    assert select_best_sorted(ranked, ACC, rel_tol=1e-6, abs_tol=0.0).candidates == (
        "n0002",
        "n0003",
        "n0005",
    )


def test_sorted_selection_evidence_holds_the_first_ten():
    ranked = [node(f"n{i:04d}", 1.0 - i / 100) for i in range(1, 14)]
    c = select_best_sorted(ranked, ACC)
    assert [r["id"] for r in c.evidence["ranking"]] == [f"n{i:04d}" for i in range(1, 11)]
    assert c.evidence["metric_key"] == ["acc", "maximize", "val"]


def test_journal_fast_path_asks_the_callback_on_a_tie(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    a = j.new_node(stage=1, operation="draft")
    j.update(a.id, status="good", metric=Metric("acc", 0.5, dataset="val"))
    ids = []
    for v in (0.9, 0.7, 0.9):
        n = j.new_node(stage=2, operation="improve", parent_id=a.id)
        j.update(n.id, status="good", metric=Metric("acc", v, dataset="val"))
        ids.append(n.id)
    rec = Recorder(answer=ids[2], reasoning="fewer epochs")
    c = j.best_choice(2, a.id, tie_break=rec)
    assert rec.calls == [[ids[0], ids[2]]]
    assert (c.node_id, c.method, c.reasoning) == (ids[2], "tie_break", "fewer epochs")
    assert c == select_best(
        [j.get(a.id), *(j.get(i) for i in ids)], tie_break=Recorder(answer=ids[2], reasoning="fewer epochs")
    )
    assert j.best_choice(2, a.id).node_id == ids[0]

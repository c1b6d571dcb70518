"""best.py's parts added since its mutation score was measured (docs/testing.md, "Scores"): the
ablation stage's best (the carried node, ablations ranked as measurements), the node counts
shown everywhere (``NodeCounts``, ``count_nodes``, ``counts_by_stage``) and the recorded bests
read from ``state.json``. ``scripts/mutation.sh treesearch/best.py`` at 6bf777b found no focused
test reaching the counts and the recorded bests, and the ablation choice's evidence unchecked."""

from __future__ import annotations

from ai_scientist.treesearch import Metric, Node
from ai_scientist.treesearch.best import (
    ABLATION_STAGE,
    Choice,
    NodeCounts,
    ablation_stage_best,
    count_nodes,
    counts_by_stage,
    recorded_best,
)

ACC = ("acc", "maximize", "val")
LOSS = ("loss", "minimize", "val")


def node(nid, value=None, key=ACC, status="good", stage=ABLATION_STAGE, op="ablate", incomparable=None):
    m = None if value is None else Metric(key[0], value, key[1], key[2])
    return Node(nid, None, stage, op, status, metric=m, incomparable=incomparable)


# -- the ablation stage's best ------------------------------------------------------------------


def test_the_ablation_stage_keeps_its_carried_node_and_ranks_the_good_ablations_as_evidence():
    carried = node("n0001", 0.7, op="tune", stage=3)
    nodes = [
        carried,  # listed with the stage's nodes: never ranked against itself
        node("n0003", 0.5),
        node("n0002", 0.9),  # a higher metric is a measurement, not a better method
        node("n0004", status="buggy"),
        node("n0005", 0.99, incomparable="changed the split"),
        node("n0006", 3.0, LOSS),  # another key: ranked after the primary key's nodes, no value
    ]
    got = ablation_stage_best(ABLATION_STAGE, "n0001", nodes)
    assert got == Choice(
        "n0001",
        "carried",
        "stage 4 ablates n0001: the node the ablations were run against stays the best "
        "(3 good ablation node(s) ranked as measurements against it)",
        ("n0001",),
        evidence={
            "metric_key": list(ACC),
            "ranking": [
                {"id": "n0002", "value": 0.9},
                {"id": "n0003", "value": 0.5},
                {"id": "n0006", "value": None},
            ],
        },
    )


def test_the_ablation_evidence_ranks_at_most_ten_and_counts_all():
    nodes = [node(f"n{i:04d}", i / 100) for i in range(2, 14)]
    got = ablation_stage_best(ABLATION_STAGE, "n0001", nodes)
    assert got is not None
    assert [r["id"] for r in got.evidence["ranking"]] == [f"n{i:04d}" for i in range(13, 3, -1)]
    assert "(12 good ablation node(s)" in got.reason


def test_no_good_ablation_leaves_the_carried_node_with_empty_evidence():
    got = ablation_stage_best(ABLATION_STAGE, "n0001", [node("n0002", status="buggy")])
    assert got is not None and got.node_id == "n0001" and got.method == "carried"
    assert got.evidence == {"metric_key": None, "ranking": []}
    assert "(0 good ablation node(s)" in got.reason


def test_other_stages_and_a_missing_carried_node_have_no_ablation_best():
    good = [node("n0002", 0.9)]
    for stage in (1, 2, 3, 5):
        assert ablation_stage_best(stage, "n0001", good) is None
    assert ablation_stage_best(ABLATION_STAGE, None, good) is None


# -- counts -------------------------------------------------------------------------------------


def test_node_counts_text_singular_plural_and_optional_parts():
    assert NodeCounts(nodes=1, good=1).text() == "1 node (1 good, 0 buggy)"
    assert NodeCounts(nodes=0).text() == "0 nodes (0 good, 0 buggy)"
    assert NodeCounts(nodes=4, good=3, buggy=1).text() == "4 nodes (3 good, 1 buggy)"
    assert (
        NodeCounts(nodes=6, good=2, buggy=1, running=2, incomparable=1, seed_runs=1, seed_good=0).text()
        == "6 nodes (2 good, 1 not comparable, 1 buggy, 2 running); 1 seed re-run (0 good)"
    )
    assert NodeCounts(nodes=2, good=2, seed_runs=3, seed_good=2).text() == (
        "2 nodes (2 good, 0 buggy); 3 seed re-runs (2 good)"
    )


def test_node_counts_to_dict_has_every_count_by_name():
    c = NodeCounts(nodes=7, good=6, buggy=5, running=4, seed_runs=3, seed_good=2, incomparable=1)
    assert c.to_dict() == {
        "nodes": 7,
        "good": 6,
        "buggy": 5,
        "running": 4,
        "seed_runs": 3,
        "seed_good": 2,
        "incomparable": 1,
    }
    assert list(c.to_dict()) == [
        "nodes",
        "good",
        "buggy",
        "running",
        "seed_runs",
        "seed_good",
        "incomparable",
    ]


def test_count_nodes_counts_each_kind_and_seed_runs_apart():
    nodes = [
        node("n0001", 0.5, stage=1, op="draft"),
        node("n0002", 0.6, stage=1, op="improve"),
        node("n0003", status="buggy", stage=1, op="debug"),
        node("n0004", status="pending", stage=1, op="draft"),
        node("n0005", status="running", stage=1, op="draft"),
        node("n0006", 0.7, stage=1, op="tune", incomparable="another metric"),
        node("n0007", 0.5, stage=1, op="seed_eval"),
        node("n0008", status="buggy", stage=1, op="seed_eval"),
        node("n0009", 0.4, stage=1, op="seed_eval"),
        node("n0010", 0.8, stage=1, op="tune", incomparable="another split"),
        node("n0011", 0.9, stage=1, op="tune"),  # each count adds up, whatever comes last
    ]
    assert count_nodes(nodes) == NodeCounts(
        nodes=8, good=3, buggy=1, running=2, seed_runs=3, seed_good=2, incomparable=2
    )
    assert count_nodes([]) == NodeCounts()


def test_counts_by_stage_groups_by_stage_in_order():
    nodes = [
        node("n0004", 0.1, stage=3, op="tune"),
        node("n0001", 0.2, stage=1, op="draft"),
        node("n0002", status="buggy", stage=1, op="draft"),
        node("n0003", 0.3, stage=1, op="seed_eval"),
    ]
    got = counts_by_stage(nodes)
    assert list(got) == [1, 3]
    assert got[1] == NodeCounts(nodes=2, good=1, buggy=1, seed_runs=1, seed_good=1)
    assert got[3] == NodeCounts(nodes=1, good=1)
    assert counts_by_stage([]) == {}


# -- the recorded bests -------------------------------------------------------------------------


def test_recorded_best_reads_each_ended_stages_best_node_in_stage_order():
    stages = {
        "10": {"best": {"node_id": "n0040"}},  # by number: after 2, not before it
        "2": {"best": {"node_id": "n0007"}},
        "1": {"best": {"node_id": "n0003"}, "status": "done"},
        "3": {"best": None},  # ended without a best
        "4": {},  # still running
        "5": {"best": {"node_id": 12}},  # not an id
        "x": {"best": {"node_id": "n0009"}},  # not a stage
        "6": "garbled",
        "7": None,
    }
    got = recorded_best(stages)
    assert got == {1: "n0003", 2: "n0007", 10: "n0040"}
    assert list(got) == [1, 2, 10]
    assert recorded_best(None) == {}
    assert recorded_best({}) == {}

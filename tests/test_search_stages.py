"""Stage completion criteria and caps, best-node choice with tie-break, multi-seed aggregation."""

from __future__ import annotations

import math

import pytest

from ai_scientist.base.config import validate
from ai_scientist.treesearch import (
    JournalView,
    Metric,
    Node,
    StageRules,
    StageState,
    aggregate_seeds,
    next_stage_state,
    seed_plan,
    select_best,
    stage_outcome,
)
from ai_scientist.treesearch.node import IncomparableMetrics
from ai_scientist.treesearch.policies import BFTSPolicy
from ai_scientist.treesearch.seeds import aggregate_by_key, missing_seeds, seed_metrics
from ai_scientist.treesearch.stages import no_improvement_streak


def n(
    nid,
    parent=None,
    op="draft",
    status="good",
    value=None,
    stage=1,
    idea=None,
    direction="maximize",
    seed=None,
):
    m = Metric("acc", value, direction) if value is not None else None
    return Node(nid, parent, stage, op, status, metric=m, idea=idea, seed=seed)


CFG = validate(
    {
        "agent": {
            "search": {"num_drafts": 2},
            "stages": {
                "stage1_max_iters": 4,
                "stage2_max_iters": 3,
                "stage3_max_iters": 6,
                "stage4_max_iters": 3,
            },
        }
    }
)


# ------------------------------------------------------------------ stages --


def test_stage1_needs_a_working_node_and_num_drafts():
    one_good = JournalView([n("n0001", value=0.5)])
    out = stage_outcome(one_good, 1, CFG)
    assert not out.done and out.accepting and "1 of num_drafts=2" in out.reason
    both = JournalView([n("n0001", value=0.5), n("n0002", status="buggy")])
    done, reason = stage_outcome(both, 1, CFG)  # unpacks as (done, reason)
    assert done and "1 good node(s), 2 of num_drafts=2" in reason
    assert stage_outcome(both, 1, CFG).working


def test_stage1_cap_without_working_node_is_no_working_experiment():
    nodes = [n(f"n{i:04d}", status="buggy") for i in range(1, 5)]
    out = stage_outcome(JournalView(nodes), 1, CFG)
    assert out.done and not out.accepting and out.no_working_experiment
    assert out.reason.startswith("no working experiment: cap reached: 4 of stage1_max_iters=4")


def test_cap_is_enforced_and_in_flight_nodes_are_awaited():
    nodes = [
        n("n0001", status="buggy"),
        n("n0002", status="buggy"),
        n("n0003", status="buggy"),
        n("n0004", status="running"),
    ]
    out = stage_outcome(JournalView(nodes), 1, CFG)
    assert not out.accepting and not out.done and out.in_flight == 1
    assert "waiting for 1 node(s) in flight" in out.reason
    # criteria met while something runs: no new nodes, but not done yet either
    nodes = [n("n0001", value=0.2), n("n0002", value=0.3), n("n0003", "n0002", "improve", status="pending")]
    out = stage_outcome(JournalView(nodes), 1, CFG)
    assert (out.accepting, out.done) == (False, False)


def test_seed_runs_do_not_count_as_iterations():
    nodes = [n("n0001", value=0.5)] + [
        n(f"n{i:04d}", "n0001", "seed_eval", value=0.5, seed=i) for i in range(2, 6)
    ]
    out = stage_outcome(JournalView(nodes), 1, CFG)
    assert out.iterations == 1 and out.accepting


def test_stage2_k_good_nodes_or_cap():
    base = [n("n0001", value=0.5)]
    st = StageState(2, carried_id="n0001")
    one = base + [n("n0002", "n0001", "tune", stage=2, value=0.6, idea="a")]
    assert stage_outcome(JournalView(one), st, CFG).accepting
    two = one + [n("n0003", "n0001", "tune", stage=2, value=0.4, idea="b")]
    out = stage_outcome(JournalView(two), st, CFG)
    assert out.done and "2 of 2 good tuning" in out.reason
    assert stage_outcome(JournalView(two), st, CFG, StageRules(stage2_good_nodes=3)).accepting
    out = stage_outcome(JournalView(one), StageState(2, carried_id="n0001", ideas_exhausted=True), CFG)
    assert out.done and "no untried hyper-parameter idea" in out.reason
    bugs = base + [n(f"n{i:04d}", "n0001", "tune", stage=2, status="buggy") for i in (2, 3, 4)]
    out = stage_outcome(JournalView(bugs), st, CFG)
    assert out.done and "cap reached" in out.reason and out.working  # the carried node still works


def test_stage3_patience_counts_finished_nodes_without_improvement():
    base = [n("n0001", value=0.5)]
    nodes = base + [
        n("n0002", "n0001", "improve", stage=3, value=0.7),  # improves
        n("n0003", "n0002", "improve", stage=3, value=0.6),
        n("n0004", "n0002", "improve", stage=3, status="buggy"),
    ]
    carried = nodes[0]
    assert no_improvement_streak(JournalView(nodes), 3, carried) == 2
    st = StageState(3, carried_id="n0001")
    assert stage_outcome(JournalView(nodes), st, CFG).accepting
    nodes.append(n("n0005", "n0002", "improve", stage=3, value=0.7))  # a tie is no improvement
    out = stage_outcome(JournalView(nodes), st, CFG)
    assert out.done and "3 finished node(s) in a row without improvement" in out.reason
    assert (
        no_improvement_streak(
            JournalView(nodes + [n("n0006", "n0002", "improve", stage=3, value=0.9)]), 3, carried
        )
        == 0
    )


def test_stage4_planned_ideas_exhausted_or_cap():
    base = [n("n0001", value=0.5)]
    plan = StageState(4, carried_id="n0001", ideas=("no dropout", "no norm"))
    one = base + [n("n0002", "n0001", "ablate", stage=4, value=0.4, idea="no dropout")]
    assert stage_outcome(JournalView(one), plan, CFG).accepting
    both = one + [n("n0003", "n0001", "ablate", stage=4, status="buggy", idea="No  norm")]
    out = stage_outcome(JournalView(both), plan, CFG)
    assert out.done and "2 of 2 planned ablations tried" in out.reason
    exhausted = StageState(4, carried_id="n0001", ideas_exhausted=True)
    assert stage_outcome(JournalView(one), exhausted, CFG).done
    assert stage_outcome(JournalView(one), StageState(4, carried_id="n0001"), CFG).accepting


def test_zero_cap_and_missing_carried_node_end_the_stage():
    cfg = validate({"agent": {"stages": {"stage2_max_iters": 0}}})
    view = JournalView([n("n0001", value=0.5)])
    out = stage_outcome(view, StageState(2, carried_id="n0001"), cfg)
    assert out.done and "cap reached: 0 of stage2_max_iters=0" in out.reason
    out = stage_outcome(view, StageState(3), cfg)
    assert out.done and "no node to start from" in out.reason
    with pytest.raises(ValueError):
        StageState(1, carried_id="n0001")
    with pytest.raises(ValueError):
        StageState(5)


def test_next_stage_starts_from_the_previous_best_including_the_carried_node():
    pol = BFTSPolicy()
    nodes = [n("n0001", value=0.5), n("n0002", "n0001", "tune", stage=2, value=0.4, idea="x")]
    view = JournalView(nodes)
    nxt, choice = next_stage_state(view, StageState(2, carried_id="n0001"), pol)
    assert nxt == StageState(3, carried_id="n0001") and choice.node_id == "n0001"
    nxt, _ = next_stage_state(
        JournalView(nodes + [n("n0003", "n0001", "tune", stage=2, value=0.9)]),
        StageState(2, carried_id="n0001"),
        pol,
    )
    assert nxt.carried_id == "n0003"
    last, choice = next_stage_state(view, StageState(4, carried_id="n0001"), pol)
    assert last is None and choice.node_id == "n0001"
    assert StageState.from_dict(StageState(3, "n0002", ("a",), True).to_dict()) == StageState(
        3, "n0002", ("a",), True
    )


# -------------------------------------------------------------------- best --


def test_best_is_metric_first_and_direction_aware():
    nodes = [
        n("n0001", value=0.3, direction="minimize"),
        n("n0002", value=0.1, direction="minimize"),
        n("n0003", status="buggy"),
    ]
    c = select_best(nodes)
    assert (c.node_id, c.method) == ("n0002", "metric")
    assert select_best([n("n0001", status="buggy")]).node_id is None


def test_ties_go_to_lowest_id_without_callback_and_to_the_callback_with_reasoning():
    nodes = [n("n0003", value=1.0), n("n0002", value=1.0), n("n0001", value=0.4)]
    c = select_best(nodes)
    assert (c.node_id, c.method, set(c.candidates)) == ("n0002", "lowest_id", {"n0002", "n0003"})
    calls = []

    def tie_break(cands):
        calls.append(sorted(x.id for x in cands))
        return "n0003", "n0003 uses fewer parameters for the same accuracy"

    c = select_best(nodes, tie_break=tie_break)
    assert calls == [["n0002", "n0003"]]
    assert (c.node_id, c.method) == ("n0003", "tie_break")
    assert c.reasoning == "n0003 uses fewer parameters for the same accuracy"
    assert c.to_dict()["reasoning"] == c.reasoning
    bad = select_best(nodes, tie_break=lambda cands: ("n0001", "worse one"))
    assert bad.node_id == "n0002" and "not one of" in bad.reason and bad.reasoning == "worse one"
    # no tie, no callback call
    assert select_best([n("n0001", value=0.9), n("n0002", value=0.5)], tie_break=tie_break).method == "metric"
    assert len(calls) == 1


def test_incomparable_metrics_rank_after_the_primary_metric():
    loss = Node("n0001", None, 1, "draft", "good", metric=Metric("loss", 0.01, "minimize"))
    nodes = [loss, n("n0002", value=0.6), n("n0003", value=0.7), Node("n0004", None, 1, "draft", "good")]
    c = select_best(nodes)
    assert c.node_id == "n0003" and c.evidence["metric_key"] == ["acc", "maximize", None]
    assert [r["id"] for r in c.evidence["ranking"]] == ["n0003", "n0002", "n0001", "n0004"]
    assert (
        select_best(
            [Node("n0001", None, 1, "draft", "good"), Node("n0002", None, 1, "draft", "good")]
        ).node_id
        == "n0001"
    )


# ------------------------------------------------------------------- seeds --


def test_aggregate_seeds_mean_and_standard_error():
    agg = aggregate_seeds([Metric("acc", v, dataset="val") for v in (1.0, 2.0, 3.0, 4.0)])
    assert agg.mean == 2.5 and agg.n == 4 and agg.direction == "maximize" and agg.dataset == "val"
    assert agg.stderr == pytest.approx(math.sqrt(5 / 3) / 2)  # sample sd sqrt(5/3), / sqrt(4)
    assert agg.to_dict()["stderr"] == pytest.approx(0.6454972)
    single = aggregate_seeds([Metric("acc", 0.7)])
    assert single.mean == 0.7 and single.stderr is None and single.n == 1


def test_aggregate_never_mixes_names_or_directions():
    with pytest.raises(IncomparableMetrics):
        aggregate_seeds([Metric("acc", 0.5), Metric("loss", 0.5)])
    with pytest.raises(IncomparableMetrics):
        aggregate_seeds([Metric("acc", 0.5), Metric("acc", 0.5, "minimize")])
    with pytest.raises(ValueError, match="non-finite"):
        aggregate_seeds([Metric("acc", 0.5), Metric("acc", math.nan)])
    with pytest.raises(ValueError):
        aggregate_seeds([])
    groups = aggregate_by_key([Metric("acc", 0.5), Metric("loss", 2.0, "minimize"), Metric("acc", 0.7)])
    assert [(g.name, g.n, g.mean) for g in groups] == [("acc", 2, pytest.approx(0.6)), ("loss", 1, 2.0)]


def test_seed_plan_and_resume_helpers():
    assert seed_plan(10, 3) == [11, 12, 13]
    with pytest.raises(ValueError):
        seed_plan(0, 0)
    nodes = [
        n("n0001", value=0.5),
        n("n0002", "n0001", "seed_eval", value=0.52, seed=11),
        n("n0003", "n0001", "seed_eval", status="running", seed=12),
    ]
    view = JournalView(nodes)
    assert missing_seeds(view, "n0001", [11, 12, 13]) == [13]
    assert [m.value for m in seed_metrics(view, "n0001")] == [0.52]
    assert view.is_leaf("n0001")  # seed re-runs are not search children

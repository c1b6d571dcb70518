"""Stage 4's best is the node its ablations were run against, never an ablation; the stage facts
a stage summary is asked from: numbers as text (4 significant digits), whole metrics and
sentences in the table, the best node worded per stage.

The journal mirrors the relay run of issue 28 (L2 against label noise): stage 3's n0007 scored
val_accuracy 0.8648; its stage-4 ablation n0010 trained on clean labels (an easier task) and
scored 0.86952, which the metric alone would have made the run's best.
"""

from __future__ import annotations

import random

import pytest

from ai_scientist.runloop.stage_facts import cut_sentences, cut_words, result_cell, seeds_text, stage_facts
from ai_scientist.treesearch import Journal, Metric, Node
from ai_scientist.treesearch.best import ABLATION_STAGE, ablation_stage_best
from ai_scientist.treesearch.policies import next_stage_state
from ai_scientist.treesearch.policies.bfts import BFTSPolicy
from ai_scientist.treesearch.policies.greedy import GreedyPolicy
from ai_scientist.treesearch.policies.mcts import MCTSPolicy
from ai_scientist.treesearch.stages import StageState

ACC = dict(direction="maximize", dataset="synthetic")
SUMMARY_7 = (
    "Over 20 paired replicates (seed 0, 400 points, 20% noise): headline val_accuracy 0.8648 "
    "(L2 0.01, lr 0.01) vs 0.86495 without L2. Paired L2 gains were all negative."
)
SUMMARY_10 = (
    "With clean training labels (NOISE=0; 20 paired replicates, seed 0): headline val_accuracy "
    "0.86952 (L2 0.01, lr 0.01) vs 0.86985 without L2. Paired L2 gains were again all negative: "
    "-0.00032 (L2 0.01, lr 0.01), -0.0012 (L2 0.1, lr 0.01), -0.00058 (L2 0.01, lr 0.1), "
    "-0.00455 (L2 0.1, lr 0.1). Ablations: no bias 0.8695, no standardisation 0.86638."
)
IDEA_10 = (
    "ablation label noise: train on clean labels (NOISE=0) to measure what the 20% flips cost and "
    "whether the L2 gain changes without noise"
)
SEEDS_7 = {
    "node_id": "n0007",
    "runs": ["n0008", "n0009"],
    "aggregate": {
        "name": "val_accuracy",
        "mean": 0.861835,
        "stderr": 0.0007650000000000157,
        "n": 2,
        "direction": "maximize",
        "dataset": "synthetic",
        "values": [0.86107, 0.8626],
    },
}


def _grid(base: float, n: int) -> tuple[Metric, ...]:
    return tuple(
        Metric(f"val_accuracy[l2={i / 100},lr=0.01]", base + i / 10000, **ACC)
        for i in range(n)  # type: ignore[arg-type]
    )


@pytest.fixture
def journal(tmp_path):
    """n0001 (stage 1) -> n0002 (stage 3 improve, the 'n0007' of the relay run) -> n0003 (stage 4
    ablation, higher metric: clean labels), n0004 (stage 4 ablation, lower), n0005 (failed)."""
    j = Journal(tmp_path / "journal.jsonl")
    a = j.new_node(stage=1, operation="draft")
    j.update(a.id, status="good", metric=Metric("val_accuracy", 0.8645, **ACC), summary="first")  # type: ignore[arg-type]
    b = j.new_node(stage=3, operation="improve", parent_id=a.id)
    m7 = Metric("val_accuracy", 0.8648, **ACC)  # type: ignore[arg-type]
    j.update(b.id, status="good", metric=m7, metrics=(m7, *_grid(0.86, 14)), summary=SUMMARY_7)
    c = j.new_node(stage=4, operation="ablate", parent_id=b.id, idea=IDEA_10)
    m10 = Metric("val_accuracy", 0.86952, **ACC)  # type: ignore[arg-type]
    j.update(c.id, status="good", metric=m10, metrics=(m10, *_grid(0.869, 14)), summary=SUMMARY_10)
    d = j.new_node(stage=4, operation="ablate", parent_id=b.id, idea="ablation: no standardisation")
    j.update(d.id, status="good", metric=Metric("val_accuracy", 0.82225, **ACC), summary="Lower.")  # type: ignore[arg-type]
    e = j.new_node(stage=4, operation="ablate", parent_id=b.id, idea="ablation: no bias")
    j.update(e.id, status="buggy", error="Traceback (most recent call last):\n  File x\nKeyError: 'bias'")
    return j


@pytest.mark.parametrize(
    "policy", [GreedyPolicy(), BFTSPolicy(), MCTSPolicy(tree_nums=2)], ids=lambda p: p.name
)
def test_stage_4s_best_is_the_ablated_node_for_every_policy(journal, policy):
    state = StageState(4, carried_id="n0002")
    choice = policy.stage_best(journal, state, rng=random.Random(0))
    assert (choice.node_id, choice.method) == ("n0002", "carried")
    # the ablations stay ranked in the evidence, as measurements against it
    assert [r["id"] for r in choice.evidence["ranking"]] == ["n0003", "n0004"]
    nxt, end = next_stage_state(journal, state, policy, rng=random.Random(0))
    assert nxt is None and end.node_id == "n0002"  # the run's best: no next stage


def test_the_other_stages_still_choose_by_metric(journal):
    # stage 3 with the stage-1 node carried: n0002 beats it by metric
    assert journal.best_choice(3, "n0001").method == "metric"
    assert GreedyPolicy().stage_best(journal, StageState(3, carried_id="n0001")).node_id == "n0002"
    assert ablation_stage_best(3, "n0001") is None
    assert ablation_stage_best(ABLATION_STAGE, None) is None  # no carried node: nothing to keep
    assert journal.best_choice(4, "n0002").node_id == "n0002"  # the status line's source as well


def test_stage_4_facts_name_the_run_best_and_rank_the_ablations_against_it(journal):
    head, *rows = stage_facts(journal, 4, journal.get("n0002"), SEEDS_7)
    assert "Best node handed to the next stage" not in head
    assert (
        "Best node of the run: n0002 (from stage 3: the node this stage's ablations were run against" in head
    )
    assert "val_accuracy=0.8648 (maximize, synthetic)" in head
    assert (
        "val_accuracy over 2 seed re-runs of n0007: mean 0.8618 ± 0.00077 s.e. (values 0.8611, 0.8626)."
        in head
    )
    assert "{'" not in head and "0.0007650000000000157" not in head
    assert "Ablations, each measured against n0002 (val_accuracy 0.8648):" in head
    assert [r.split(" | ")[0] for r in rows] == ["| n0003", "| n0004", "| n0005"]
    assert IDEA_10 in rows[0]  # whole: it fits
    assert "failed: Traceback (most recent call last): ... KeyError: 'bias'" in rows[2]


def test_stages_1_to_3_hand_their_best_to_the_next_stage(journal):
    head = stage_facts(journal, 3, journal.get("n0002"), None)[0]
    assert (
        f"Best node handed to the next stage: n0002 val_accuracy=0.8648 (maximize, synthetic): {SUMMARY_7}"
        in head
    )
    kept = stage_facts(journal, 3, journal.get("n0001"), None)[0]
    assert "Best node handed to the next stage: n0001 (from stage 1: no node of this stage beat it)" in kept


def test_the_result_cell_gives_whole_metrics_primary_first_then_a_count():
    m = Metric("val_accuracy", 0.86952, **ACC)  # type: ignore[arg-type]
    node = Node("n0010", "n0007", 4, "ablate", "good", metric=m, metrics=(m, *_grid(0.869, 14)))
    cell = result_cell(node, limit=200)
    parts = cell.split("; ")
    assert parts[0] == "val_accuracy=0.8695 (synthetic)"  # 4 significant digits, the dataset once
    assert all(p.startswith("val_accuracy[l2=") and p.count("=") == 3 for p in parts[1:-1])
    assert parts[-1] == f"+{15 - len(parts) + 1} more" and len(cell) <= 200
    assert "..." not in cell


def test_summaries_are_cut_at_a_sentence_end_and_ideas_at_a_word():
    assert cut_sentences(SUMMARY_10, 200) == SUMMARY_10[: SUMMARY_10.index(" Paired")] + " […]"
    assert cut_sentences("Short.", 200) == "Short."
    long_one = "word " * 100
    cut = cut_words(long_one, 50)
    assert cut.endswith(" …") and len(cut) <= 52 and cut[:-2].split() == ["word"] * len(cut[:-2].split())
    assert cut_sentences("a|b", 10) == "a\\|b"  # a bar in a table cell is escaped, not a column


def test_seed_text_rounds_and_handles_a_single_run():
    agg = {
        "name": "val_accuracy",
        "mean": 0.86575,
        "stderr": 0.008750000000000034,
        "n": 2,
        "values": [0.8745, 0.857],
    }
    assert seeds_text(agg, "n0001") == (
        "val_accuracy over 2 seed re-runs of n0001: mean 0.8658 ± 0.0088 s.e. (values 0.8745, 0.857)."
    )
    # the re-runs' seeds are named: two equal values then read as a coincidence, not a bug
    assert seeds_text(agg, "n0001", [1, 2]).startswith(
        "val_accuracy over 2 seed re-runs of n0001 (seeds 1, 2): "
    )
    one = {"name": "acc", "mean": 0.5, "stderr": None, "n": 1, "values": [0.5]}
    assert seeds_text(one, None) == "acc over 1 seed re-run: 0.5 (one re-run: no spread)."
    assert seeds_text(None, "n0001") is None

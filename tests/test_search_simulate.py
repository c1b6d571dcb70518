"""Whole searches with a fake experiment outcome (no LLM): every policy walks all four stages
within their caps, the journal replays to the same tree, and a resumed search makes the same
decisions as an uninterrupted one."""

from __future__ import annotations

import json
import random

import pytest

from ai_scientist.base.config import validate
from ai_scientist.treesearch import (
    STAGES,
    Journal,
    Metric,
    StageState,
    decision_rng,
    dedupe_ideas,
    ideas_tried,
    load,
    make_policy,
    next_stage_state,
    stage_outcome,
)


def make_cfg(policy: str, **stages: int):
    caps = {"stage1_max_iters": 8, "stage2_max_iters": 4, "stage3_max_iters": 5, "stage4_max_iters": 3}
    caps.update(stages)
    return validate(
        {
            "agent": {"seed": 7, "stages": caps, "search": {"num_drafts": 3, "debug_prob": 0.5}},
            "search": {"policy": policy, "mcts": {"tree_nums": 2}},
        }
    )


def fake_outcome(journal, node, fail_all=False):
    """Deterministic per node id: drafts often fail, debugs usually fix, improvements add noise."""
    rng = random.Random(f"outcome:{node.id}")
    p_bug = {"draft": 0.5, "debug": 0.3}.get(node.operation, 0.2)
    if fail_all or rng.random() < p_bug:
        return {"status": "buggy", "error": "Traceback: simulated failure"}
    base = (
        journal.get(node.parent_id).metric.value
        if node.parent_id and journal.get(node.parent_id).metric
        else 0.5
    )
    value = min(1.0, max(0.0, base + rng.uniform(-0.05, 0.1)))
    return {
        "status": "good",
        "metric": Metric("accuracy", round(value, 4), "maximize", "val"),
        "summary": f"{node.operation} reached accuracy {value:.3f}",
    }


def fake_llm_idea(journal, state, k):
    """An 'LLM' proposing ideas, some duplicates of what was tried; deduplicated like the lead will."""
    word = "learning rate" if state.stage == 2 else "remove component"
    candidates = [f"{word} {k % 3}", f"{word.title()} {k % 3}.", f"{word} {k}"]
    fresh = dedupe_ideas(candidates, ideas_tried(journal, state.stage, finished_only=False))
    return fresh[0] if fresh else None


def simulate(cfg, path, workers=1, fail_all=False, stop_after=None, journal=None, state=None):
    """The orchestrator loop in miniature. Returns (exit_code, journal, log)."""
    journal = journal or Journal(path)
    policy = make_policy(cfg)
    state = state or StageState(1)
    inflight = [n.id for n in journal.nodes if n.in_flight]
    log, k = [], 0
    for _step in range(2000):  # a bug must fail the test, not hang it
        out = stage_outcome(journal, state, cfg)
        if out.accepting and len(inflight) < workers:
            action = policy.next_action(journal.snapshot(), state, decision_rng(7, journal.next_node_id()))
            assert action.operation in STAGES[state.stage].operations, action
            json.dumps([action.to_dict(), out.to_dict()])  # events.jsonl material is plain JSON
            idea = action.idea
            if action.operation in ("tune", "ablate") and idea is None:
                k += 1
                idea = fake_llm_idea(journal, state, k) or f"fallback idea {k}"
            node = journal.new_node(
                stage=state.stage,
                operation=action.operation,
                parent_id=action.parent_id,
                tree=action.tree,
                idea=idea,
            )
            log.append((node.id, action.operation, action.parent_id, action.reason))
            inflight.append(node.id)
            if stop_after is not None and len(journal) >= stop_after:
                return None, journal, log, state
            continue
        if inflight:
            # finish nodes out of order when several are in flight
            nid = inflight.pop(random.Random(len(journal)).randrange(len(inflight)))
            journal.update(nid, status="running")
            journal.update(nid, finished_at=1.0, **fake_outcome(journal, journal.get(nid), fail_all))
            continue
        assert out.done
        log.append(("stage_done", state.stage, out.reason))
        if out.no_working_experiment:
            return 3, journal, log, state
        state, choice = next_stage_state(journal.snapshot(), state, policy, rng=random.Random(1))
        log.append(("stage_best", choice.node_id, json.dumps(choice.to_dict())))
        if state is None:
            return 0, journal, log, None
    pytest.fail(f"search did not finish in 2000 steps; last stage {state}, {len(journal)} nodes")


@pytest.mark.parametrize("policy", ["bfts", "greedy", "mcts"])
@pytest.mark.parametrize("workers", [1, 3])
def test_every_policy_completes_all_stages_within_caps(tmp_path, policy, workers):
    cfg = make_cfg(policy)
    code, journal, log, _ = simulate(cfg, tmp_path / "journal.jsonl", workers=workers)
    assert code == 0
    done = [e for e in log if e[0] == "stage_done"]
    assert [d[1] for d in done] == [1, 2, 3, 4]
    for s in (1, 2, 3, 4):
        nodes = journal.stage_nodes(s)
        assert 1 <= len(nodes) <= getattr(cfg.agent.stages, f"stage{s}_max_iters")
        assert all(n.is_finished for n in nodes)
        assert all(n.operation in STAGES[s].operations for n in nodes)
    assert len(journal.draft_nodes(1)) >= 3  # num_drafts
    if policy == "mcts":  # the forest: both trees were grown
        assert {n.tree for n in journal.stage_nodes(1)} == {0, 1}
        assert {n.tree for n in journal.stage_nodes(3)} == {0, 1}
    # stage 2 / 4 nodes descend from the node the previous stage handed over
    for s in (2, 4):
        for n in journal.stage_nodes(s):
            if n.operation in ("tune", "ablate"):
                assert journal.get(n.parent_id).stage < s or policy == "greedy"
    # tune / ablate ideas are never repeated within a stage
    for s in (2, 4):
        ideas = [n.idea for n in journal.stage_nodes(s) if n.idea]
        assert len(ideas) == len(set(ideas))
    # the file replays to the same tree
    again = load(tmp_path / "journal.jsonl")
    assert [n.to_dict() for n in again.nodes] == [n.to_dict() for n in journal.nodes]


@pytest.mark.parametrize("policy", ["bfts", "greedy", "mcts"])
def test_stage1_without_working_node_ends_with_no_working_experiment(tmp_path, policy):
    cfg = make_cfg(policy, stage1_max_iters=5)
    code, journal, log, _ = simulate(cfg, tmp_path / "j.jsonl", fail_all=True)
    assert code == 3
    assert len(journal.stage_nodes(1)) == 5
    assert not journal.stage_nodes(2)
    assert log[-1][2].startswith("no working experiment")
    # debug chains never exceed max_debug_depth (3)
    assert max(journal.debug_depth(n.id) for n in journal.nodes) <= 3


@pytest.mark.parametrize("policy", ["bfts", "greedy", "mcts"])
def test_resumed_search_makes_the_same_decisions(tmp_path, policy):
    cfg = make_cfg(policy)
    full_code, full, _, _ = simulate(cfg, tmp_path / "a.jsonl")
    # interrupt after 6 nodes (one in flight), reload the file, continue
    _, _, _, state = simulate(cfg, tmp_path / "b.jsonl", stop_after=6)
    resumed = load(tmp_path / "b.jsonl")
    code, resumed, _, _ = simulate(cfg, None, journal=resumed, state=state)
    assert code == full_code == 0
    strip = [(n.id, n.parent_id, n.operation, n.stage, n.tree, n.status) for n in full.nodes]
    assert strip == [(n.id, n.parent_id, n.operation, n.stage, n.tree, n.status) for n in resumed.nodes]


def test_zero_cap_stages_are_skipped(tmp_path):
    cfg = make_cfg("bfts", stage2_max_iters=0, stage4_max_iters=0)
    code, journal, log, _ = simulate(cfg, tmp_path / "j.jsonl")
    assert code == 0
    assert not journal.stage_nodes(2) and not journal.stage_nodes(4)
    assert journal.stage_nodes(3)
    assert [e[1] for e in log if e[0] == "stage_done"] == [1, 2, 3, 4]

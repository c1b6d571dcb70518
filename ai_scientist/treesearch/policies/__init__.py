"""Selection policies, chosen by ``search.policy``: ``bfts``, ``greedy``, ``mcts``.

Each policy is a small class with ``next_action(view, state, rng) -> Action``
and ``stage_best(view, state, *, rng, tie_break) -> Choice``; see ``base``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    Action,
    SearchPolicy,
    decision_rng,
    dedupe_ideas,
    idea_similarity,
    next_planned_idea,
    next_stage_state,
)
from .bfts import BFTSPolicy
from .forest import final_choice, nearest_solved_example, tfidf_similarities
from .greedy import GreedyPolicy
from .mcts import MCTSPolicy, tree_stats, ucb_score

if TYPE_CHECKING:
    from ...base.config import Config

SEARCH_POLICIES: dict[str, Any] = {"bfts": BFTSPolicy, "greedy": GreedyPolicy, "mcts": MCTSPolicy}


def make_policy(cfg: Config) -> SearchPolicy:
    """The policy named by ``cfg.search.policy``, configured from ``cfg``."""
    name = cfg.search.policy
    if name not in SEARCH_POLICIES:
        raise ValueError(f"search.policy: unknown policy {name!r}; choose one of {sorted(SEARCH_POLICIES)}")
    return SEARCH_POLICIES[name].from_config(cfg)


__all__ = [
    "Action",
    "BFTSPolicy",
    "GreedyPolicy",
    "MCTSPolicy",
    "SEARCH_POLICIES",
    "SearchPolicy",
    "decision_rng",
    "dedupe_ideas",
    "final_choice",
    "idea_similarity",
    "make_policy",
    "nearest_solved_example",
    "next_planned_idea",
    "next_stage_state",
    "tfidf_similarities",
    "tree_stats",
    "ucb_score",
]

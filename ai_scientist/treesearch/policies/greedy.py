"""``greedy``: AIDE's search policy, applied stage by stage.

Per decision: (stage 1) draft until ``num_drafts`` drafts exist; then, with
probability ``debug_prob``, debug a random buggy leaf whose debug depth is
below ``max_debug_depth``; otherwise grow the best node so far (stage 1 falls
back to drafting while nothing works). Growing means improve in stages 1 and 3,
tune in stage 2 (hill-climbing: the best tuned node is tuned further) and
ablate in stage 4 (always the carried stage-3 best, so every ablation is
measured against the same base).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..best import Choice, TieBreak
from ..journal import JournalView
from ..node import Node
from ..stages import StageState
from .base import (
    Action,
    debug_action,
    debuggable_leaves,
    fanout_action,
    require_carried,
    stage_best_choice,
)

if TYPE_CHECKING:
    from ...base.config import Config


class GreedyPolicy:
    name = "greedy"

    def __init__(self, num_drafts: int = 2, debug_prob: float = 0.5, max_debug_depth: int = 3) -> None:
        self.num_drafts = num_drafts
        self.debug_prob = debug_prob
        self.max_debug_depth = max_debug_depth

    @classmethod
    def from_config(cls, cfg: Config) -> GreedyPolicy:
        s = cfg.agent.search
        return cls(s.num_drafts, s.debug_prob, s.max_debug_depth)

    # ---------------------------------------------------------------- hooks --
    def _avoid_roots(self, view: JournalView, stage: int) -> frozenset[str]:
        """Draft trees to pass over when another tree offers a candidate; greedy avoids none."""
        return frozenset()

    def _prefer(self, view: JournalView, stage: int, nodes: Sequence[Node]) -> list[Node]:
        """Which of ``nodes`` to choose from: those outside ``_avoid_roots``, or all if none is."""
        avoid = self._avoid_roots(view, stage)
        if not avoid:
            return list(nodes)
        return [n for n in nodes if view.root_id(n.id) not in avoid] or list(nodes)

    def _tune_parent(self, view: JournalView, state: StageState) -> tuple[Node, str]:
        choice = stage_best_choice(view, state)
        return view.get(choice.node_id or require_carried(view, state).id), "best node so far"

    # --------------------------------------------------------------- policy --
    def next_action(self, view: JournalView, state: StageState, rng: random.Random) -> Action:
        s = state.stage
        if s == 1:
            drafts = len(view.draft_nodes(1))
            if drafts < self.num_drafts:
                return Action(
                    "draft", None, 0, None, f"{drafts} of num_drafts={self.num_drafts} drafts exist"
                )
        draw = rng.random()
        why = f"draw {draw:.3f} >= debug_prob {self.debug_prob}"
        if draw < self.debug_prob:
            leaves = self._prefer(view, s, debuggable_leaves(view, s, self.max_debug_depth))
            if leaves:
                return debug_action(rng.choice(leaves), view, len(leaves), draw, self.debug_prob)
            why = f"draw {draw:.3f} < debug_prob {self.debug_prob} but no debuggable leaf"
        if s == 2:
            parent, why = self._tune_parent(view, state)
            return fanout_action(view, state, parent, why)
        if s == 4:
            return fanout_action(view, state, require_carried(view, state), "best node of stage 3")
        choice = stage_best_choice(view, state, avoid_roots=self._avoid_roots(view, s))
        if choice.node_id is None:
            if s == 1:
                return Action("draft", None, 0, None, "no good node yet: draft a new solution")
            carried = require_carried(view, state)
            return Action("improve", carried.id, carried.tree, None, "no good node: improve the carried node")
        node = view.get(choice.node_id)
        return Action(
            "improve",
            node.id,
            node.tree,
            None,
            f"improve the best node {node.id} ({why}): {choice.reason}",
            {"draw": draw, "best": choice.to_dict()},
        )

    def stage_best(
        self,
        view: JournalView,
        state: StageState,
        *,
        rng: random.Random | None = None,
        tie_break: TieBreak | None = None,
    ) -> Choice:
        """Best of the stage's good nodes and its carried node (metric, then tie-break); in
        stage 4 the carried node, which the ablations were run against."""
        return stage_best_choice(view, state, tie_break=tie_break)

"""``mcts``: Forest-of-Thought style Monte-Carlo tree search over experiment nodes.

Everything is recomputed from the journal on each decision (resume needs no
saved search state). For stage ``s`` and forest tree ``t`` the *scope* is the
stage's search nodes with ``tree == t``, hanging under an anchor: a virtual
root in stage 1 (whose children are the drafts), the carried node in stage 3.

- reward ``r(n)``: the node's primary metric normalised to [0, 1] among the
  stage's good nodes (all trees, plus the carried node), direction-aware;
  1.0 for all when they are equal; 0 for buggy, in-flight (a virtual loss, so
  parallel workers spread out) and good-but-incomparable nodes.
- visits ``N(n)``: nodes in n's subtree within the scope, n included.
- value ``Q(n) = sum_d gamma^(depth(d) - depth(n)) * r(d) / N(n)`` over that
  subtree: rewards backpropagated with discount ``gamma`` per level.
- ``UCB(n) = Q(n) + C * sqrt(ln N(parent) / N(n))`` with ``C = exploration_c``;
  the parent of a draft is the virtual root (``N`` = scope size), the anchor's
  own parent count is its own ``N``.
- candidates: finished good nodes with fewer than ``max_expand`` search
  children (mature-node filter) -> improve; buggy leaves with debug depth below
  ``max_debug_depth`` -> debug. Highest UCB wins, the earliest id on a tie.

Trees take turns: the tree with the fewest nodes in the stage acts next. In
stage 1 every tree first gets its share of the ``num_drafts`` root drafts (at
least one each). Stages 2 and 4 fan out ideas from the carried node exactly as
``bfts`` does (there is no tree to search there). ``debug_prob`` is not used
here: UCB decides between debugging and improving.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..best import Choice, TieBreak, comparable_metric, primary_metric_key
from ..journal import JournalView
from ..node import Node, node_sort_key
from ..stages import STAGES, StageState
from .base import Action, best_of, require_carried, stage_pool
from .bfts import BFTSPolicy
from .forest import final_choice

if TYPE_CHECKING:
    from ...base.config import Config


def ucb_score(value: float, parent_visits: int, visits: int, c: float) -> float:
    """``value + c * sqrt(ln(parent_visits) / visits)``; visits >= 1 always holds in a scope."""
    if visits < 1 or parent_visits < 1:
        raise ValueError(f"visits must be >= 1 (got visits={visits}, parent_visits={parent_visits})")
    return value + c * math.sqrt(math.log(parent_visits) / visits)


def stage_rewards(view: JournalView, state: StageState) -> dict[str, float]:
    """Reward in [0, 1] of every search node of the stage (and the carried node)."""
    pool = stage_pool(view, state)
    key = primary_metric_key(pool)
    scores = {n.id: comparable_metric(n, key).score for n in pool if comparable_metric(n, key)}  # type: ignore[union-attr]
    lo, hi = (min(scores.values()), max(scores.values())) if scores else (0.0, 0.0)
    out = {n.id: 0.0 for n in view.stage_nodes(state.stage)}
    for nid, sc in scores.items():
        out[nid] = 1.0 if hi == lo else (sc - lo) / (hi - lo)
    return out


@dataclass(frozen=True)
class TreeStats:
    """Per-node MCTS numbers of one (stage, tree) scope; keys are node ids."""

    tree: int
    anchor: str | None
    reward: dict[str, float]
    visits: dict[str, int]
    value: dict[str, float]
    parent_visits: dict[str, int]
    ucb: dict[str, float]
    children: dict[str, list[str]]


def tree_members(view: JournalView, stage: int, tree: int) -> list[Node]:
    return [n for n in view.stage_nodes(stage) if n.tree == tree]


def tree_stats(view: JournalView, state: StageState, tree: int, c: float, gamma: float) -> TreeStats:
    """Rewards, visits, discounted values and UCB of every node in the scope."""
    members = tree_members(view, state.stage, tree)
    anchor = state.carried_id if state.stage > 1 else None
    ids = {n.id for n in members}
    rewards = stage_rewards(view, state)
    parent = {n.id: (n.parent_id if n.parent_id in ids else anchor) for n in members}
    children: dict[str, list[str]] = {}
    for n in members:
        children.setdefault(parent[n.id] or "", []).append(n.id)
    visits: dict[str, int] = {}
    total: dict[str, float] = {}
    # children are created after their parents: reverse creation order is a post-order
    for n in reversed(members):
        kids = children.get(n.id, [])
        visits[n.id] = 1 + sum(visits[k] for k in kids)
        total[n.id] = rewards.get(n.id, 0.0) + gamma * sum(total[k] for k in kids)
    top = children.get(anchor or "", [])
    root_visits = sum(visits[k] for k in top)
    if anchor is not None:
        visits[anchor] = 1 + root_visits
        total[anchor] = rewards.get(anchor, 0.0) + gamma * sum(total[k] for k in top)
        root_visits = visits[anchor]
    value = {k: total[k] / visits[k] for k in visits}
    pv = {k: (visits[parent[k]] if parent.get(k) else root_visits) for k in visits}
    ucb = {k: ucb_score(value[k], pv[k], visits[k], c) for k in visits}
    return TreeStats(tree, anchor, {k: rewards.get(k, 0.0) for k in visits}, visits, value, pv, ucb, children)


class MCTSPolicy:
    name = "mcts"

    def __init__(
        self,
        num_drafts: int = 2,
        debug_prob: float = 0.5,
        max_debug_depth: int = 3,
        exploration_c: float = 1.4,
        gamma: float = 0.85,
        max_expand: int = 3,
        tree_nums: int = 2,
        final_choice: str = "consensus",
    ) -> None:
        self.num_drafts = num_drafts
        self.max_debug_depth = max_debug_depth
        self.c = exploration_c
        self.gamma = gamma
        self.max_expand = max_expand
        self.tree_nums = tree_nums
        self.final_choice = final_choice
        self._fanout = BFTSPolicy(num_drafts, debug_prob, max_debug_depth)

    @classmethod
    def from_config(cls, cfg: Config) -> MCTSPolicy:
        s, m = cfg.agent.search, cfg.search.mcts
        return cls(
            s.num_drafts,
            s.debug_prob,
            s.max_debug_depth,
            m.exploration_c,
            m.gamma,
            m.max_expand,
            m.tree_nums,
            m.final_choice,
        )

    def draft_target(self, tree: int) -> int:
        """Root drafts tree ``tree`` gets: ``num_drafts`` spread over the trees, at least one each."""
        share, extra = divmod(self.num_drafts, self.tree_nums)
        return max(1, share + (1 if tree < extra else 0))

    def _tree_order(self, view: JournalView, stage: int) -> list[int]:
        sizes = {t: 0 for t in range(self.tree_nums)}
        for n in view.stage_nodes(stage):
            if n.tree in sizes:
                sizes[n.tree] += 1
        return sorted(sizes, key=lambda t: (sizes[t], t))

    def candidates(self, view: JournalView, state: StageState, stats: TreeStats) -> dict[str, str]:
        """Expandable node id -> operation (mature and in-flight nodes are left out)."""
        out: dict[str, str] = {}
        expand = STAGES[state.stage].expand_op
        for nid in stats.visits:
            n = view.get(nid)
            if nid == stats.anchor:
                kids = len(stats.children.get(nid, []))
            else:
                kids = len(view.search_children(nid))
            if n.is_good and kids < self.max_expand:
                out[nid] = expand
            elif (
                n.is_buggy
                and n.stage == state.stage
                and view.is_leaf(nid)
                and view.debug_depth(nid) < self.max_debug_depth
            ):
                out[nid] = "debug"
        return out

    def next_action(self, view: JournalView, state: StageState, rng: random.Random) -> Action:
        s = state.stage
        if s in (2, 4):
            return self._fanout.next_action(view, state, rng)
        order = self._tree_order(view, s)
        if s == 1:
            for t in order:
                roots = sum(1 for n in tree_members(view, 1, t) if n.is_draft)
                if roots < self.draft_target(t):
                    return Action(
                        "draft", None, t, None, f"tree {t} has {roots} of {self.draft_target(t)} drafts"
                    )
        for t in order:
            stats = tree_stats(view, state, t, self.c, self.gamma)
            cands = self.candidates(view, state, stats)
            if not cands:
                continue
            pick = min(cands, key=lambda k: (-stats.ucb[k], node_sort_key(k)))
            table = sorted(cands, key=lambda k: (-stats.ucb[k], node_sort_key(k)))[:5]
            ev = {
                "tree": t,
                "ucb": [_row(stats, k, cands[k]) for k in table],
                "mature": sorted(k for k in stats.visits if k not in cands and view.get(k).is_good),
            }
            reason = f"tree {t}: {cands[pick]} {pick}, highest UCB {stats.ucb[pick]:.4f} among {len(cands)}"
            return Action(cands[pick], pick, t, None, reason, ev)
        t = order[0]
        if s == 1:
            return Action("draft", None, t, None, "every node is mature, in flight or past max debug depth")
        carried = require_carried(view, state)
        return Action(
            "improve", carried.id, t, None, "every node is mature or in flight: improve the carried node"
        )

    def stage_best(
        self,
        view: JournalView,
        state: StageState,
        *,
        rng: random.Random | None = None,
        tie_break: TieBreak | None = None,
    ) -> Choice:
        """Stages 1 and 3: the forest's final choice (``final_choice``); 2 and 4: best by metric."""
        if state.stage in (2, 4):
            return best_of(stage_pool(view, state), tie_break)
        return final_choice(view, state, self.tree_nums, method=self.final_choice, rng=rng, expert=tie_break)


def _row(stats: TreeStats, k: str, op: str) -> dict[str, object]:
    return {
        "id": k,
        "op": op,
        "ucb": round(stats.ucb[k], 6),
        "value": round(stats.value[k], 6),
        "visits": stats.visits[k],
        "parent_visits": stats.parent_visits[k],
        "reward": round(stats.reward[k], 6),
    }

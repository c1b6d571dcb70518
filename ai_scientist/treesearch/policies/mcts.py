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

Cost per decision: the scale of the rewards (primary metric key, lowest and highest
score) comes from the journal's metric rankings, a tree's nodes and the tree sizes
from its per-tree index, children counts and debug depths from the index too; what is
left is one pass over the acting tree's nodes, which the definition of ``Q`` needs
(every reward moves when the lowest or highest score does).

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

from ..best import Choice, TieBreak, comparable_metric
from ..index import MetricKey
from ..journal import JournalView
from ..node import Node, node_sort_key
from ..stages import STAGES, StageState
from .base import Action, require_carried, stage_best_choice
from .bfts import BFTSPolicy
from .forest import final_choice

if TYPE_CHECKING:
    from ...base.config import Config


def ucb_score(value: float, parent_visits: int, visits: int, c: float) -> float:
    """``value + c * sqrt(ln(parent_visits) / visits)``; visits >= 1 always holds in a scope."""
    if visits < 1 or parent_visits < 1:
        raise ValueError(f"visits must be >= 1 (got visits={visits}, parent_visits={parent_visits})")
    return value + c * math.sqrt(math.log(parent_visits) / visits)


@dataclass(frozen=True)
class RewardScale:
    """How a metric becomes a reward in a stage: the primary metric ``key`` of the stage's pool
    (its good nodes and the carried node) and the lowest and highest score of that key in it."""

    key: MetricKey | None
    lo: float
    hi: float
    carried_id: str | None

    def reward(self, node: Node) -> float:
        """The normalised metric of a pool node (0 for others and incomparable metrics)."""
        if not (node.is_good or node.id == self.carried_id):
            return 0.0
        m = comparable_metric(node, self.key)
        if m is None:
            return 0.0
        return 1.0 if self.hi == self.lo else (m.score - self.lo) / (self.hi - self.lo)


def reward_scale(view: JournalView, state: StageState) -> RewardScale:
    """The :class:`RewardScale` of ``stage_pool(view, state)``, from the journal's metric
    rankings (O(metric keys)): ``best.primary_metric_key`` of the pool and the ends of its ranking."""
    ix = view.index
    cid = state.carried_id if state.carried_id is not None and state.carried_id in view else None
    carried = ix.nodes[cid] if cid is not None else None
    counts = {k[1]: (len(t), ix.first[k]) for k, t in ix.ranked.items() if k[0] == state.stage}
    cm = carried.metric if carried is not None else None  # the carried node competes whatever its status
    if carried is not None and cm is not None and cm.is_valid:
        n, first = counts.get(cm.key, (0, 1 << 62))
        counts[cm.key] = (n + 1, min(first, ix.facts[carried.id].order))
    if not counts:
        return RewardScale(None, 0.0, 0.0, cid)
    key = min(counts, key=lambda k: (-counts[k][0], counts[k][1]))
    entries = ix.ranked.get((state.stage, key), ())
    scores = [-entries[0][0], -entries[-1][0]] if entries else []
    if cm is not None and cm.is_valid and cm.key == key:
        scores.append(cm.score)
    return RewardScale(key, min(scores), max(scores), cid)


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
    """The stage's search nodes in forest tree ``tree``, in creation order (from the index)."""
    nodes = view.index.nodes
    return [nodes[i] for i in view.tree_ids(stage, tree)]


def tree_stats(
    view: JournalView,
    state: StageState,
    tree: int,
    c: float,
    gamma: float,
    scale: RewardScale | None = None,
) -> TreeStats:
    """Rewards, visits, discounted values and UCB of every node in the scope; ``scale``:
    ``reward_scale(view, state)`` when the caller has it already."""
    members = tree_members(view, state.stage, tree)
    anchor = state.carried_id if state.stage > 1 else None
    ids = set(view.tree_ids(state.stage, tree))
    scale = scale or reward_scale(view, state)
    rewards = {n.id: scale.reward(n) for n in members}
    if anchor is not None and anchor in view:
        rewards[anchor] = scale.reward(view.get(anchor))
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
    pv = {k: (visits[p] if (p := parent.get(k)) else root_visits) for k in visits}
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
        sizes = {t: len(view.tree_ids(stage, t)) for t in range(self.tree_nums)}
        return sorted(sizes, key=lambda t: (sizes[t], t))

    def candidates(self, view: JournalView, state: StageState, stats: TreeStats) -> dict[str, str]:
        """Expandable node id -> operation (mature and in-flight nodes are left out)."""
        out: dict[str, str] = {}
        expand = STAGES[state.stage].expand_op
        ix = view.index
        for nid in stats.visits:
            n = view.get(nid)
            if nid == stats.anchor:
                kids = len(stats.children.get(nid, []))
            else:
                kids = ix.search_children.get(nid, 0)
            if n.is_good and kids < self.max_expand:
                out[nid] = expand
            elif (
                n.is_buggy
                and n.stage == state.stage
                and ix.is_leaf(nid)
                and ix.facts[nid].debug_depth < self.max_debug_depth
            ):
                out[nid] = "debug"
        return out

    def next_action(self, view: JournalView, state: StageState, rng: random.Random) -> Action:
        s = state.stage
        if s in (2, 4):
            return self._fanout.next_action(view, state, rng)
        order = self._tree_order(view, s)
        if s == 1:
            drafts = view.draft_nodes(1)
            for t in order:
                roots = sum(1 for n in drafts if n.tree == t)
                if roots < self.draft_target(t):
                    return Action(
                        "draft", None, t, None, f"tree {t} has {roots} of {self.draft_target(t)} drafts"
                    )
        scale = reward_scale(view, state)
        for t in order:
            stats = tree_stats(view, state, t, self.c, self.gamma, scale)
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
        """Stages 1 and 3: the forest's final choice (``final_choice``); 2: best by metric; 4:
        the carried node, which the ablations were run against (:func:`stage_best_choice`)."""
        if state.stage in (2, 4):
            return stage_best_choice(view, state, tie_break=tie_break)
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

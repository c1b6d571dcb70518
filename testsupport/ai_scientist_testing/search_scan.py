"""The forest/MCTS answers computed by scanning the nodes, as the definitions read.

``treesearch/policies/mcts.py`` and ``forest.py`` answer from the journal's indexes
(``SearchIndex.trees``, ``tree_ranked``, ``ranked``); these are the versions they
replaced, kept as the baseline ``bench/search_decisions.py`` times in the same run. They are
the policy's own code with scans for index reads, so they are no test oracle: the test of
the decisions compares with ``mcts_reference.py``, written from the definitions.
"""

from __future__ import annotations

import random

from ai_scientist.treesearch.best import comparable_metric, primary_metric_key, select_best
from ai_scientist.treesearch.journal import JournalView
from ai_scientist.treesearch.node import Node, node_sort_key
from ai_scientist.treesearch.policies.base import Action, require_carried, stage_pool
from ai_scientist.treesearch.policies.mcts import MCTSPolicy, TreeStats, _row, ucb_score
from ai_scientist.treesearch.stages import STAGES, StageState


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


class ScanMCTS(MCTSPolicy):
    """:class:`MCTSPolicy` deciding by scanning the stage's nodes (the reference)."""

    def _tree_order(self, view: JournalView, stage: int) -> list[int]:
        sizes = {t: 0 for t in range(self.tree_nums)}
        for n in view.stage_nodes(stage):
            if n.tree in sizes:
                sizes[n.tree] += 1
        return sorted(sizes, key=lambda t: (sizes[t], t))

    def candidates(self, view: JournalView, state: StageState, stats: TreeStats) -> dict[str, str]:
        out: dict[str, str] = {}
        expand = STAGES[state.stage].expand_op
        for nid in stats.visits:
            n = view.get(nid)
            kids = len(stats.children.get(nid, [])) if nid == stats.anchor else len(view.search_children(nid))
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


def tree_bests(view: JournalView, state: StageState, tree_nums: int) -> dict[int, str]:
    """Best node (by metric) of each tree that has one; the carried node competes in each."""
    carried = [view.get(state.carried_id)] if state.carried_id else []
    out = {}
    for t in range(tree_nums):
        nodes = [n for n in view.good_nodes(state.stage) if n.tree == t] + carried
        choice = select_best(nodes)
        if choice.node_id:
            out[t] = choice.node_id
    return out

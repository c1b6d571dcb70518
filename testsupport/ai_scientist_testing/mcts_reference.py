"""An independent reference of the ``mcts`` search policy, written from the definitions in
``treesearch/policies/mcts.py``'s docstring, for ``tests/test_search_mcts_index.py``.

It shares nothing with the policy but the node records and ``best.py``'s metric helpers: it reads
only ``view.nodes`` (no index, no journal query), walks each node's ancestor chain instead of the
policy's post-order accumulation, sums the discounted rewards exactly (``Fraction``) and writes
its own UCB, candidate, debug-depth and tree-order rules. It is quadratic in the worst case and
meant for test-sized histories; ``search_scan.py`` is the faster pre-index code the benchmark times.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

from ai_scientist.treesearch.best import comparable_metric, primary_metric_key, select_best
from ai_scientist.treesearch.journal import JournalView
from ai_scientist.treesearch.node import Node, node_sort_key
from ai_scientist.treesearch.policies.base import Action
from ai_scientist.treesearch.policies.bfts import BFTSPolicy
from ai_scientist.treesearch.policies.mcts import TreeStats
from ai_scientist.treesearch.stages import STAGES, StageState


class Records:
    """The journal's node records and the relations the definitions use, by scanning them."""

    def __init__(self, view: JournalView):
        self.nodes: list[Node] = list(view.nodes)
        self.by_id = {n.id: n for n in self.nodes}

    def search_nodes(self, stage: int) -> list[Node]:
        return [n for n in self.nodes if n.stage == stage and n.operation != "seed_eval"]

    def search_children(self, nid: str) -> list[Node]:
        return [n for n in self.nodes if n.parent_id == nid and n.operation != "seed_eval"]

    def debug_depth(self, nid: str) -> int:
        """Consecutive debug steps ending at ``nid``, counted up its parent chain."""
        depth, node = 0, self.by_id.get(nid)
        while node is not None and node.operation == "debug":
            depth += 1
            node = self.by_id.get(node.parent_id) if node.parent_id else None
        return depth

    def pool(self, state: StageState) -> list[Node]:
        """The nodes whose metrics set the reward scale: the carried node and the stage's good ones."""
        good = [n for n in self.search_nodes(state.stage) if n.status == "good" and n.incomparable is None]
        carried = self.by_id.get(state.carried_id) if state.carried_id else None
        return ([carried] if carried is not None else []) + good


def rewards(rec: Records, state: StageState) -> dict[str, float]:
    """r(n): the primary metric normalised over the pool, 0 for nodes outside it or incomparable."""
    pool = rec.pool(state)
    key = primary_metric_key(pool)
    scores = {}
    for n in pool:
        m = comparable_metric(n, key)
        if m is not None:
            scores[n.id] = m.score
    out = {n.id: 0.0 for n in rec.search_nodes(state.stage)}
    if scores:
        lo, hi = min(scores.values()), max(scores.values())
        for nid, score in scores.items():
            out[nid] = 1.0 if hi == lo else (score - lo) / (hi - lo)
    return out


def tree_stats(view: JournalView, state: StageState, tree: int, c: float, gamma: float) -> TreeStats:
    rec = Records(view)
    return _stats(rec, state, tree, c, gamma, rewards(rec, state))


def _stats(
    rec: Records, state: StageState, tree: int, c: float, gamma: float, r: dict[str, float]
) -> TreeStats:
    members = [n for n in rec.search_nodes(state.stage) if n.tree == tree]
    ids = {n.id for n in members}
    anchor = state.carried_id if state.stage > 1 else None

    def scope_parent(nid: str) -> str | None:  # the anchor (None: the virtual root) above the scope
        pid = rec.by_id[nid].parent_id
        return pid if pid in ids else anchor

    children: dict[str, list[str]] = {}
    for n in members:
        children.setdefault(scope_parent(n.id) or "", []).append(n.id)
    visits: dict[str, int] = {n.id: 0 for n in members}
    total: dict[str, Fraction] = {n.id: Fraction(0) for n in members}
    if anchor is not None:
        visits[anchor], total[anchor] = 0, Fraction(0)
    g = Fraction(gamma)
    # N(n) counts n's subtree; Q(n)·N(n) sums gamma^(levels below n) · r(d) over it: every node
    # adds itself to each ancestor on its chain up to the anchor
    for d in [*members, *([rec.by_id[anchor]] if anchor in rec.by_id else [])]:
        k: str | None = d.id
        level = 0
        while k is not None:
            visits[k] += 1
            total[k] += g**level * Fraction(r.get(d.id, 0.0))
            k = scope_parent(k) if k != anchor else None
            level += 1
    if anchor is not None and anchor not in rec.by_id:  # a carried id the journal lacks: itself only
        visits[anchor] += 1
    root = len(members) if anchor is None else visits[anchor]
    value = {k: float(total[k] / visits[k]) for k in visits}
    parent_visits = {
        k: visits[p] if (p := scope_parent(k) if k != anchor else None) else root for k in visits
    }
    ucb = {k: value[k] + c * math.sqrt(math.log(parent_visits[k]) / visits[k]) for k in visits}
    reward = {k: r.get(k, 0.0) for k in visits}
    return TreeStats(tree, anchor, reward, visits, value, parent_visits, ucb, children)


class ReferenceMCTS:
    """Decides as the docstring says; stages 2 and 4 fan out as ``bfts`` (no tree there)."""

    def __init__(self, num_drafts: int = 2, debug_prob: float = 0.5, max_debug_depth: int = 3,
                 exploration_c: float = 1.4, gamma: float = 0.85, max_expand: int = 3, tree_nums: int = 2):  # fmt: skip
        self.num_drafts, self.max_debug_depth, self.max_expand = num_drafts, max_debug_depth, max_expand
        self.c, self.gamma, self.tree_nums = exploration_c, gamma, tree_nums
        self._fanout = BFTSPolicy(num_drafts, debug_prob, max_debug_depth)

    def drafts_for(self, tree: int) -> int:
        """``num_drafts`` dealt out over the trees, lower trees first, at least one each."""
        dealt = [0] * self.tree_nums
        for i in range(self.num_drafts):
            dealt[i % self.tree_nums] += 1
        return max(1, dealt[tree])

    def candidates(self, rec: Records, state: StageState, stats: TreeStats) -> dict[str, str]:
        out = {}
        for nid in stats.visits:
            n = rec.by_id[nid]
            if nid == stats.anchor:  # the anchor grows only this tree's scope
                kids = len(stats.children.get(nid, []))
            else:
                kids = len(rec.search_children(nid))
            if n.status == "good" and n.incomparable is None and kids < self.max_expand:
                out[nid] = STAGES[state.stage].expand_op
            elif (
                n.status == "buggy"
                and n.stage == state.stage
                and not rec.search_children(nid)
                and rec.debug_depth(nid) < self.max_debug_depth
            ):
                out[nid] = "debug"
        return out

    def next_action(self, view: JournalView, state: StageState, rng: random.Random) -> Action:
        s = state.stage
        if s in (2, 4):
            return self._fanout.next_action(view, state, rng)
        rec = Records(view)
        nodes = rec.search_nodes(s)
        order = sorted(range(self.tree_nums), key=lambda t: (sum(n.tree == t for n in nodes), t))
        if s == 1:
            for t in order:
                have = sum(n.tree == t and n.operation == "draft" for n in nodes)
                if have < self.drafts_for(t):
                    return Action(
                        "draft", None, t, None, f"tree {t} has {have} of {self.drafts_for(t)} drafts"
                    )
        r = rewards(rec, state)
        for t in order:
            st = _stats(rec, state, t, self.c, self.gamma, r)
            cands = self.candidates(rec, state, st)
            if not cands:
                continue
            ranked = sorted(cands, key=lambda k: (-st.ucb[k], node_sort_key(k)))
            pick = ranked[0]
            rows = [
                {"id": k, "op": cands[k], "ucb": round(st.ucb[k], 6), "value": round(st.value[k], 6),
                 "visits": st.visits[k], "parent_visits": st.parent_visits[k], "reward": round(st.reward[k], 6)}
                for k in ranked[:5]
            ]  # fmt: skip
            mature = sorted(
                k
                for k in st.visits
                if k not in cands and rec.by_id[k].status == "good" and rec.by_id[k].incomparable is None
            )
            reason = f"tree {t}: {cands[pick]} {pick}, highest UCB {st.ucb[pick]:.4f} among {len(cands)}"
            return Action(cands[pick], pick, t, None, reason, {"tree": t, "ucb": rows, "mature": mature})
        if s == 1:
            return Action(
                "draft", None, order[0], None, "every node is mature, in flight or past max debug depth"
            )
        if state.carried_id not in rec.by_id:
            raise ValueError(f"stage {s}: the carried node {state.carried_id!r} is not in the journal")
        return Action(
            "improve", state.carried_id, order[0], None,
            "every node is mature or in flight: improve the carried node",
        )  # fmt: skip


def tree_bests(view: JournalView, state: StageState, tree_nums: int) -> dict[int, str]:
    """Best node (by metric) of each tree that has one; the carried node competes in each."""
    rec = Records(view)
    carried = [rec.by_id[state.carried_id]] if state.carried_id in rec.by_id else []
    good = [n for n in rec.search_nodes(state.stage) if n.status == "good" and n.incomparable is None]
    out = {}
    for t in range(tree_nums):
        choice = select_best([n for n in good if n.tree == t] + carried)
        if choice.node_id:
            out[t] = choice.node_id
    return out

"""Forest-of-Thought helpers: input diversity for later trees, and the final choice.

``nearest_solved_example``: trees after the first are shown a solved example;
the nearest good node of another tree by TF-IDF cosine similarity between the
query text and the node's summary + idea. Like FoT it always returns the
nearest one when any exists, even with similarity 0, so the prompt is perturbed.

``final_choice`` over the trees' best nodes (each tree votes for its best):

- ``consensus`` (CGDM): votes whose primary metric agrees within
  ``CONSENSUS_REL_TOL`` form one answer; the answer with most votes wins (its
  best node); a tie between answers goes to the ``expert`` callback (an LLM,
  passed in by the orchestrator) whose reasoning is returned, or by score when
  no expert is given or it names a node that is not a candidate;
- ``score``: the best metric among the trees' best nodes;
- ``random``: uniform over the distinct best nodes, using the given rng.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence

from ..best import Choice, TieBreak, comparable_metric, primary_metric_key, rank_nodes, select_best
from ..journal import JournalView
from ..node import Node, node_sort_key
from ..stages import StageState
from .base import stage_pool

# Two tree answers "agree" when their metric values are within 1 % of each other.
CONSENSUS_REL_TOL = 0.01
FINAL_CHOICES = ("consensus", "score", "random")

_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def tfidf_similarities(query: str, documents: Sequence[str]) -> list[float]:
    """Cosine similarity of ``query`` to each document under smoothed TF-IDF of the documents."""
    docs = [Counter(_tokens(d)) for d in documents]
    n = len(docs)
    df = Counter(t for d in docs for t in d)
    idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}

    def vec(counts: Counter) -> dict[str, float]:
        return {t: c * idf[t] for t, c in counts.items() if t in idf}

    q = vec(Counter(_tokens(query)))
    qn = math.sqrt(sum(v * v for v in q.values()))
    out = []
    for d in docs:
        dv = vec(d)
        dn = math.sqrt(sum(v * v for v in dv.values()))
        dot = sum(w * dv.get(t, 0.0) for t, w in q.items())
        out.append(dot / (qn * dn) if qn and dn else 0.0)
    return out


def nearest_solved_example(view: JournalView, tree: int, query_text: str) -> str | None:
    """Id of the good node of another tree most similar to ``query_text``; None for tree 0
    or when no other tree has solved anything. Ties go to the earliest node."""
    if tree == 0:
        return None
    solved = [n for n in view.good_nodes() if n.tree != tree]
    if not solved:
        return None
    sims = tfidf_similarities(query_text, [f"{n.summary} {n.idea or ''}" for n in solved])
    best = max(range(len(solved)), key=lambda i: (sims[i], -node_sort_key(solved[i].id)[0]))
    return solved[best].id


def tree_bests(view: JournalView, state: StageState, tree_nums: int) -> dict[int, str]:
    """Best node (by metric, ``select_best`` without a tie-break) of each tree that has one;
    the carried node competes in each. From the per-tree metric rankings of the journal."""
    out = {}
    for t in range(tree_nums):
        best = view.tree_best(state.stage, t, state.carried_id)
        if best is not None:
            out[t] = best
    return out


def _group_best(group: Sequence[Node]) -> str:
    """The best node of one consensus group; a group holds the trees' answers, all good."""
    node_id = select_best(group).node_id
    if node_id is None:
        raise ValueError(f"a consensus group has no good node: {[n.id for n in group]}")
    return node_id


def consensus_groups(nodes: Sequence[Node], rel_tol: float = CONSENSUS_REL_TOL) -> list[list[Node]]:
    """Distinct nodes grouped into 'equivalent answers', best group first.

    Nodes are ranked by metric; each joins the group of the first node whose value it
    is within ``rel_tol`` of, else starts a new group. Incomparable metrics stand alone.
    """
    key = primary_metric_key(nodes)
    groups: list[list[Node]] = []
    for n in rank_nodes(nodes):
        m = comparable_metric(n, key)
        for g in groups:
            head = comparable_metric(g[0], key)
            if m is not None and head is not None and math.isclose(m.value, head.value, rel_tol=rel_tol):
                g.append(n)
                break
        else:
            groups.append([n])
    return groups


def final_choice(
    view: JournalView,
    state: StageState,
    tree_nums: int,
    *,
    method: str = "consensus",
    rng: random.Random | None = None,
    expert: TieBreak | None = None,
    rel_tol: float = CONSENSUS_REL_TOL,
) -> Choice:
    """The forest's answer for the stage; see the module docstring."""
    if method not in FINAL_CHOICES:
        raise ValueError(f"search.mcts.final_choice must be one of {FINAL_CHOICES}, got {method!r}")
    votes = tree_bests(view, state, tree_nums)
    distinct = sorted({v for v in votes.values()}, key=node_sort_key)
    ev = {"votes": {str(t): v for t, v in votes.items()}}
    if not distinct:
        pool = select_best(stage_pool(view, state))  # trees beyond tree_nums, if config changed
        return Choice(pool.node_id, "none" if pool.node_id is None else "score", pool.reason, evidence=ev)
    nodes = [view.get(i) for i in distinct]
    if method == "random":
        if rng is None:
            raise ValueError("final_choice='random' needs an rng")
        pick = rng.choice(distinct)
        return Choice(
            pick, "random", f"random choice among tree bests {distinct}", tuple(distinct), evidence=ev
        )
    if method == "score":
        c = select_best(nodes)
        return Choice(
            c.node_id, "score", f"best metric among tree bests: {c.reason}", tuple(distinct), evidence=ev
        )
    return _consensus(nodes, votes, expert, rel_tol, ev)


def _consensus(
    nodes: list[Node], votes: dict[int, str], expert: TieBreak | None, rel_tol: float, ev: dict
) -> Choice:
    count = Counter(votes.values())
    groups = consensus_groups(nodes, rel_tol)
    sizes = [sum(count[n.id] for n in g) for g in groups]
    ev = {**ev, "groups": [[n.id for n in g] for g in groups], "group_votes": sizes}
    top = max(sizes)
    tied = [g for g, s in zip(groups, sizes, strict=True) if s == top]
    reps = [_group_best(g) for g in tied]
    if len(tied) == 1:
        return Choice(
            reps[0], "consensus", f"majority: {top} of {len(votes)} tree(s) agree", (reps[0],), evidence=ev
        )
    reps_nodes = [n for n in nodes if n.id in reps]
    by_score = select_best(reps_nodes).node_id
    if expert is None:
        why = f"{len(tied)} answers tie with {top} vote(s) each; no expert given, best score {by_score} wins"
        return Choice(by_score, "score", why, tuple(reps), evidence=ev)
    chosen, reasoning = expert(reps_nodes)
    if chosen not in reps:
        why = f"expert answered {chosen!r}, not one of {reps}; best score {by_score} wins"
        return Choice(by_score, "score", why, tuple(reps), reasoning=str(reasoning), evidence=ev)
    why = f"{len(tied)} answers tie with {top} vote(s) each; expert chose {chosen}"
    return Choice(chosen, "consensus", why, tuple(reps), reasoning=str(reasoning), evidence=ev)

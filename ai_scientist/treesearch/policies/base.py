"""What every selection policy shares: the Action it returns and the pure helpers.

A policy is a small object with

    next_action(view: JournalView, state: StageState, rng: random.Random) -> Action
    stage_best(view, state, *, rng=None, tie_break=None) -> Choice

Both are pure: they read the journal view and return values; all randomness
comes from ``rng``. For reproducible resume and replay, derive the rng of each
decision from the run seed and the id the next node will get
(:func:`decision_rng`), so no random state has to be saved.
"""

from __future__ import annotations

import difflib
import functools
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..best import Choice, TieBreak, select_best
from ..journal import JournalView
from ..node import Node, node_sort_key
from ..stages import STAGES, StageState, handover, ideas_tried


@dataclass(frozen=True)
class Action:
    """One decision: create a node doing ``operation`` from ``parent_id`` in forest ``tree``.

    ``idea`` is None when the orchestrator must ask the LLM for an untried idea
    (tune / ablate). ``reason`` and ``evidence`` are what goes to events.jsonl.
    """

    operation: str
    parent_id: str | None
    tree: int
    idea: str | None
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "parent_id": self.parent_id,
            "tree": self.tree,
            "idea": self.idea,
            "reason": self.reason,
            "evidence": dict(self.evidence),
        }


class SearchPolicy(Protocol):
    """A tree-search policy (``search.policy``): what to try next, and the stage's best node.

    Named apart from the context layer policies (``context.policies.LayerPolicy``), which cut
    prompt layers to fit a budget."""

    name: str

    def next_action(self, view: JournalView, state: StageState, rng: random.Random) -> Action: ...

    def stage_best(
        self,
        view: JournalView,
        state: StageState,
        *,
        rng: random.Random | None = None,
        tie_break: TieBreak | None = None,
    ) -> Choice: ...


def next_stage_state(
    view: JournalView, state: StageState, policy: SearchPolicy, **best_kwargs: Any
) -> tuple[StageState | None, Choice]:
    """The state of the stage after ``state`` and the Choice that picked its start node.

    Returns ``(None, choice)`` after stage 4, or when the finished stage hands
    over no node (then the run has nothing to continue from). ``best_kwargs``
    go to ``policy.stage_best`` (``rng``, ``tie_break``). It lives with the policy protocol, not
    in ``stages.py``, because it calls a policy: stages know nothing of policies (no import loop).
    """
    choice = policy.stage_best(view, state, **best_kwargs)
    return handover(state, choice.node_id), choice


def decision_rng(seed: int, next_node_id: str) -> random.Random:
    """The rng for the decision that creates ``next_node_id`` (stable across processes)."""
    return random.Random(f"{seed}:{next_node_id}")


# ------------------------------------------------------------------ ideas --

_NON_WORD = re.compile(r"[^a-z0-9.]+|(?<![0-9])\.|\.(?![0-9])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


@functools.lru_cache(maxsize=65536)
def normalise_idea(text: str) -> str:
    """Lower-case, punctuation to spaces (decimal points kept), whitespace collapsed."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


@functools.lru_cache(maxsize=65536)
def _numbers(normalised: str) -> tuple[str, ...]:
    return tuple(sorted(_NUMBER.findall(normalised)))


def idea_similarity(a: str, b: str) -> float:
    """Text similarity in [0, 1] of two ideas; 0 when they name different numbers.

    Ideas differing only in a value ("lr 0.01" vs "lr 0.001") are different
    experiments, so numbers must match before wording is compared.
    """
    na, nb = normalise_idea(a), normalise_idea(b)
    if _numbers(na) != _numbers(nb):
        return 0.0
    return difflib.SequenceMatcher(None, na, nb).ratio()


def dedupe_ideas(candidates: Iterable[str], tried: Iterable[str], threshold: float = 0.85) -> list[str]:
    """Candidates (in order) not similar (>= ``threshold``) to a tried idea or an earlier candidate.

    Only ideas naming the same numbers can be similar, so each candidate is compared
    with that group alone (a proposal late in a long stage does not rescan every idea).
    """
    groups: dict[tuple[str, ...], list[str]] = {}

    def add(idea: str) -> None:
        groups.setdefault(_numbers(normalise_idea(idea)), []).append(idea)

    for t in tried:
        if t and t.strip():
            add(t)
    kept: list[str] = []
    for c in candidates:
        if not c or not c.strip():
            continue
        same = groups.get(_numbers(normalise_idea(c)), [])
        if all(idea_similarity(c, s) < threshold for s in same):
            kept.append(c.strip())
            add(c)
    return kept


def next_planned_idea(view: JournalView, state: StageState) -> str | None:
    """The first planned idea of the stage no node (finished or in flight) has taken yet."""
    # the planned ideas were deduplicated when planned: an exact (normalised) lookup suffices
    taken = {normalise_idea(t) for t in ideas_tried(view, state.stage, finished_only=False)}
    return next((i for i in state.ideas if normalise_idea(i) not in taken), None)


# ------------------------------------------------------------- selection --


def debuggable_leaves(view: JournalView, stage: int, max_debug_depth: int) -> list[Node]:
    """Finished buggy leaves of the stage whose debug depth is below ``max_debug_depth``."""
    return [n for n in view.buggy_leaves(stage) if view.debug_depth(n.id) < max_debug_depth]


def stage_pool(view: JournalView, state: StageState) -> list[Node]:
    """The stage's good nodes plus the carried node (it competes in stages 2 and 3; in stage 4
    it is the best, see :func:`stage_best_choice`)."""
    pool = view.good_nodes(state.stage)
    if state.carried_id is not None and state.carried_id in view:
        pool = [view.get(state.carried_id)] + pool
    return pool


def best_of(nodes: Sequence[Node], tie_break: TieBreak | None = None) -> Choice:
    return select_best(nodes, tie_break=tie_break)


def stage_best_choice(
    view: JournalView,
    state: StageState,
    *,
    avoid_roots: Iterable[str] = (),
    tie_break: TieBreak | None = None,
) -> Choice:
    """The stage's best: ``best_of(stage_pool(view, state))``, passing over the trees in
    ``avoid_roots`` unless that leaves no candidate; answered from the journal's metric index.
    In the ablation stage it is the carried node, the node the ablations were run against: an
    ablation is a measurement, never the best (:func:`..best.ablation_stage_best`)."""
    carried = state.carried_id if state.carried_id is not None and state.carried_id in view else None
    return view.best_choice(state.stage, carried, avoid_roots=frozenset(avoid_roots), tie_break=tie_break)


def require_carried(view: JournalView, state: StageState) -> Node:
    if state.carried_id is None:
        raise ValueError(f"stage {state.stage} needs a carried node (StageState.carried_id) to expand")
    return view.get(state.carried_id)


def debug_action(node: Node, view: JournalView, pool_size: int, draw: float, prob: float) -> Action:
    depth = view.debug_depth(node.id)
    return Action(
        "debug",
        node.id,
        node.tree,
        None,
        f"debug buggy leaf {node.id} (debug depth {depth}; draw {draw:.3f} < debug_prob {prob})",
        {"draw": draw, "debug_prob": prob, "debuggable": pool_size, "debug_depth": depth},
    )


def fanout_action(view: JournalView, state: StageState, parent: Node, why: str) -> Action:
    """Stages 2 and 4: tune / ablate ``parent`` with the next planned idea or an LLM one."""
    op = STAGES[state.stage].expand_op
    idea = next_planned_idea(view, state)
    tried = ideas_tried(view, state.stage, finished_only=False)
    source = f"planned idea {idea!r}" if idea else "a new idea from the LLM, deduplicated against tried ones"
    return Action(
        op,
        parent.id,
        parent.tree,
        idea,
        f"{op} {parent.id} ({why}) with {source}; {len(tried)} idea(s) taken so far",
        # the count and the latest few, not the whole list: the event is written for every
        # node, and the tried ideas are on the journal's nodes anyway
        {"tried_count": len(tried), "recent_tried": tried[-5:]},
    )


def earliest(nodes: Iterable[Node]) -> Node:
    return min(nodes, key=lambda n: node_sort_key(n.id))

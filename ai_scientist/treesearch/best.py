"""Choosing the best node: metric first, then an optional LLM tie-break.

Only good nodes compete. Their *primary metric* is the (name, direction,
dataset) shared by most of them (ties: the key of the earliest node); nodes
whose metric is missing, invalid or of another key are ranked after all
comparable ones, because incomparable metrics are never mixed. Nodes whose
primary metric is within the tolerance of the top value tie; a tie goes to the
``tie_break`` callback when one is given (its reasoning is returned so the
caller can store it) and otherwise to the earliest-created node, so the answer
is deterministic without an LLM.

The ablation stage is the exception (:func:`ablation_stage_best`): its nodes remove parts of the
method to measure what each contributes, so none of them can be the stage's (or the run's) best;
the stage's best is the node they were run against, the one the stage started from (its
carried node), and the ablations are measurements against it.

This module is also the one definition of what the status line, the stage facts, the run's
last lines and the writeup call a stage's *node counts* (:func:`count_nodes`: search nodes, seed
re-runs counted apart) and its *best node* (:func:`recorded_best`: the choice made at the stage's
end, as ``state.json`` keeps it).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .node import Metric, Node, node_sort_key, values_close

# Relative tolerance under which two metric values count as a tie. Small on
# purpose: it catches equal results (e.g. several nodes at accuracy 1.0), it is
# not a significance test.
TIE_REL_TOL = 1e-6
TIE_ABS_TOL = 1e-12

TieBreak = Callable[[Sequence[Node]], tuple[str, str]]
"""``tie_break(candidates) -> (chosen_node_id, reasoning)``; passed in by the orchestrator."""


@dataclass(frozen=True)
class Choice:
    """A decision about which node is best, with the evidence for ``events.jsonl``.

    ``method`` is one of ``metric`` (a clear winner), ``lowest_id`` (a tie without
    a usable callback), ``tie_break`` (the callback decided; ``reasoning`` holds
    its text), ``consensus``, ``score``, ``random`` (forest final choice),
    ``carried`` (the ablation stage: the node the ablations were run against) or
    ``none`` (no good node: ``node_id`` is None).
    """

    node_id: str | None
    method: str
    reason: str
    candidates: tuple[str, ...] = ()
    reasoning: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "method": self.method,
            "reason": self.reason,
            "candidates": list(self.candidates),
            "reasoning": self.reasoning,
            "evidence": dict(self.evidence),
        }


def primary_metric_key(nodes: Sequence[Node]) -> tuple[str, str, str | None] | None:
    """The metric key most nodes report (earliest node's key on a tie); None if none has one."""
    counts: Counter = Counter()
    first: dict[tuple, tuple[int, str]] = {}
    for n in nodes:
        m = n.metric
        if m is None or not m.is_valid:
            continue
        counts[m.key] += 1
        order = node_sort_key(n.id)
        if m.key not in first or order < first[m.key]:
            first[m.key] = order
    if not counts:
        return None
    top = max(counts.values())
    return min((k for k in counts if counts[k] == top), key=lambda k: first[k])


def comparable_metric(node: Node, key: tuple[str, str, str | None] | None) -> Metric | None:
    """The node's metric if it is valid and of the primary ``key``; else None."""
    m = node.metric
    if key is None or m is None or not m.is_valid or m.key != key:
        return None
    return m


def _rank_key(n: Node, key: tuple[str, str, str | None] | None) -> tuple:
    m = comparable_metric(n, key)
    return (0, -m.score, node_sort_key(n.id)) if m else (1, 0.0, node_sort_key(n.id))


def rank_nodes(nodes: Sequence[Node], limit: int | None = None) -> list[Node]:
    """Nodes best-first by primary metric; incomparable ones last, ties in creation order."""
    key = primary_metric_key(nodes)
    if limit is None:
        return sorted(nodes, key=lambda n: _rank_key(n, key))
    return heapq.nsmallest(limit, nodes, key=lambda n: _rank_key(n, key))


def select_best(
    nodes: Sequence[Node],
    *,
    tie_break: TieBreak | None = None,
    rel_tol: float = TIE_REL_TOL,
    abs_tol: float = TIE_ABS_TOL,
) -> Choice:
    """The best good node among ``nodes`` (others are ignored); see the module docstring.

    Linear in the number of nodes. A callback answer naming a node outside the
    tied candidates is not trusted: the earliest candidate wins and the reason
    says so. Exceptions raised by the callback propagate to the caller.
    """
    good = [n for n in nodes if n.is_good]
    if not good:
        return Choice(None, "none", "no good node among the candidates")
    key = primary_metric_key(good)
    scored = [(m.score, n) for n in good if (m := comparable_metric(n, key)) is not None]
    if not scored:  # nobody has a comparable metric: all tie
        tied = good
    else:
        top = max(scored, key=lambda t: t[0])[1].metric
        tied = [n for _, n in scored if values_close(n.metric.value, top.value, rel_tol, abs_tol)]  # type: ignore[union-attr]
    ranking = [n for _, n in heapq.nlargest(10, scored, key=lambda t: t[0])]
    ranking += [n for n in good if comparable_metric(n, key) is None][: 10 - len(ranking)]
    return _decide(tied, ranking, key, tie_break)


def select_best_sorted(
    ranked: Sequence[Node],
    key: tuple[str, str, str | None] | None,
    *,
    tie_break: TieBreak | None = None,
    rel_tol: float = TIE_REL_TOL,
    abs_tol: float = TIE_ABS_TOL,
) -> Choice:
    """:func:`select_best` for candidates already ranked: good nodes, all with a valid
    metric of the primary ``key``, best first (equal scores in candidate order), holding
    at least the first 10 and everything tied with the first. Gives the same Choice as
    ``select_best`` on the whole candidate list, without reading the rest of it."""
    if not ranked:
        return Choice(None, "none", "no good node among the candidates")
    top = ranked[0].metric
    tied = [n for n in ranked if values_close(n.metric.value, top.value, rel_tol, abs_tol)]  # type: ignore[union-attr]
    return _decide(tied, list(ranked[:10]), key, tie_break)


def _decide(
    tied: Sequence[Node],
    ranking: Sequence[Node],
    key: tuple[str, str, str | None] | None,
    tie_break: TieBreak | None,
) -> Choice:
    tied = sorted(tied, key=lambda n: node_sort_key(n.id))
    ev = {"metric_key": list(key) if key else None, "ranking": [_brief(n, key) for n in ranking]}
    ids = tuple(n.id for n in tied)
    if len(tied) == 1:
        return Choice(tied[0].id, "metric", f"{tied[0].id} has the best metric", ids, evidence=ev)
    earliest = tied[0].id
    if tie_break is None:
        reason = f"{len(tied)} nodes tie within tolerance; earliest ({earliest}) wins"
        return Choice(earliest, "lowest_id", reason, ids, evidence=ev)
    chosen, reasoning = tie_break(list(tied))
    if chosen not in ids:
        reason = f"tie-break answered {chosen!r}, not one of {list(ids)}; earliest ({earliest}) wins instead"
        return Choice(earliest, "lowest_id", reason, ids, reasoning=str(reasoning), evidence=ev)
    reason = f"{len(tied)} nodes tie within tolerance; tie-break chose {chosen}"
    return Choice(chosen, "tie_break", reason, ids, reasoning=str(reasoning), evidence=ev)


ABLATION_STAGE = 4
"""The stage whose nodes are ablations (operation ``ablate``): see :func:`ablation_stage_best`."""


def ablation_stage_best(stage: int, carried_id: str | None, ablations: Sequence[Node] = ()) -> Choice | None:
    """The best of the ablation stage: the node the stage started from (``carried_id``), which its
    ablations were run against; None for the other stages (their best is chosen by metric) and
    when there is no carried node.

    An ablation removes a part of the method (or changes the setting: clean labels, an easier
    task) to measure what that part contributes; a higher metric from an ablation is a
    measurement, never a better method, so no ablation becomes the stage's or the run's best.
    ``ablations`` (the stage's nodes) are ranked in the evidence, as measurements against it."""
    if stage != ABLATION_STAGE or carried_id is None:
        return None
    good = rank_nodes([n for n in ablations if n.is_good and n.id != carried_id])
    key = primary_metric_key(good)
    ev = {"metric_key": list(key) if key else None, "ranking": [_brief(n, key) for n in good[:10]]}
    reason = (
        f"stage {stage} ablates {carried_id}: the node the ablations were run against stays the best "
        f"({len(good)} good ablation node(s) ranked as measurements against it)"
    )
    return Choice(carried_id, "carried", reason, (carried_id,), evidence=ev)


def _brief(n: Node, key: tuple[str, str, str | None] | None) -> dict[str, Any]:
    m = comparable_metric(n, key)
    return {"id": n.id, "value": m.value if m else None}


# ------------------------------------------------------------------ counts --


@dataclass(frozen=True)
class NodeCounts:
    """How many nodes a stage (or run) has. ``nodes`` are search nodes (drafts, improvements,
    tunings, debugs, ablations); a seed re-run re-measures a chosen node, so it is never a node
    here: it is counted in ``seed_runs`` / ``seed_good`` only. ``incomparable``: nodes that worked
    but changed the stage's evaluation protocol (``Node.incomparable``), neither good nor buggy."""

    nodes: int = 0
    good: int = 0
    buggy: int = 0
    running: int = 0  # created, not finished yet (pending or running)
    seed_runs: int = 0
    seed_good: int = 0
    incomparable: int = 0

    def text(self) -> str:
        """``"4 nodes (3 good, 1 buggy); 2 seed re-runs (2 good)"`` (the seed part only if any;
        ``, 1 not comparable`` after the good ones when a node changed the protocol)."""
        out = f"{self.nodes} node{'' if self.nodes == 1 else 's'} ({self.good} good"
        if self.incomparable:
            out += f", {self.incomparable} not comparable"
        out += f", {self.buggy} buggy"
        out += f", {self.running} running)" if self.running else ")"
        if self.seed_runs:
            s = "" if self.seed_runs == 1 else "s"
            out += f"; {self.seed_runs} seed re-run{s} ({self.seed_good} good)"
        return out

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in _COUNT_FIELDS}


_COUNT_FIELDS = ("nodes", "good", "buggy", "running", "seed_runs", "seed_good", "incomparable")


def count_nodes(nodes: Iterable[Node]) -> NodeCounts:
    """:class:`NodeCounts` of ``nodes`` (any mix of stages; filter first for one stage)."""
    c = dict.fromkeys(_COUNT_FIELDS, 0)
    for n in nodes:
        if n.is_seed_eval:
            c["seed_runs"] += 1
            c["seed_good"] += n.is_good
            continue
        c["nodes"] += 1
        c["good"] += n.is_good
        c["buggy"] += n.is_buggy
        c["running"] += n.in_flight
        c["incomparable"] += n.is_incomparable
    return NodeCounts(**c)


def counts_by_stage(nodes: Iterable[Node]) -> dict[int, NodeCounts]:
    """Stage -> :func:`count_nodes` of that stage's nodes (a seed re-run counts in its own stage,
    the stage whose best it re-measures)."""
    groups: dict[int, list[Node]] = {}
    for n in nodes:
        groups.setdefault(n.stage, []).append(n)
    return {stage: count_nodes(groups[stage]) for stage in sorted(groups)}


# -------------------------------------------------------- a stage's best --


def recorded_best(stages: Mapping[str, Any] | None) -> dict[int, str]:
    """Stage -> the node chosen as its best when the stage ended: ``state.json``'s
    ``stages.<N>.best.node_id`` (the ``stage_best`` event's ``node_id``; the node may come from an
    earlier stage when no node of this one beat it). Stages that have not ended (or chose none)
    are absent. This is the stage's best everywhere it is shown; a stage still running has none
    yet, and what leads it is ``JournalView.best_choice(stage, carried)``, the function that
    makes the choice at the stage's end."""
    out: dict[int, str] = {}
    for key, info in (stages or {}).items():
        best = ((info or {}).get("best") or {}).get("node_id") if isinstance(info, Mapping) else None
        if isinstance(best, str) and str(key).isdigit():
            out[int(key)] = best
    return dict(sorted(out.items()))

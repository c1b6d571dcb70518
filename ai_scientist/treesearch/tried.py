"""What a stage has tried and what it scored: ranked tables for the stage's prompts.

Stage 2 (tuning) and stage 4 (ablation) prompts, the idea proposer and the stage summary see the
ideas already tried with their results. Each table is a list ``[header, row, row, ...]`` with the
best row first — good nodes by the primary metric (best first, incomparable ones after), then
failed nodes, then nodes still running — so the ``head_rows`` layer policy, which cuts rows
from the end, drops the worst and the unfinished first. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence

from .best import comparable_metric, primary_metric_key, rank_nodes
from .journal import JournalView
from .node import Node

ERROR_CHARS = 160  # a failed row says why in one line
SUMMARY_CHARS = 160


def _cell(text: str, limit: int) -> str:
    """One table cell: a single line, ``|`` escaped, at most ``limit`` characters."""
    one = " ".join(str(text).split()).replace("|", "/")
    return one if len(one) <= limit else one[: limit - 3] + "..."


def metric_text(node: Node | None) -> str:
    """``name=value (direction)`` of the node's metric, or ``-``."""
    if node is None or node.metric is None:
        return "-"
    m = node.metric
    dataset = f", {m.dataset}" if m.dataset else ""
    return f"{m.name}={m.value:.6g} ({m.direction}{dataset})"


def result_text(node: Node) -> str:
    if node.is_good:
        return metric_text(node)
    if node.is_buggy:
        return "failed: " + _cell(node.error or "no reason recorded", ERROR_CHARS)
    return "running (no result yet)"


def ranked(nodes: Sequence[Node]) -> list[Node]:
    """Good nodes best first (primary metric; incomparable after), then failed, then unfinished;
    ties in creation order."""
    good = rank_nodes([n for n in nodes if n.is_good])
    failed = [n for n in nodes if n.is_buggy]
    running = [n for n in nodes if not n.is_finished]
    return [*good, *failed, *running]


def tried_table(
    view: JournalView, stage: int, *, column: str, exclude: str | None = None, carried: Node | None = None
) -> list[str]:
    """The stage's tune / ablate nodes (any status) as a ranked table; [] when none exists yet.

    ``column`` names the idea column (``setting``, ``ablation``); ``exclude`` leaves one node out
    (the node the prompt is for); ``carried`` is the node the stage started from, shown in the
    header as the baseline every row compares against.
    """
    nodes = [view.get(i) for i in view.ids("idea", stage) if i != exclude]
    if not nodes:
        return []
    lines = []
    if carried is not None:
        lines.append(f"Baseline (the node this stage started from): {carried.id} {metric_text(carried)}")
    lines += [f"| rank | {column} | node | result |", "|---|---|---|---|"]
    rows = []
    for rank, n in enumerate(ranked(nodes), 1):
        place = str(rank) if n.is_good else "-"
        rows.append(f"| {place} | {_cell(n.idea or '', 200)} | {n.id} | {result_text(n)} |")
    return ["\n".join(lines), *rows]


def ablation_plan(
    view: JournalView, stage: int, planned: Sequence[str], *, current: str | None = None
) -> list[str]:
    """The stage's planned ablations in order, each marked done (with its node), in flight, this
    node's, or still to do; [] when nothing is planned."""
    if not planned:
        return []
    by_idea: dict[str, Node] = {}
    for nid in view.ids("idea", stage):
        node = view.get(nid)
        by_idea.setdefault(_norm(node.idea or ""), node)
    rows = []
    for i, idea in enumerate(planned, 1):
        n = by_idea.get(_norm(idea))
        if current is not None and _norm(idea) == _norm(current):
            status = "this node"
        elif n is None:
            status = "to do"
        elif n.is_finished:
            status = f"done ({n.id}: {result_text(n)})"
        else:
            status = f"running ({n.id})"
        rows.append(f"{i}. {_cell(idea, 200)} — {status}")
    header = f"The stage plans {len(planned)} ablations, in this order (compare each with the baseline):"
    return [header, *rows]


def stage_facts(view: JournalView, stage: int, best: Node | None, seeds: dict | None) -> list[str]:
    """What a stage did, for its summary: counts, best node, then every search node ranked."""
    nodes = [view.get(i) for i in view.ids("search", stage)]
    good = sum(n.is_good for n in nodes)
    buggy = sum(n.is_buggy for n in nodes)
    head = [f"Nodes: {len(nodes)} ({good} good, {buggy} failed)."]
    if best is not None:
        head.append(f"Best node handed to the next stage: {best.id} {metric_text(best)}: {best.summary}")
    else:
        head.append("No node is handed to the next stage.")
    agg = (seeds or {}).get("aggregate")
    if agg:
        head.append(f"Seed re-runs of the best node: {agg}")
    key = primary_metric_key([n for n in nodes if n.is_good])
    head += ["| node | operation | idea | result | summary |", "|---|---|---|---|---|"]
    rows = []
    for n in ranked(nodes):
        comparable = "" if not n.is_good or comparable_metric(n, key) else " (other metric)"
        rows.append(
            f"| {n.id} | {n.operation} | {_cell(n.idea or '-', 120)} | {result_text(n)}{comparable} "
            f"| {_cell(n.summary or '-', SUMMARY_CHARS)} |"
        )
    return ["\n".join(head), *rows]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())

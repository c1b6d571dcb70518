"""What a stage has tried and what it scored: ranked tables for the stage's prompts.

Stage 2 (tuning) and stage 4 (ablation) prompts, the idea proposer and the stage summary see the
ideas already tried with their results. Each table is a list ``[header, row, ..., ranking]``: the
rows in creation order (a new node's row last, so a later prompt's table extends an earlier one's
and a provider's prefix cache keeps it), the last line the good nodes ranked by the primary metric,
best first — so the ``rank_rows`` layer policy drops the failed and unfinished rows first, then the
worst. Pure: values in, values out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..context.policies import RANK_LINE
from .best import rank_nodes
from .journal import JournalView
from .node import Metric, Node
from .parameters import settings_text
from .seeds import differences_line, distinct_digits, is_rough, paired_differences

ERROR_CHARS = 400  # a failed row says why in one line (a review's reason needs its sentence)
SUMMARY_CHARS = 900  # a node's findings whole (review 500 + caveat 300), cut at a sentence end
METRICS_CHARS = 240
DESIGN_CHARS = 500  # an earlier draft's plan: its goal and its strategy, each
SIBLING_ROWS = 8  # a node's table of the other nodes of its stage: the nearest and the best
TABLE_DIGITS = 6  # significant digits of a table's values, more where two would read alike


def table_digits(nodes: Sequence[Node]) -> dict[str, int]:
    """Metric name -> the significant digits that keep the distinct values of that metric across
    ``nodes`` (one table) distinct, at least :data:`TABLE_DIGITS`."""
    values: dict[str, list[float]] = {}
    for n in nodes:
        for m in [*n.metrics, *([n.metric] if n.metric is not None else [])]:
            values.setdefault(m.name, []).append(m.value)
    return {name: distinct_digits(v, least=TABLE_DIGITS) for name, v in values.items()}


def _cell(text: str, limit: int) -> str:
    """One table cell: a single line, ``|`` escaped (``\\|``: the text keeps its meaning, e.g.
    ``|C - ref|``), at most ``limit`` characters."""
    one = " ".join(str(text).split()).replace("|", "\\|")
    return one if len(one) <= limit else one[: limit - 3] + "..."


# a sentence's end: not an abbreviation's dot ("i.e. 2 of 40": a relay run's row ended "i.e |")
_ABBREVIATIONS = r"(?<!\bi\.e)(?<!\be\.g)(?<!\bvs)(?<!\bcf)(?<!\betc)(?<!\bapprox)(?<!\bNo)"
_SENTENCE_END = re.compile(_ABBREVIATIONS + r"[.!?](?=\s)")
_CLAUSE_END = re.compile(r";(?=\s)")  # a cut's fallback when no sentence ends late enough


def first_sentence(text: str) -> tuple[str, str]:
    """``text``'s first sentence (its end as :func:`sentences` finds it, the dot dropped) and the
    rest; the whole text and "" when it is one sentence."""
    m = _SENTENCE_END.search(text + " ")
    if m is None or m.end() >= len(text):
        return text.rstrip(" ."), ""
    return text[: m.start()], text[m.end() :].lstrip()


def sentences(text: str, limit: int) -> str:
    """``text`` on one line (``|`` escaped), cut at the last sentence end within ``limit``
    characters (a clause's ";" when no sentence ends in the last two thirds), never mid-word: a
    cut ends with "[...]" so the reader knows more was said. The first sentence — a node's main
    result — is kept whole up to twice ``limit`` (relay s7 ln1 020: a finding cut mid-list)."""
    one = " ".join(str(text).split()).replace("|", "\\|")
    if len(one) <= limit:
        return one
    room = one[: limit - 6]
    first = _SENTENCE_END.search(one + " ")
    whole = first.end() if first is not None else len(one)  # where the first sentence ends
    if whole > len(room) and whole <= 2 * limit:
        return one[:whole].rstrip() + (" [...]" if whole < len(one) else "")
    for pattern in (_SENTENCE_END, _CLAUSE_END):
        ends = [e for m in pattern.finditer(room + " ") if (e := m.end()) >= min(whole, len(room))]
        if ends and ends[-1] >= limit // 3:
            return one[: ends[-1]] + " [...]"
    word = room.rsplit(" ", 1)[0] if " " in room else room
    return word.rstrip(",;:") + " [...]"


def metric_text(node: Node | None, digits: Mapping[str, int] | None = None) -> str:
    """``name=value (direction)`` of the node's metric, or ``-`` (``digits``: :func:`table_digits`
    of the table it is shown in)."""
    if node is None or node.metric is None:
        return "-"
    m = node.metric
    dataset = f", {m.dataset}" if m.dataset else ""
    d = (digits or {}).get(m.name, TABLE_DIGITS)
    return f"{m.name}={m.value:.{d}g} ({m.direction}{dataset})"


def metrics_text(
    node: Node,
    limit: int = METRICS_CHARS,
    digits: Mapping[str, int] | None = None,
    skip: Collection[str] = (),
) -> str:
    """Every metric the node reported, the primary first, ``name=value (dataset)`` each, whole:
    as many as fit in ``limit`` characters (the primary always), then "(+N more metrics)" —
    never a name or a value cut mid-word. ``skip``: names the prompt lists elsewhere (never the
    primary)."""
    metrics = ordered_metrics(node)
    metrics = metrics[:1] + [m for m in metrics[1:] if m.name not in skip]
    if not metrics:
        return "-"
    parts = [
        " ".join(f"{m.name}={m.value:.{(digits or {}).get(m.name, TABLE_DIGITS)}g}".split()).replace(
            "|", "\\|"
        )
        + (f" ({m.dataset})" if m.dataset else "")
        for m in metrics
    ]
    shown = [parts[0]]
    for part in parts[1:]:
        if len("; ".join([*shown, part])) + len(" (+99 more metrics)") > limit:
            break
        shown.append(part)
    more = len(parts) - len(shown)
    text = "; ".join(shown)
    if more:
        text += f" (+{more} more metric{'s' if more > 1 else ''})"
    return text


def ordered_metrics(node: Node) -> list[Metric]:
    """Every metric the node reported, its primary first."""
    metrics = list(node.metrics) or ([node.metric] if node.metric is not None else [])
    if node.metric is not None:
        metrics = [node.metric, *(m for m in metrics if m.key != node.metric.key)]
    return metrics


def result_text(node: Node, *, all_metrics: bool = False, digits: Mapping[str, int] | None = None) -> str:
    """The node's result in one cell: its metric (``all_metrics``: every metric), its failure,
    or that it is still running (``digits``: the table's, :func:`table_digits`)."""
    if node.is_good:
        return metrics_text(node, digits=digits) if all_metrics else metric_text(node, digits)
    if node.is_incomparable:  # measured, but not what the others measure: never ranked with them
        return f"{metric_text(node, digits)}, not comparable: " + _cell(node.incomparable or "", ERROR_CHARS)
    if node.is_buggy:
        return "failed: " + _cell(failure_text(node.error), ERROR_CHARS)
    return "running (no result yet)"


def failure_text(error: str | None) -> str:
    """A recorded error in one line: its first line (where it failed) and its last (the cause, e.g.
    the exception a traceback ends with), not the traceback's file paths in between."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return "no reason recorded"
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def ranked(nodes: Sequence[Node]) -> list[Node]:
    """Good nodes best first (primary metric; incomparable after), then those that changed the
    evaluation protocol (unranked), then failed, then unfinished; ties in creation order."""
    good = rank_nodes([n for n in nodes if n.is_good])
    changed = [n for n in nodes if n.is_incomparable]
    failed = [n for n in nodes if n.is_buggy]
    running = [n for n in nodes if not n.is_finished]
    return [*good, *changed, *failed, *running]


def order_note(ranked_nodes: Sequence[Node], noise: Mapping[str, Any] | None) -> str:
    """How a ranking line of single-seed results is ordered and whether its gaps are within the
    seed noise (``noise``: the protocol's ``seed_noise``, its ``band``): the rule "call no
    single-seed difference within the band a gain" stood beside a bare "Ranked best first" (relay
    s7 mm2 015, 016, 018). "" for fewer than two nodes."""
    nodes = [n for n in ranked_nodes if n.metric is not None]
    if len(nodes) < 2:
        return ""
    name = nodes[0].metric.name if nodes[0].metric is not None else "the metric"
    head = f"(Ordered by {name} of each node's search run, one seed each"
    band = (noise or {}).get("band")
    if not isinstance(band, (int, float)):
        return head + "; no seed noise is measured yet: a single-seed order, not settled.)"
    if (noise or {}).get("too_wide"):
        return (
            head + f"; the seed noise band ({band:.3g}) is too large to rank them: an order, not a ranking.)"
        )
    if is_rough((noise or {}).get("dof")):  # calls neither a tie nor a gain (seeds.ROUGH_DOF)
        dof = (noise or {}).get("dof")
        basis = f"{(noise or {}).get('basis') or 'its re-runs'} ({dof} degree{'' if dof == 1 else 's'} of freedom)"
        return (
            head + f"; the seed noise band ({band:.3g}) rests on {basis}: too few to tell a tie from a "
            "gain, so none is called: an order, not a ranking.)"
        )
    apart = [
        f"{a.id} over {b.id} by {abs(a.metric.value - b.metric.value):.3g}"
        for a, b in itertools.pairwise(nodes)
        if a.metric is not None and b.metric is not None and abs(a.metric.value - b.metric.value) >= band
    ]
    if not apart:
        return (
            head
            + f"; every gap between neighbours is within the seed noise (band {band:.3g}): ties, not a ranking.)"
        )
    return head + f"; beyond the seed noise (band {band:.3g}): {', '.join(apart)}; the other gaps are ties.)"


def tried_table(
    view: JournalView,
    stage: int,
    *,
    column: str,
    exclude: str | None = None,
    carried: Node | None = None,
    noise: Mapping[str, Any] | None = None,
    loads: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """The stage's tune / ablate nodes (any status) as a table, in creation order, and their
    ranking (good nodes best first) on its last line; [] when none exists yet. Under the ranking:
    how it is ordered (:func:`order_note`), the ranked nodes' machine loads when given (``loads``,
    for a timing headline: :func:`load_note`) and their within-run paired differences over their
    seed re-runs (:func:`.seeds.differences_line`).

    ``column`` names the idea column (``setting``, ``ablation``); ``exclude`` leaves one node out
    (the node the prompt is for); ``carried`` is the node the stage started from, shown in the
    header as the baseline every row compares against and ranked with the rows, marked
    "(baseline)".
    """
    nodes = [view.get(i) for i in view.ids("idea", stage) if i != exclude]
    if not nodes:
        return []
    lines = []
    digits = table_digits([*nodes, *([carried] if carried is not None else [])])
    if carried is not None:
        lines.append(
            f"Baseline (the node this stage started from): {carried.id} {metric_text(carried, digits)}"
        )
    lines += [f"| node | {column} | result |", "|---|---|---|"]
    # rows in creation order: a new node's row comes last, so the next prompt's table extends this
    # one's (the prefix cache keeps it; by rank, a better node's row moved every row below it);
    # the ranking is the last line, and the rank_rows layer policy cuts the lowest-ranked first
    # a tuning's settings one per "; " (a dict or a quoted value with spaces stays one value)
    shown = settings_text if column == "setting" else str
    rows = [
        f"| {n.id} | {_cell(shown(n.idea or ''), 200)} | {result_text(n, digits=digits)} |" for n in nodes
    ]
    # the baseline is ranked with the rows (marked): "Ranked best first: n0005" under a baseline
    # n0002 that scored above it read as if n0005 led the stage (relay s6 mm: 015, 016)
    base = carried if carried is not None and carried.is_good else None
    order = [n for n in ranked([*nodes, *([base] if base is not None else [])]) if n.is_good]
    good = [f"{n.id} (baseline)" if n is base else n.id for n in order]
    note = order_note(order, noise) if len(good) > (base is not None) else ""
    after = [
        note,
        load_note(order, loads or {}) if note else "",
        differences_line(
            [
                (n.id, paired_differences(view.seed_runs(n.id), n.metric.key if n.metric else None, n))
                for n in order
            ]
        ),
    ]
    return [
        "\n".join(lines),
        *rows,
        RANK_LINE
        + (", ".join(good) if len(good) > (base is not None) else "(none has a result yet)")
        + "."
        + "".join(f"\n{x}" for x in after if x),
    ]


# two loads (1-minute averages) this far apart or more are unlike: one core's worth of other work
LOAD_APART = 1.0


def load_note(ranked_nodes: Sequence[Node], loads: Mapping[str, Mapping[str, Any]]) -> str:
    """The machine's load during each ranked node's run commands (``loads``: node id -> ``low``,
    ``high`` (1-minute load averages), ``others`` (this run's other commands at once); ``cores``
    -> the machine's core count), and whether they differed, one line; "" without any. Timings
    taken under different loads were ranked with only the seed band said (relay s8 mm2 012-016,
    mm1)."""
    shown = [(n.id, loads[n.id]) for n in ranked_nodes if isinstance(loads.get(n.id), Mapping)]
    if not shown:
        return ""

    def text(load: Mapping[str, Any]) -> str:
        low, high, others = f"{load['low']:.1f}", f"{load['high']:.1f}", load.get("others")
        span = low if low == high else f"{low}-{high}"
        return span + (
            f" (+{others} other command{'s' if others != 1 else ''} of this run)" if others else ""
        )

    cores = (loads.get("cores") or {}).get("count")
    lows, highs = [float(x["low"]) for _, x in shown], [float(x["high"]) for _, x in shown]
    apart = max(highs) - min(lows)
    head = "Machine load during each one's run commands (1-minute load average, lowest-highest"
    head += f", on {cores} cores): " if cores else "): "
    if apart < LOAD_APART and len(shown) == len(ranked_nodes):
        verdict = f"alike (within {apart:.1f})"
        # a load above the cores: every timing shared them, each slower than the machine can do
        verdict += (
            f", above the {cores} cores: each timing shared them." if cores and min(lows) > cores else "."
        )
    else:
        verdict = (
            f"the loads differed (by up to {apart:.1f}): a timing taken under more load is slower for "
            "that reason alone, so compare timings only under like loads."
        )
    return head + ", ".join(f"{nid} {text(x)}" for nid, x in shown) + ": " + verdict


def sibling_table(
    view: JournalView,
    stage: int,
    *,
    node_id: str | None = None,
    parent_id: str | None = None,
    rows: int = SIBLING_ROWS,
    designs: Mapping[str, str] | None = None,
) -> list[str]:
    """What the nodes of ``stage`` other than ``node_id`` did and scored: ``[header, row, ...]``;
    [] when there is none. Which nodes are shown (at most ``rows``): the children of
    ``parent_id`` first (for a draft, the earlier drafts), then the stage's other nodes ranked
    best first; the rows shown are in creation order, so a later node's table extends an
    earlier one's (a new node's row comes last: the prefix cache keeps the rows before it, and
    the nodes' ids and results say which is nearest and best).

    Left out: ``node_id`` itself, ``parent_id`` (its material is the prompt's lineage) and, in
    stages whose prompts carry a tried table (2 and 4), the idea nodes that table lists. A node
    still running shows only what it was created to do (operation, idea) and "running": its
    summary appears while it runs, at a moment that depends on timing, and a replay must see
    the same table. ``designs``: a finished node's plan in a line (goal and strategy, see
    :func:`design_text`), shown after what it found — a second draft must see the first's design
    to take a different one."""
    shown_elsewhere = set(view.ids("idea", stage)) if stage in (2, 4) else set()
    others = [
        view.get(i)
        for i in view.ids("search", stage)
        if i not in (node_id, parent_id) and i not in shown_elsewhere
    ]
    if not others:
        return []
    same = [n for n in others if n.parent_id == parent_id]
    rest = ranked([n for n in others if n.parent_id != parent_id])
    picked = [*same, *rest]
    order = {n.id: i for i, n in enumerate(others)}  # creation order
    shown = sorted(picked[:rows], key=lambda n: order[n.id])
    header = [
        "| node | operation | idea | result | what it did |",
        "|---|---|---|---|---|",
    ]
    lines = []
    digits = table_digits(shown)
    for n in shown:
        op = n.operation + (f" of {n.parent_id}" if n.parent_id else "")
        lines.append(
            f"| {n.id} | {op} | {_cell(n.idea or '-', 120)} | {result_text(n, all_metrics=True, digits=digits)} "
            f"| {_did(n, (designs or {}).get(n.id, ''))} |"
        )
    if len(picked) > rows:
        lines.append(f"({len(picked) - rows} more nodes of the stage not listed)")
    return ["\n".join(header), *lines]


def _did(node: Node, design: str) -> str:
    """The "what it did" cell: a finished node's findings (cut at a sentence end) and its design."""
    if not node.is_finished:
        return "-"
    found = sentences(node.summary or "-", SUMMARY_CHARS)
    return f"{found} — {design}" if design else found


def design_text(plan: Mapping[str, object] | None) -> str:
    """A node's plan in one line: "Design: goal: ... / strategy: ...", each part cut at a sentence
    end within :data:`DESIGN_CHARS`; "" when the plan says neither."""
    plan = plan or {}
    goal = sentences(str(plan.get("goal_summary") or ""), DESIGN_CHARS)
    strategy = sentences(str(plan.get("implementation_strategy") or ""), DESIGN_CHARS)
    parts = [f"goal: {goal}" if goal else "", f"strategy: {strategy}" if strategy else ""]
    shown = " / ".join(p for p in parts if p)
    return f"Design: {shown}" if shown else ""


def ablation_plan(
    view: JournalView,
    stage: int,
    planned: Sequence[str],
    *,
    current: str | None = None,
    iterations_left: int | None = None,
) -> list[str]:
    """The stage's planned ablations in order, each marked done (with its node), in flight, this
    node's, or still to do; [] when nothing is planned. The header counts those still to do and,
    given ``iterations_left`` (nodes the stage may still create), says whether all of them fit."""
    if not planned:
        return []
    by_idea: dict[str, Node] = {}
    for nid in view.ids("idea", stage):
        node = view.get(nid)
        by_idea.setdefault(_norm(node.idea or ""), node)
    rows, to_do = [], 0
    for i, idea in enumerate(planned, 1):
        n = by_idea.get(_norm(idea))
        if current is not None and _norm(idea) == _norm(current):
            status = "this node"
        elif n is None:
            status, to_do = "to do", to_do + 1
        elif n.is_finished:
            status = f"done ({n.id}: {result_text(n)})"
        else:
            status = f"running ({n.id})"
        rows.append(f"{i}. {_cell(idea, 200)} — {status}")
    mine = current is not None and any(_norm(idea) == _norm(current) for idea in planned)
    header = f"The stage plans {len(planned)} ablation(s), in this order (compare each with the baseline)"
    if to_do:
        header += f"; {to_do} still to do" + (" besides this node" if mine else "")
    elif mine:
        header += "; this node runs the last of them"
    elif current is not None:
        header += f"; none still to do: this node runs a new ablation, proposed since ({_cell(current, 200)})"
    else:
        header += "; none still to do"
    if iterations_left is not None:
        after = " after this one" if current is not None else ""
        # no config key names: the model never sees the config (relay s10 ln 033)
        header += f"; the stage may create {iterations_left} more node(s){after}"
        if to_do > iterations_left:
            header += f": {to_do - iterations_left} planned ablation(s) will not run"
    return [header + ":", *rows]


def untried(view: JournalView, stage: int, planned: Sequence[str]) -> list[str]:
    """The ``planned`` ideas of ``stage`` that no node has taken up yet, in order."""
    taken = {_norm(view.get(i).idea or "") for i in view.ids("idea", stage)}
    return [idea for idea in planned if _norm(idea) not in taken]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())

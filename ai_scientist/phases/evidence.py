"""The evidence of one run, as the calls that judge or use it see it (review, plotting, critique).

A run reaches those calls in a shape that survives packing (context/spec.py): ``run_result`` —
each command's exit code and every metric value, a few lines kept before anything else —,
``run_output`` — the last lines of each command's stderr and stdout (results are printed last; a
tail cut drops the oldest lines) — and the node's facts for the call's brief (which node, what it
is: never "Operation: draft" as if the call were a draft). The criteria the review and the
critique apply follow the kind of experiment (:func:`experiment_kinds`). Texts are rendered from
templates; this module decides only what goes in.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.artifacts import CodeAnswer, CommandOutput, Plan, RunRecord, read_artifact
from ..base.templates import render

# re-exported: the node calls' evidence and the kinds they are judged by come from one module
from ..context.kinds import KINDS as KINDS
from ..context.kinds import experiment_kinds as experiment_kinds
from ..context.kinds import shows_machine as shows_machine

if TYPE_CHECKING:
    from .base import NodeContext

# how much of each stream the run record keeps (phases/experiment.py: the last 2500 characters): a
# tail that long was cut, most likely mid-line
RECORDED_TAIL_CHARS = 2500

# the parent's metrics after a child's call line, one a line, primary first, then "(+N more metrics)":
# a C benchmark's 41 (a relay run saw "+19 more metrics" at 800 characters)
PARENT_METRICS = 60


def node_facts(ctx: NodeContext) -> dict[str, Any]:
    """What the briefs of the review, plotting and critique calls say about the node: its id,
    operation, stage (number and title), parent and idea, and a child's parent's metrics
    (``parent_metrics``: what the child's own are compared with)."""
    from ..treesearch.stages import STAGES

    node = ctx.node
    stage = STAGES.get(node.stage)
    facts: dict[str, Any] = {
        "node_id": node.id,
        "operation": node.operation,
        "stage_name": f"stage {node.stage}",
        "stage_title": stage.title if stage else "",
        "parent_id": node.parent_id or "",
    }
    if node.idea:
        facts["stage_idea"] = node.idea
    parent = ctx.parent
    if parent is not None and node.operation != "seed_eval" and (parent.metrics or parent.metric):
        # a child's run is judged against its parent's (an ablation's review is a comparison):
        # the parent's metrics, whole, primary first, next to the node's own "Run result"
        from ..treesearch.tried import ordered_metrics

        metrics = ordered_metrics(parent)
        facts["parent_metrics"] = metrics[:PARENT_METRICS]
        facts["parent_metrics_more"] = max(0, len(metrics) - PARENT_METRICS)
        facts["parent_seed_mean"] = _seed_mean_text(ctx, parent)
        # each parent metric its seed re-runs measured too, beside its search-run value: a
        # reviewer shown the search run alone read a seed-0 gain as real (relay s6 ln2 012, mm1 032)
        facts["parent_seed_values"] = _seed_values(ctx, parent)
    return facts


def own_plan(ctx: NodeContext) -> str:
    """The node's own plan (``plan.json``: its goal and its strategy, whole — cut only beyond the
    plan schema's own limits, which an answer cannot pass), for the calls that judge its run and
    draw or judge its figures: what it set out to do and measure. A relay run's reviewer inferred
    from the code which kernel was the headline (mm2 006, 021, 025, 027); the tables' short form
    (:func:`..treesearch.tried.design_text`, 500 characters a part) cut the strategy with "[...]"
    (s7 mm2 002, 004, 006) where it said what a null means. "" for a seed re-run (its parent's
    plan) or a node without one."""
    from ..base.paths import PLAN_FILE
    from ..treesearch.tried import sentences
    from .schemas import PLAN_SCHEMA

    if ctx.node.operation == "seed_eval":
        return ""
    plan = ctx.plan if ctx.plan is not None else read_artifact(ctx.dir / PLAN_FILE, Plan)
    data = plan.to_json() if plan is not None else {}
    props = PLAN_SCHEMA["properties"]
    parts = [
        f"{label}: {text}"
        for key, label in (("goal_summary", "goal"), ("implementation_strategy", "strategy"))
        if (text := sentences(str(data.get(key) or ""), int(props[key]["maxLength"])))
    ]
    return " / ".join(parts)


# a child's program is shown as its diff to the parent's when the diff is at most this share of the
# program (a tuning's one changed constant, not a rewrite): the parent's program was reviewed and
# plotted already, and the review's and plotting's calls pay for the whole program otherwise
DIFF_SHARE = 0.4


def program_values(ctx: NodeContext, answer: CodeAnswer) -> dict[str, Any]:
    """The ``prior_code`` layer of a review or plotting call: the node's program, or — for a child
    whose program differs a little from its parent's (:data:`DIFF_SHARE`) — the unified diff to
    the parent's program with the parent's id (``code_diff_of``; ``prompt/context/prior_code.j2``).
    A program equal to its parent's (a seed re-run) is shown whole: its bytes repeat the parent's
    call, which a provider's prefix cache serves."""
    from .base import code_text, commands_text

    program = code_text(answer)
    parent = ctx.parent
    if parent is None or not program:
        return {"prior_code": program}
    parent_answer = ctx.parent_answer
    before = code_text(parent_answer)
    if not before or parent_answer is None:
        return {"prior_code": program}
    # the commands are diffed with the files: a tuning that changed only a build flag showed an
    # empty-looking diff under "every line not shown is the parent's" (a relay run's judge)
    commands_changed = parent_answer.commands() != answer.commands()
    diff = "\n".join(
        difflib.unified_diff(
            # the file labels name no node (the sentence above names the parent): siblings' diffs
            # share their bytes up to the first changed line
            f"{before}\n\n{commands_text(parent_answer)}".splitlines(),
            f"{program}\n\n{commands_text(answer)}".splitlines(),
            "parent",
            "this node",
            n=2,
            lineterm="",
        )
    )
    # an unchanged program (a seed re-run) is shown whole: the same bytes as its parent's call, a
    # prefix-cache hit up to the run's own output; so is one whose diff is not much shorter
    if not diff or len(diff) > DIFF_SHARE * len(program):
        return {"prior_code": program}
    return {"prior_code": diff, "code_diff_of": parent.id, "commands_changed": commands_changed}


def node_kinds(ctx: NodeContext, metrics: Any) -> list[str]:
    """The kinds of experiment (:func:`experiment_kinds`) a review or critique of this node applies
    the criteria of: those its own metrics' names say; for a run that reported none (a failed run,
    metrics still to be read from the output), those of the metric the stage's protocol fixed and
    of its parent's metrics, before the idea's words — a failed benchmark run got every kind's
    checklist, training's included, under "check what applies"."""
    names = [str(m.get("name", "")) for m in metrics or [] if isinstance(m, dict)]
    if not names:
        protocol = ctx.extra_values.get("evaluation_protocol") or {}
        metric = protocol.get("metric") if isinstance(protocol, dict) else None
        names = [str(metric[0])] if metric else []
        if ctx.parent is not None:
            names += [m.name for m in ctx.parent.metrics]
    return experiment_kinds(names, ctx.run.idea.to_markdown())


def judged_stage(ctx: NodeContext) -> dict[str, Any]:
    """The layers a review or a figure critique judges the node's result against: the stage's other
    nodes with their results — the tables the node's code prompt got (frozen when it was scheduled,
    ``runloop/stage_inputs.py``): ``siblings``, each row cut to what a judge compares (node,
    operation, idea, every metric or the failure, a measurement caveat; not the findings' prose
    or an earlier draft's design, which a node that writes code needs), and in stages 2 and 4 the
    tuning / ablation table. Empty for a stage's first node and for a seed re-run."""
    rows = ctx.extra_values.get("siblings") or []
    if isinstance(rows, str):
        rows = rows.splitlines()
    shown = ["\n".join(_judged_row(line) for line in str(row).split("\n")) for row in rows]
    out: dict[str, Any] = {
        "siblings": shown,
        "judging": True,
        "tried_hyperparams": ctx.extra_values.get("tried_hyperparams") or [],
        "tried_ablations": ctx.extra_values.get("tried_ablations") or [],
    }
    # a later draft's protocol carries the protocol node's program with the instruction to copy its
    # data and evaluation code: a writing instruction a judge does not follow (a relay run's review
    # got 9 kB of another node's program and "You write a new program ..."); the judge keeps what
    # must be measured alike
    protocol = ctx.extra_values.get("evaluation_protocol")
    if isinstance(protocol, dict):
        out["evaluation_protocol"] = judged_protocol(protocol)
    return out


def judged_protocol(protocol: dict[str, Any]) -> dict[str, Any]:
    """The protocol as a judge (review, plotting, figure critique) is shown it: without a later
    draft's reference program, and ``judging`` set, so its closing lines say what a change of the
    protocol means for the judged node instead of telling the judge to keep it (s8 F8: "Keep this
    protocol ..." reached the figure calls, which write no experiment)."""
    return {**{k: v for k, v in protocol.items() if k != "reference_code"}, "judging": True}


_CELL = re.compile(r"(?<!\\)\|")  # a table cell's border: a "|" the cell's text did not escape


def _judged_row(row: str) -> str:
    """A sibling table line (``treesearch/tried.py`` ``sibling_table``) as a judge sees it: the
    header and each row without the "what it did" column, whose measurement caveat (when the
    findings open with one) joins the result; any other line (a "more nodes" note) as it is."""
    from ..treesearch.tried import first_sentence

    cells = _CELL.split(row)
    if len(cells) != 7 or cells[0].strip() or cells[-1].strip():
        return row
    did = cells[5].strip()
    if did.startswith("Caveat"):
        # split at the caveat's sentence end, not at an abbreviation's dot (relay s7 ln1 021: "i.e |")
        caveat, did = first_sentence(did.split(": ", 1)[-1])
        cells[4] = f"{cells[4].rstrip()}; caveat: {caveat.rstrip('.')} "
    if did.startswith("Headline: "):  # a grid's value: the configuration it is for (review.headline)
        config = first_sentence(did.removeprefix("Headline: ").split(" is for ", 1)[-1])[0]
        primary, sep, rest = cells[4].strip().partition("; ")  # the primary metric comes first
        cells[4] = f" {primary} for {config.rstrip('.')}{sep}{rest} "
    return "|".join(cells[:5]) + "|"


def _seed_mean_text(ctx: NodeContext, parent: Any) -> str:
    """``"Over its 2 seed re-runs: val_accuracy mean 0.909 ± 0.007 s.e."`` when the parent was
    re-run over seeds (at its stage's end, so before any child of a later stage): a child compared
    with its parent's single search run alone credits its change with the parent's seed luck."""
    from ..treesearch.seeds import aggregate_seeds, distinct_digits

    m = parent.metric
    if ctx.journal is None or m is None:
        return ""
    same = [
        r.metric
        for r in ctx.journal.seed_runs(parent.id)
        if r.is_good and r.metric is not None and r.metric.key == m.key and r.metric.is_valid
    ]
    if not same:
        return ""
    agg = aggregate_seeds(same)
    spread = f" ± {agg.stderr:.2g} s.e." if agg.stderr is not None else " (one re-run: no spread)"
    runs = "re-run" if agg.n == 1 else "re-runs"
    d = distinct_digits(
        [m.value, agg.mean]
    )  # told apart from the search value where they differ past 4 digits
    return f"Over its {agg.n} seed {runs}: {m.name} mean {agg.mean:.{d}g}{spread}"


def _seed_values(ctx: NodeContext, parent: Any) -> dict[str, str]:
    """Per parent metric (keyed ``name|dataset``) that its good seed re-runs measured too: "search
    run; seed re-runs 0.81, 0.785: mean 0.7975 ± 0.017 s.e." — the spread of every metric (a
    grid's other conditions, an in-run ratio), not only the primary's mean. Empty without re-runs."""
    from ..treesearch.seeds import aggregate_seeds

    if ctx.journal is None:
        return {}
    reruns = [r for r in ctx.journal.seed_runs(parent.id) if r.is_good]
    out: dict[str, str] = {}
    for m in list(parent.metrics) or ([parent.metric] if parent.metric is not None else []):
        same = [
            x
            for r in reruns
            for x in (r.metrics or ([r.metric] if r.metric else ()))
            if x.key == m.key and x.is_valid
        ]
        if not same:
            continue
        if len(same) == 1:
            out[f"{m.name}|{m.dataset or ''}"] = (
                f"search run; one seed re-run: {same[0].value:.6g}, no spread"
            )
            continue
        agg = aggregate_seeds(same)
        spread = f" ± {agg.stderr:.2g} s.e." if agg.stderr is not None else ""
        values = ", ".join(f"{x.value:.6g}" for x in same)
        out[f"{m.name}|{m.dataset or ''}"] = f"search run; seed re-runs {values}: mean {agg.mean:.6g}{spread}"
    return out


def load_summary(outputs: Sequence[CommandOutput]) -> dict[str, Any] | None:
    """The machine's load during a node's run commands (``execution/usage.py`` records each one's
    1-minute load at start and end, the core count and the run's other commands meanwhile):
    ``{"low", "high", "cores", "others", "commands"}`` — the lowest and highest load seen, the
    most other commands of this run at once. None when no command recorded a load (an older run).
    A timing is judged against it: a relay run's stage summary and reviews compared timings taken
    under load 6 on 2 cores with ones taken idle (s7 mm2 004, 005, 008, 014, 018, 024)."""
    loads = [o.load for o in outputs if isinstance(o.load, dict)]
    seen = [float(v) for ld in loads for v in (ld.get("start"), ld.get("end")) if isinstance(v, (int, float))]
    if not seen:
        return None
    cores = next((ld["cores"] for ld in loads if isinstance(ld.get("cores"), int)), None)
    others = [ld["others"] for ld in loads if isinstance(ld.get("others"), int)]
    return {
        "low": f"{min(seen):.1f}",
        "high": f"{max(seen):.1f}",
        "cores": cores,
        "others": max(others) if others else None,
        "commands": len(loads),
    }


def headline_metric(metrics: Any) -> tuple[str, float] | None:
    """The node's primary metric (the first one) as name and value; None without a numeric one."""
    first = next(iter(metrics or []), None)
    if first is None:
        return None
    # the run record's metrics are dicts ({name, value, ...}); a node's are Metric objects
    get = first.get if isinstance(first, dict) else lambda k: getattr(first, k, None)
    name, value = get("name"), get("value")
    if not name or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return str(name), float(value)


def run_result_text(
    run_record: RunRecord | None,
    metrics: Any,
    *,
    commands: bool = True,
    builds: Sequence[Any] | None = None,
    from_review: bool = False,
    series: Any = None,
    steps: Any = None,
) -> str:
    """The ``run_result`` layer: each build command (``builds``, from ``compile.json``: a
    benchmark's flags matter) and run command with its exit code (``commands``), then every
    metric with its value, direction and dataset, and where the metrics came from
    (``from_review``: none yet, the review reads them from the output); with a grader, each
    value the program claimed that the grader did not confirm; ``series`` (the review's: the
    data files' loss-like lists, :func:`.plots.loss_series`): the first and last values of each;
    ``steps`` (the review's: the other per-step lists, :func:`step_series`): each one's first,
    last, lowest and highest value and length. Each is a :class:`.plots.SeriesView` (or a pair
    of the lists shown and their count): the lists not shown are named, never only counted."""
    shown, total, series_left = _view(series)
    other, other_total, steps_left = _view(steps)
    return render(
        "context/_run_result.j2",
        builds=list(builds or []),
        outputs=list(run_record.outputs) if run_record is not None and commands else [],
        metrics=list(metrics or []),
        metrics_source=(run_record.metrics_source or "") if run_record is not None else "",
        mismatches=list(run_record.mismatches) if run_record is not None else [],
        from_review=from_review,
        series=shown,
        series_more=total - len(shown),
        series_left=series_left,
        steps=other,
        steps_more=other_total - len(other),
        steps_left=steps_left,
        headline_name=(headline_metric(metrics) or ("the headline metric",))[0],
    ).strip()


def _view(lists: Any) -> tuple[list[dict[str, Any]], int, str]:
    """(shown, total, the others named) of a :class:`.plots.SeriesView` or a (shown, total) pair."""
    if lists is None:
        return [], 0, ""
    if isinstance(lists, tuple):
        return list(lists[0]), int(lists[1]), ""
    return list(lists.shown), int(lists.total), str(lists.left_out)


# a tune's code call (one setting changed) sees its parent's output cut to the last lines of each
# stream: a relay run's 50 kB tune prompt for a one-flag change carried the parent's whole output
# (requests 011, 015); the parent's metrics are in its history, whole
TUNE_OUTPUT_LINES = 12


def run_output_text(
    outputs: Sequence[CommandOutput],
    status: bool = False,
    last_lines: int | None = None,
    full_stdout: Sequence[str | None] | None = None,
) -> str:
    """The ``run_output`` layer: per command, the last lines of its stderr and then of its stdout
    (the stdout's tail last, where a tail cut keeps it longest); a tail the run record cut
    mid-line starts at its first whole line. ``status``: every command, with its exit code and
    duration (a child's code call sees its parent's run so; plain text, not a JSON string with
    escaped line breaks). ``last_lines``: at most that many lines of each stream, the cut said
    (a tune's code call, :data:`TUNE_OUTPUT_LINES`). ``full_stdout`` (the review's: each
    command's stdout as its exec record holds it, None where unknown): a tail cut inside a
    results table gets the table's cut rows back (:func:`_table_kept`), and the lines still left
    out are counted (relay s9 ln 012: the grid's first cells were cut from the table)."""
    shown = [
        replace(o, stdout_tail=_whole_lines(o.stdout_tail), stderr_tail=_whole_lines(o.stderr_tail))
        for o in outputs
    ]
    notes = [""] * len(shown)
    for i, full in enumerate(full_stdout or []):
        if i < len(shown) and full and len(outputs[i].stdout_tail or "") >= RECORDED_TAIL_CHARS:
            text, notes[i] = _table_kept(full, shown[i].stdout_tail)
            shown[i] = replace(shown[i], stdout_tail=text)
    cut = 0
    if last_lines is not None:
        cut = sum(
            _lines_over(o.stdout_tail, last_lines) + _lines_over(o.stderr_tail, last_lines) for o in shown
        )
        shown = [
            replace(
                o,
                stdout_tail=_last_lines(o.stdout_tail, last_lines),
                stderr_tail=_last_lines(o.stderr_tail, last_lines),
            )
            for o in shown
        ]
    if not status:
        keep = [i for i, o in enumerate(shown) if o.stdout_tail.strip() or o.stderr_tail.strip()]
        shown, notes = [shown[i] for i in keep], [notes[i] for i in keep]
    if not shown:
        return ""
    return render(
        "context/_run_output.j2",
        outputs=shown,
        notes=notes,
        total=len(outputs),
        status=status,
        last_lines=last_lines,
        cut=cut,
    ).strip()


# rows of a results table a cut stdout gets back from its exec record (at most), and their size
TABLE_ROWS = 60
TABLE_CHARS = 6000


def _table_kept(full: str, tail: str) -> tuple[str, str]:
    """``tail`` (the recorded end of a stdout, from its first whole line) with the rows of the
    table it starts inside put back from ``full`` (the whole stdout), up to :data:`TABLE_ROWS`
    rows and :data:`TABLE_CHARS`, and a note saying what is still left out ("12 earlier lines
    not shown"; "..., the first 3 rows of the table below among them"); ``(tail, note)`` as it
    is when ``full`` does not end with it."""
    at = full.rfind(tail.rstrip()) if tail.strip() else -1
    if at < 0:
        return tail, ""
    before = full[:at].splitlines()
    lines = tail.splitlines()
    shape = _row_shape(lines[0]) if lines else None
    rows = 0
    while shape and rows < len(before) and _row_shape(before[-1 - rows]) == shape:
        rows += 1
    back: list[str] = []
    for line in reversed(before[len(before) - rows :]):
        if len(back) >= TABLE_ROWS or sum(len(x) + 1 for x in back) + len(line) > TABLE_CHARS:
            break
        back.insert(0, line)
    left = len(before) - len(back)
    note = f"{left} earlier line{'s' if left != 1 else ''} not shown" if left else "whole"
    if rows > len(back):
        note += f", the first {rows - len(back)} rows of the table below among them"
    elif back and left:
        note += "; the table below whole"
    return "\n".join([*back, *lines]), note


def _row_shape(line: str) -> tuple[str, ...] | None:
    """A results table row's shape: its number of fields and, past the first (the row's label),
    each field's ``name=`` or kind (number or word); None for a line of fewer than 3 fields."""
    fields = line.split()
    if len(fields) < 3:
        return None
    return tuple(
        f.split("=", 1)[0] + "="
        if "=" in f
        else ("#" if re.fullmatch(r"[-+]?[\d.]+(e[-+]?\d+)?%?", f) else "w")
        for f in fields[1:]
    )


def _lines_over(text: str, n: int) -> int:
    return max(0, len(text.rstrip().splitlines()) - n)


def _last_lines(text: str, n: int) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])


def _whole_lines(tail: str | None) -> str:
    text = tail or ""
    if len(text) >= RECORDED_TAIL_CHARS and "\n" in text[:-1]:
        return text[text.index("\n") + 1 :]
    return text

"""The execution review: what one run found, judged from what it printed and measured.

The review call (prompt ``exec_review``) judges a run by its output, so the run reaches it in a
shape that survives packing (context/spec.py): ``run_result`` — each command's exit code and
every metric value, a few lines kept before anything else —, ``run_output`` — the last lines of
each command's stderr and stdout (results are printed last; a cut drops the oldest lines) — and
the program itself, which is what gets cut first. The answer separates what the run found
(``findings``, with the numbers from the output: the node's summary everywhere later) from
remarks about the review itself (``remarks``: what could not be seen or checked), which stay in
``review.json``. Between bug and no bug, ``measurement`` says a valid run's number is noisy or not
comparable (a baseline timed once): the node stays working and its summary opens with the caveat.

The layers' texts, and the criteria by kind of experiment, come from :mod:`.evidence` (shared
with the plotting and critique calls).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base.artifacts import BuildRecord, CodeAnswer, Review, RunRecord
from ..base.nodedata import unmeasured
from ..base.paths import REVIEW_FILE, RUN_FILE, RunPaths
from ..base.templates import render
from ..execution.environment import machine_text
from ..llm.call import LLMError
from .base import NodeContext, PhaseFailed, checkpoint_typed, parent_artifact
from .evidence import (
    headline_metric,
    judged_stage,
    load_summary,
    node_facts,
    node_kinds,
    own_plan,
    program_values,
    run_output_text,
    run_result_text,
    shows_machine,
)
from .experiment import METRICS_FROM_REVIEW, normalise_metrics
from .plots import loss_lists, step_lists
from .schemas import REVIEW_METRICS_SCHEMA, REVIEW_SCHEMA


def _reference_workspace(ctx: NodeContext) -> Path | None:
    """The workspace a child's loss lists are compared with (new ones shown first): its nearest
    working ancestor's — the parent's, or for a fix of a failed node the node that one started
    from (a relay run's review of a debug fix was shown the four lists its grandparent already
    had, not the new conditions the fix was about)."""
    if not ctx.node.parent_id:
        return None
    paths = RunPaths(ctx.run.dir)
    ancestors = ctx.journal.ancestors(ctx.node.id) if ctx.journal is not None else []
    for node in ancestors:
        if node.status == "good":
            return paths.node(node.id).workspace
    return paths.node(ctx.node.parent_id).workspace


def review_execution(
    ctx: NodeContext, answer: CodeAnswer, build: BuildRecord, run_record: RunRecord
) -> Review:
    """Structured execution review (findings, remarks, measurement, is_bug) of the run of
    ``answer`` (built as ``build``, run as ``run_record``); saved as ``review.json``."""
    return checkpoint_typed(
        ctx, "review", Review, REVIEW_FILE, lambda: _review(ctx, answer, build, run_record)
    )


def _review(ctx: NodeContext, answer: CodeAnswer, build: BuildRecord, run_record: RunRecord) -> Review:
    metrics = list(run_record.metrics)
    parse = run_record.metrics_source == METRICS_FROM_REVIEW  # one call for both (merge_calls)
    kinds = node_kinds(ctx, metrics)
    # which lists are the headline condition's: the record holding the primary metric's value,
    # told from tied grid cells by the headline configuration the protocol names (s9 ln 006)
    lists_of: dict[str, Any] = {
        "parent": _reference_workspace(ctx),
        "headline": headline_metric(metrics),
        "config": _headline_config(ctx),
    }
    values = {
        **node_facts(ctx),
        # what the node set out to do and measure (its plan's goal and strategy): the run is judged
        # against it, not guessed from the code (relay s6 mm2 006, 021, 025)
        "own_plan": own_plan(ctx),
        # a benchmark is judged against the machine (its cores, caches, peak rate): only then
        "environment": machine_text(ctx.environment, ctx.run.idea.to_markdown())
        if shows_machine(kinds)
        else "",
        **program_values(ctx, answer),  # a small change: its diff to the parent's
        # a tail cut inside a results table gets its rows back from the exec records (s9 ln 012)
        "run_output": run_output_text(run_record.outputs, full_stdout=_full_stdout(ctx, run_record)),
        # the data files' per-epoch losses (head and tail): "a loss that never decreases" is
        # judged from them (the output rarely prints them; a relay run's reviewer never saw any)
        "run_result": run_result_text(
            run_record,
            metrics,
            builds=build.commands,
            from_review=parse,
            # the headline condition's lists first (what the node's result measures), then a
            # child's new lists (its new conditions), then the ones its parent had too
            series=loss_lists(ctx.workspace, unmeasured(ctx.dir), **lists_of),
            # the per-step lists not named like a loss (an accuracy, a weight norm per epoch), the
            # headline's first: the course of what the node measured (relay s7 ln2 023, s9 ln 006)
            steps=step_lists(ctx.workspace, unmeasured(ctx.dir), **lists_of),
        ),
        "kinds": kinds,
        # a timing is judged against the machine's load while it ran, and a child's against its
        # parent's load too (relay s7 mm2: timings under load 6 on 2 cores read as an effect)
        **(_loads(ctx, run_record) if "benchmark" in kinds else {}),
        "parse_metrics": parse,
        # the stage's other nodes with their results: the run is judged against them too
        **judged_stage(ctx),
    }
    try:
        answer = ctx.ask(
            "exec_review",
            values,
            phase="review",
            label="exec_review+metrics" if parse else "exec_review",
            role="feedback",
            schema=REVIEW_METRICS_SCHEMA if parse else REVIEW_SCHEMA,
        ).parsed
    except LLMError as exc:
        # the review is advice on top of hard evidence (exit codes, metrics): record and go on
        return Review(is_bug=False, remarks=f"review unavailable: {exc}", error=str(exc))
    try:
        return Review.from_json(answer)
    except ValueError as exc:  # the client checked the schema: only a backend ignoring it gets here
        raise PhaseFailed("review", f"the review's answer is malformed: {exc}") from exc


def _full_stdout(ctx: NodeContext, run_record: RunRecord) -> list[str | None]:
    """Each run command's stdout as its latest exec record (``exec/NNN_phase4_runK.json``) holds
    it (capped by the executor), None where there is none: the run record keeps only the tail."""
    import json

    out: list[str | None] = []
    for k in range(1, len(run_record.outputs) + 1):
        found = sorted(RunPaths(ctx.run.dir).node(ctx.node.id).exec.glob(f"*_phase4_run{k}.json"))
        try:
            data = json.loads(found[-1].read_text(encoding="utf-8")) if found else {}
        except (OSError, ValueError):
            data = {}
        stdout = data.get("stdout") if isinstance(data, dict) else None
        out.append(stdout if isinstance(stdout, str) else None)
    return out


def _headline_config(ctx: NodeContext) -> str:
    """The headline configuration the stage's protocol names ("l2=0.01, lr=0.1, ..."), or ""."""
    protocol = ctx.extra_values.get("evaluation_protocol")
    head = protocol.get("headline") if isinstance(protocol, dict) else None
    return str(head.get("config") or "") if isinstance(head, dict) else ""


def _loads(ctx: NodeContext, run_record: RunRecord) -> dict[str, Any]:
    """``own_load`` and ``parent_load`` (:func:`.evidence.load_summary`) of the node's and its
    parent's run commands, for a review whose metrics time something; a seed re-run's parent ran
    the same program, so its load is the comparison too."""
    parent = parent_artifact(ctx, RUN_FILE, RunRecord)
    return {
        "own_load": load_summary(run_record.outputs),
        "parent_load": load_summary(parent.outputs) if parent is not None else None,
    }


def findings(review: Review) -> str:
    """What the reviewed run found (a review written before issue 28 called it ``summary``)."""
    return review.findings.strip()


def measurement(review: Review) -> str:
    """The review's concern about a valid run's numbers (noisy or not comparable), or ""."""
    return " ".join(review.measurement.split())


def headline(review: Review, metric: Any = None) -> str:
    """The review's answer to which configuration of a grid the primary metric's value is for, as
    the sentence the node's summary opens with: "Headline: val_accuracy=0.91 is for lr=0.1."
    ("" when the run measured one configuration, or the review did not say)."""
    said = " ".join((review.headline or "").split()).rstrip(".")
    if not said:
        return ""
    value = f"{metric.name}={metric.value:.6g}" if metric is not None else "the reported value"
    return f"Headline: {value} is for {said}."


def node_summary(found: str, concern: str, fallback: str = "", head: str = "") -> str:
    """A reviewed node's summary: what its run found, after the review's measurement concern and
    the grid's headline configuration (``head``, :func:`headline`) when it has them — first, so
    the tables that cut a summary at its end (the siblings', the stage's facts) keep them."""
    text = (found or fallback)[:500]
    if head:
        text = f"{head} {text}".strip()
    if not concern:
        return text
    return f"Caveat (valid but noisy or not comparable): {concern.rstrip('.')}. {text}".strip()


def with_review_metrics(record: RunRecord, review: Review) -> RunRecord:
    """Phase 4's record with the metrics the execution review parsed from the output (no
    metrics.json, merge_calls: ``metrics_source`` "review"); any other record as it is."""
    if record.metrics_source != METRICS_FROM_REVIEW:
        return record
    try:
        metrics = normalise_metrics(list(review.metrics or []))
    except (ValueError, TypeError) as exc:
        raise PhaseFailed("phase4", f"no metrics: the review's metrics are invalid: {exc}") from exc
    if not metrics:
        why = findings(review) or review.remarks
        raise PhaseFailed("phase4", f"no metrics.json; the review found none: {why}")
    return replace(record, metrics=tuple(metrics))


def seed_summary(ctx: NodeContext, metrics: list[dict[str, Any]]) -> str:
    """A seed re-run's summary: what it is (a re-run of its parent with one seed) and what it
    measured — never its parent's plan, which it only repeats."""
    return render(
        "phases/_seed_summary.j2", parent_id=ctx.node.parent_id or "?", seed=ctx.node.seed, metrics=metrics
    ).strip()

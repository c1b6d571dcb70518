"""One tree node through its phases: plan → install → code → compile → run → review → plots → critique.

Each phase runs through :func:`~.base.checkpoint`: it saves its artifact and
adds itself to ``node.phases_done`` (the journal is updated after every phase), so
a resumed node restarts from its last completed phase. A failed phase marks the node buggy with the reason;
nothing becomes an empty plan or a placeholder program.
"""

from __future__ import annotations

import time
from typing import Any

from ..base.artifacts import CodeAnswer, Plan, RunRecord
from ..context.state import state_op_for
from .base import NodeContext, PhaseFailed
from .experiment import METRICS_FROM_REVIEW, compile_code, generate_code, run_experiment
from .install import install_dependencies
from .plan import make_plan, merges_plan
from .plots import check_valid, critique_plots, make_plots, wants_plots
from .review import (
    findings,
    headline,
    measurement,
    node_summary,
    review_execution,
    seed_summary,
    with_review_metrics,
)


def _metric_objects(metrics: list[dict]) -> tuple[Any, list[Any]]:
    from ..treesearch.node import Metric

    objs = [
        Metric(name=m["name"], value=m["value"], direction=m["direction"], dataset=m.get("dataset"))
        for m in metrics
    ]
    return (objs[0] if objs else None), objs


def _plan_and_code(ctx: NodeContext) -> tuple[Plan, CodeAnswer]:
    """Phases 0-2. A child whose plan is merged into its code answer (phase0.merges_plan) makes one
    call for both: code first (its plan saved as plan.json), then phase 1, which installs only
    what the parent's inherited prefix lacks (nothing, and no LLM call, when no new dependency)."""
    if merges_plan(ctx):
        answer = generate_code(ctx, ctx.parent_plan, merged=True)
        plan = make_plan(ctx, merged_answer=answer)
        install_dependencies(ctx, plan)
        return plan, answer
    plan = make_plan(ctx)
    if ctx.node.operation != "seed_eval":
        install_dependencies(ctx, plan)
    return plan, generate_code(ctx, plan)


def run_node(ctx: NodeContext) -> None:
    """Run (or resume) every phase of ``ctx.node`` and record its final status in the journal."""
    ctx.update(status="running")
    try:
        ctx.plan, answer = _plan_and_code(ctx)
        build = compile_code(ctx, answer)
        record = run_experiment(ctx, answer)
        if record.failure:
            raise PhaseFailed("phase4", record.failure + _tail(record))
        if not record.metrics and record.metrics_source != METRICS_FROM_REVIEW:
            raise PhaseFailed("phase4", f"no metrics: {record.metrics_source}")
        # a seed re-run repeats a reviewed program: its numbers are what it adds, not a review
        review = review_execution(ctx, answer, build, record) if ctx.node.operation != "seed_eval" else None
        if review is not None:
            record = with_review_metrics(record, review)
            found = findings(review)
            if review.is_bug:
                if ctx.cfg.agent.trust_review:
                    # the verdict with its reason and what the run measured: a stage summary and the
                    # siblings' tables must be able to say why (the findings alone were cut to a line)
                    remarks = review.remarks.strip()
                    why = " ".join(x for x in (found, f"Why a bug: {remarks}" if remarks else "") if x)
                    measured = ", ".join(f"{m['name']}={m['value']}" for m in record.metrics[:8])
                    raise PhaseFailed(
                        "review",
                        f"execution review found a bug: {why or 'no reason given'}"
                        + (f" (the run measured {measured})" if measured else ""),
                    )
                # advice only (agent.trust_review false): recorded, the hard evidence decides
                ctx.run.event("review_advisory", node_id=ctx.node.id, summary=found[:500])
        metrics_list = list(record.metrics)
        if wants_plots(ctx):  # the node's figures and their critique (a plotting failure is no bug)
            # the review's caveat on the numbers (machine load, ...): without it the plotting call
            # and the critique each rediscovered it from the figures (relay s7 mm1 013-018)
            caveat = measurement(review) if review is not None else ""
            plots = make_plots(ctx, answer, metrics_list, caveat=caveat)
            check_valid(ctx, critique_plots(ctx, plots, caveat=caveat))
        metric, metrics = _metric_objects(metrics_list)
        # the node's summary is what its run found, after the review's measurement caveat (the
        # review's remarks about itself stay in review.json); a seed re-run's says whose re-run it is, with which seed, and what it measured
        if review is None:
            summary = seed_summary(ctx, metrics_list)
        else:
            summary = node_summary(found, measurement(review), ctx.node.summary, headline(review, metric))
        ctx.update(
            status="good",
            error=None,
            metric=metric,
            metrics=tuple(metrics),
            summary=summary,
            finished_at=time.time(),
            # what the node's state will do to the inherited one (services.write_state applies it)
            state_op=state_op_for(ctx.node.operation),
        )
    except PhaseFailed as exc:
        ctx.update(
            status="buggy",
            error=f"{exc.phase}: {exc.reason}"[:4000],
            finished_at=time.time(),
            state_op=state_op_for(ctx.node.operation),
        )
        ctx.run.event("node_failed", node_id=ctx.node.id, phase=exc.phase, reason=exc.reason[:1000])


def _tail(record: RunRecord) -> str:
    if not record.outputs:
        return ""
    return f"\nstderr tail:\n{record.outputs[-1].stderr_tail[-1500:]}"

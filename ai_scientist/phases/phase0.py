"""Phase 0: a JSON plan for the node (goal, strategy, dependencies, guidance per phase).

Debug children reuse their parent's plan when ``agent.debug_reuses_parent_plan``
is set (the choice is recorded as an event); seed re-runs always reuse it.
"""

from __future__ import annotations

from ..base.paths import CODE_FILE, PLAN_FILE, REVIEW_FILE
from ..llm.types import LLMError
from .base import NodeContext, PhaseFailed, code_text, parent_file, short_json
from .checkpoint import checkpoint
from .schemas import PLAN_SCHEMA, validate_plan


def _stage_inputs(ctx: NodeContext) -> dict[str, str]:
    values: dict[str, str] = {"operation": ctx.node.operation, "stage_name": f"stage {ctx.node.stage}"}
    if ctx.node.idea:
        values["stage_idea"] = ctx.node.idea
    if ctx.parent is not None:
        code = parent_file(ctx, CODE_FILE)
        if code:
            values["prior_code"] = code_text(code)
        review = parent_file(ctx, REVIEW_FILE)
        if review:
            values["prior_outputs"] = short_json(review)
        if ctx.parent.error:
            values["execution_output"] = ctx.parent.error
    return values


def run_phase0(ctx: NodeContext) -> dict:
    """Produce (or reuse) the node's plan and save it as ``plan.json``."""
    return checkpoint(ctx, "phase0", PLAN_FILE, lambda: _plan(ctx))


def _plan(ctx: NodeContext) -> dict:
    reuse = ctx.node.operation == "seed_eval" or (
        ctx.node.operation == "debug" and ctx.cfg.agent.debug_reuses_parent_plan
    )
    plan = parent_file(ctx, PLAN_FILE) if reuse else None
    if plan is not None:
        ctx.run.event(
            "plan_reused", node_id=ctx.node.id, parent_id=ctx.parent.id, operation=ctx.node.operation
        )
    else:
        try:
            result = ctx.ask(
                "phase0_plan",
                _stage_inputs(ctx),
                phase="phase0",
                label="plan",
                schema=PLAN_SCHEMA,
                validator=validate_plan,
            )
        except LLMError as exc:
            raise PhaseFailed("phase0", f"no valid plan: {exc}") from exc
        plan = result.parsed
    return plan

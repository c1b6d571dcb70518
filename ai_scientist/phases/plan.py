"""Phase 0: a JSON plan for the node (goal, strategy, dependencies, guidance per phase).

Where a node's plan comes from is saved in ``plan.json`` as ``plan_source``:

- ``own``: a planning call of its own (every node when ``agent.merge_calls`` is off);
- ``merged`` (``agent.merge_calls``, the default, for drafts, improve / tune / ablate children and
  debug children that do not reuse the parent's plan): no planning call; the node's code answer
  carries the plan fields (``schemas.MERGED_CODE_SCHEMA``) and phase 0 saves them (event
  ``plan_merged``); phase 1 then installs what the answer declares (nothing, and no call, when
  everything is present);
- ``parent``: the parent's plan reused (seed re-runs always; debug children when
  ``agent.debug_reuses_parent_plan``), recorded as the event ``plan_reused``.
"""

from __future__ import annotations

from typing import Any

from ..base.artifacts import CodeAnswer, Plan
from ..base.paths import PLAN_FILE
from ..llm.call import LLMError
from .base import NodeContext, PhaseFailed, checkpoint_typed, code_text, short_json
from .install import install_schema
from .schemas import PLAN_FIELDS, PLAN_SCHEMA, constrain_dependencies, probed_packages, validate_plan

MERGE_OPERATIONS = ("improve", "tune", "ablate", "debug")
# a draft has no parent plan to start from: its merged answer is its first plan
MERGE_DRAFTS = ("draft",)


def _stage_inputs(ctx: NodeContext) -> dict[str, Any]:
    values: dict[str, Any] = {
        "operation": ctx.node.operation,
        "stage": ctx.node.stage,
        "stage_goal": ctx.node.stage,  # the stage_goal layer (seed re-runs make no code call)
    }
    if ctx.node.idea:
        values["stage_idea"] = ctx.node.idea
    if ctx.parent is not None:
        code = ctx.parent_answer
        if code is not None and code.data:
            values["prior_code"] = code_text(code)
        review = ctx.parent_review
        if (
            review is not None
        ):  # what the parent's run found; the reviewer's remarks on its own input stay out
            kept: dict[str, Any] = {"is_bug": review.is_bug, "findings": review.findings}
            if review.metrics is not None:  # the metrics the review parsed from the output
                kept["metrics"] = list(review.metrics)
            if review.measurement:  # a valid but noisy number: the child should know
                kept["measurement"] = review.measurement
            values["prior_outputs"] = short_json(kept)
        if ctx.parent.error:
            values["execution_output"] = ctx.parent.error
    return values


def make_plan(ctx: NodeContext, merged_answer: CodeAnswer | None = None) -> Plan:
    """Produce (or reuse) the node's plan and save it as ``plan.json``; with ``merged_answer``
    (a code answer with the plan fields, see :func:`merges_plan`) the plan is taken from it."""
    return checkpoint_typed(
        ctx, "phase0", Plan, PLAN_FILE, lambda: _plan(ctx, merged_answer).with_unique_dependencies()
    )


def _reuses_parent_plan(ctx: NodeContext) -> bool:
    return ctx.node.operation == "seed_eval" or (
        ctx.node.operation == "debug" and ctx.cfg.agent.debug_reuses_parent_plan
    )


def merges_plan(ctx: NodeContext) -> bool:
    """True when this node's plan comes inside its code answer (no planning call of its own):
    ``agent.merge_calls`` is on and the node is a draft, or a child (not a seed re-run, not a debug
    child reusing its parent's plan) whose parent has a plan to start from."""
    if not ctx.cfg.agent.merge_calls:
        return False
    if ctx.parent is None:
        return ctx.node.operation in MERGE_DRAFTS
    return (
        ctx.parent is not None
        and ctx.node.operation in MERGE_OPERATIONS
        and not _reuses_parent_plan(ctx)
        and ctx.parent_plan is not None
    )


def plan_from_answer(answer: CodeAnswer) -> Plan:
    """The plan part of a merged code answer."""
    return Plan.from_json(answer.plan_data(PLAN_FIELDS))


def plan_schema(ctx: NodeContext, schema: dict) -> dict:
    """``schema`` with its dependencies chosen from what the sandbox probe found (new packages only
    with network) when ``agent.constrain_answers`` is on (``schemas.constrain_dependencies``);
    without the phase-1 note when nothing can be installed (:func:`.install.install_schema`).

    The installed Python packages are an enum only when the schema becomes a decoding grammar
    (the local model: a small model would otherwise invent names). Elsewhere the enum would repeat
    the ~50 names the environment layer already lists — in the prompt text, or in every code
    request's json_schema for a capable API model (a relay run's critique) — so the names stay
    plain strings and :func:`check_installed` refuses one that is not installed, for the repair
    round."""
    schema = install_schema(schema, bool(ctx.cfg.exec.network))
    if not ctx.cfg.agent.constrain_answers:
        return schema
    constrained = constrain_dependencies(schema, ctx.environment, ctx.cfg.exec.network)
    if constrained is schema or ctx.prompts.schema_as_grammar("code"):
        return constrained
    deps = constrained["properties"]["dependencies"]
    pip = {
        **deps["properties"]["pip"],
        "items": {"type": "string", "maxLength": 100},
        "description": "installed Python packages the code imports (the names listed under Environment)",
    }
    deps = {**deps, "properties": {**deps["properties"], "pip": pip}}
    return {**constrained, "properties": {**constrained["properties"], "dependencies": deps}}


def check_installed(ctx: NodeContext, answer: dict) -> None:
    """Refuse a ``dependencies.pip`` name the sandbox probe did not find (the schema's enum does it
    for a grammar-constrained backend; see :func:`plan_schema`). Nothing to check without a probe."""
    if not ctx.cfg.agent.constrain_answers:
        return
    installed = probed_packages(ctx.environment)
    pip = ((answer.get("dependencies") or {}).get("pip") or []) if isinstance(answer, dict) else []
    if installed is None or not isinstance(pip, list):
        return
    known = {_norm(n) for n in installed}
    missing = [str(n) for n in pip if _norm(str(n)) not in known]
    if missing:
        where = "under 'new' with a reason" if ctx.cfg.exec.network else "nowhere: the sandbox has no network"
        raise ValueError(
            f"dependencies.pip: {', '.join(missing)} not installed in the sandbox; list only the "
            f"installed packages named under Environment (a new package goes {where})"
        )


def _check_plan(ctx: NodeContext, answer: Any) -> None:
    validate_plan(answer)
    check_installed(ctx, answer)


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _plan(ctx: NodeContext, merged_answer: CodeAnswer | None = None) -> Plan:
    if merged_answer is not None:
        ctx.run.event("plan_merged", node_id=ctx.node.id, operation=ctx.node.operation)
        return plan_from_answer(merged_answer).with_source("merged")
    parent = ctx.parent_plan if _reuses_parent_plan(ctx) else None
    if parent is not None:
        ctx.run.event(
            "plan_reused", node_id=ctx.node.id, parent_id=ctx.node.parent_id, operation=ctx.node.operation
        )
        return parent.with_source("parent")
    try:
        result = ctx.ask(
            "phase0_plan",
            _stage_inputs(ctx),
            phase="phase0",
            label="plan",
            schema=plan_schema(ctx, PLAN_SCHEMA),
            validator=lambda a: _check_plan(ctx, a),
        )
    except LLMError as exc:
        raise PhaseFailed("phase0", f"no valid plan: {exc}") from exc
    try:
        return Plan.from_json(result.parsed).with_source("own")
    except ValueError as exc:  # the client checked the schema: only a backend ignoring it gets here
        raise PhaseFailed("phase0", f"the plan is malformed: {exc}") from exc

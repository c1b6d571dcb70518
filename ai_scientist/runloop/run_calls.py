"""The stage loop's own LLM calls (run-level, not a node's): the tune/research/ablate idea proposal and the
tie-break between equally good nodes. Each asks through ``services.ask_run`` (one prompt log under
the run's ``run_calls``) and returns the answer; the stage loop decides what to do with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..llm.call import LLMError
from ..treesearch.policies import dedupe_ideas

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..base.run import Run
    from ..treesearch.journal import JournalView
    from ..treesearch.node import Node
    from ..treesearch.policies.base import Action
    from ..treesearch.stages import StageState
    from .services import Services


@dataclass(frozen=True)
class Proposal:
    """An idea proposal's answer: ``offered`` as the model gave them, ``fresh`` those not tried
    nor planned yet (in order), ``tried``: how many ideas the stage had tried."""

    offered: list[str]
    fresh: list[str]
    tried: int


def propose_ideas(
    run: Run,
    services: Services,
    journal: JournalView,
    state: StageState,
    action: Action,
    notes: dict[str, Any],
) -> Proposal:
    """Ask for untried ideas growing ``action.parent_id``, on ``journal`` (the view the decision
    saw): tunings (stage 2), research experiments (a stage-3 improve) or ablations (stage 4);
    ``notes``: the user's notes for the node to create. A failed call is an ``ideas_failed`` event
    and no idea."""
    from ..phases.schemas import ideas_schema
    from ..treesearch.stages import ideas_tried
    from .stage_inputs import proposal_inputs

    tried = ideas_tried(journal, state.stage, finished_only=False)
    kind = proposal_kind(action.operation)
    # the node to grow (all its metrics, its code's parameters), what the stage tried, its budget
    if action.parent_id is None:  # tune, research and ablate ideas apply to an existing node
        raise ValueError(f"a {kind} proposal needs the node to grow; the action names none")
    values = proposal_inputs(run, journal, state, journal.get(action.parent_id), kind)
    values.update(notes)
    try:
        res = services.ask_run(
            "propose_idea",
            values,
            phase="ideas",
            label=kind,
            role="select_node",
            # as many ideas as the text allows (the nodes the stage may still create beyond the
            # planned ones, at least one): a schema allowing 8 contradicted "propose at most 1"
            schema=ideas_schema(values["iterations_left"] - values["planned_left"]),
            stage=state.stage,
        )
        offered = [str(i)[:300] for i in res.parsed.get("ideas", [])]
        fresh = dedupe_ideas(offered, [*tried, *state.ideas])
    except LLMError as exc:
        run.event("ideas_failed", stage=state.stage, kind=kind, reason=str(exc)[:500])
        offered, fresh = [], []
    return Proposal(offered=offered, fresh=fresh, tried=len(tried))


def proposal_kind(operation: str) -> str:
    """What an idea proposal for a node doing ``operation`` asks for: tune, ablate, or research (a
    stage-3 improve: an experiment the research idea asks for, or a hypothesis the results raise)."""
    return "research" if operation == "improve" else operation


def tie_break(services: Services, candidates: Sequence[Node]) -> tuple[str, str]:
    """The selection role's pick among equally good ``candidates``: (node id, its reasoning)."""
    from ..phases.schemas import TIEBREAK_SCHEMA

    listing = "\n".join(
        f"- {n.id}: metric={n.metric.to_dict() if n.metric else None}; {n.summary}" for n in candidates
    )
    res = services.ask_run(
        "select_tiebreak",
        {"candidates": listing},
        phase="select",
        label="tiebreak",
        role="select_node",
        schema=TIEBREAK_SCHEMA,
        stage=candidates[0].stage,
    )
    ids = {n.id for n in candidates}
    chosen = res.parsed.get("node_id")
    if chosen not in ids:
        raise ValueError(f"tie-break chose {chosen!r}, not one of {sorted(ids)}")
    return chosen, str(res.parsed.get("reasoning", ""))

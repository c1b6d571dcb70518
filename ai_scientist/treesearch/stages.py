"""The four search stages, their completion criteria and hard caps.

1 initial implementation (draft / debug / improve), 2 baseline tuning (tune /
debug), 3 creative research (improve / debug), 4 ablations (ablate / debug).

One *iteration* is one search node created in the stage (seed re-runs excluded).
``agent.stages.stageN_max_iters`` is always enforced: once that many nodes exist
the stage accepts no more, whatever the policy would like. A stage finishes
when it accepts no more nodes and none is in flight. Criteria (evidence in the
outcome's ``reason``):

- stage 1: a good node exists and at least ``num_drafts`` drafts were created,
  or the cap; at the cap without a good node the outcome is "no working
  experiment" (the run ends with exit 3);
- stage 2: ``StageRules.stage2_good_nodes`` good nodes in the stage, or the
  orchestrator reported that no untried idea is left (``ideas_exhausted``), or the cap;
- stage 3: ``StageRules.stage3_patience`` finished nodes in a row that do not
  beat the best so far (the carried node counts), or the cap;
- stage 4: every planned ablation idea has a finished node, or the orchestrator
  reported that the LLM has no untried idea left (``ideas_exhausted``), or the cap.

Stages 2-4 start from the node the previous stage hands over (``carried_id``):
the policy's ``stage_best`` of the previous stage, which includes that stage's
own carried node, so a stage that made things worse hands over the better one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .best import TIE_ABS_TOL, TIE_REL_TOL, comparable_metric, primary_metric_key
from .journal import JournalView
from .node import Node

if TYPE_CHECKING:
    from ..base.config import Config


@dataclass(frozen=True)
class Stage:
    number: int
    name: str
    title: str
    operations: tuple[str, ...]
    expand_op: str  # what growing a good node means in this stage


STAGES: dict[int, Stage] = {
    1: Stage(1, "initial_implementation", "Initial implementation", ("draft", "debug", "improve"), "improve"),
    2: Stage(2, "baseline_tuning", "Baseline tuning", ("tune", "debug"), "tune"),
    3: Stage(3, "creative_research", "Creative research", ("improve", "debug"), "improve"),
    4: Stage(4, "ablations", "Ablation studies", ("ablate", "debug"), "ablate"),
}


@dataclass(frozen=True)
class StageRules:
    """Completion thresholds that have no config key yet (see docs/search.md)."""

    stage2_good_nodes: int = 2
    stage3_patience: int = 3


@dataclass(frozen=True)
class StageState:
    """What a stage needs besides the journal; the orchestrator keeps it in ``state.json``.

    ``carried_id``: node the stage starts from (stages 2-4). ``ideas``: planned
    hyper-parameter / research / ablation ideas, if the orchestrator asked for a list
    (policies then hand them out in order). ``ideas_exhausted``: the LLM offered
    no untried idea (ends stages 2 and 4). ``protocol``: the stage's evaluation protocol once its
    first working node fixed it (``runloop.protocol.EvalProtocol.to_dict()``; None before).
    """

    stage: int
    carried_id: str | None = None
    ideas: tuple[str, ...] = ()
    ideas_exhausted: bool = False
    protocol: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"stage must be 1, 2, 3 or 4, got {self.stage!r}")
        if self.stage == 1 and self.carried_id is not None:
            raise ValueError("stage 1 starts from scratch: carried_id must be None")
        object.__setattr__(self, "ideas", tuple(self.ideas))

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "carried_id": self.carried_id,
            "ideas": list(self.ideas),
            "ideas_exhausted": self.ideas_exhausted,
            "protocol": self.protocol,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageState:
        return cls(
            stage=data["stage"],
            carried_id=data.get("carried_id"),
            ideas=tuple(data.get("ideas") or ()),
            ideas_exhausted=bool(data.get("ideas_exhausted", False)),
            protocol=data.get("protocol"),
        )

    def with_protocol(self, protocol: dict[str, Any]) -> StageState:
        """This state with its evaluation protocol fixed."""
        return replace(self, protocol=protocol)

    def with_ideas(self, fresh: Sequence[str]) -> StageState:
        """This state with ``fresh`` ideas planned after the others; none fresh means exhausted in
        stages 2 and 4 (their end). Stage 3 ends on patience: a proposal with nothing new leaves
        its node to choose its own direction, and the next node asks again."""
        exhausted = not fresh if self.stage in (2, 4) else self.ideas_exhausted
        return replace(self, ideas=(*self.ideas, *fresh), ideas_exhausted=exhausted)


@dataclass(frozen=True)
class StageOutcome:
    """Where a stage stands. Unpacks as ``(done, reason)``.

    ``accepting``: the orchestrator may create another node in this stage.
    ``done``: not accepting and nothing in flight, so the next stage may start.
    ``working``: a good node exists in the stage (or was carried into it).
    """

    done: bool
    reason: str
    accepting: bool
    iterations: int
    cap: int
    in_flight: int
    working: bool
    evidence: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.done, self.reason))

    @property
    def no_working_experiment(self) -> bool:
        """Stage 1 ended without any good node: the run ends with exit code 3."""
        return self.done and not self.working

    def to_dict(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "reason": self.reason,
            "accepting": self.accepting,
            "iterations": self.iterations,
            "cap": self.cap,
            "in_flight": self.in_flight,
            "working": self.working,
            "evidence": self.evidence,
        }


def max_iters(cfg: Config, stage: int) -> int:
    """``agent.stages.stage{N}_max_iters``."""
    return int(getattr(cfg.agent.stages, f"stage{stage}_max_iters"))


def iterations(view: JournalView, stage: int) -> int:
    """Search nodes created in the stage (pending ones included, seed re-runs excluded)."""
    return view.count("search", stage)


def stage_outcome(
    view: JournalView, stage: int | StageState, cfg: Config, rules: StageRules | None = None
) -> StageOutcome:
    """Evaluate the stage's criteria and cap; see the module docstring."""
    state = stage if isinstance(stage, StageState) else StageState(stage)
    rules = rules or StageRules()
    number = state.stage
    cap = max_iters(cfg, number)
    created = iterations(view, number)
    in_flight = view.count("flight", number)
    carried = view.get(state.carried_id) if state.carried_id else None
    working = view.count("good", number) > 0 or bool(carried and carried.is_good)
    if number > 1 and carried is None:
        met, why = True, f"stage {number} has no node to start from (previous stage handed over none)"
    else:
        met, why = _criteria(view, state, cfg, rules, carried)
    if met:
        reason = why
    elif created >= cap:
        reason = f"cap reached: {created} of stage{number}_max_iters={cap} nodes created"
    else:
        reason = f"continuing: {created} of {cap} nodes created; {why}"
    accepting = not met and created < cap
    done = not accepting and in_flight == 0
    if not accepting and in_flight:
        reason += f"; waiting for {in_flight} node(s) in flight"
    if number == 1 and done and not working:
        reason = f"no working experiment: {reason}"
    return StageOutcome(
        done=done,
        reason=reason,
        accepting=accepting,
        iterations=created,
        cap=cap,
        in_flight=in_flight,
        working=working,
        evidence={
            "stage": number,
            "iterations": created,
            "cap": cap,
            "in_flight": in_flight,
            "criteria_met": met,
        },
    )


def _criteria(
    view: JournalView, state: StageState, cfg: Config, rules: StageRules, carried: Node | None
) -> tuple[bool, str]:
    number = state.stage
    if number == 1:
        drafts = view.count("draft", 1)
        need = cfg.agent.search.num_drafts
        good = view.count("good", 1)
        met = good > 0 and drafts >= need
        return met, f"{good} good node(s), {drafts} of num_drafts={need} drafts created"
    if number == 2:
        good = view.count("good", 2)
        k = rules.stage2_good_nodes
        if state.ideas_exhausted:
            return True, f"no untried hyper-parameter idea left ({good} of {k} good tuning node(s))"
        return good >= k, f"{good} of {k} good tuning node(s)"
    if number == 3:
        streak = no_improvement_streak(view, 3, carried)
        p = rules.stage3_patience
        return streak >= p, f"{streak} finished node(s) in a row without improvement (patience {p})"
    tried = ideas_tried(view, 4)
    if state.ideas_exhausted:
        return True, f"no untried ablation idea left after {len(tried)} tried"
    if state.ideas:
        taken = {_norm(t) for t in tried}
        left = [i for i in state.ideas if _norm(i) not in taken]
        return not left, f"{len(state.ideas) - len(left)} of {len(state.ideas)} planned ablations tried"
    return False, f"{len(tried)} ablation idea(s) tried"


def ideas_tried(view: JournalView, stage: int, finished_only: bool = True) -> list[str]:
    """Ideas of the stage's tune / ablate / stage-3 improve nodes (finished ones unless told
    otherwise)."""
    get = view.get
    return [get(i).idea for i in view.ids("idea_finished" if finished_only else "idea", stage)]  # type: ignore[misc]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def no_improvement_streak(view: JournalView, stage: int, carried: Node | None = None) -> int:
    """Finished nodes since the last one that beat the running best (``carried`` is the start).

    Walks the stage's finished nodes in creation order. The walk is kept on the
    journal and resumed from where the previous call stopped while the nodes it
    covered are unchanged and the primary metric key is the same, so a call costs
    O(new nodes); otherwise it starts over.
    """
    carried_id = carried.id if carried is not None and carried.id in view else None
    if carried is not None and carried_id is None:  # not in this journal: the index cannot count it
        key = primary_metric_key(view.good_nodes(stage) + ([carried] if carried.is_good else []))
    else:
        key = view.primary_metric_key(stage, carried_id)
    finished = view.ids("finished", stage)
    start = (
        carried_id,
        carried.status if carried else None,
        carried.metric if carried else None,
        key,
        view.refinished,
    )

    def walk(prev: tuple | None) -> tuple:
        done, best, streak = 0, (comparable_metric(carried, key) if carried else None), 0
        if prev is not None and prev[0] == start and len(prev[1]) <= len(finished):
            if finished[: len(prev[1])] == prev[1]:
                done, best, streak = len(prev[1]), prev[2], prev[3]
        get = view.get
        for i in finished[done:]:
            n = get(i)
            m = comparable_metric(n, key) if n.is_good else None
            if m is not None and (best is None or m.better_than(best, TIE_REL_TOL, TIE_ABS_TOL)):
                best, streak = m, 0
            else:
                streak += 1
        return start, finished, best, streak

    return view.derived(("no_improvement_streak", stage), walk)[3]


def handover(state: StageState, best_id: str | None) -> StageState | None:
    """The state of the stage after ``state`` when it hands on ``best_id`` (None after stage 4 or
    when it hands on no node)."""
    if state.stage == 4 or best_id is None:
        return None
    return StageState(state.stage + 1, carried_id=best_id)

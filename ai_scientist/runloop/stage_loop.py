"""The stage loop: stages one after another, and in each the decisions (stop the stage, create one
more node) on the journal as it stands; the nodes run under :mod:`.workers`.

The loop is the only owner of the current :class:`StageState` (:attr:`StageLoop.state`): every
change goes through :meth:`StageLoop._save`, which keeps it and writes it to ``state.json``; the
file is read back only when a run is resumed (:func:`.recovery.saved_stage_state`). Each decision
evaluates the stage outcome once, on the state and journal it decides on, and every node is picked
by one function, :meth:`StageLoop._pick`, under either scheduler.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..base import failpoints
from ..base.errors import EXIT_NO_WORKING_EXPERIMENT
from ..treesearch.policies import decision_rng, make_policy, next_planned_idea
from ..treesearch.stages import STAGES, StageOutcome, StageRules, StageState, stage_outcome
from .early_seeds import EarlySeeds, create_early_seeds, recorded_early_seeds, void_cut_off
from .recovery import leftover_nodes, saved_stage_state
from .run_calls import proposal_kind, propose_ideas
from .scheduler import recorded_waiting
from .seed_runs import SeedRuns
from .stage_end import StageEnd
from .stage_protocol import ProtocolStep
from .steering import GateStop, steer_action

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal, JournalView
    from ..treesearch.node import Node
    from ..treesearch.policies.base import Action
    from .progress import ProgressLine
    from .scheduler import WorkerPool
    from .services import Services
    from .steering import Steering
    from .workers import NodeContexts, Workers


class StageLoop:
    """The search of one run, stage by stage (see the module docstring)."""

    def __init__(
        self,
        run: Run,
        services: Services,
        journal: Journal,
        steering: Steering,
        workers: Workers,
        contexts: NodeContexts,
        progress: ProgressLine,
    ):
        self.run_ = run
        self.cfg = cfg = run.cfg
        self.services = services
        self.journal = journal
        self.steering = steering
        self.workers = workers
        self.contexts = contexts
        self.progress = progress
        self.policy = make_policy(cfg)
        st = cfg.agent.stages
        self.rules = StageRules(stage2_good_nodes=st.stage2_good_nodes, stage3_patience=st.stage3_patience)
        self.scheduler = cfg.agent.scheduler
        self.state: StageState | None = None
        replay_dir = cfg.llm.replay_dir if cfg.llm.backend == "replay" else None
        # a replay fixes each stage's evaluation protocol on the node the recording fixed it on
        recorded: dict[int, str] = {}
        if replay_dir:
            from .protocol import recorded_protocols

            recorded = recorded_protocols(replay_dir)
        self.protocol_step = ProtocolStep(run, journal, self._save, recorded)
        # a replay of a free-running recording follows its recorded order (None: not a replay of one)
        self.replay_order: dict[str, frozenset[str]] | None = None
        self.replay_early: dict[str, EarlySeeds] = {}  # a replay's early seed re-runs, by first id
        if replay_dir and self.scheduler == "free":
            self.replay_order = recorded_waiting(replay_dir)
            if self.replay_order is None:  # recorded by the batch scheduler (or older code): same order
                self.scheduler = "batch"
            else:  # seed re-runs started before their stage's last node was in: at the same ids
                self.replay_early = recorded_early_seeds(replay_dir)
                self.replay_order.update({i: d.waiting for i, d in self.replay_early.items()})
        seeds = SeedRuns(run, journal, lambda nodes: workers.run_all(nodes, free=self.scheduler == "free"))
        self.stage_end = StageEnd(
            run, services, journal, self.policy, self.protocol_step, seeds, lambda s: self.show(s, force=True)
        )

    # ------------------------------------------------------------ stages --
    def run(self) -> int | None:
        """Run (or resume) the search to its end; returns EXIT_NO_WORKING_EXPERIMENT when stage 1
        found none (the run ends there), None when the search is done."""
        void_cut_off(self.run_, self.journal)  # early seed decisions a kill -9 cut off (.early_seeds)
        state = self.state = saved_stage_state(self.run_)
        if state is not None:  # a resumed run shows its saved state at once, not after a node
            self.show(state.stage, force=True)
        while state is not None:
            if state.stage > 1:  # the previous stage's best is chosen: the transition may need approval
                self.gate("stage_end", f"stage_end:{state.stage - 1}")
            self.run_.event(
                "stage_started", stage=state.stage, name=STAGES[state.stage].name, carried_id=state.carried_id
            )
            outcome, state = self._run_stage(state)
            self.run_.event("stage_completed", stage=state.stage, **outcome.to_dict())
            if state.stage == 1 and outcome.no_working_experiment:
                self.state = None
                self.run_.save_state(stage_state=None, search_done=True, result_reason=outcome.reason)
                self.run_.event("run_result", result="no working experiment", reason=outcome.reason)
                self.services.write_view()
                return EXIT_NO_WORKING_EXPERIMENT
            state = self.state = self.stage_end.finish(state)
        self.run_.save_state(stage_state=None, search_done=True)
        return None

    def show(self, stage: int, force: bool = False) -> None:
        """Refresh the progress line with ``stage``'s counts."""
        self.progress.update(stage, self.state.carried_id if self.state is not None else None, force)

    def _save(self, state: StageState) -> None:
        """The one place the current stage state changes: kept here and in ``state.json``."""
        self.state = state
        self.run_.save_state(stage_state=state.to_dict(), current_stage=state.stage)

    def _outcome(self, state: StageState, view: JournalView | None = None) -> StageOutcome:
        return stage_outcome(self.journal if view is None else view, state, self.cfg, self.rules)

    def _leftover(self, stage: int) -> list[Node]:
        return leftover_nodes(self.run_, self.services, self.journal, stage, self.workers.memory_step)

    # ------------------------------------------------------------- stage --
    def _run_stage(self, state: StageState) -> tuple[StageOutcome, StageState]:
        """Run the stage until its outcome is done (or nothing can be created); returns the
        final outcome and the stage state as the stage left it (with its planned ideas)."""
        self._save(state)
        if self.scheduler == "free":
            return self._run_stage_free(state)
        leftover = self._leftover(state.stage)
        if leftover:
            self.workers.run_batch(leftover)
        while True:
            self._steer_point(None)
            state, _ = self.protocol_step(state, self.journal.snapshot())
            outcome = self._outcome(state)
            self.show(state.stage, force=outcome.done)
            if outcome.done:
                return outcome, state
            batch, planned = self._plan_batch(state, outcome)
            if not batch:
                if planned != state:  # an idea proposal changed the state: judge the stage on it
                    state, outcome = planned, self._outcome(planned)
                if not outcome.done:  # nothing to create and nothing in flight: stop the stage
                    self.run_.event("stage_stalled", stage=state.stage, reason=outcome.reason)
                return outcome, state
            state = planned
            self.workers.run_batch(batch)

    def _run_stage_free(self, state: StageState) -> tuple[StageOutcome, StageState]:
        """The free-running stage loop: a node is picked whenever a worker is free and the
        stage accepts one (see :mod:`.scheduler`)."""
        workers = self.workers
        pool = workers.pool()
        for node in self._leftover(state.stage):
            pool.add(node, None)
        try:
            while True:
                self._steer_point(pool)
                workers.replay_prepare(pool, self.replay_order)
                view = workers.settled_view(pool)
                state, marked = self.protocol_step(state, view)
                if marked:  # the view lists them as good: decide on a new one
                    continue
                outcome = self._outcome(state, view)
                self.show(state.stage, force=outcome.done)
                if outcome.done and pool.idle:
                    workers.memory_step()
                    return outcome, state
                can_pick = self.replay_order is not None or pool.free_slots > 0
                if can_pick and outcome.accepting and not state.ideas_exhausted:
                    state, picked = self._pick(
                        view, state, waiting=sorted([*pool.running_ids, *pool.queued_ids])
                    )
                    if picked is not None:
                        # inputs frozen on the decision's view (stage inputs are also stored with the node)
                        workers.add(pool, picked, self.contexts.inputs(picked, state, view))
                        if self.replay_order is None:
                            pool.start_queued()
                        continue
                    if state.ideas_exhausted:  # the proposal offered nothing new: judge the stage again
                        continue
                if not pool.idle and (not outcome.accepting or state.ideas_exhausted):
                    if self._early_seeds(view, state, pool):  # a free worker re-runs the provisional best
                        continue
                if pool.idle:  # nothing to create and nothing in flight: stop the stage
                    workers.memory_step()
                    outcome = self._outcome(state)
                    if not outcome.done:
                        self.run_.event("stage_stalled", stage=state.stage, reason=outcome.reason)
                    return outcome, state
                workers.step(pool)
        except Exception:  # let running workers end (Ctrl-C does not wait: a resume re-runs them)
            workers.drain(pool)
            raise

    def _early_seeds(self, view: JournalView, state: StageState, pool: WorkerPool) -> bool:
        """The stage accepts no more nodes and some still run: start seed re-runs of its
        provisional best on the free workers (:mod:`.early_seeds`); a replay starts those the
        recording started at this node id. True when it started any."""
        recorded = None
        if self.replay_order is not None:
            recorded = self.replay_early.get(self.journal.next_node_id())
            if recorded is None:
                return False
        nodes = create_early_seeds(
            self.run_,
            self.journal,
            self.policy,
            view,
            state,
            [*pool.running_ids, *pool.queued_ids],
            pool.free_slots,
            recorded,
        )
        for node in nodes:
            pool.add(node, None)
        if nodes and self.replay_order is None:
            pool.start_queued()
        return bool(nodes)

    def _plan_batch(self, state: StageState, outcome: StageOutcome) -> tuple[list[Node], StageState]:
        """Create up to ``agent.num_workers`` nodes, each picked on the journal the previous
        picks left; ``outcome`` is the stage's outcome on ``state`` before the first pick.
        Returns the nodes and the stage state after the picks."""
        batch: list[Node] = []
        for slot in range(self.cfg.agent.num_workers):
            if slot:  # the previous pick created a node: the stage may have reached its cap
                outcome = self._outcome(state)
            if not outcome.accepting or state.ideas_exhausted:
                break
            state, node = self._pick(self.journal.snapshot(), state, waiting=None)
            if node is None:
                break
            batch.append(node)
        return batch, state

    # -------------------------------------------------------------- pick --
    def _pick(
        self, view: JournalView, state: StageState, waiting: list[str] | None
    ) -> tuple[StageState, Node | None]:
        """Pick one node on ``view`` and create it; returns the stage state after the pick (an idea
        proposal plans ideas) and the node (None: every candidate is blocked by steering, or the
        proposal offered nothing new). ``waiting``: the nodes in flight (free scheduler)."""
        next_id = self.journal.next_node_id()
        action = self._decide(view, state, next_id)
        if action is None:  # every candidate is blocked by steering
            return state, None
        idea = action.idea
        if action.operation in ("tune", "ablate") and idea is None:
            state, idea = self._propose_idea(state, action, view)
            if idea is None:
                return state, None
        elif action.operation == "improve" and state.stage == 3 and idea is None:
            # a research idea: the next planned one, else a proposal; nothing new (or a failed
            # call) leaves the node's direction to it (its brief says so), the stage goes on
            idea = next_planned_idea(view, state)
            if idea is None:
                state, idea = self._propose_idea(state, action, view)
        return state, self._create_node(state, action, idea, waiting)

    def _decide(self, view: JournalView, state: StageState, next_id: str) -> Action | None:
        """The policy's action for ``next_id``, after steering (block / expand next)."""
        action = self.policy.next_action(view, state, decision_rng(self.cfg.agent.seed, next_id))
        steered, used = steer_action(
            view, state, action, self.steering.state, self.cfg.agent.search.max_debug_depth
        )
        if used is not None:
            self.steering.used(used, next_id)
        return steered

    def _propose_idea(
        self, state: StageState, action: Action, view: JournalView
    ) -> tuple[StageState, str | None]:
        """Ask the LLM for untried tune/research/ablate ideas, on ``view``. Returns the stage state
        with them planned (saved) and the idea for this node (None if none is new)."""
        proposal = propose_ideas(
            self.run_, self.services, view, state, action, self.contexts.notes(self.journal.next_node_id())
        )
        fresh = proposal.fresh
        new_state = state.with_ideas(fresh)
        self._save(new_state)
        self.run_.event(
            "ideas_planned",
            stage=state.stage,
            kind=proposal_kind(action.operation),
            new=fresh,
            rejected=[
                i for i in proposal.offered if i.strip() not in fresh
            ],  # repeats of tried / planned ideas
            tried_count=proposal.tried,
            exhausted=new_state.ideas_exhausted,
        )
        return new_state, (fresh[0] if fresh else None)

    def _create_node(
        self, state: StageState, action: Action, idea: str | None, waiting: list[str] | None
    ) -> Node:
        """Record the decision (``node_selected``), then create the picked node in the journal;
        the free scheduler adds ``waiting`` (the nodes in flight), which replay follows; batch
        recordings have none and replay in batch order.

        The decision is durable first: a kill -9 between the two leaves a decision whose node
        does not exist (the resumed run decides on that id again, and the last decision for an
        id is the one replay follows), never a node whose decision, and its ``waiting``, is lost."""
        node_id = self.journal.next_node_id()  # only this thread creates nodes
        extra = {} if waiting is None else {"waiting": waiting}
        self.run_.event(
            "node_selected",
            node_id=node_id,
            stage=state.stage,
            policy=self.policy.name,
            **{**action.to_dict(), "idea": idea},
            **extra,
        )
        failpoints.hit(f"selected:{node_id}")
        node = self.journal.new_node(
            stage=state.stage,
            operation=action.operation,
            parent_id=action.parent_id,
            tree=action.tree,
            idea=idea,
        )
        if node.id != node_id:  # another writer created a node meanwhile: the record would lie
            raise RuntimeError(f"node_selected recorded {node_id} but the journal created {node.id}")
        self.workers.memory_step(node)
        return node

    # ---------------------------------------------------------- steering --
    def gate(self, kind: str, gate: str) -> None:
        """Stop at ``gate`` (exit code steering.EXIT_GATE, state saved) unless ``agent.gates``
        does not name ``kind`` or a ``steer approve`` passed it."""
        if kind not in self.cfg.agent.gates:
            return
        self.steering.poll(self.journal.next_node_id())
        if gate not in self.steering.state.approved:
            self.run_.save_state(awaiting_gate=gate)
            self.run_.event("gate_reached", gate=gate)
            raise GateStop(gate)
        if self.run_.state.get("awaiting_gate") or not any(
            e.get("type") == "gate_passed" and e.get("gate") == gate for e in self.run_.events()
        ):
            self.run_.save_state(awaiting_gate=None)
            self.run_.event("gate_passed", gate=gate)

    def _steer_point(self, pool: WorkerPool | None) -> None:
        """A safe point (before a decision): apply pending steering; while paused, let the nodes
        in flight finish and wait for a resume, reading the steering directory twice a second."""
        for ev in self.steering.poll(self.journal.next_node_id()):
            what = ev.get("node") or ev.get("gate") or ev.get("note") or (ev.get("text") or "")[:60]
            self._say(f"steering: {ev['action']} {what}".rstrip())
        if not self.steering.waits:
            return
        waited = self.workers.finish_running(pool) if pool is not None else []
        self.run_.event("run_paused", waited_for=waited)  # nothing runs from here until a resume
        self._say(f"paused: no node runs until `ai-scientist steer {self.run_.dir} resume`")
        while self.steering.waits:
            time.sleep(0.5)
            self.steering.poll(self.journal.next_node_id())
        self.run_.event("run_unpaused")
        self._say("resumed")

    def _say(self, msg: str) -> None:
        if self.services.progress is not None:
            self.services.progress.event(msg)

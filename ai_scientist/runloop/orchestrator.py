"""The search loop: stages, nodes on parallel workers, seed re-runs, reporting.

Scheduling (``agent.scheduler``) is free-running by default: up to
``agent.num_workers`` nodes run on worker threads, and as soon as one finishes the
main thread picks the next node on the journal as it stands (a consistent snapshot
in which every finished node has also been collected). Only the main thread creates
nodes, so a stage's cap counts nodes in flight and is never overshot; a stage ends
when it accepts no more nodes and none of its nodes is in flight. Each
``node_selected`` event records ``waiting``, the nodes not finished in the snapshot
the decision saw, and a replay starts a node only when a later decision needs it
finished (:mod:`.scheduler`), so it makes every decision on the same journal state.
``agent.scheduler: batch`` is the older batch-synchronous loop: the policy picks up
to ``agent.num_workers`` actions from the same journal state, the batch runs, and
the next batch starts when all of it is done. Either way every decision depends
only on the journal and the LLM's answers, which is what makes ``resume`` and
``replay`` reproduce the same tree.

Nothing here holds state that the journal and ``state.json`` do not: a resumed
run rebuilds everything from them. The current :class:`StageState` has one owner, the
stage loop: it is passed down and returned by each step that changes it (an idea
proposal plans ideas), saved to ``state.json`` on every change and read back only when
a run is resumed. Each decision (stop the stage, create one more node) evaluates the
stage outcome once, on the state and journal it decides on.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import failpoints
from ..base.errors import EXIT_NO_WORKING_EXPERIMENT, EXIT_OK
from ..phases.base import NodeContext
from ..phases.node_memory import open_branch, record_outcome
from ..treesearch.journal import Journal, JournalView
from ..treesearch.node import Node
from ..treesearch.policies import decision_rng, make_policy, next_stage_state
from ..treesearch.stages import (
    STAGES,
    StageOutcome,
    StageRules,
    StageState,
    handover,
    stage_outcome,
)
from .node_context import NodeContexts
from .progress import ProgressLine
from .recovery import leftover_nodes, missing_outcomes, saved_stage_state, write_missing_states
from .run_calls import propose_ideas, tie_break
from .scheduler import WorkerPool, recorded_waiting
from .seed_runs import SeedRuns
from .services import Services, build_services  # noqa: F401  (re-exported for commands)
from .steering import GateStop, Steering, steer_action

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..base.run import Run
    from ..treesearch.policies.base import Action


class Orchestrator:
    """Runs (or resumes) the whole search of one run; see the module docstring."""

    def __init__(self, run: Run, services: Services):
        self.run_ = run
        self.cfg = run.cfg
        self.services = services
        self.journal = Journal(run.journal_path)
        if self.journal.recovered:
            run.event(
                "journal_repaired",
                line=self.journal.recovered.line,
                bytes_dropped=self.journal.recovered.bytes_dropped,
            )
        self.policy = make_policy(self.cfg)
        st = self.cfg.agent.stages
        self.rules = StageRules(stage2_good_nodes=st.stage2_good_nodes, stage3_patience=st.stage3_patience)
        self.scheduler = self.cfg.agent.scheduler
        # finished nodes whose memory outcome events are not written yet (see _memory_step); a
        # resumed run starts with those a kill -9 left unwritten
        self._unrecorded: list[str] = missing_outcomes(services, self.journal)
        self._contexts: dict[str, NodeContext] = {}  # the free scheduler's nodes, until recorded
        # working nodes already checked against their stage's evaluation protocol (a resumed run
        # checks them again: the check is a pure function of recorded files, see _protocol_step)
        self._protocol_checked: set[str] = set()
        # a replay of a free-running recording follows its recorded order (None: not a replay of one)
        self.replay_order: dict[str, frozenset[str]] | None = None
        # a replay fixes each stage's evaluation protocol on the node the recording fixed it on
        self.replay_protocols: dict[int, str] = {}
        if self.cfg.llm.backend == "replay" and self.cfg.llm.replay_dir:
            from .protocol import recorded_protocols

            self.replay_protocols = recorded_protocols(self.cfg.llm.replay_dir)
        if self.cfg.llm.backend == "replay" and self.cfg.llm.replay_dir and self.scheduler == "free":
            self.replay_order = recorded_waiting(self.cfg.llm.replay_dir)
            if self.replay_order is None:  # recorded by the batch scheduler (or older code): same order
                self.scheduler = "batch"
        # steering requests (runloop/steering.py); a replay applies the recording's steer events
        replay_src = self.cfg.llm.replay_dir if self.cfg.llm.backend == "replay" else None
        self.steering = Steering(run.dir, run.event, Path(replay_src) if replay_src else None)
        self.contexts = NodeContexts(run, services, self.journal, self.steering)
        self.progress = ProgressLine(self.journal, services)
        self.seeds = SeedRuns(run, self.journal, self._run_nodes)

    # ------------------------------------------------------------- main --
    def run(self) -> int:
        write_missing_states(self.run_, self.services, self.journal)
        state = saved_stage_state(self.run_)
        if state is not None:  # a resumed run shows its saved state at once, not after a node
            self._progress(state.stage, force=True)
        while state is not None:
            if state.stage > 1:  # the previous stage's best is chosen: the transition may need approval
                self._gate("stage_end", f"stage_end:{state.stage - 1}")
            self.run_.event(
                "stage_started", stage=state.stage, name=STAGES[state.stage].name, carried_id=state.carried_id
            )
            outcome, state = self._run_stage(state)
            self.run_.event("stage_completed", stage=state.stage, **outcome.to_dict())
            if state.stage == 1 and outcome.no_working_experiment:
                self.run_.save_state(stage_state=None, search_done=True, result_reason=outcome.reason)
                self.run_.event("run_result", result="no working experiment", reason=outcome.reason)
                self.services.write_view()
                return EXIT_NO_WORKING_EXPERIMENT
            state = self._finish_stage(state)
        self.run_.save_state(stage_state=None, search_done=True)
        if self.cfg.report.enabled:
            self._gate("reporting", "reporting")
        finish_reporting(self.run_, self.services)
        return EXIT_OK

    # --------------------------------------------------------- steering --
    def _gate(self, kind: str, gate: str) -> None:
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
        waited = pool.running_ids if pool is not None else []
        while pool is not None and pool.running_ids:
            self._collect(pool, pool.wait())
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

    def _decide(self, view: JournalView, state: StageState, next_id: str) -> Action | None:
        """The policy's action for ``next_id``, after steering (block / expand next)."""
        action = self.policy.next_action(view, state, decision_rng(self.cfg.agent.seed, next_id))
        steered, used = steer_action(
            view, state, action, self.steering.state, self.cfg.agent.search.max_debug_depth
        )
        if used is not None:
            self.steering.used(used, next_id)
        return steered

    def _save_stage_state(self, state: StageState) -> None:
        self.run_.save_state(stage_state=state.to_dict(), current_stage=state.stage)

    def _outcome(self, state: StageState, view: JournalView | None = None) -> StageOutcome:
        return stage_outcome(self.journal if view is None else view, state, self.cfg, self.rules)

    # ------------------------------------------------------------ stage --
    def _run_stage(self, state: StageState) -> tuple[StageOutcome, StageState]:
        """Run the stage until its outcome is done (or nothing can be created); returns the
        final outcome and the stage state as the stage left it (with its planned ideas)."""
        self._save_stage_state(state)
        if self.scheduler == "free":
            return self._run_stage_free(state)
        leftover = leftover_nodes(self.run_, self.services, self.journal, state.stage, self._memory_step)
        if leftover:
            self._run_batch(leftover)
        while True:
            self._steer_point(None)
            state, _ = self._protocol_step(state, self.journal.snapshot())
            outcome = self._outcome(state)
            self._progress(state.stage, force=outcome.done)
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
            self._run_batch(batch)

    def _run_stage_free(self, state: StageState) -> tuple[StageOutcome, StageState]:
        """The free-running stage loop: a node is picked whenever a worker is free and the
        stage accepts one; see the module docstring."""
        pool = self._pool()
        for node in leftover_nodes(self.run_, self.services, self.journal, state.stage, self._memory_step):
            pool.add(node, None)
        try:
            while True:
                self._steer_point(pool)
                self._replay_prepare(pool)
                view = self._settled_view(pool)
                state, marked = self._protocol_step(state, view)
                if marked:  # the view lists them as good: decide on a new one
                    continue
                outcome = self._outcome(state, view)
                self._progress(state.stage, force=outcome.done)
                if outcome.done and pool.idle:
                    self._memory_step()
                    return outcome, state
                can_pick = self.replay_order is not None or pool.free_slots > 0
                if can_pick and outcome.accepting and not state.ideas_exhausted:
                    state, picked, extras = self._select(view, state, pool)
                    if picked is not None:
                        ctx = self._context(picked, pool.next_slot(), extras)
                        self._contexts[picked.id] = ctx
                        pool.add(picked, ctx)
                        if self.replay_order is None:
                            pool.start_queued()
                        continue
                    if state.ideas_exhausted:  # the proposal offered nothing new: judge the stage again
                        continue
                if pool.idle:  # nothing to create and nothing in flight: stop the stage
                    self._memory_step()
                    outcome = self._outcome(state)
                    if not outcome.done:
                        self.run_.event("stage_stalled", stage=state.stage, reason=outcome.reason)
                    return outcome, state
                pool.start_queued()
                self._collect(pool, pool.wait())
        except Exception:  # let running workers end (Ctrl-C does not wait: a resume re-runs them)
            self._drain(pool)
            raise

    def _pool(self) -> WorkerPool:
        self._errors: list[BaseException] = []
        self._contexts = {}

        def prepare(node: Node, ctx: NodeContext | None, slot: int) -> NodeContext:
            # on the main thread: a resumed node or a seed re-run gets its context (and its
            # memory branch) when it starts; a selected node got it when it was selected
            if ctx is not None:
                return ctx
            ctx = self._context(node, slot)
            self._contexts[node.id] = ctx
            return ctx

        def target(node: Node, ctx: NodeContext, slot: int) -> None:
            self._worker(ctx, self._errors)

        return WorkerPool(self.cfg.agent.num_workers, prepare, target)

    def _collect(self, pool: WorkerPool, done: list[str]) -> None:
        """Bookkeeping of nodes whose worker ended, in the order they ended (main thread)."""
        for nid in done:
            node = self.journal.get(nid)
            self._unrecorded.append(nid)
            self.run_.event("node_finished", node_id=nid, stage=node.stage, status=node.status)
            self._progress(node.stage)
        if self._errors:  # cost cap, full disk, diverged replay: let the others end, then stop
            self._drain(pool)
            raise self._errors[0]

    def _memory_step(self, created: Node | None = None) -> None:
        """The main thread's memory writes at one decision, in one transaction: the outcome
        events of the nodes collected since the last step, in node order (a replay collects the
        same set between the same decisions, not in the same order), then, for a node just
        created, its branch and ``node_created`` event. Memory ids (shown in prompts) thus
        depend neither on timing nor on where a kill -9 struck: it leaves all of a step or none,
        and a resumed run writes the outcomes the kill lost at its first step, as the
        uninterrupted run would have (``_missing_outcomes``)."""
        ids, self._unrecorded = sorted(set(self._unrecorded)), []
        for nid in ids:
            self._contexts.pop(nid, None)
        store = self.services.memory_store
        if store is None:
            return
        with store.transaction():
            for nid in ids:
                record_outcome(store, self.journal.get(nid))
            if created is not None:
                open_branch(store, created, created.parent_id)

    def _drain(self, pool: WorkerPool) -> None:
        """Wait for every running worker (queued nodes stay pending for a resume)."""
        while pool.running_ids:
            pool.wait()

    def _settled_view(self, pool: WorkerPool) -> JournalView:
        """A journal snapshot in which every finished node has been collected: a node whose
        final record is written but whose worker has not ended yet is waited for."""
        while True:
            self._collect(pool, pool.wait(timeout=0))
            view = self.journal.snapshot()
            ending = [i for i in pool.running_ids if view.get(i).is_finished]
            if not ending:
                return view
            while any(i in pool.running_ids for i in ending):
                self._collect(pool, pool.wait())

    def _replay_prepare(self, pool: WorkerPool) -> None:
        """Replay: finish exactly the nodes the recorded next decision saw finished (all of the
        stage's nodes when the recording made no further decision here)."""
        if self.replay_order is None:
            return
        waiting = self.replay_order.get(self.journal.next_node_id())
        needed = [i for i in [*pool.running_ids, *pool.queued_ids] if waiting is None or i not in waiting]
        while any(i in pool.running_ids or i in pool.queued_ids for i in needed):
            pool.start_queued(only=needed)
            self._collect(pool, pool.wait())

    def _select(
        self, view: JournalView, state: StageState, pool: WorkerPool
    ) -> tuple[StageState, Node | None, dict[str, Any]]:
        """Pick one node on ``view`` and create it; returns the stage state after the pick, the
        node (None when an idea proposal offered nothing new) and its context inputs."""
        next_id = self.journal.next_node_id()
        action = self._decide(view, state, next_id)
        if action is None:  # every candidate is blocked by steering
            return state, None, {}
        idea = action.idea
        if action.operation in ("tune", "ablate") and idea is None:
            state, idea = self._propose_idea(state, action, view)
            if idea is None:
                return state, None, {}
        node = self._create_node(state, action, idea, waiting=sorted([*pool.running_ids, *pool.queued_ids]))
        # inputs frozen on the decision's view (stage inputs are also stored with the node)
        extras = self.contexts.inputs(node, self._saved_state(), view)
        return state, node, extras

    def _create_node(
        self, state: StageState, action: Action, idea: str | None, waiting: list[str] | None = None
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
        self._memory_step(node)
        return node

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
            next_id = self.journal.next_node_id()
            action = self._decide(self.journal.snapshot(), state, next_id)
            if action is None:  # every candidate is blocked by steering
                break
            idea = action.idea
            if action.operation in ("tune", "ablate") and idea is None:
                state, idea = self._propose_idea(state, action)
                if idea is None:
                    break
            node = self._create_node(state, action, idea)
            batch.append(node)
        return batch, state

    def _propose_idea(
        self, state: StageState, action: Action, view: JournalView | None = None
    ) -> tuple[StageState, str | None]:
        """Ask the LLM for untried tune/ablate ideas, on ``view`` (default: the journal now).
        Returns the stage state with them planned (saved to ``state.json``) and the idea for
        this node (None if none is new)."""
        proposal = propose_ideas(
            self.run_,
            self.services,
            self.journal if view is None else view,
            state,
            action,
            self.contexts.notes(self.journal.next_node_id()),
        )
        fresh, offered, kind = proposal.fresh, proposal.offered, action.operation
        new_state = state.with_ideas(fresh)
        self._save_stage_state(new_state)
        self.run_.event(
            "ideas_planned",
            stage=state.stage,
            kind=kind,
            new=fresh,
            rejected=[i for i in offered if i.strip() not in fresh],  # repeats of tried / planned ideas
            tried_count=proposal.tried,
            exhausted=not fresh,
        )
        return new_state, (fresh[0] if fresh else None)

    # ------------------------------------------------------------ batch --
    def _run_batch(self, nodes: list[Node]) -> None:
        """Run ``nodes`` in parallel. Memory branches and outcome events are written in node
        order from this thread (:meth:`_memory_step`), so memory ids (shown in prompts) do not
        depend on timing."""
        errors: list[BaseException] = []
        contexts = [self._context(node, slot) for slot, node in enumerate(nodes)]
        threads = [
            threading.Thread(
                target=self._worker, args=(ctx, errors), daemon=True, name=f"worker-{ctx.node.id}"
            )
            for ctx in contexts
        ]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.2)  # short joins keep Ctrl-C deliverable to the main thread
        for exc in errors:
            raise exc
        self._unrecorded += [ctx.node.id for ctx in contexts]
        self._memory_step()
        for ctx in contexts:
            self._progress(ctx.node.stage)

    def _worker(self, ctx: NodeContext, errors: list[BaseException]) -> None:
        self.contexts.work(ctx, errors)

    def _context(self, node: Node, slot: int, extras: dict[str, Any] | None = None) -> NodeContext:
        """The node's context; ``extras``: its prompt inputs computed when it was selected
        (None: computed now, from the journal as it stands)."""
        return self.contexts.build(node, slot, self._saved_state(), extras)

    def _saved_state(self) -> StageState | None:
        saved = self.run_.state.get("stage_state")
        return StageState.from_dict(saved) if saved else None

    # ------------------------------------------------------- protocol --
    def _protocol_step(self, state: StageState, view: JournalView) -> tuple[StageState, int]:
        """Fix the stage's evaluation protocol and mark the working nodes of ``view`` that changed
        it (:mod:`.protocol`); returns the stage state and how many nodes were marked (the caller
        then decides on a new view: the marked ones are no longer good).

        The protocol is fixed once, by the stage's first working node: the node the stage starts
        from (stages 2-4), else the earliest-created good node of the first view that has one (a
        replay: the node the recording fixed, :func:`.protocol.recorded_protocols`).
        Runs on the main thread at each decision, on the view the decision sees, so a replay (the
        same finished nodes at each decision) fixes and marks the same; it is saved in the stage
        state (``state.json``) and the ``eval_protocol`` event, each mark in the journal
        (``Node.incomparable``) and a ``node_incomparable`` event."""
        from .protocol import EvalProtocol, node_answer, protocol_change, protocol_of

        stage = state.stage
        if state.protocol is None:
            carried = view.get(state.carried_id) if state.carried_id and state.carried_id in view else None
            first = carried if carried is not None and carried.is_good else None
            recorded = self.replay_protocols.get(stage)
            if first is None and recorded is not None and recorded in view and view.get(recorded).is_good:
                first = view.get(recorded)
            first = first or next(iter(view.good_nodes(stage)), None)
            if first is None:
                return state, 0
            fixed = protocol_of(first, node_answer(self.run_.dir, first.id))
            state = state.with_protocol(fixed.to_dict())
            self._save_stage_state(state)
            self.run_.event("eval_protocol", stage=stage, **fixed.to_dict())
            self._protocol_checked.add(first.id)
        reference = EvalProtocol.from_dict(state.protocol)  # type: ignore[arg-type]
        marked = 0
        for node in view.good_nodes(stage):
            if node.id in self._protocol_checked:
                continue
            self._protocol_checked.add(node.id)
            reason = protocol_change(reference, protocol_of(node, node_answer(self.run_.dir, node.id)))
            if reason is not None:
                self.journal.update(node.id, incomparable=reason)
                self.run_.event(
                    "node_incomparable",
                    node_id=node.id,
                    stage=stage,
                    reason=reason,
                    protocol=reference.node_id,
                )
                marked += 1
        return state, marked

    # ------------------------------------------------------ stage end --
    def _finish_stage(self, state: StageState) -> StageState | None:
        state, _ = self._protocol_step(state, self.journal.snapshot())  # nodes that ended last
        tie_break = self._tie_break if self.cfg.agent.llm_tie_break else None
        _, first = next_stage_state(
            self.journal,
            state,
            self.policy,
            rng=decision_rng(self.cfg.agent.seed, f"best{state.stage}"),
            tie_break=tie_break,
        )
        choice = first
        if first.node_id:  # its seed re-runs, then the runners-up within their noise (if any)
            self.seeds.run_seeds(state.stage, first.node_id)
            choice = self.seeds.rerank(state, first)
        nxt = handover(state, choice.node_id)
        self.run_.event("stage_best", stage=state.stage, **choice.to_dict())
        failpoints.hit(f"stage_end:{state.stage}")
        seeds = self.seeds.result(state.stage, choice.node_id) if choice.node_id else None
        self._progress(state.stage, force=True)  # the stage's final counts, its seed re-runs included
        from .stage_summary import write_stage_summary

        # the summary role's account of the stage (asked once; a resume reads the stored one)
        summary = write_stage_summary(
            self.run_,
            self.services,
            self.journal,
            state.stage,
            choice.node_id,
            seeds,
            rerank=choice.evidence.get("seed_rerank"),
        )
        failpoints.hit(f"stage_summary:{state.stage}")
        stages = dict(self.run_.state.get("stages") or {})
        stages[str(state.stage)] = {
            "best": choice.to_dict(),
            "seeds": seeds,
            "summary": summary.get("summary"),
        }
        self.run_.save_state(
            stages=stages, stage_state=nxt.to_dict() if nxt else None, search_done=nxt is None
        )
        return nxt

    def _run_nodes(self, pending: list[Node]) -> None:
        """Run ``pending`` to their end (seed re-runs: no decision depends on their order)."""
        if self.scheduler == "free":  # a worker takes the next at once
            pool = self._pool()
            for node in pending:
                pool.add(node, None)
            try:
                while not pool.idle:
                    pool.start_queued()
                    self._collect(pool, pool.wait())
                self._memory_step()
            except Exception:
                self._drain(pool)
                raise
        else:
            for start in range(0, len(pending), self.cfg.agent.num_workers):
                self._run_batch(pending[start : start + self.cfg.agent.num_workers])

    def _tie_break(self, candidates: Sequence[Node]) -> tuple[str, str]:
        return tie_break(self.services, candidates)

    def _progress(self, stage: int, force: bool = False) -> None:
        carried = (self.run_.state.get("stage_state") or {}).get("carried_id")
        self.progress.update(stage, carried, force)


def finish_reporting(run: Run, services: Services, from_phase: str | None = None) -> None:
    """Plots, VLM, writeup and review (when ``report.enabled``), then the HTML view."""
    if run.cfg.report.enabled and (from_phase or not (run.state.get("reporting") or {}).get("done")):
        services.run_reporting(from_phase=from_phase)
        run.save_state(reporting={"done": True})
    services.write_view()

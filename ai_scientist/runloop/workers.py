"""The workers' side of the stage loop: a node's context and the worker that runs it
(:class:`NodeContexts`), running the nodes the loop creates and the main thread's bookkeeping of
those that end (:class:`Workers`).

``agent.scheduler: free`` runs them in a :class:`.scheduler.WorkerPool` (a node starts as soon as
a slot is free); ``batch`` runs a batch on threads and waits for all of it. The stage loop makes
every decision; it hands this class its two call-backs: ``context(node, slot, inputs)`` builds a
node's context on the main thread when it starts, ``work(ctx, errors)`` runs it on its thread.

Memory writes happen here, on the main thread, at the loop's decisions (:meth:`Workers.memory_step`),
so memory ids (shown in prompts) depend neither on timing nor on where a kill -9 struck.

A node's prompt inputs beyond its parent (tried settings, ablation plan, earlier stage summaries,
a solved example of another tree, the user's notes) are frozen when the node is selected, on the
journal view its decision saw (:meth:`NodeContexts.inputs`); a node built without them (resumed,
seed re-run, batch scheduler) computes them when it starts, from the journal as it stands.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base import failpoints
from ..base.artifacts import CodeAnswer, read_artifact
from ..base.errors import RunStop, disk_full_from
from ..base.paths import CODE_FILE, RunPaths
from ..phases.base import NodeContext, code_text
from ..phases.node_memory import open_branch, record_outcome
from ..phases.pipeline import run_node
from .recovery import missing_outcomes
from .scheduler import WorkerPool

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal, JournalView
    from ..treesearch.node import Node
    from ..treesearch.stages import StageState
    from .services import Services
    from .steering import Steering

ContextFn = Callable[["Node", int, "dict[str, Any] | None"], "NodeContext"]
WorkFn = Callable[["NodeContext", "list[BaseException]"], None]


class Workers:
    """Runs nodes for the stage loop (main thread only); ``progress(stage)`` refreshes the
    progress line when a node of ``stage`` ends."""

    def __init__(
        self,
        run: Run,
        services: Services,
        journal: Journal,
        context: ContextFn,
        work: WorkFn,
        progress: Callable[[int], None],
    ):
        self.run_ = run
        self.services = services
        self.journal = journal
        self.size = run.cfg.agent.num_workers
        self._context = context
        self._work = work
        self._progress = progress
        # finished nodes whose memory outcome events are not written yet (see memory_step); a
        # resumed run starts with those a kill -9 left unwritten
        self._unrecorded: list[str] = missing_outcomes(services, journal)
        self._contexts: dict[str, NodeContext] = {}  # the free scheduler's nodes, until recorded
        self._errors: list[BaseException] = []

    # ------------------------------------------------------------ memory --
    def memory_step(self, created: Node | None = None) -> None:
        """The main thread's memory writes at one decision, in one transaction: the outcome
        events of the nodes collected since the last step, in node order (a replay collects the
        same set between the same decisions, not in the same order), then, for a node just
        created, its branch and ``node_created`` event. Memory ids (shown in prompts) thus
        depend neither on timing nor on where a kill -9 struck: it leaves all of a step or none,
        and a resumed run writes the outcomes the kill lost at its first step, as the
        uninterrupted run would have (:func:`.recovery.missing_outcomes`)."""
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

    # -------------------------------------------------------------- free --
    def pool(self) -> WorkerPool:
        """A fresh pool of ``agent.num_workers`` slots."""
        self._errors = []
        self._contexts = {}

        def prepare(node: Node, ctx: NodeContext | None, slot: int) -> NodeContext:
            # on the main thread: a resumed node or a seed re-run gets its context (and its
            # memory branch) when it starts; a selected node got it when it was selected
            if ctx is not None:
                return ctx
            ctx = self._context(node, slot, None)
            self._contexts[node.id] = ctx
            return ctx

        def target(node: Node, ctx: NodeContext, slot: int) -> None:
            self._work(ctx, self._errors)

        return WorkerPool(self.size, prepare, target)

    def add(self, pool: WorkerPool, node: Node, inputs: dict[str, Any]) -> None:
        """Queue a node the loop just selected, its context built now (slot: the next free one)."""
        ctx = self._context(node, pool.next_slot(), inputs)
        self._contexts[node.id] = ctx
        pool.add(node, ctx)

    def collect(self, pool: WorkerPool, done: list[str]) -> None:
        """Bookkeeping of nodes whose worker ended, in the order they ended (main thread)."""
        for nid in done:
            node = self.journal.get(nid)
            self._unrecorded.append(nid)
            self.run_.event("node_finished", node_id=nid, stage=node.stage, status=node.status)
            self._progress(node.stage)
        if self._errors:  # cost cap, full disk, diverged replay: let the others end, then stop
            self.drain(pool)
            raise self._errors[0]

    def step(self, pool: WorkerPool) -> None:
        """Start what fits, then collect the nodes that ended (waiting briefly for one)."""
        pool.start_queued()
        self.collect(pool, pool.wait())

    def finish_running(self, pool: WorkerPool) -> list[str]:
        """Let the running nodes end and collect them; returns their ids."""
        waited = pool.running_ids
        while pool.running_ids:
            self.collect(pool, pool.wait())
        return waited

    def drain(self, pool: WorkerPool) -> None:
        """Wait for every running worker (queued nodes stay pending for a resume)."""
        while pool.running_ids:
            pool.wait()

    def settled_view(self, pool: WorkerPool) -> JournalView:
        """A journal snapshot in which every finished node has been collected: a node whose
        final record is written but whose worker has not ended yet is waited for."""
        while True:
            self.collect(pool, pool.wait(timeout=0))
            view = self.journal.snapshot()
            ending = [i for i in pool.running_ids if view.get(i).is_finished]
            if not ending:
                return view
            while any(i in pool.running_ids for i in ending):
                self.collect(pool, pool.wait())

    def replay_prepare(self, pool: WorkerPool, replay_order: dict[str, frozenset[str]] | None) -> None:
        """Replay: finish exactly the nodes the recorded next decision saw finished (all of the
        stage's nodes when the recording made no further decision here)."""
        if replay_order is None:
            return
        waiting = replay_order.get(self.journal.next_node_id())
        needed = [i for i in [*pool.running_ids, *pool.queued_ids] if waiting is None or i not in waiting]
        while any(i in pool.running_ids or i in pool.queued_ids for i in needed):
            pool.start_queued(only=needed)
            self.collect(pool, pool.wait())

    # ------------------------------------------------------------- batch --
    def run_batch(self, nodes: list[Node]) -> None:
        """Run ``nodes`` in parallel and wait for all of them. Memory branches and outcome
        events are written in node order from this thread (:meth:`memory_step`), so memory ids
        (shown in prompts) do not depend on timing."""
        errors: list[BaseException] = []
        contexts = [self._context(node, slot, None) for slot, node in enumerate(nodes)]
        threads = [
            threading.Thread(target=self._work, args=(ctx, errors), daemon=True, name=f"worker-{ctx.node.id}")
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
        self.memory_step()
        for ctx in contexts:
            self._progress(ctx.node.stage)

    # ------------------------------------------------------------ either --
    def run_all(self, nodes: list[Node], free: bool) -> None:
        """Run ``nodes`` to their end, no decision depending on their order (seed re-runs): the
        free scheduler starts the next as soon as a worker is free, the batch one runs batches
        of ``agent.num_workers``."""
        if free:
            pool = self.pool()
            for node in nodes:
                pool.add(node, None)
            try:
                while not pool.idle:
                    self.step(pool)
                self.memory_step()
            except Exception:
                self.drain(pool)
                raise
        else:
            for start in range(0, len(nodes), self.size):
                self.run_batch(nodes[start : start + self.size])


class NodeContexts:
    """Builds node contexts and runs nodes for one run (main thread builds, workers run)."""

    def __init__(self, run: Run, services: Services, journal: Journal, steering: Steering):
        self.run_ = run
        self.services = services
        self.journal = journal
        self.steering = steering

    def build(
        self, node: Node, slot: int, state: StageState | None, inputs: dict[str, Any] | None = None
    ) -> NodeContext:
        """The node's context on worker ``slot``; ``inputs``: its prompt inputs frozen when it was
        selected (None: computed now, on the journal as it stands and the stage state ``state``)."""
        parent = self.journal.get(node.parent_id) if node.parent_id else None
        services = self.services
        return NodeContext(
            run=self.run_,
            node=node,
            parent=parent,
            llm=services.llm,
            executor=services.executor,
            prompts=services.prompts,
            environment=services.environment,
            environment_text=services.environment_text,
            resource_text=services.resource_text(node, parent),
            resources_dir=services.resources_dir,
            memory=services.node_memory(node, parent),
            journal=self.journal,
            exec_env=services.exec_env(node, parent, slot),
            extra_values=self.inputs(node, state) if inputs is None else inputs,
        )

    def inputs(self, node: Node, state: StageState | None, view: JournalView | None = None) -> dict[str, Any]:
        """The node's prompt inputs beyond its parent, on ``view`` (default: the journal now)."""
        return {
            **self.stage_inputs(node, state, view),
            **self.input_diversity(node, view),
            **self.notes(node.id),
        }

    def notes(self, node_id: str) -> dict[str, Any]:
        """The ``user_note`` layer's value for a node (the notes active when it was created)."""
        from .steering import note_text

        text = note_text(self.steering.state.notes_at(node_id))
        return {"user_note": text} if text else {}

    def stage_inputs(
        self, node: Node, state: StageState | None, view: JournalView | None = None
    ) -> dict[str, Any]:
        """Tried settings / ablation plan / earlier stage summaries (frozen per node; see
        :mod:`.stage_inputs`). Seed re-runs ask no code prompt: none."""
        if node.is_seed_eval:
            return {}
        from .stage_inputs import stage_inputs

        return stage_inputs(self.run_, self.journal if view is None else view, node, state)

    def input_diversity(self, node: Node, view: JournalView | None = None) -> dict[str, Any]:
        """Forest-of-Thought: drafts of trees after the first see the nearest solved example."""
        if self.run_.cfg.search.policy != "mcts" or node.tree == 0 or node.operation != "draft":
            return {}
        from ..treesearch.policies import nearest_solved_example

        example = nearest_solved_example(
            self.journal if view is None else view, node.tree, self.run_.idea.title
        )
        path = RunPaths(self.run_.dir).node(example).file(CODE_FILE) if example else None
        answer = read_artifact(path, CodeAnswer) if path is not None else None
        if answer is None or not answer.data:
            return {}
        self.run_.event("input_diversity", node_id=node.id, tree=node.tree, example=example)
        return {"prior_code": f"Solved example from node {example} (another tree):\n{code_text(answer)}"}

    def work(self, ctx: NodeContext, errors: list[BaseException]) -> None:
        """Run one node (on its worker thread): every phase, then its ``state.md``. A stop (cost
        cap, full disk, diverged replay) goes to ``errors`` for the main thread; a bug in our
        code marks the node buggy and the run goes on."""
        node = ctx.node
        try:
            run_node(ctx)
            failpoints.hit(f"node_journaled:{node.id}")
            self.services.write_state(ctx.node)
            failpoints.hit(f"after_node:{node.id}")
        except RunStop as exc:
            errors.append(exc)
        except Exception as exc:
            full = disk_full_from(exc)
            if full is not None:  # the run cannot write: stop, do not mark nodes buggy
                errors.append(full)
                return
            tb = traceback.format_exc()
            ctx.node = self.journal.update(node.id, status="buggy", error=f"internal error: {exc!r}"[:2000])
            self.run_.event("internal_error", node_id=node.id, error=repr(exc), traceback=tb[-4000:])

"""Node-context building: what one node's phases get (:class:`..phases.base.NodeContext`), and
the worker that runs the node on its thread.

A node's prompt inputs beyond its parent (tried settings, ablation plan, earlier stage summaries,
a solved example of another tree, the user's notes) are frozen when the node is selected, on the
journal view its decision saw (:meth:`NodeContexts.inputs`); a node built without them (resumed,
seed re-run, batch scheduler) computes them when it starts, from the journal as it stands.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

from ..base import failpoints
from ..base.errors import RunStop, disk_full_from
from ..base.paths import RunPaths
from ..phases.base import NodeContext
from ..phases.pipeline import run_node

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal, JournalView
    from ..treesearch.node import Node
    from ..treesearch.stages import StageState
    from .services import Services
    from .steering import Steering


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
        from ..base.fileio import read_json
        from ..base.paths import CODE_FILE
        from ..phases.base import code_text
        from ..treesearch.policies import nearest_solved_example

        example = nearest_solved_example(
            self.journal if view is None else view, node.tree, self.run_.idea.title
        )
        answer = read_json(RunPaths(self.run_.dir).node(example).file(CODE_FILE)) if example else None
        if not answer:
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

"""The search loop of one run: stages, nodes on parallel workers, seed re-runs, reporting.

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

Nothing here holds state that the journal and ``state.json`` do not: a resumed run rebuilds
everything from them. The pieces, one module each:

- :mod:`.stage_loop` -- the stage loop, the only owner of the current ``StageState`` (saved to
  ``state.json`` on every change, read back only on resume) and of every decision; one pick
  function for both schedulers;
- :mod:`.workers` -- the workers' side: a node's context and the worker that runs it, the
  nodes the loop creates run (free-running ``WorkerPool`` or batches), the main thread's
  bookkeeping and memory writes;
- :mod:`.stage_end` -- the end of a stage: its best, seed re-runs (:mod:`.seed_runs`), summary,
  the next stage's state;
- :mod:`.recovery` -- what a kill -9 left half-done, completed on resume;
- :mod:`.run_calls` -- the loop's own LLM calls (idea proposal, tie-break);
- :mod:`.progress` -- the progress line.

:class:`Orchestrator` wires them for one run and runs reporting at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import EXIT_OK
from ..treesearch.journal import Journal
from .progress import ProgressLine
from .recovery import write_missing_states
from .services import Services, build_services  # noqa: F401  (re-exported for commands)
from .stage_loop import StageLoop
from .steering import Steering
from .workers import NodeContexts, Workers

if TYPE_CHECKING:
    from ..base.run import Run
    from ..phases.base import NodeContext
    from ..treesearch.node import Node


class Orchestrator:
    """Runs (or resumes) the whole search of one run, then its reporting; see the module docstring.

    :meth:`_context` (main thread: a node's context when it starts) and :meth:`_worker` (the
    node's thread) are the two call-backs the workers get: a subclass may wrap them
    (``bench/orchestration.py`` times each node's span between the two)."""

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
        # steering requests (runloop/steering.py); a replay applies the recording's steer events
        replay_src = self.cfg.llm.replay_dir if self.cfg.llm.backend == "replay" else None
        self.steering = Steering(run.dir, run.event, Path(replay_src) if replay_src else None)
        self.contexts = NodeContexts(run, services, self.journal, self.steering)
        self.workers = Workers(
            run, services, self.journal, self._context, self._worker, lambda stage: self.loop.show(stage)
        )
        self.loop = StageLoop(
            run,
            services,
            self.journal,
            self.steering,
            self.workers,
            self.contexts,
            ProgressLine(self.journal, services),
        )

    def run(self) -> int:
        write_missing_states(self.run_, self.services, self.journal)
        code = self.loop.run()
        if code is not None:
            return code
        if self.cfg.report.enabled:
            self.loop.gate("reporting", "reporting")
        finish_reporting(self.run_, self.services)
        return EXIT_OK

    def _context(self, node: Node, slot: int, inputs: dict[str, Any] | None = None) -> NodeContext:
        """The node's context; ``inputs``: its prompt inputs frozen when it was selected (None:
        computed now, from the journal as it stands and the loop's stage state)."""
        return self.contexts.build(node, slot, self.loop.state, inputs)

    def _worker(self, ctx: NodeContext, errors: list[BaseException]) -> None:
        self.contexts.work(ctx, errors)


def finish_reporting(run: Run, services: Services, from_phase: str | None = None) -> None:
    """Plots, VLM, writeup and review (when ``report.enabled``), then the HTML view."""
    if run.cfg.report.enabled and (from_phase or not (run.state.get("reporting") or {}).get("done")):
        services.run_reporting(from_phase=from_phase)
        run.save_state(reporting={"done": True})
    services.write_view()

"""Recovery on resume: what a kill -9 left half-done is completed as the uninterrupted run would
have done it, from the journal, the memory store and ``state.json`` (read back here, and only
here: during a run the stage loop owns the stage state)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base.paths import RunPaths
from ..treesearch.stages import StageState

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal
    from ..treesearch.node import Node
    from .services import Services


def saved_stage_state(run: Run) -> StageState | None:
    """The stage state to start (or resume) the search from; None when the search is done."""
    if run.state.get("search_done"):
        return None
    data = run.state.get("stage_state")
    return StageState.from_dict(data) if data else StageState(1)


def write_missing_states(run: Run, services: Services, journal: Journal) -> None:
    """Finished nodes without ``state.md``: a kill -9 struck after the node's final journal
    record and before its worker wrote the file (another worker's failpoint or crash). A child
    shows its parent's state as its history, so it is written now, parents first (journal
    order), as the uninterrupted run wrote it."""
    paths = RunPaths(run.dir)
    for node in journal.nodes:
        if node.is_finished and not paths.node(node.id).state_md.exists():
            services.write_state(node)


def missing_outcomes(services: Services, journal: Journal) -> list[str]:
    """Finished nodes with a memory branch but no outcome events yet: a kill -9 struck after
    they finished and before the step that writes them."""
    store = services.memory_store
    if store is None:
        return []
    return store.unrecorded_outcomes([n.id for n in journal.nodes if n.is_finished])


def leftover_nodes(
    run: Run, services: Services, journal: Journal, stage: int, memory_step: Callable[[Node], None]
) -> list[Node]:
    """Nodes (and seed re-runs) of ``stage`` a crash interrupted; a node created by a decision
    whose memory step the kill prevented takes that step now (``memory_step(node)``)."""
    leftover = journal.in_flight(stage)
    if leftover:
        run.event("nodes_resumed", node_ids=[n.id for n in leftover])
    store = services.memory_store
    for node in leftover:
        if store is not None and not node.is_seed_eval and not store.has_branch(node.id):
            memory_step(node)
    return leftover

"""The stage loop's evaluation-protocol step (:mod:`.protocol` defines the protocol itself): fix a
stage's protocol on its first working node and mark the working nodes that changed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal, JournalView
    from ..treesearch.stages import StageState


class ProtocolStep:
    """``save(state)``: the stage loop's save of a changed stage state; ``recorded``: a replay's
    stage -> the node the recording fixed the protocol on (:func:`.protocol.recorded_protocols`)."""

    def __init__(
        self, run: Run, journal: Journal, save: Callable[[StageState], None], recorded: dict[int, str]
    ):
        self.run_ = run
        self.journal = journal
        self.save = save
        self.recorded = recorded
        # working nodes already checked against their stage's evaluation protocol (a resumed run
        # checks them again: the check is a pure function of recorded files)
        self.checked: set[str] = set()

    def __call__(self, state: StageState, view: JournalView) -> tuple[StageState, int]:
        """Fix the stage's evaluation protocol and mark the working nodes of ``view`` that changed
        it (:mod:`.protocol`); returns the stage state and how many nodes were marked (the caller
        then decides on a new view: the marked ones are no longer good).

        The protocol is fixed once, by the stage's first working node: the node the stage starts
        from (stages 2-4), else the earliest-created good node of the first view that has one (a
        replay: the node the recording fixed). Runs on the main thread at each decision, on the
        view the decision sees, so a replay (the same finished nodes at each decision) fixes and
        marks the same; it is saved in the stage state (``state.json``) and the ``eval_protocol``
        event, each mark in the journal (``Node.incomparable``) and a ``node_incomparable`` event."""
        from .protocol import EvalProtocol, node_answer, protocol_change, protocol_of

        stage = state.stage
        protocol = state.protocol
        if protocol is None:
            carried = view.get(state.carried_id) if state.carried_id and state.carried_id in view else None
            first = carried if carried is not None and carried.is_good else None
            recorded = self.recorded.get(stage)
            if first is None and recorded is not None and recorded in view and view.get(recorded).is_good:
                first = view.get(recorded)
            first = first or next(iter(view.good_nodes(stage)), None)
            if first is None:
                return state, 0
            protocol = protocol_of(first, node_answer(self.run_.dir, first.id)).to_dict()
            state = state.with_protocol(protocol)
            self.save(state)
            self.run_.event("eval_protocol", stage=stage, **protocol)
            self.checked.add(first.id)
        reference = EvalProtocol.from_dict(protocol)
        marked = 0
        for node in view.good_nodes(stage):
            if node.id in self.checked:
                continue
            self.checked.add(node.id)
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

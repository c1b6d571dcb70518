"""The progress line of a run (``services.progress_update``): a stage's node counts and its best
so far, refreshed at most twice a second (counting the tree is O(nodes))."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..treesearch.journal import Journal
    from ..treesearch.node import Node
    from .services import Services


class ProgressLine:
    def __init__(self, journal: Journal, services: Services):
        self.journal = journal
        self.services = services
        self._last = 0.0

    def update(self, stage: int, carried_id: str | None, force: bool = False) -> None:
        """Show ``stage``'s counts (``carried_id``: the node it started from, or None)."""
        now = time.monotonic()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        from ..treesearch.best import count_nodes

        # the stage's counts as the stage facts and last lines count them (treesearch.best)
        c = count_nodes(n for n in self.journal.nodes if n.stage == stage)
        carried = carried_id if carried_id in self.journal else None
        best: Node | None
        if stage == 4 and carried:  # an ablation's metric is not the run's result: the ablated node is
            best = self.journal.get(carried)
        else:  # what the stage's end would choose now (carried node included), without the LLM
            choice = self.journal.best_choice(stage, carried)
            best = self.journal.get(choice.node_id) if choice.node_id else None
        m = best.metric if best is not None else None
        shown = None
        if best is not None and m is not None:
            shown = {"name": m.name, "value": m.value, "direction": m.direction, "node": best.id}
        self.services.progress_update(
            stage=stage,
            running=c.running,
            good=c.good,
            buggy=c.buggy,
            seed_runs=c.seed_runs,
            best=shown,
        )

"""``bfts``: AI-Scientist-v2's best-first tree search.

Same decision rule as ``greedy`` (draft until ``num_drafts``, debug a buggy
leaf with probability ``debug_prob`` below ``max_debug_depth``, else improve the
best node), with v2's two differences:

- stage 2 always tunes the stage-1 best node (the carried node) and stage 4
  always ablates the stage-3 best, each with an idea not tried yet;
- tree diversity for parallel workers: when choosing a node to debug or
  improve, nodes whose draft tree already has a node in flight are passed over
  if another tree offers a candidate (v2's "unprocessed tree" preference).
"""

from __future__ import annotations

from ..journal import JournalView
from ..node import Node
from ..stages import StageState
from .base import require_carried
from .greedy import GreedyPolicy


class BFTSPolicy(GreedyPolicy):
    name = "bfts"

    def _avoid_roots(self, view: JournalView, stage: int) -> frozenset[str]:
        return frozenset(view.root_id(n.id) for n in view.in_flight(stage))

    def _tune_parent(self, view: JournalView, state: StageState) -> tuple[Node, str]:
        return require_carried(view, state), "best node of stage 1"

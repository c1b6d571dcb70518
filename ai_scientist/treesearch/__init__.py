"""Tree search: nodes, the append-only journal, selection policies, stages, best-node choice.

Pure core: policies and stage checks take a journal view and return values;
the journal file is the only side effect (see docs/search.md).
"""

from .best import Choice, TieBreak, select_best
from .journal import Journal, JournalError, JournalView, load
from .node import Metric, Node, NodeError
from .policies import (
    Action,
    decision_rng,
    dedupe_ideas,
    make_policy,
    nearest_solved_example,
    next_stage_state,
)
from .seeds import aggregate_seeds, missing_seeds, seed_metrics, seed_plan
from .stages import (
    STAGES,
    StageOutcome,
    StageRules,
    StageState,
    ideas_tried,
    stage_outcome,
)

__all__ = [
    "Action",
    "Choice",
    "Journal",
    "JournalError",
    "JournalView",
    "Metric",
    "Node",
    "NodeError",
    "STAGES",
    "StageOutcome",
    "StageRules",
    "StageState",
    "TieBreak",
    "aggregate_seeds",
    "decision_rng",
    "dedupe_ideas",
    "ideas_tried",
    "missing_seeds",
    "load",
    "make_policy",
    "nearest_solved_example",
    "next_stage_state",
    "seed_metrics",
    "seed_plan",
    "select_best",
    "stage_outcome",
]

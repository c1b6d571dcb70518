"""Fault-injection points for crash tests (the way databases test crash safety).

``AI_SCIENTIST_FAILPOINTS=name1,name2`` makes the process kill itself with
SIGKILL — exactly what ``kill -9`` does — when execution reaches a named point.
Unset (the normal case), a point costs one dictionary lookup. Names used:
``node_journaled:<id>`` (a node's final state is journaled, its ``state.md`` not written yet),
``after_node:<id>`` (a node's final state is journaled), ``seeds_started:<id>`` (the decision
to start seed re-runs before their stage's last node is in is recorded, the journal does not hold
its first node ``<id>`` yet), ``stage_end:<N>`` (the
stage's best node is chosen, before its seed re-runs), ``selected:<id>`` (the decision to
create the node is recorded, the journal does not hold the node yet), ``stage_summary:<N>`` (the
stage's summary is stored, the state does not list the stage as finished yet),
``phase_saved:<id>:<phase>`` (a phase's artifact is written, the journal does
not list the phase as done yet), ``graded:<id>`` (the grader's command record is written, its
verdict ``grade.json`` and phase 4's ``run.json`` not yet), and
``torn_append:<file>:<seq>`` (half of that JSONL record is written, then kill).
"""

from __future__ import annotations

import os
import signal

ENV = "AI_SCIENTIST_FAILPOINTS"


def armed(name: str) -> bool:
    spec = os.environ.get(ENV)
    return spec is not None and name in spec.split(",")


def hit(name: str) -> None:
    """SIGKILL this process if ``name`` is armed."""
    if armed(name):
        os.kill(os.getpid(), signal.SIGKILL)

"""What the stage shows one node besides its parent: the stage's own results so far.

* every node of stage 2-4: ``stage_summary`` (the summaries of the stages before it);
* stage 2 (tuning): ``tried_hyperparams``, the settings tried in the stage with their results;
* stage 4 (ablations): ``ablation_plan`` (the planned ablations, each marked done / running /
  this node / to do) and ``tried_ablations`` with their results.

The tables are ranked best first (:mod:`..treesearch.tried`), so their layers' ``head_rows``
policy cuts the worst rows first and the prompt's ledger records the cut. The values are
computed once, when the node is first scheduled, and frozen in ``nodes/<id>/stage_inputs.json``:
a node resumed after a crash sees the same tables as before it (its siblings may have finished
in between), so its prompts, and a replay of the run, stay the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.fileio import atomic_write_json, read_json
from ..base.paths import STAGE_INPUTS_FILE, RunPaths
from ..treesearch.tried import ablation_plan, tried_table
from .stage_summary import summaries_text

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import JournalView
    from ..treesearch.node import Node
    from ..treesearch.stages import StageState


def compute_stage_inputs(run: Run, view: JournalView, node: Node, state: StageState | None) -> dict[str, Any]:
    """The stage-input values for ``node`` from the journal as it is now (empty ones left out)."""
    values: dict[str, Any] = {"stage_summary": summaries_text(run.dir, before=node.stage)}
    carried_id = state.carried_id if state is not None and state.stage == node.stage else None
    carried = view.get(carried_id) if carried_id and carried_id in view else None
    if node.stage == 2:
        values["tried_hyperparams"] = tried_table(view, 2, column="setting", exclude=node.id, carried=carried)
    elif node.stage == 4:
        planned = state.ideas if state is not None and state.stage == 4 else ()
        values["ablation_plan"] = ablation_plan(view, 4, planned, current=node.idea)
        values["tried_ablations"] = tried_table(view, 4, column="ablation", exclude=node.id, carried=carried)
    return {k: v for k, v in values.items() if v}


def stage_inputs(run: Run, view: JournalView, node: Node, state: StageState | None) -> dict[str, Any]:
    """``node``'s stage inputs: the frozen ones if it has any, else computed now and frozen."""
    path = RunPaths(run.dir).node(node.id).file(STAGE_INPUTS_FILE)
    stored = read_json(path)
    if isinstance(stored, dict):
        return stored
    values = compute_stage_inputs(run, view, node, state)
    atomic_write_json(path, values, durable=False)  # lost on power loss: recomputed, like a phase
    return values

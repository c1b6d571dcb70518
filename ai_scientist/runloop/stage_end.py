"""The end of a stage, once the stage loop has stopped creating nodes and none is in flight:
the evaluation-protocol step on the nodes that ended last, the stage's best (policy choice, LLM
tie-break if enabled), its seed re-runs and the re-ranking over seeds, the seed re-runs of the
nodes whose finding is in metrics their parent did not report, the ``stage_best`` event,
the stage summary, and the next stage's state (saved to ``state.json`` with the stage's record).

One entry point, :meth:`StageEnd.finish`; the stage loop calls it and carries on with the state it
returns (None: the search is over)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..base import failpoints
from ..treesearch.policies import decision_rng, next_stage_state
from ..treesearch.stages import StageState, handover
from .run_calls import tie_break

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..base.run import Run
    from ..treesearch.journal import Journal
    from ..treesearch.node import Node
    from ..treesearch.policies.base import SearchPolicy
    from .seed_runs import SeedRuns
    from .services import Services
    from .stage_protocol import ProtocolStep


@dataclass
class StageEnd:
    """``progress(stage)``: show the stage's final counts on the progress line."""

    run: Run
    services: Services
    journal: Journal
    policy: SearchPolicy
    protocol: ProtocolStep
    seeds: SeedRuns
    progress: Callable[[int], None]

    def finish(self, state: StageState) -> StageState | None:
        """End the stage of ``state``; returns the next stage's state (None: the search is done)."""
        run, cfg = self.run, self.run.cfg
        state, _ = self.protocol(state, self.journal.snapshot())  # nodes that ended last
        _, first = next_stage_state(
            self.journal,
            state,
            self.policy,
            rng=decision_rng(cfg.agent.seed, f"best{state.stage}"),
            tie_break=self._tie_break if cfg.agent.llm_tie_break else None,
        )
        choice = first
        if first.node_id:  # its seed re-runs, then the runners-up within their noise (if any)
            self.seeds.run_seeds(state.stage, first.node_id)
            choice = self.seeds.rerank(state, first)
        # the nodes whose finding is in metrics their parent did not report: re-run over the same
        # seeds too (agent.multi_seed_eval.finding_reruns), since the headline re-runs miss them
        findings = self.seeds.findings(state.stage, choice.node_id) if choice.node_id else None
        nxt = handover(state, choice.node_id)
        run.event("stage_best", stage=state.stage, **choice.to_dict())
        failpoints.hit(f"stage_end:{state.stage}")
        seeds = self.seeds.result(state.stage, choice.node_id, findings) if choice.node_id else None
        self.progress(state.stage)  # the stage's final counts, its seed re-runs included
        from .stage_summary import write_stage_summary

        # the summary role's account of the stage (asked once; a resume reads the stored one)
        summary = write_stage_summary(
            run,
            self.services,
            self.journal,
            state.stage,
            choice.node_id,
            seeds,
            rerank=choice.evidence.get("seed_rerank"),
        )
        failpoints.hit(f"stage_summary:{state.stage}")
        stages = dict(run.state.get("stages") or {})
        stages[str(state.stage)] = {
            "best": choice.to_dict(),
            "seeds": seeds,
            "summary": summary.get("summary"),
        }
        run.save_state(stages=stages, stage_state=nxt.to_dict() if nxt else None, search_done=nxt is None)
        return nxt

    def _tie_break(self, candidates: Sequence[Node]) -> tuple[str, str]:
        return tie_break(self.services, candidates)

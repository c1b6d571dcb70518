"""A seed re-run that reports another metric is recorded, not a crash (issue 28).

A capable model put the seed into its metric's dataset label (``random_n1024_seed{SEED}``): every
seed re-run of the stage's best then reported a different metric, averaging them raised
IncomparableMetrics, and the run died with a traceback at stage 1's end. Now only re-runs that
measure what the node measured are averaged; the others are named in the ``seed_eval`` event and
the stage's facts, and the run goes on. The code prompt says to keep the seed out of the labels.
"""

from __future__ import annotations

import json
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, prompt_records, start_run


class SeedInLabel(ExampleResponder):
    """The example's answers, with the seed written into the metric's dataset label."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer.get("files") or []:
            f["content"] = f["content"].replace(
                '"dataset": "synthetic"', '"dataset": f"synthetic_seed{SEED}"'
            )
        return json.dumps(answer)


def test_seed_reruns_with_another_label_are_recorded_not_averaged(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        responder=SeedInLabel(buggy_nodes=()),
    )
    assert code == 0
    seed_eval = next(e for e in events(run_dir) if e["type"] == "seed_eval" and e["stage"] == 1)
    assert seed_eval["aggregate"] is None and len(seed_eval["incomparable"]) == len(seed_eval["runs"]) >= 1
    assert all(m["metric"][2].startswith("synthetic_seed") for m in seed_eval["incomparable"])
    summary = next(r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == "stage1")
    assert "Seed re-runs not averaged:" in summary["messages"][-1]["content"]
    code_prompt = next(r for r in prompt_records(run_dir) if r["phase"] == "phase2")
    assert (
        "keep the seed\n  out of metric names and `dataset` labels" in code_prompt["messages"][-1]["content"]
    )

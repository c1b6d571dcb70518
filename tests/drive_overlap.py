"""Run or resume a 4-worker scripted run whose stage ends overlap its last nodes (issue 37).

Every experiment is a shell script that sleeps, then writes ``metrics.json``; how long and what
it reports are drawn from a hash of the node id (a seed re-run repeats its parent's script). The
stage-1 draft ``n0004`` is the best and slow: its first LLM call returns only after the run has
started a seed re-run of another node (the stage's provisional best), so stage 1 always overlaps
(a replay answers from the recording and does not wait).
Usage: drive_overlap.py run OUT NAME [--set k=v ...]
       drive_overlap.py resume RUN_DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from ai_scientist_testing.scripted import ExampleResponder  # noqa: E402
from pipeline_support import run_args  # noqa: E402

from ai_scientist.cli.commands import execute, open_locked, setup_run  # noqa: E402
from ai_scientist.llm.scripted_backend import ScriptedBackend  # noqa: E402

SLOW_BEST = "n0004"
# 4 workers, six drafts, small later stages, two seed re-runs per stage best
OVERLAP = [
    "agent.num_workers=4",
    "agent.search.num_drafts=6",
    "agent.stages.stage1_max_iters=6",
    "agent.stages.stage2_max_iters=4",
    "agent.stages.stage2_good_nodes=50",
    "agent.stages.stage3_max_iters=3",
    "agent.stages.stage3_patience=50",
    "agent.stages.stage4_max_iters=2",
    "agent.multi_seed_eval.num_seeds=2",
    "agent.plots.enabled=false",  # the shell experiments save no data to plot
]
SCRIPT = (
    "sleep {sleep:.2f}\n"
    'printf \'{{"metrics": [{{"name": "val_accuracy", "value": {value:.4f}, '
    '"direction": "maximize", "dataset": "val"}}]}}\' > metrics.json\n'
    "echo val_accuracy={value:.4f}\n"
)


def draw(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


class OverlapResponder(ExampleResponder):
    """The example responder, but every experiment is the shell script above."""

    def __init__(self, run_dir: Path, hold: bool = True) -> None:
        super().__init__(buggy_nodes=())
        self.events, self.hold = run_dir / "events.jsonl", hold

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: Any) -> str:
        # the slow best's calls wait (at most 60 s) until the run started a seed re-run early
        deadline = time.monotonic() + 60
        while self.hold and ctx.node_id == SLOW_BEST and time.monotonic() < deadline:
            if self.events.exists() and '"seeds_started"' in self.events.read_text(encoding="utf-8"):
                break
            time.sleep(0.05)
        return super().__call__(messages, schema, ctx)

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        best = ctx.node_id == SLOW_BEST
        script = SCRIPT.format(
            sleep=0.2 + 0.6 * draw(ctx.node_id + ":sleep"),
            value=0.95 if best else 0.6 + 0.3 * draw(ctx.node_id + ":value"),
        )
        answer["files"] = [{"path": "run.sh", "content": script, "encoding": "utf-8"}]
        answer["build"] = {"language": "bash", "commands": []}
        answer["run"] = {"commands": ["sh run.sh"], "expected_outputs": ["metrics.json"]}
        return json.dumps(answer)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["run", "resume"])
    p.add_argument("target")
    p.add_argument("name", nargs="?")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    a = p.parse_args()
    if a.mode == "run":
        run, resources = setup_run(run_args(Path(a.target), *OVERLAP, *a.overrides, name=a.name))
        print(run.dir, flush=True)
        return execute(run, resources=resources, backend=ScriptedBackend(OverlapResponder(run.dir)))
    run = open_locked(a.target, a.overrides)
    return execute(run, backend=ScriptedBackend(OverlapResponder(run.dir)), resumed=True)


if __name__ == "__main__":
    sys.exit(main())

"""``ai-scientist run`` / ``resume`` with a scripted model that answers a bench task's code call with
the task's own baseline: the bench's runner for tests (``bench run --runner "python THIS"``).

The run is parsed by the real CLI parser and set up by the real ``setup_run``; only the model is
scripted. The task is the one whose grader the run was given (``--grader TASK/grader``).
``BENCH_DRIVE_SLOW`` (seconds): each experiment sleeps first (kill tests).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.base.errors import ConfigError, UsageError
from ai_scientist.benchsuite.task import load_task
from ai_scientist.cli.commands import execute, open_locked, setup_run
from ai_scientist.cli.main import build_parser
from ai_scientist.llm.scripted_backend import ScriptedBackend


class BaselineResponder(ExampleResponder):
    """Every code answer: the task's baseline files and commands (so its graded score is known)."""

    def __init__(self, task_dir: Path):
        super().__init__(buggy_nodes=())
        self.task = load_task(task_dir)

    def _phase2(self, text, ctx):  # noqa: ANN001, ANN202 - the parent's signature
        files = [
            {"path": p.name, "content": p.read_text(), "encoding": "utf-8"}
            for p in sorted(self.task.baseline.iterdir())
            if p.is_file()
        ]
        commands = list(self.task.spec.baseline.commands)
        slow = os.environ.get("BENCH_DRIVE_SLOW")
        if slow:
            commands = [f"sleep {float(slow)}", *commands]
        return json.dumps(
            {
                "summary": f"the baseline of {self.task.name}",
                "files": files,
                "build": {"language": "python", "commands": []},
                "run": {"commands": commands or ["true"], "expected_outputs": []},
            }
        )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        run, resources = setup_run(args)
        print(run.dir, flush=True)
    else:
        run, resources = open_locked(args.run_dir, args.overrides), None
    task_dir = Path(run.cfg.grader.dir).parent
    backend = ScriptedBackend(BaselineResponder(task_dir))
    return execute(run, resources=resources, backend=backend, resumed=args.command == "resume")


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ConfigError, UsageError) as exc:  # as the CLI does: exit 2, one line
        print(f"bench_drive_run: error: {exc}", file=sys.stderr)
        sys.exit(2)

"""Run or resume a run of the bundled example with the scripted LLM in its own process.

Crash tests kill this process with SIGKILL at chosen moments and resume the run.
Usage: drive_run.py run OUT NAME [--hang NODE PHASE MARKER] [--slow NODE SECONDS] [--set k=v ...]
       drive_run.py resume RUN_DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ai_scientist_testing.scripted import ExampleResponder  # noqa: E402
from pipeline_support import run_args  # noqa: E402

from ai_scientist.base.errors import ConfigError, UsageError  # noqa: E402
from ai_scientist.cli.commands import execute, open_locked, setup_run  # noqa: E402
from ai_scientist.llm.scripted_backend import ScriptedBackend  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["run", "resume"])
    p.add_argument("target")
    p.add_argument("name", nargs="?")
    p.add_argument("--hang", nargs=3)
    p.add_argument("--slow", nargs=2)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    a = p.parse_args()
    responder = ExampleResponder(
        buggy_nodes=("n0001",),
        hang_at=tuple(a.hang) if a.hang else None,
        slow_nodes={a.slow[0]: float(a.slow[1])} if a.slow else None,
    )
    backend = ScriptedBackend(responder)
    if a.mode == "run":
        run, resources = setup_run(run_args(Path(a.target), *a.overrides, name=a.name))
        print(run.dir, flush=True)
        return execute(run, resources=resources, backend=backend)
    run = open_locked(a.target, a.overrides)
    return execute(run, backend=backend, resumed=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ConfigError, UsageError) as exc:  # as the CLI does: exit 2, one line
        print(f"drive_run: error: {exc}", file=sys.stderr)
        sys.exit(2)

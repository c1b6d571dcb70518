"""The interpreter a submitted test job runs (``submit.python``): ``ai-scientist submit --in-job RUN``
with the scripted example LLM instead of a real one.

The job script calls ``<submit.python> -m ai_scientist.cli submit --in-job RUN``; a test sets
``submit.python`` to a small shell script that runs this file with those arguments, so the batch
job is the real one (its script, signals, continuation) and only the LLM backend is scripted,
as ``tests/drive_run.py`` does for a run in its own process.
Usage: submit_driver.py [--latency S] [--slow NODE SECONDS] -m ai_scientist.cli submit --in-job RUN
(``--slow``: that node's experiment sleeps first, after touching ``STARTED`` in its workspace)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.base.errors import ConfigError, UsageError
from ai_scientist.cli.submit import run_in_job
from ai_scientist.llm.scripted_backend import ScriptedBackend


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--latency", type=float, default=0.0, help="seconds each LLM answer takes")
    p.add_argument("--slow", nargs=2, default=None)
    p.add_argument("-m", dest="module", required=True)
    p.add_argument("command", choices=["submit"])
    p.add_argument("--in-job", required=True)
    a = p.parse_args()
    slow = {a.slow[0]: float(a.slow[1])} if a.slow else None
    backend = ScriptedBackend(ExampleResponder(slow_nodes=slow), latency_s=a.latency)
    return run_in_job(Path(a.in_job), backend=backend)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ConfigError, UsageError) as exc:  # as the CLI does: exit 2, one line
        print(f"submit_driver: error: {exc}", file=sys.stderr)
        sys.exit(2)

"""``ai-scientist bench list | run | report``: graded research tasks (docs/bench.md)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..base.errors import EXIT_OK, UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="bench_command", metavar="WHAT")
    sub.required = True
    sub.add_parser("list", help="the bundled tasks: metric, baseline, best known, data licence")
    q = sub.add_parser("run", help="run each task x seed (again: continues where it stopped)")
    q.add_argument(
        "config", nargs="?", default=None, help="bfts_config.yaml for every run (default: built-in)"
    )
    q.add_argument("--tasks", default=None, help="a,b: bundled task names or task directories (default: all)")
    q.add_argument("--seeds", type=int, default=1, help="seeds per task, 1-20 (agent.seed = 1..N; default 1)")
    q.add_argument(
        "--out", default="bench/results/latest", help="the bench directory (default: bench/results/latest)"
    )
    q.add_argument(
        "--label", default=None, help='what the results are, shown in the report, e.g. "model X, config Y"'
    )
    q.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
        help="override one config key of every run (repeatable), e.g. --set llm.model=...",
    )  # fmt: skip
    # tests: the command a run is started with (a scripted model); the default is this ai-scientist
    q.add_argument("--runner", default=None, help=argparse.SUPPRESS)
    q = sub.add_parser("report", help="the table and figure of a bench directory; two: side by side")
    q.add_argument("dir")
    q.add_argument("dir2", nargs="?", default=None, help="a second bench directory to compare with")


def cmd_bench(args: argparse.Namespace) -> int:
    from ..benchsuite.task import bundled_tasks, select_tasks

    if args.bench_command == "list":
        from ..benchsuite.runner import describe

        tasks = bundled_tasks()
        print(describe(tasks))
        print(f"{len(tasks)} tasks")
        return EXIT_OK
    if args.bench_command == "report":
        from ..benchsuite.report import write_report

        for d in (args.dir, args.dir2):
            if d is not None and not Path(d, "bench.json").is_file():
                raise UsageError(f"{d}: not a bench directory (no bench.json)")
        paths = write_report(Path(args.dir), Path(args.dir2) if args.dir2 else None)
        print(Path(paths["compare_md" if args.dir2 else "md"]).read_text(), end="")
        for key, path in paths.items():
            print(f"{key}: {path}", file=sys.stderr)
        return EXIT_OK
    from ..base.config import load_config
    from ..benchsuite.runner import DEFAULT_RUNNER, BenchPlan, bench_run

    if not 1 <= args.seeds <= 20:
        raise UsageError(f"--seeds: must be 1-20, got {args.seeds}")
    load_config(args.config, args.overrides)  # a bad config or --set exits 2 before anything runs
    plan = BenchPlan(
        out=Path(args.out).resolve(),
        tasks=select_tasks(args.tasks),
        seeds=args.seeds,
        config=str(Path(args.config).resolve()) if args.config else None,
        overrides=list(args.overrides),
        runner=tuple(shlex.split(args.runner)) if args.runner else DEFAULT_RUNNER,
        label=args.label,
    )
    return bench_run(
        plan,
        ["ai-scientist", *sys.argv[1:]] if sys.argv[1:2] == ["bench"] else ["ai-scientist", "bench", "run"],
    )

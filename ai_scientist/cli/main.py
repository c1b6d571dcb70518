"""``ai-scientist`` command line.

Each subcommand is a thin adapter: it parses arguments and hands over to the
module that owns the work (imported lazily so ``--help`` stays fast). Errors a
user can fix exit 2 with one clear message and no traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from ..base.errors import (  # noqa: F401  (exit codes re-exported for scripts that import them from here)
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_WORKING_EXPERIMENT,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_USAGE,
    UsageError,
)

# Each handler takes the parsed Namespace and returns an exit code. Handlers import the module that owns
# the work when called (so `--help` stays fast); every hop is a plain call an editor can follow.


def _run(args: argparse.Namespace) -> int:
    from .commands import cmd_run

    return cmd_run(args)


def _resume(args: argparse.Namespace) -> int:
    from .commands import cmd_resume

    return cmd_resume(args)


def _replay(args: argparse.Namespace) -> int:
    from .commands import cmd_replay

    return cmd_replay(args)


def _submit(args: argparse.Namespace) -> int:
    from .submit import cmd_submit

    return cmd_submit(args)


def _logs(args: argparse.Namespace) -> int:
    from .logs import cmd_logs

    return cmd_logs(args)


def _view(args: argparse.Namespace) -> int:
    """``ai-scientist view RUN_DIR [--html FILE]``: write the tree viewer and print its path."""
    from ..base.paths import RunPaths
    from ..reporting.viewer import write_view

    run_dir = Path(args.run_dir)
    if not RunPaths(run_dir).journal.exists():
        raise UsageError(
            f"{run_dir}: not a run directory (no journal.jsonl); pass the run directory that `ai-scientist run` printed"
        )
    print(write_view(run_dir, Path(args.html) if args.html else None))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from .serve import cmd_serve

    return cmd_serve(args)


def _steer(args: argparse.Namespace) -> int:
    from .steer import cmd_steer

    return cmd_steer(args)


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import cmd_doctor

    return cmd_doctor(args)


def _exec(args: argparse.Namespace) -> int:
    from .sandbox_exec import cmd_exec

    return cmd_exec(args)


def _ideate(args: argparse.Namespace) -> int:
    from .ideate import cmd_ideate

    return cmd_ideate(args)


def _bench(args: argparse.Namespace) -> int:
    from .bench import cmd_bench

    return cmd_bench(args)


HANDLERS = {
    "run": _run,
    "resume": _resume,
    "replay": _replay,
    "submit": _submit,
    "logs": _logs,
    "view": _view,
    "serve": _serve,
    "steer": _steer,
    "doctor": _doctor,
    "exec": _exec,
    "ideate": _ideate,
    "bench": _bench,
}


MAX_TIMEOUT_S = 7 * 24 * 3600  # as exec.timeout


def _timeout_s(text: str) -> float:
    """``--timeout``: a finite number of seconds in (0, 7 days]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= {MAX_TIMEOUT_S} seconds (7 days), got {text}")
    return value


def _workspace_dir(text: str) -> str:
    """``--workspace``: a directory, or a path where one can be made (not a file)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{parent} is a file, not a directory")
            break
    return text


def _config_args(p: argparse.ArgumentParser, positional: bool = False) -> None:
    if positional:
        p.add_argument(
            "config", nargs="?", default=None, help="bfts_config.yaml (default: built-in defaults)"
        )
    else:
        p.add_argument("--config", default=None, help="bfts_config.yaml")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override one config key (repeatable), e.g. --set agent.num_workers=2",
    )


def _run_inputs(p: argparse.ArgumentParser) -> None:
    """The arguments that make a new run (``run`` and ``submit``)."""
    _config_args(p, positional=True)
    p.add_argument("--idea", default=None, help="idea file (markdown or AI-Scientist-v2 JSON); required")
    p.add_argument("--resources", default=None, help="resources file (YAML or JSON)")
    p.add_argument(
        "--load-code",
        default=None,
        metavar="FILE",
        help="seed code: the first drafts start from this file (as AI-Scientist-v2's --load_code)",
    )
    p.add_argument("--out", default="experiments", help="output root (default: experiments/)")
    p.add_argument("--name", default=None, help="run name (default: timestamp + idea name)")
    p.add_argument(
        "--grader",
        default=None,
        metavar="DIR",
        help="grader directory (grade or grade.py + hidden data): it decides each node's metric, "
        "out of the generated code's reach (sets grader.dir; wins over the idea's)",
    )
    _references_arg(p)


def _references_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--references",
        action="append",
        default=None,
        metavar="PATH",
        help="your own papers: a .bib file, a PDF or a folder of them (repeatable), searched offline "
        "and first for citations and novelty (sets report.references; docs/literature.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ai-scientist",
        description="Grow a tree of sandboxed experiments from a research idea; every LLM call logged.",
    )
    parser.add_argument("--version", action="version", version="%(prog)s 0.1.0")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also show library log records (INFO) on the terminal"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="start a research run from an idea and a config")
    _run_inputs(p)
    p.add_argument(
        "--from-phase",
        default=None,
        choices=["plots", "writeup", "review"],
        help="with --run-dir: re-run this reporting phase and the ones after it on an existing run",
    )
    p.add_argument("--run-dir", default=None, help="existing run directory (with --from-phase)")
    p.add_argument("--stop-after", default=None, choices=["setup", "search"], help=argparse.SUPPRESS)

    p = sub.add_parser("resume", help="continue an interrupted run without redoing completed work")
    p.add_argument("run_dir")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")

    p = sub.add_parser(
        "submit", help="run (or --resume) the whole run as a Slurm batch job that continues itself"
    )
    _run_inputs(p)
    from .submit import add_arguments

    add_arguments(p)

    p = sub.add_parser("replay", help="re-run a recorded run from its prompt logs, with no LLM")
    p.add_argument("run_dir")
    p.add_argument("--out", default=None, help="where the replayed run goes (default: beside the original)")

    p = sub.add_parser("logs", help="inspect a run's tree, prompts, memory and cost from its logs")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    lsub = p.add_subparsers(dest="logs_command", metavar="WHAT")
    lsub.required = True
    lsub.add_parser("nodes", help="the tree: stage, status, metric")
    for name, hlp in (
        ("inspect", "last 500 chars of a node's state"),
        ("inspect-full", "a node's full state"),
        ("path", "root to node, each operation and whether it appended or replaced"),
        ("memory", "core / recall / archival memory as the node saw it"),
    ):
        q = lsub.add_parser(name, help=hlp)
        q.add_argument("node")
    q = lsub.add_parser("show-prompt", help="print exactly what was sent for one call")
    q.add_argument("node")
    q.add_argument("--call", type=int, default=None, help="call number K (default: the last)")
    q.add_argument("--layer", default=None, help="only this layer")
    q = lsub.add_parser("diff", help="layer-by-layer difference between two nodes' prompts")
    q.add_argument("node_a")
    q.add_argument("node_b")
    lsub.add_parser("cost", help="tokens and USD by role, phase and node")
    lsub.add_parser(
        "stages", help="each stage's best: how it was chosen (seed re-ranking), nodes not comparable"
    )
    for q in lsub.choices.values():
        # SUPPRESS: `logs RUN --json nodes` and `logs RUN nodes --json` both work
        q.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )

    p = sub.add_parser("view", help="write a self-contained offline HTML view of the run's tree")
    p.add_argument("run_dir")
    p.add_argument("--html", default=None, help="output file (default: RUN_DIR/tree.html)")

    p = sub.add_parser(
        "serve", help="live web view of a run (or of the runs under a directory), with steering"
    )
    from .serve import add_arguments as serve_arguments

    serve_arguments(p)

    p = sub.add_parser("steer", help="steer a run: pause, resume, note, block, expand, approve, status")
    from .steer import add_arguments as steer_arguments

    steer_arguments(p)

    p = sub.add_parser("doctor", help="what this machine offers: LLM, sandboxes, LaTeX, GPU, disk")
    _config_args(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("exec", help="run one command in a sandbox backend")
    p.add_argument("--backend", default=None, help="auto | subprocess | bwrap | docker | apptainer | slurm")
    p.add_argument(
        "--workspace",
        type=_workspace_dir,
        default=None,
        help="workspace directory (default: a temporary one)",
    )
    p.add_argument("--timeout", type=_timeout_s, default=None, help="seconds (default: exec.timeout)")
    p.add_argument("--network", action="store_true", help="allow network access")
    _config_args(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    p = sub.add_parser("ideate", help="propose research ideas on a topic, checked against the literature")
    p.add_argument("topic", help="markdown file describing the research area (as AI-Scientist-v2's)")
    p.add_argument("--out", default=None, help="ideas file, appended to (default: TOPIC with .json)")
    p.add_argument("--num-ideas", type=int, default=3, help="ideas to propose (1-50, default 3)")
    p.add_argument("--reflections", type=int, default=5, help="rounds per idea (1-20, default 5)")
    p.add_argument("--s2-url", default=None, help="Semantic Scholar API base URL (default: the public API)")
    _references_arg(p)
    _config_args(p)
    p = sub.add_parser("bench", help="graded research tasks: list, run (resumable), report")
    from .bench import add_arguments as bench_arguments

    bench_arguments(p)
    for q in sub.choices.values():  # `ai-scientist -v run ...` and `ai-scientist run -v ...` both work
        q.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="INFO logs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..base.config import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    from ..base.logsetup import configure_terminal

    configure_terminal(verbose=args.verbose)  # library INFO lines go to run.log, not the terminal
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    if getattr(args, "references", None) and args.command != "ideate":  # ideate reads it itself
        # absolute: config.resolved.yaml keeps it for a resume from another directory
        paths = [str(Path(r).expanduser().resolve()) for r in args.references]
        args.overrides.append(f"report.references={json.dumps(paths)}")
    try:
        return int(HANDLERS[args.command](args) or 0)
    except (ConfigError, UsageError) as exc:
        print(f"ai-scientist {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK

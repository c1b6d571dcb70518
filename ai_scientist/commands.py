"""``run``, ``resume`` and ``replay``: set a run up and hand it to the orchestrator.

Order matters for the user's money: every check that can fail (config, idea,
resources, LaTeX when reporting is on, sandbox backend, LLM backend) happens
before the first token is spent.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from .cli import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_NO_WORKING_EXPERIMENT, EXIT_OK, UsageError
from .config import Config, ConfigError, load_config
from .idea import load_idea
from .run import Run


def _preflight_reporting(cfg: Config) -> None:
    if not cfg.report.enabled:
        return
    from .reporting.latex import preflight_latex

    ok, message = preflight_latex()
    if not ok:
        raise ConfigError(
            f"report.enabled: {message}; install LaTeX (see README) or pass --set report.enabled=false"
        )


def setup_run(args: Any) -> tuple[Run, Any]:
    """Validate everything and create the run directory (no token spent yet): (run, resources)."""
    cfg = load_config(args.config, args.overrides)
    idea = load_idea(args.idea)
    resources = None
    if args.resources:
        from .resources import load_resources

        resources = load_resources(args.resources)
    _preflight_reporting(cfg)
    run = Run.create(cfg, idea, args.out, args.name)
    if args.resources:
        shutil.copyfile(args.resources, run.dir / "resources" / ("spec" + Path(args.resources).suffix))
    run.save_state(resources_spec=str(args.resources) if args.resources else None)
    return run, resources


def cmd_run(args: Any) -> int:
    if args.from_phase:
        return _rerun_reporting(args)
    if not args.idea:
        raise UsageError("--idea FILE is required (markdown or AI-Scientist-v2 JSON idea)")
    run, resources = setup_run(args)
    print(run.dir, flush=True)
    if args.stop_after == "setup":
        return EXIT_OK
    return execute(run, resources=resources)


def cmd_resume(args: Any) -> int:
    run = Run.open(args.run_dir, args.overrides)
    if run.state.get("status") == "completed":
        print(f"{run.dir}: already completed (exit {run.state.get('exit_code')})", file=sys.stderr)
        return int(run.state.get("exit_code") or 0)
    print(run.dir, flush=True)
    return execute(run, resources=None, resumed=True)


def cmd_replay(args: Any) -> int:
    from .replay import replay_run

    src = Path(args.run_dir)
    if not (src / "journal.jsonl").exists():
        raise UsageError(f"{src}: not a run directory with a journal")
    out = Path(args.out) if args.out else src.parent
    run = replay_run(src, out)
    print(run.dir, flush=True)
    return execute(run, resources=None, replay_from=src)


def _rerun_reporting(args: Any) -> int:
    if not args.run_dir:
        raise UsageError("--from-phase needs --run-dir RUN_DIR (an existing run)")
    run = Run.open(args.run_dir, args.overrides)
    print(run.dir, flush=True)
    from .orchestrator import build_services, finish_reporting

    services = build_services(run)
    try:
        finish_reporting(run, services, from_phase=args.from_phase)
    finally:
        services.close()
    return EXIT_OK


def execute(
    run: Run,
    *,
    resources: Any = None,
    resumed: bool = False,
    replay_from: Path | None = None,
    backend: Any = None,
) -> int:
    """Run the search (and reporting) to the end; returns the CLI exit code."""
    from .llm.types import CostCapExceeded, UnrecordedPrompt
    from .orchestrator import Orchestrator, build_services

    if resumed:
        run.event("run_resumed", previous_status=run.state.get("status"))
    services = build_services(run, resources=resources, backend=backend, replay_from=replay_from)
    run.save_state(status="running")
    try:
        code = Orchestrator(run, services).run()
    except KeyboardInterrupt:
        run.save_state(status="interrupted")
        run.event("run_interrupted", reason="KeyboardInterrupt (Ctrl-C); resume with ai-scientist resume")
        print(f"interrupted; state saved. Resume with: ai-scientist resume {run.dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UnrecordedPrompt as exc:
        run.save_state(status="replay_diverged")
        run.event("replay_diverged", reason=str(exc))
        print(f"replay diverged from the recording: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except CostCapExceeded as exc:
        run.save_state(status="cost_cap")
        run.event("run_stopped", reason=str(exc))
        print(
            f"stopped: {exc}. Raise llm.max_cost_usd and resume: ai-scientist resume {run.dir} "
            f"--set llm.max_cost_usd=...",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        services.close()
    status = "completed" if code in (EXIT_OK, EXIT_NO_WORKING_EXPERIMENT) else "failed"
    run.save_state(status=status, exit_code=code)
    run.event("run_finished", exit_code=code, status=status)
    return code

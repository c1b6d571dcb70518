"""``run``, ``resume`` and ``replay``: set a run up and hand it to the orchestrator.

Order matters for the user's money: every check that can fail (config, idea,
resources, LaTeX when reporting is on, sandbox backend, LLM backend) happens
before the first token is spent.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.config import Config, ConfigError, dump_config, load_config
from ..base.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_WORKING_EXPERIMENT,
    EXIT_OK,
    DiskFull,
    RunStop,
    UnrecordedPrompt,
    UsageError,
    disk_full_from,
)
from ..base.fileio import atomic_write_text
from ..base.idea import load_idea, with_seed_code
from ..base.paths import RunPaths
from ..base.run import Run
from ..base.runlock import RunLock
from .outcome import print_outcome

if TYPE_CHECKING:
    import argparse

    from ..execution.resources import ResourceSpec
    from ..llm.backend import Backend
    from ..runloop.services import Services


def _preflight_reporting(cfg: Config) -> None:
    if not cfg.report.enabled:
        return
    from ..reporting.latex import preflight_latex

    ok, message = preflight_latex()
    if not ok:
        raise ConfigError(
            f"report.enabled: {message}; install LaTeX (see README) or pass --set report.enabled=false"
        )


def _preflight_context_window(cfg: Config) -> None:
    """A model the window table does not know gets the window its server reports, written into
    the resolved config (so ``resume`` and ``replay`` budget the same prompts); when the server
    does not say, one line warns that prompts get the small default budget."""
    from ..llm.probe import run_context_window

    window, line = run_context_window(cfg)
    if window:
        cfg.context.model_context_window = window
    if line:
        print(f"[context] {line}", file=sys.stderr, flush=True)


def _preflight_sandbox(cfg: Config) -> None:
    """The sandbox must be usable (and safe) before a run directory is made: a refusal exits 2
    and leaves nothing behind. The resolution is cached, so the run reuses it."""
    from ..execution import make_executor, resolve_backend
    from ..execution.base import SandboxError

    try:
        name, _ = resolve_backend(cfg)
        make_executor(cfg, backend=name).close()
    except ConfigError:
        raise
    except SandboxError as exc:
        raise ConfigError(f"exec.backend: {exc}") from None


def _grader_choice(args: argparse.Namespace, from_idea: str) -> tuple[str, str] | None:
    """(directory, where it was given): ``--grader`` wins over the idea's, the idea's over ``grader.dir``."""
    if getattr(args, "grader", None):
        return args.grader, "--grader"
    if from_idea:
        return from_idea, "the idea's grader"
    return None


def _preflight_grader(
    cfg: Config, given: tuple[str, str] | None, out_root: str, resources: ResourceSpec | None
) -> None:
    """The grader (``--grader DIR``, the idea's, or ``grader.dir``) must be usable and exposed
    neither by the run directory nor by a resource; it is saved as an absolute ``grader.dir``.
    A broken grader exits 2 before the run directory is made."""
    from ..execution.grader import check_placement, load_grader

    path, where = given or (cfg.grader.dir, "grader.dir")
    if not path:
        return
    grader = load_grader(path, where)
    sources = []
    if resources is not None:
        base = Path(resources.source).parent
        sources = [(base / Path(e.path).expanduser()) for e in resources.entries if e.path]
    check_placement(grader, Path(out_root), sources)
    cfg.grader.dir = str(grader.dir)


def setup_run(args: argparse.Namespace) -> tuple[Run, ResourceSpec | None]:
    """Validate everything and create the run directory (no token spent yet): (run, resources)."""
    cfg = load_config(args.config, args.overrides)
    idea = load_idea(args.idea)
    if getattr(args, "load_code", None) is not None:
        idea = with_seed_code(idea, args.load_code)
    resources = None
    if args.resources:
        from ..execution.resources import load_resources

        resources = load_resources(args.resources)
    _preflight_grader(cfg, _grader_choice(args, idea.grader), args.out, resources)
    _preflight_reporting(cfg)
    _preflight_sandbox(cfg)
    _preflight_context_window(cfg)
    run = Run.create(cfg, idea, args.out, args.name)
    if args.resources:
        shutil.copyfile(args.resources, RunPaths(run.dir).resources / ("spec" + Path(args.resources).suffix))
    run.save_state(resources_spec=str(args.resources) if args.resources else None)
    return run, resources


def cmd_run(args: argparse.Namespace) -> int:
    if args.from_phase:
        return _rerun_reporting(args)
    if not args.idea:
        raise UsageError("--idea FILE is required (markdown or AI-Scientist-v2 JSON idea)")
    run, resources = setup_run(args)
    print(run.dir, flush=True)
    if args.stop_after == "setup":
        return EXIT_OK
    return execute(run, resources=resources)


def open_locked(run_dir: str, overrides: list[str] | None) -> Run:
    """Open an existing run holding its lock (taken before the state is read)."""
    path = Path(run_dir)
    if not RunPaths(path).config.is_file():
        raise UsageError(f"{path}: not a run directory (no config.resolved.yaml)")
    lock = RunLock.acquire(path)
    try:
        run = Run.open(path, overrides)
    except BaseException:
        lock.release()
        raise
    run.lock = lock
    if overrides:  # kept, so a later `resume` without --set does not fall back (e.g. to the old cap)
        atomic_write_text(RunPaths(run.dir).config, dump_config(run.cfg))
        run.event("config_overridden", overrides=list(overrides))
    return run


def cmd_resume(args: argparse.Namespace) -> int:
    run = open_locked(args.run_dir, args.overrides)
    try:
        if run.cfg.grader.dir:  # removed or broken since the run started: exit 2, nothing run
            from ..execution.grader import load_grader

            load_grader(run.cfg.grader.dir, "grader.dir")
        if run.state.get("status") == "completed":
            print(f"{run.dir}: already completed (exit {run.state.get('exit_code')})", file=sys.stderr)
            return int(run.state.get("exit_code") or 0)
        print(run.dir, flush=True)
        return execute(run, resources=None, resumed=True)
    finally:
        if run.lock is not None:
            run.lock.release()


def cmd_replay(args: argparse.Namespace) -> int:
    from ..runloop.replay import replay_run

    src = Path(args.run_dir)
    if not RunPaths(src).journal.exists():
        raise UsageError(f"{src}: not a run directory with a journal")
    out = Path(args.out) if args.out else src.parent
    run = replay_run(src, out)
    print(run.dir, flush=True)
    return execute(run, resources=None, replay_from=src)


def _rerun_reporting(args: argparse.Namespace) -> int:
    if not args.run_dir:
        raise UsageError("--from-phase needs --run-dir RUN_DIR (an existing run)")
    run = open_locked(args.run_dir, args.overrides)
    print(run.dir, flush=True)
    from ..runloop.orchestrator import build_services, finish_reporting

    lock = run.lock  # open_locked took it
    try:
        services = build_services(run)
        try:
            finish_reporting(run, services, from_phase=args.from_phase)
        finally:
            services.close()
    finally:
        if lock is not None:
            lock.release()
        run.lock = None
    return EXIT_OK


def execute(
    run: Run,
    *,
    resources: ResourceSpec | None = None,
    resumed: bool = False,
    replay_from: Path | None = None,
    backend: Backend | None = None,
) -> int:
    """Run the search (and reporting) to the end; returns the CLI exit code.

    Holds the run's lock for the whole call (a second orchestrator on the same run is refused
    with exit 2), and always ends with the outcome, its reason and the next command on stderr.
    """
    from ..runloop.orchestrator import Orchestrator, build_services

    lock = run.lock if run.lock is not None else RunLock.acquire(run.dir)
    try:
        if resumed:
            run.event("run_resumed", previous_status=run.state.get("status"))
        services = build_services(run, resources=resources, backend=backend, replay_from=replay_from)
        run.save_state(status="running")
        stop: BaseException | None = None
        try:
            code = Orchestrator(run, services).run()
        except (KeyboardInterrupt, RunStop) as exc:
            stop, code = exc, -1
        except Exception as exc:
            full = disk_full_from(exc)
            if full is None:
                raise
            stop, code = full, -1
        finally:
            _close_quietly(services, stop)
        if stop is not None:
            return _stopped(run, stop)
        status = "completed" if code in (EXIT_OK, EXIT_NO_WORKING_EXPERIMENT) else "failed"
        run.save_state(status=status, exit_code=code)
        run.event("run_finished", exit_code=code, status=status)
        print_outcome(run, code)
        return code
    finally:  # the run has ended (or stopped): the next `resume` may take it
        lock.release()
        run.lock = None


def _close_quietly(services: Services, stop: BaseException | None) -> None:
    try:  # a stop at the orchestrator's own Slurm time limit may leave experiment jobs running
        services.close(keep_jobs=bool(getattr(stop, "keep_jobs", False)))
    except Exception as exc:
        if stop is None and disk_full_from(exc) is None:
            raise


def _stopped(run: Run, stop: BaseException) -> int:
    """Record a clean stop (Ctrl-C, cost cap, full disk, diverged replay) and say what to do next.

    The journal already holds every finished node; if the disk is full even the state update
    may fail, which loses nothing (``resume`` works from the journal)."""
    if isinstance(stop, KeyboardInterrupt):
        status, code, reason = "interrupted", EXIT_INTERRUPTED, "interrupted (Ctrl-C)"
        hint, title = f"ai-scientist resume {run.dir}", "run interrupted"
        event = "run_interrupted"
    else:
        assert isinstance(stop, RunStop)
        if isinstance(stop, DiskFull):
            stop = stop.located(run.dir)
        status, code, reason, hint = stop.status, stop.exit_code, str(stop), stop.hint(run.dir)
        title = stop.title
        event = "replay_diverged" if isinstance(stop, UnrecordedPrompt) else "run_stopped"
    try:
        run.save_state(status=status)
        run.event(event, status=status, reason=reason, exit_code=code)
        saved = "state saved"
    except Exception as exc:
        if disk_full_from(exc) is None:
            raise
        saved = "state as of the last finished node (the state file could not be updated)"
    print_outcome(run, code, reason=reason, hint=hint, saved=saved, title=title)
    return code

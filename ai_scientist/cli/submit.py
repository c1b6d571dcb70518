"""``ai-scientist submit``: the whole run as a Slurm batch job that continues itself at its time limit.

On the login node, ``submit`` checks everything ``run`` checks, asks the controller whether it
would take the job (``sbatch --test-only``), makes the run directory (resources staged there,
where the network is), writes the batch script to ``RUN/submit/job.sh`` (kept) and submits it;
it prints the run directory and the job id and returns. ``submit --resume RUN`` submits the same
script for an existing run.

The job runs ``ai-scientist submit --in-job RUN``: resume semantics from the first job on (a
fresh run starts, a stopped one continues; no finished node or phase runs again). It asks Slurm
for ``--signal=B:USR1@<submit.warning_s>``: SIGUSR1, sent to the batch shell only (which the
script ``exec``s into this process, so experiment commands never get it), raises
:class:`SlurmJobEnding` on the main thread, the path of Ctrl-C and the cost cap: state saved,
exit 4, experiment jobs left to finish (``resume`` re-attaches) or cancelled
(``submit.experiment_jobs``). The job then continues the run in a new job that starts after it
ends (``--dependency=afterany``) or requeues itself, at most ``submit.max_resubmits`` times per
``submit``. SIGTERM (``scancel``, or the hard limit reached first) stops the same way, without
a continuation.

Experiments run wherever ``exec.backend`` says: in the job's own allocation with a local sandbox
(give the job the CPUs and memory: ``submit.cpus`` / ``submit.mem_mb``), or each as its own job
under ``exec.backend: slurm``. Every step is an event of the run (``submit_job_submitted``,
``submit_job_started``, ``submit_continued``, ``submit_exhausted``).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import EXIT_INTERRUPTED, EXIT_STOPPED, RunStop, UsageError

if TYPE_CHECKING:
    from ..base.config import Config
    from ..base.run import Run
    from ..llm.backend import Backend

SUBMIT_DIR = "submit"  # RUN/submit/: job.sh and the jobs' output (slurm-<id>.out)
CLI_TIMEOUT_S = 60.0
# Slurm's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+))?(?::(\d+))?|(\d+)(?::(\d+))?(?::(\d+))?)$")


class SlurmJobEnding(RunStop):
    """The orchestrator's own Slurm job is ending: its time-limit warning (``time_limit``: exit 4,
    the job continues the run) or SIGTERM (scancel, or the hard limit reached before the warning
    could act: exit 130, nothing continues by itself). ``keep_jobs``: experiment jobs in flight are
    left running (``resume`` re-attaches to them) instead of cancelled."""

    title = "run stopped by its Slurm job"

    def __init__(self, message: str, *, time_limit: bool, keep_jobs: bool):
        super().__init__(message)
        self.status = "time_limit" if time_limit else "job_cancelled"
        self.exit_code = EXIT_STOPPED if time_limit else EXIT_INTERRUPTED
        self.keep_jobs = keep_jobs

    def hint(self, run_dir: str | Path) -> str:
        if self.status == "time_limit":
            return f"the job continues the run in a new job (see RUN/submit/); by hand: ai-scientist submit --resume {run_dir}"
        return f"ai-scientist submit --resume {run_dir}   (or: ai-scientist resume {run_dir})"


# ------------------------------------------------------------------------------- arguments --


def time_limit_s(text: str) -> int:
    """Seconds of a Slurm ``--time`` value (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``)."""
    m = _TIME.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a Slurm time limit (HH:MM:SS, MM, MM:SS or D-HH:MM:SS)")
    d, dh, dm, ds, mm, ms, hs = (int(g) if g else 0 for g in m.groups())
    if m.group(1) is not None:  # D-H[:M[:S]]
        seconds = ((d * 24 + dh) * 60 + dm) * 60 + ds
    elif m.group(7) is not None:  # H:M:S
        seconds = (mm * 60 + ms) * 60 + hs
    else:  # M or M:S
        seconds = mm * 60 + ms
    if seconds <= 0:
        raise ValueError(f"{text!r}: the time limit must be positive")
    return seconds


def _time_arg(text: str) -> str:
    try:
        time_limit_s(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The submit-only options (the run arguments are added by the caller)."""
    p.add_argument("--resume", default=None, metavar="RUN", help="submit an existing run to continue")
    p.add_argument("--time", type=_time_arg, default=None, help="job time limit (default: submit.time)")
    p.add_argument("--partition", default=None, help="job partition (default: submit.partition)")
    p.add_argument(
        "--sbatch-arg",
        dest="sbatch_args",
        action="append",
        default=[],
        metavar="OPTION",
        help="one more sbatch option, e.g. --sbatch-arg=--account=proj (repeatable)",
    )
    p.add_argument("--in-job", default=None, metavar="RUN", help=argparse.SUPPRESS)


# ------------------------------------------------------------------------------ the script --


def job_name(run_dir: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"ais-submit-{run_dir.name}")


def job_resources(cfg: Config) -> tuple[int, int]:
    """(cpus, mem_mb) of the orchestrator's job: its own share, plus the experiments' when they
    run in the allocation (every backend but slurm)."""
    workers = cfg.agent.num_workers
    local = cfg.exec.backend != "slurm"
    cpus = cfg.submit.cpus or 1 + (workers * math.ceil(cfg.exec.cpus) if local else 0)
    mem = cfg.submit.mem_mb or 4096 + (workers * cfg.exec.memory_mb if local else 0)
    return cpus, mem


def sbatch_options(
    cfg: Config, run_dir: Path, *, time: str, partition: str | None, extra: list[str]
) -> list[str]:
    """Every option of the orchestrator's job (pure; written as the script's ``#SBATCH`` lines)."""
    cpus, mem = job_resources(cfg)
    opts = [
        f"--job-name={job_name(run_dir)}",
        f"--output={run_dir / SUBMIT_DIR / 'slurm-%j.out'}",
        "--open-mode=append",  # a requeued job keeps its id: its output continues the file
        f"--chdir={Path.cwd()}",
        f"--time={time}",
        f"--signal=B:USR1@{cfg.submit.warning_s}",
        "--requeue",  # a node failure requeues it too: the job always resumes the run
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={cpus}",
        f"--mem={mem}",
    ]
    if partition:
        opts.append(f"--partition={partition}")
    return opts + list(cfg.submit.extra_args) + list(extra)


def job_python(cfg: Config) -> str:
    return cfg.submit.python or cfg.exec.slurm.python or sys.executable


def script_text(cfg: Config, run_dir: Path, options: list[str]) -> str:
    """The batch script. ``exec`` makes the orchestrator the batch shell, so the ``B:`` signal
    reaches it and nothing else; the environment is the submitting shell's (sbatch's default
    ``--export=ALL``: the orchestrator needs its API key variable; experiment jobs get none)."""
    lines = ["#!/bin/bash", *(f"#SBATCH {o}" for o in options), ""]
    # a warning that comes before the orchestrator's handler is armed (interpreter start-up) is
    # ignored, not fatal: the ignore survives exec, and the run then stops cleanly at the limit's
    # SIGTERM with its state saved (without it, the default action killed the job at once)
    lines.append("trap '' USR1")
    argv = [job_python(cfg), "-m", "ai_scientist.cli", "submit", "--in-job", str(run_dir)]
    return "\n".join([*lines, "exec " + " ".join(shlex.quote(a) for a in argv), ""])


# ---------------------------------------------------------------------------- login node --


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a new run (run arguments) or ``--resume RUN``; prints the run directory, then the job id."""
    if args.in_job:
        return run_in_job(Path(args.in_job))
    from ..execution.slurm_cli import SlurmCLI

    ok, detail = SlurmCLI.available()
    if not ok:
        raise UsageError(f"{detail}; `submit` runs where sbatch does (a login node)")
    if args.resume:
        return _submit_existing(args)
    if not args.idea:
        raise UsageError("--idea FILE is required (or --resume RUN to continue an existing run)")
    from ..base.config import load_config

    cfg = load_config(args.config, args.overrides)
    time, partition = _job_limits(cfg, args)
    probe = sbatch_options(cfg, Path.cwd() / "unused", time=time, partition=partition, extra=args.sbatch_args)
    _test_only(SlurmCLI(), probe)  # a refused option exits 2 before the run directory exists
    for name in ("resources", "load_code", "grader"):  # the job starts elsewhere: absolute paths
        if getattr(args, name, None):
            setattr(args, name, str(Path(getattr(args, name)).absolute()))
    from .commands import setup_run

    run, resources = setup_run(args)
    try:
        if resources is not None:  # staged here, on the login node, where the network is
            _stage(run, resources)
        return _submit(run, time, partition, args.sbatch_args, by="user")
    except UsageError as exc:  # e.g. sbatch refused after --test-only accepted: the run is kept
        raise UsageError(
            f"{exc}\nthe run directory {run.dir} is kept: ai-scientist submit --resume {run.dir}"
        ) from None
    finally:
        if run.lock is not None:
            run.lock.release()
            run.lock = None


def _job_limits(cfg: Config, args: argparse.Namespace) -> tuple[str, str | None]:
    """(--time, --partition): the arguments win over ``submit.*``; the warning must fit in the limit."""
    time = args.time or cfg.submit.time
    try:
        limit = time_limit_s(time)
    except ValueError as exc:
        raise UsageError(f"submit.time: {exc}") from None
    minutes = math.ceil(limit / 60)  # Slurm counts whole minutes
    if cfg.submit.warning_s >= minutes * 60:
        raise UsageError(
            f"--time {time} ({minutes} min) leaves no time before the warning signal "
            f"(submit.warning_s={cfg.submit.warning_s}); give a longer --time or --set submit.warning_s=<fewer seconds>"
        )
    return time, args.partition or cfg.submit.partition


def _test_only(cli: Any, options: list[str]) -> None:
    keep = [o for o in options if not o.startswith(("--output=", "--open-mode", "--chdir", "--signal"))]
    problem = cli.test_only([*keep, "--output=/dev/null"])
    if problem:
        raise UsageError(f"the Slurm controller refuses the job ({' '.join(keep)}): {problem}")


def _stage(run: Run, resources: Any) -> None:
    from ..execution import make_executor, resolve_backend
    from ..execution.base import Limits
    from ..execution.resources import stage_resources

    name, _ = resolve_backend(run.cfg)
    executor = make_executor(run.cfg, backend=name, resources_dir=run.paths.resources)
    try:
        index = stage_resources(
            resources, run.dir, executor=executor, limits=Limits.from_config(run.cfg.exec)
        )
    finally:
        executor.close()
    run.event("resources_staged", items=len(getattr(index, "items", []) or []), where="submit")


def _submit_existing(args: argparse.Namespace) -> int:
    from ..execution.slurm_cli import SlurmCLI
    from .commands import open_locked

    stray = [a for a in ("idea", "resources", "load_code", "grader", "name") if getattr(args, a, None)]
    if stray or args.config:
        raise UsageError("--resume RUN takes no run arguments (the run has its own); --set is applied to it")
    run = open_locked(args.resume, args.overrides)  # exits 2 when a process holds the run
    try:
        if run.state.get("status") == "completed":
            print(f"{run.dir}: already completed (exit {run.state.get('exit_code')})", file=sys.stderr)
            return int(run.state.get("exit_code") or 0)
        cli = SlurmCLI()
        queued = [j for j, st in cli.squeue(cli.find_by_name(job_name(run.dir))).items() if st.active]
        if queued:
            raise UsageError(
                f"{run.dir}: already queued or running as Slurm job {', '.join(queued)}; "
                f"wait for it, or scancel {' '.join(queued)} first"
            )
        time, partition = _job_limits(run.cfg, args)
        return _submit(run, time, partition, args.sbatch_args, by="user")
    finally:
        if run.lock is not None:
            run.lock.release()
            run.lock = None


def _submit(run: Run, time: str, partition: str | None, extra: list[str], *, by: str) -> int:
    """Write RUN/submit/job.sh, submit it, record it; print the run directory and the job id."""
    from ..base.fileio import atomic_write_text

    where = run.dir.absolute()  # the script works from any directory
    options = sbatch_options(run.cfg, where, time=time, partition=partition, extra=extra)
    folder = run.dir / SUBMIT_DIR
    folder.mkdir(exist_ok=True)
    script = folder / "job.sh"
    atomic_write_text(script, script_text(run.cfg, where, options))
    job_id = _sbatch([str(script)])
    run.event("submit_job_submitted", job_id=job_id, by=by, script=str(script), options=options)
    print(run.dir, flush=True)
    print(job_id, flush=True)
    print(
        f"submitted Slurm job {job_id} ({job_name(run.dir)}, --time={time}); its output: "
        f"{folder / f'slurm-{job_id}.out'}\nfollow it: squeue -j {job_id}; ai-scientist logs {run.dir} nodes",
        file=sys.stderr,
    )
    return 0


def _sbatch(argv: list[str]) -> str:
    """``sbatch --parsable ARGV``: the job id, or exit 2 with the controller's words."""
    proc = _slurm(["sbatch", "--parsable", *argv])
    job_id = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not job_id.isdigit():
        raise UsageError(f"sbatch refused the job: {(proc.stderr or proc.stdout).strip()[:500]}")
    return job_id


def _slurm(argv: list[str]) -> subprocess.CompletedProcess[str]:
    if not shutil.which(argv[0]):
        raise UsageError(f"{argv[0]} not found on PATH; install the Slurm client (slurm-client)")
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{argv[0]} did not answer within {CLI_TIMEOUT_S:.0f}s (controller down?)") from None


# ---------------------------------------------------------------------------- in the job --


class _JobSignals:
    """SIGUSR1 (the time-limit warning) and SIGTERM raise :class:`SlurmJobEnding` on the main
    thread, once; :meth:`disarm` ignores both from then on."""

    def __init__(self, job_id: str, warning_s: int, keep_jobs: bool):
        self.job_id, self.warning_s, self.keep_jobs = job_id, warning_s, keep_jobs

    def arm(self) -> None:
        signal.signal(signal.SIGUSR1, self._warning)
        signal.signal(signal.SIGTERM, self._terminated)

    def disarm(self) -> None:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def _warning(self, signum: int, frame: object) -> None:
        self.disarm()
        raise SlurmJobEnding(
            f"Slurm job {self.job_id} got its time-limit warning (SIGUSR1, --signal=B:USR1@{self.warning_s})",
            time_limit=True,
            keep_jobs=self.keep_jobs,
        )

    def _terminated(self, signum: int, frame: object) -> None:
        self.disarm()
        raise SlurmJobEnding(
            f"Slurm job {self.job_id} was sent SIGTERM (scancel, or its time limit passed before the warning)",
            time_limit=False,
            keep_jobs=False,
        )


def run_in_job(run_dir: Path, backend: Backend | None = None) -> int:
    """The batch job's body: run or resume the run, and at a time-limit stop continue it in
    another job. ``backend``: the LLM backend (tests pass a scripted one)."""
    from .commands import _stopped, execute, open_locked

    job_id = os.environ.get("SLURM_JOB_ID", "")
    run = open_locked(str(run_dir), None)
    sub = run.cfg.submit
    signals = _JobSignals(job_id, sub.warning_s, keep_jobs=sub.experiment_jobs == "leave")
    signals.arm()
    try:
        run.event(
            "submit_job_started",
            job_id=job_id,
            restart_count=int(os.environ.get("SLURM_RESTART_COUNT") or 0),
            host=socket.gethostname(),
        )
        if run.state.get("status") == "completed":
            print(f"{run.dir}: already completed (exit {run.state.get('exit_code')})", file=sys.stderr)
            return int(run.state.get("exit_code") or 0)
        fresh = run.state.get("status") == "created"
        code = execute(run, resumed=not fresh, backend=backend)
    except SlurmJobEnding as stop:  # arrived outside execute's own handler (before or after it)
        if run.lock is not None:
            run.lock.release()
            run.lock = None
        code = _stopped(run, stop)
    finally:
        signals.disarm()
        if run.lock is not None:
            run.lock.release()
            run.lock = None
    if run.state.get("status") != "time_limit":
        return code
    return _continue(run, job_id, code)


def continuations(events: list[dict[str, Any]]) -> int:
    """Continuations since the user's last ``submit`` (the budget of ``submit.max_resubmits``)."""
    used = 0
    for ev in events:
        if ev.get("type") == "submit_job_submitted" and ev.get("by") == "user":
            used = 0
        elif ev.get("type") == "submit_continued":
            used += 1
    return used


def _continue(run: Run, job_id: str, code: int) -> int:
    """After a time-limit stop: requeue this job or submit a new one that starts once it ends."""
    sub = run.cfg.submit
    used = continuations(run.events())
    if used >= sub.max_resubmits:
        run.event("submit_exhausted", job_id=job_id, continuations=used, max_resubmits=sub.max_resubmits)
        print(
            f"submit.max_resubmits={sub.max_resubmits} continuations used; continue by hand: "
            f"ai-scientist submit --resume {run.dir}",
            file=sys.stderr,
        )
        return code
    script = run.dir / SUBMIT_DIR / "job.sh"
    if sub.continue_with == "requeue" and job_id:
        why = _requeue_refused(job_id)
        if why is None:
            run.event("submit_continued", how="requeue", job_id=job_id, previous=job_id, n=used + 1)
            print(f"requeued Slurm job {job_id} to continue the run", file=sys.stderr, flush=True)
            proc = _slurm(["scontrol", "requeue", job_id])  # Slurm ends this job now
            if proc.returncode == 0:
                return code
            why = proc.stderr.strip()[:300]
            run.event("submit_requeue_failed", job_id=job_id, reason=why)
        print(f"cannot requeue job {job_id} ({why}); submitting a new job", file=sys.stderr)
    after = [f"--dependency=afterany:{job_id}"] if job_id else []
    new_id = _sbatch([*after, str(script)])
    run.event("submit_continued", how="resubmit", job_id=new_id, previous=job_id, n=used + 1)
    print(f"submitted Slurm job {new_id} to continue the run after job {job_id}", file=sys.stderr, flush=True)
    return code


def _requeue_refused(job_id: str) -> str | None:
    """None when the job may be requeued, else why not."""
    proc = _slurm(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0:
        return proc.stderr.strip()[:300] or "scontrol show job failed"
    return None if re.search(r"\bRequeue=1\b", proc.stdout) else "the job is not requeueable (Requeue=0)"

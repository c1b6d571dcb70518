"""``slurm`` backend: every command of a node is one Slurm job (``exec.slurm.*``).

The orchestrator stays on a login or service node; each ``run()`` writes a job
directory on storage both sides see (``exec.slurm.shared_dir``)::

    <shared_dir>/<run_id>/<node_id>/<key>-<k>/
        spec.json     command, workspace, limits, environment (no secrets), inner sandbox
        job.sh        the batch script with its #SBATCH options
        job_id        written right after ``sbatch --parsable`` answered
        stdout stderr the command's capped output (Slurm's --output / --error)
        exit.json     written atomically by the job: the full ExecResult

and submits it with ``sbatch``. Inside the job :mod:`.slurm_job` runs the
command in the inner sandbox (``exec.slurm.sandbox``) with the usual limits:
exact timeout, capped output, memory limit. One poller thread looks for the
jobs' exit files every few milliseconds (:data:`EXIT_CHECK_S`) and asks
``squeue`` once per ``poll_interval_s`` about every job in flight; ``exit.json`` decides
the outcome, and a job that ended without one maps to a named failure
(:func:`.slurm_outcome.failure_for`): Slurm time limit, memory kill, cancellation, launch
failure, or lost (purged from the queue without an exit file).

Re-attach: ``<key>`` digests the command and workspace, ``<k>`` counts its
submissions for that node in this process. After a ``kill -9`` of the
orchestrator the jobs keep running; on ``resume`` the node re-runs the same
command, finds the directory, and waits for (or reads) that job instead of
submitting a new one. ``close()`` (Ctrl-C, end of run) cancels this executor's
unfinished jobs by id — never by user — and sets their directories aside so a
later resume submits them afresh.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shlex
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.paths import node_of_workspace
from .base import ExecResult, Limits, SandboxError, normalize_command
from .hpc_facts import MODULE_VAR_PREFIXES, MODULE_VARS
from .lineage import take_install_dir
from .sandbox_env import ensure_dir, is_secret_name
from .slurm_cli import SlurmCLI
from .slurm_job import SPEC_FILE
from .slurm_outcome import SlurmJob, job_result

if TYPE_CHECKING:
    from ..base.config import ExecConfig

_NAME_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# sbatch errors worth retrying: the controller is busy or briefly away, or a submit limit is reached
TRANSIENT = re.compile(
    r"timed out|Unable to contact|Socket timed out|try again|temporarily|submit limit|AssocMaxSubmitJobLimit"
    r"|QOSMaxSubmitJob|Resource temporarily unavailable|Slurm controller not responding",
    re.I,
)
SBATCH_ATTEMPTS = 6
SBATCH_RETRY_S = 2.0  # doubled after each refusal: 2 + 4 + 8 + 16 + 32 s at most
DRAIN_S = 30.0  # close() waits this long at most for the executor's jobs to leave the queue
# exit files are looked at every EXIT_CHECK_S (a stat per job in flight, no controller call), later
# every EXIT_CHECK_FRACTION of the youngest job's age; squeue only every poll_interval_s, which so
# bounds how soon a job that died without an exit file is noticed, not how soon a result is read
EXIT_CHECK_S = 0.02
EXIT_CHECK_FRACTION = 0.02
# what a job gets of the orchestrator's environment (exec.slurm.login_env: false): sbatch runs with
# only these, and the job (--export=ALL) inherits them; never a secret-looking name
JOB_ENV_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SHELL"})
JOB_ENV_PREFIXES = ("LC_", "SLURM_", "SBATCH_", *MODULE_VAR_PREFIXES)  # SLURM_CONF, sbatch's inputs


class SlurmExecutor:
    """Runs each command as a Slurm job; see the module docstring. Thread-safe: many jobs in flight."""

    name = "slurm"
    hidden: tuple[str, ...] = ()  # directories the inner sandbox hides (see run_setup.SandboxBackend)

    def __init__(
        self, exec_cfg: ExecConfig, *, resources_dir: Path | None = None, cli: SlurmCLI | None = None
    ):
        ok, detail = SlurmCLI.available()
        if cli is None and not ok:
            raise SandboxError(detail)
        if exec_cfg.gpus:
            from .isolation import SandboxUnavailable

            # refused, not ignored: a job sees the GPUs of its allocation only, which exec.gpus
            # (indices on the orchestrator's machine) cannot give it
            raise SandboxUnavailable(
                f"exec.gpus={list(exec_cfg.gpus)} is not used with exec.backend: slurm: a job's GPUs are "
                "those of its allocation. Ask Slurm for them with exec.slurm.gres (e.g. gpu:1) and leave "
                "exec.gpus empty; the job's CUDA_VISIBLE_DEVICES reaches the command"
            )
        self.exec_cfg = exec_cfg
        self.cfg = exec_cfg.slurm
        self.cli = cli or SlurmCLI()
        self.resources_dir = ensure_dir(resources_dir)
        self.job_python = self.cfg.python or sys.executable
        self.last_error = ""  # the last squeue failure (the poller keeps trying)
        self._jobs: dict[str, SlurmJob] = {}
        self._counts: Counter[str] = Counter()
        self._cv = threading.Condition()
        self._closed = threading.Event()
        self._poller: threading.Thread | None = None
        self._adhoc_run = f"adhoc-{os.getpid()}-{int(time.time())}"
        if cli is None:
            self.preflight()

    def preflight(self) -> None:
        """Ask the controller (``sbatch --test-only``) whether it would accept a job with the
        configured options, so a wrong partition / account / qos / gres or an unreachable
        controller stops the run before anything is spent (a configuration error, exit 2)."""
        from .isolation import SandboxUnavailable

        limits = Limits.from_config(self.exec_cfg)
        opts = self.sbatch_options("ai-sci-preflight", Path(tempfile.gettempdir()), limits)
        opts = [o for o in opts if not o.startswith(("--output=", "--error=", "--chdir="))]
        problem = self.cli.test_only([*opts, "--output=/dev/null", f"--chdir={tempfile.gettempdir()}"])
        if problem:
            c = self.cfg
            chosen = ", ".join(
                f"{k}={v}" for k, v in (("partition", c.partition), ("account", c.account), ("qos", c.qos),
                                        ("gres", c.gres), ("extra_args", c.extra_args)) if v
            )  # fmt: skip
            raise SandboxUnavailable(
                f"exec.slurm: the Slurm controller refuses jobs with these options "
                f"({chosen or 'defaults'}, --mem={self.mem_mb(limits)}, --time={self.time_minutes(limits)}): "
                f"{problem}. Check exec.slurm.* (sinfo lists partitions) or run `ai-scientist doctor`"
            )

    # ------------------------------------------------------------ interface --

    def run(
        self,
        command: list[str] | str,
        *,
        workspace: Path,
        limits: Limits | None = None,
        env: dict[str, str] | None = None,
        install_dir: Path | None = None,
    ) -> ExecResult:
        """Run ``command`` as a Slurm job and wait for it (a failing command or job is a value)."""
        if self._closed.is_set():
            raise SandboxError("the Slurm executor is closed")
        argv = normalize_command(command)
        limits = limits or Limits()
        if limits.ntasks > 1:
            argv = self.launch_argv(argv, limits.ntasks)
        env, install_dir = take_install_dir(env, install_dir)
        dropped = sorted(k for k in env or {} if is_secret_name(k))
        env = {k: str(v) for k, v in (env or {}).items() if not is_secret_name(k)}
        ws = Path(workspace).resolve()
        job = self._submit_or_attach(argv, ws, limits, env, install_dir)
        self._wait(job)
        result = self._result(job, argv, limits)
        result.extra["dropped_env"] = dropped  # filtered here, before anything is written to the job dir
        return result

    def close(self) -> None:
        """Cancel this executor's unfinished jobs (by id) and stop polling. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._cv:
            live = [j for j in self._jobs.values() if not j.done.is_set()]
            self._cv.notify_all()
        if live:
            self.cli.scancel([j.job_id for j in live])
            for j in live:  # a later resume must submit these afresh, not re-attach to a cancelled job
                try:
                    j.dir.rename(j.dir.with_name(f"{j.dir.name}.cancelled-{j.job_id}"))
                except OSError:
                    pass
        self._drain(DRAIN_S)

    def _drain(self, timeout_s: float) -> None:
        """Wait (bounded) until none of this executor's jobs is still in the queue: a job has written
        its exit file a moment before its batch step ends (COMPLETING), and a cancelled one needs a
        moment to leave. Jobs still there after ``timeout_s`` are left to the scheduler."""
        with self._cv:
            ids = list(self._jobs)
        deadline = time.monotonic() + timeout_s
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            while time.monotonic() < deadline:
                try:
                    states = self.cli.squeue(chunk)
                except SandboxError:
                    return
                chunk = [i for i, st in states.items() if st.active]
                if not chunk:
                    break
                time.sleep(0.2)

    def in_flight(self) -> list[str]:
        """Ids of the jobs this executor is waiting for."""
        with self._cv:
            return [j.job_id for j in self._jobs.values() if not j.done.is_set()]

    # ----------------------------------------------------------- submission --

    def _job_dir(self, argv: list[str], ws: Path) -> tuple[str, Path]:
        where = node_of_workspace(ws)
        if where is not None:
            run_paths, node_id = where
            run_id = run_paths.root.name
            root = Path(self.cfg.shared_dir) / run_id if self.cfg.shared_dir else run_paths.slurm
        else:  # not a run's node (``ai-scientist exec``, checks): never re-attached across processes
            run_id, node_id = self._adhoc_run, ws.name
            base = (
                Path(self.cfg.shared_dir)
                if self.cfg.shared_dir
                else Path(tempfile.gettempdir()) / "ai-sci-slurm-jobs"
            )
            root = base / run_id
        key = hashlib.sha256(json.dumps([argv, str(ws)]).encode()).hexdigest()[:10]
        with self._cv:
            self._counts[f"{node_id}/{key}"] += 1
            k = self._counts[f"{node_id}/{key}"]
        name = _NAME_SAFE.sub("-", f"ais-{run_id}-{node_id}-{key}-{k}")
        return name, root / _NAME_SAFE.sub("-", node_id) / f"{key}-{k}"

    def _submit_or_attach(
        self, argv: list[str], ws: Path, limits: Limits, env: dict[str, str], install_dir: Path | None
    ) -> SlurmJob:
        name, jdir = self._job_dir(argv, ws)
        id_file = jdir / "job_id"
        job_id = id_file.read_text().strip() if id_file.exists() else ""
        if not job_id and (jdir / "job.sh").exists():
            # killed between sbatch and writing job_id: the controller knows the job by its name
            found = self.cli.find_by_name(name)
            job_id = found[-1] if found else ""
            if job_id:
                _write_atomic(id_file, job_id + "\n")
        if job_id:
            job = SlurmJob(job_id, jdir, name, time.time(), reattached=True)
            if job.exit_file.exists():  # it finished while no orchestrator was watching
                job.done.set()
        else:
            jdir.mkdir(parents=True, exist_ok=True)
            spec = {
                "command": argv,
                "workspace": str(ws),
                "limits": {**dataclasses.asdict(limits), "gpus": list(limits.gpus)},
                "env": env,
                "install_dir": str(Path(install_dir).resolve()) if install_dir else None,
                "sandbox": self.cfg.sandbox,
                "python": self.exec_cfg.python,
                "resources_dir": str(self.resources_dir) if self.resources_dir else None,
                "hidden": list(self.hidden),  # grader.dir: hidden by the inner sandbox too
                "apptainer_image": self.exec_cfg.apptainer_image,
                "apptainer_binary": self.exec_cfg.apptainer_binary,
                "allow_unsafe": bool(getattr(self.exec_cfg, "allow_unsafe_sandbox", False)),
            }
            _write_atomic(jdir / SPEC_FILE, json.dumps(spec, indent=1))
            _write_atomic(jdir / "job.sh", self.script(name, jdir, limits))
            job_id = self._sbatch(jdir, name)
            _write_atomic(id_file, job_id + "\n")
            job = SlurmJob(job_id, jdir, name, time.time())
        with self._cv:
            self._jobs[job.job_id] = job
            self._cv.notify_all()
        self._ensure_poller()
        return job

    def _sbatch(self, jdir: Path, name: str) -> str:
        """Submit, retrying what a busy cluster refuses for a while (controller timeouts, the
        submit limit of a QOS); before a retry the job is looked up by name, so a submission that
        went through although sbatch reported an error is not made twice."""
        delay = SBATCH_RETRY_S
        for attempt in range(SBATCH_ATTEMPTS):
            try:
                return self.cli.sbatch(jdir / "job.sh", cwd=jdir, env=self.job_environ())
            except SandboxError as exc:
                if attempt == SBATCH_ATTEMPTS - 1 or not TRANSIENT.search(str(exc)) or self._closed.is_set():
                    raise
                self.last_error = str(exc)
            self._closed.wait(delay)
            delay *= 2
            try:
                found = self.cli.find_by_name(name)
            except SandboxError:
                found = []
            if found:
                return found[-1]
        raise AssertionError("unreachable")

    def launch_argv(self, argv: list[str], ntasks: int) -> list[str]:
        """``argv`` started ``ntasks`` times by the MPI launcher, inside the job (one node: the
        launcher finds the allocation's slots in the job's SLURM_* variables)."""
        if not 1 <= ntasks <= self.cfg.max_ntasks:
            raise ValueError(f"ntasks={ntasks}: exec.slurm.max_ntasks allows 1 to {self.cfg.max_ntasks}")
        return [a.replace("{ntasks}", str(ntasks)) for a in self.cfg.mpi_launcher] + argv

    def time_minutes(self, limits: Limits) -> int:
        """Slurm's --time: the command's timeout plus the margin, in whole minutes (at least 1)."""
        return max(1, math.ceil((limits.timeout_s + self.cfg.time_margin_s) / 60))

    def mem_mb(self, limits: Limits) -> int:
        return int(self.cfg.mem_mb or limits.memory_mb)

    def sbatch_options(self, name: str, jdir: Path, limits: Limits) -> list[str]:
        """Every sbatch option of a job (pure apart from config; the tests read it)."""
        c = self.cfg
        opts = [
            f"--job-name={name}",
            f"--output={jdir / 'stdout'}",
            f"--error={jdir / 'stderr'}",
            f"--chdir={jdir}",
            "--nodes=1",
            f"--ntasks={limits.ntasks}",  # MPI ranks, all on the one node (cpus-per-task each)
            f"--cpus-per-task={c.cpus or max(1, math.ceil(limits.cpus))}",
            f"--mem={self.mem_mb(limits)}",
            f"--time={self.time_minutes(limits)}",
            # login_env: slurmd loads the user's login environment (`su - USER`, a login shell per
            # job); else the job inherits sbatch's environment, which job_environ() keeps to a few
            # names: the orchestrator's environment (API keys) never reaches the job either way
            "--export=NONE" if c.login_env else "--export=ALL",
        ]
        for flag, value in (
            ("partition", c.partition),
            ("account", c.account),
            ("qos", c.qos),
            ("gres", c.gres),
        ):
            if value:
                opts.append(f"--{flag}={value}")
        return opts + list(c.extra_args)

    def job_environ(self) -> dict[str, str] | None:
        """The environment ``sbatch`` runs with, which an ``--export=ALL`` job inherits: the
        orchestrator's ``JOB_ENV_NAMES``, locale, ``SLURM_*`` / ``SBATCH_*`` (the client's own
        settings) and module variables, no secret-looking name. None with ``login_env`` (sbatch
        gets the orchestrator's environment; ``--export=NONE`` passes the job only ``SLURM_*``)."""
        if self.cfg.login_env:
            return self.cli.env
        base = os.environ if self.cli.env is None else self.cli.env
        return {
            k: v
            for k, v in base.items()
            if (k in JOB_ENV_NAMES or k in MODULE_VARS or k.startswith(JOB_ENV_PREFIXES))
            and not is_secret_name(k)
        }

    def script(self, name: str, jdir: Path, limits: Limits) -> str:
        lines = ["#!/bin/bash"] + [f"#SBATCH {o}" for o in self.sbatch_options(name, jdir, limits)]
        run = " ".join(shlex.quote(a) for a in [*self.runner_argv(), str(jdir)])
        return "\n".join(lines + ["", f"exec {run}", ""])

    def runner_argv(self) -> list[str]:
        """How the job starts its runner. The orchestrator's own interpreter (no exec.slurm.python)
        starts isolated and without ``site`` (``-I -S``: no site-packages scan, no ``.pth`` files,
        no editable-install finder, 20-35 ms of every job) on the orchestrator's import path, so it
        imports the very package the orchestrator runs; another interpreter imports its own install."""
        module = "ai_scientist.execution.slurm_job"
        if self.cfg.python:
            return [self.job_python, "-m", module]
        import ai_scientist

        here = str(Path(ai_scientist.__file__).resolve().parent.parent)
        paths = [here] + [p for p in sys.path if os.path.isabs(p) and p != here and os.path.isdir(p)]
        code = f"import sys; sys.path[:] = {json.dumps(paths)}; from {module} import main; sys.exit(main())"
        return [self.job_python, "-I", "-S", "-c", code]

    # -------------------------------------------------------------- polling --

    def _ensure_poller(self) -> None:
        with self._cv:
            if self._poller is None or not self._poller.is_alive():
                self._poller = threading.Thread(target=self._poll_loop, name="slurm-poller", daemon=True)
                self._poller.start()

    def _poll_loop(self) -> None:
        next_squeue = 0.0
        while not self._closed.is_set():
            with self._cv:
                pending = [j for j in self._jobs.values() if not j.done.is_set()]
                if not pending:
                    self._cv.wait(timeout=30)
                    continue
            if time.monotonic() >= next_squeue:
                self.poll_once(pending)
                next_squeue = time.monotonic() + self.cfg.poll_interval_s
            else:
                self._see_exit_files(pending)
            self._closed.wait(max(0.0, min(self._exit_check_s(pending), next_squeue - time.monotonic())))

    def _exit_check_s(self, pending: list[SlurmJob]) -> float:
        """How long until the exit files are looked at again: EXIT_CHECK_S while the youngest job
        in flight is young, then 2% of its age (a long job is not stat-ed 50 times a second on a
        shared file system), at most the poll interval."""
        age = time.time() - max(j.submitted for j in pending)
        return min(self.cfg.poll_interval_s, max(EXIT_CHECK_S, age * EXIT_CHECK_FRACTION))

    @staticmethod
    def _see_exit_files(jobs: list[SlurmJob]) -> list[SlurmJob]:
        """Mark the jobs whose exit file exists done; returns the others."""
        unresolved = []
        for job in jobs:
            if job.exit_file.exists():
                job.done.set()
            else:
                unresolved.append(job)
        return unresolved

    def poll_once(self, jobs: list[SlurmJob]) -> None:
        """One round: exit files first, then a single ``squeue`` for every job still unresolved."""
        unresolved = self._see_exit_files(jobs)
        if not unresolved:
            return
        try:
            states = self.cli.squeue([j.job_id for j in unresolved])
        except SandboxError as exc:
            self.last_error = str(exc)  # controller unreachable: keep the jobs, ask again next round
            return
        now = time.monotonic()
        for job in unresolved:
            state = states.get(job.job_id)
            if state is not None:
                job.last_state = state
                if state.active:
                    job.ended_at = None
                    continue
            if job.ended_at is None:
                job.ended_at = now
            if now - job.ended_at >= self.cfg.lost_grace_s or job.exit_file.exists():
                if state is None:
                    job.last_state = None  # gone from the queue: lost unless the exit file shows up
                job.done.set()

    def _wait(self, job: SlurmJob) -> None:
        while not job.done.wait(timeout=1.0):
            if self._closed.is_set():
                break
        if self._closed.is_set() and not job.exit_file.exists():
            if threading.current_thread().daemon:
                # a run worker after Ctrl-C: the job was cancelled by close(); return nothing, so the
                # node stays in flight in the journal and `resume` runs it again
                threading.Event().wait()
            raise SandboxError(f"Slurm job {job.job_id} was cancelled because the executor closed")

    # --------------------------------------------------------------- result --

    def _result(self, job: SlurmJob, argv: list[str], limits: Limits) -> ExecResult:
        return job_result(job, argv, limits, mem_mb=self.mem_mb(limits), time_min=self.time_minutes(limits))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)

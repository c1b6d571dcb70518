"""``bench run``: each task x seed an ordinary run in its own process, resumable as a whole.

Layout of the bench directory (``--out``)::

    bench.json             the config, its overrides and every ``bench run`` command given
    resources/<task>.yaml  the resources file of each task's runs (its data as ``data``)
    baselines/<task>.json  the baseline measured here, once
    runs/<task>-s<seed>/   the run directory (an ordinary ``ai-scientist run``, agent.seed = seed)
    results.json  results.md  results.png   rewritten after every run (see .report)

Running again continues: a run whose ``state.json`` says completed is not redone; an unfinished
one is resumed (``ai-scientist resume``); one that another live process holds (its ``run.lock``)
is waited for, never started twice. Each run's process dies with the bench (``PR_SET_PDEATHSIG``),
so a ``kill -9`` of the bench leaves runs that the next ``bench run`` resumes.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from ..base.config import load_config
from ..base.errors import EXIT_INTERRUPTED, EXIT_NO_WORKING_EXPERIMENT, EXIT_OK, EXIT_USAGE, UsageError
from ..base.fileio import atomic_write_json, atomic_write_text, read_json
from ..base.paths import RunPaths
from ..base.runlock import RunLock, RunLocked
from .baseline import measure_baseline
from .task import Task, task_dir, task_ref

DEFAULT_RUNNER = (sys.executable, "-m", "ai_scientist.cli")
PR_SET_PDEATHSIG = 1


@dataclass
class BenchPlan:
    """What one ``bench run`` was asked: where, which tasks, how many seeds, which config."""

    out: Path
    tasks: list[Task]
    seeds: int
    config: str | None = None
    overrides: list[str] = field(default_factory=list)
    runner: tuple[str, ...] = DEFAULT_RUNNER  # the command a run is started with (tests: a scripted model)
    stream: TextIO = sys.stderr
    label: str | None = None  # what the results are (e.g. "embedded model: harness only"), in the report

    def run_dir(self, task: Task, seed: int) -> Path:
        return self.out / "runs" / f"{task.name}-s{seed}"

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: a killed bench leaves its run to finish alone
        pass


def _manifest(plan: BenchPlan, argv: list[str]) -> None:
    """Record the config in ``bench.json`` on the first run; refuse a different one later (the
    runs of one bench directory must be comparable)."""
    path = plan.out / "bench.json"
    config_text = Path(plan.config).read_text() if plan.config else None
    old = read_json(path, default=None)
    if old is not None:
        if old.get("config_text") != config_text or old.get("overrides") != plan.overrides:
            raise UsageError(
                f"{plan.out}: its runs were started with another config or --set "
                f"({old.get('config')}, {old.get('overrides')}); continue with those, or use another --out"
            )
        record = old
    else:
        record = {
            "config": plan.config,
            "config_text": config_text,
            "overrides": plan.overrides,
            "commands": [],
        }
    record["commands"].append({"argv": argv, "at": time.time()})
    tasks = record.setdefault("tasks", {})
    for task in plan.tasks:
        if task.name in tasks and task_dir(task.name, tasks[task.name]) != task.dir:
            raise UsageError(f"{plan.out}: task {task.name} was {tasks[task.name]} here, not {task.dir}")
        tasks[task.name] = task_ref(task)
    record["seeds"] = max(int(record.get("seeds", 0)), plan.seeds)
    if plan.label:
        record["label"] = plan.label
    atomic_write_json(path, record)


def _resources_file(plan: BenchPlan, task: Task) -> Path:
    path = plan.out / "resources" / f"{task.name}.yaml"
    spec = {
        "resources": [
            {"id": "data", "type": "local", "path": str(task.data), "summary": task.spec.data.summary}
        ]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(spec, sort_keys=False))
    return path


def baseline_of(plan: BenchPlan, task: Task) -> dict[str, Any]:
    """The task's baseline as measured in this bench directory (measured now if it was not)."""
    path = plan.out / "baselines" / f"{task.name}.json"
    found = read_json(path, default=None)
    if isinstance(found, dict) and (found.get("score") is not None or found.get("error")):
        return found
    plan.say(f"[bench] {task.name}: measuring the baseline ({task.spec.baseline.note})")
    result = measure_baseline(task, load_config(plan.config, plan.overrides))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result)
    shown = f"{result['score']:.6g}" if result["score"] is not None else f"failed: {result['error']}"
    plan.say(f"[bench] {task.name}: baseline {task.spec.metric.name} = {shown}")
    return result


def run_state(run_dir: Path) -> str:
    """new | done | held (a live process has it) | resume."""
    paths = RunPaths(run_dir)
    if not run_dir.exists():
        return "new"
    if not paths.config.is_file():  # killed inside Run.create, before anything was recorded
        if not paths.journal.exists():
            shutil.rmtree(run_dir)
            return "new"
    try:
        RunLock.acquire(run_dir, "ai-scientist bench").release()
    except RunLocked:
        return "held"
    state = read_json(paths.state, default={}) or {}
    return "done" if state.get("status") == "completed" else "resume"


def _argv(plan: BenchPlan, task: Task, seed: int, how: str) -> list[str]:
    run_dir = plan.run_dir(task, seed)
    if how == "resume":
        return [*plan.runner, "resume", str(run_dir)]
    sets = [*plan.overrides, f"agent.seed={seed}"]
    return [
        *plan.runner, "run", *([plan.config] if plan.config else []),
        "--idea", str(task.idea),
        "--resources", str(_resources_file(plan, task)),
        "--grader", str(task.grader),
        "--out", str(run_dir.parent), "--name", run_dir.name,
        *[a for s in sets for a in ("--set", s)],
    ]  # fmt: skip


def _relay(proc: subprocess.Popen[str], prefix: str, plan: BenchPlan) -> list[str]:
    """Print the run's own lines (its progress, its outcome) under ``prefix``; keep the tail."""
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        plan.say(f"{prefix} {line}")
        tail = [*tail[-19:], line]
    proc.wait()
    return tail


def run_one(plan: BenchPlan, task: Task, seed: int) -> int | None:
    """Bring one task x seed to an end; its exit code, or None when it was already done."""
    run_dir = plan.run_dir(task, seed)
    prefix = f"[{task.name} s{seed}]"
    state = run_state(run_dir)
    while state == "held":
        plan.say(f"{prefix} in flight in another process ({run_dir}/run.lock): waiting for it")
        time.sleep(5)
        state = run_state(run_dir)
    if state == "done":
        return None
    argv = _argv(plan, task, seed, state)
    plan.say(f"{prefix} {'resuming' if state == 'resume' else 'starting'}: {run_dir}")
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        bufsize=1,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - single-threaded here; see _die_with_parent
    )
    try:
        tail = _relay(proc, prefix, plan)
    except KeyboardInterrupt:  # the run got the same Ctrl-C: let it save its state
        proc.wait()
        raise
    code = proc.returncode
    if code == EXIT_USAGE:
        raise UsageError(f"{task.name} seed {seed}: the run refused to start: " + " | ".join(tail[-3:]))
    return code


def bench_run(plan: BenchPlan, argv: list[str]) -> int:
    """Run every task x seed not yet done; returns 0, or 130 when interrupted (resumable)."""
    from .report import write_report

    plan.out.mkdir(parents=True, exist_ok=True)
    _manifest(plan, argv)
    for task in plan.tasks:  # first, so every run's normalised score has its baseline
        baseline_of(plan, task)
    jobs = [(t, s) for t in plan.tasks for s in range(1, plan.seeds + 1)]
    failed = 0
    for k, (task, seed) in enumerate(jobs, start=1):
        plan.say(f"[bench] {k}/{len(jobs)}: task {task.name}, seed {seed}")
        try:
            code = run_one(plan, task, seed)
        except KeyboardInterrupt:
            plan.say(f"[bench] interrupted; run the same command again to continue ({plan.out})")
            return EXIT_INTERRUPTED
        if code is None:
            plan.say(f"[{task.name} s{seed}] already finished: not run again")
        elif code not in (EXIT_OK, EXIT_NO_WORKING_EXPERIMENT):
            failed += 1
            plan.say(f"[{task.name} s{seed}] ended with exit {code}; `bench run` again resumes it")
        write_report(plan.out)
    paths = write_report(plan.out)
    plan.say(f"[bench] done: {paths['md']}" + (f" ({failed} run(s) unfinished)" if failed else ""))
    return EXIT_OK


def describe(tasks: list[Task]) -> str:
    """``bench list``: one block per task."""
    lines = []
    for t in tasks:
        b = t.spec.best_known
        arrow = "higher" if t.spec.metric.direction == "maximize" else "lower"
        lines += [
            f"{t.name}: {t.spec.title}",
            f"  metric {t.spec.metric.name} ({arrow} is better); best known {b.value:g}"
            + ("" if b.published else " (not published: the task author's reference)"),
            f"  baseline: {t.spec.baseline.note}",
            f"  data: {t.spec.data.licence}",
            f"  {t.dir}",
        ]
    return "\n".join(lines)

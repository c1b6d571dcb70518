"""A task's baseline, measured by the bench itself on this machine, in the configured sandbox.

The baseline's files are copied into a fresh workspace; the task's data is staged as the resource
``data`` (``resources/data/`` in the workspace, as in a run); ``baseline.commands`` run there
under the run's limits; then the task's grader grades the workspace as it grades a node's. The
result is JSON (``OUT/baselines/<task>.json``), so a bench re-run does not measure it again.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..execution.base import Limits
from ..execution.grader import grade, load_grader

if TYPE_CHECKING:
    from ..base.config import Config
    from .task import Task


def graded_value(data: Any, metric: str) -> float | None:
    """The value of ``metric`` in a grader's ``metrics.json`` content, or None."""
    for m in (data or {}).get("metrics") or [] if isinstance(data, dict) else []:
        if isinstance(m, dict) and m.get("name") == metric and isinstance(m.get("value"), (int, float)):
            return float(m["value"])
    return None


def grade_workspace(task: Task, workspace: Path, cfg: Config) -> dict[str, Any]:
    """Grade ``workspace`` with the task's grader: ``{"score", "error", "raw", "grade_s", "stderr"}``."""
    run = grade(load_grader(task.grader, f"task {task.name} grader"), workspace, cfg)
    score = graded_value(run.data, task.spec.metric.name) if run.error is None else None
    error = run.error
    if error is None and score is None:
        error = f"the grader wrote no metric {task.spec.metric.name!r}"
    return {
        "score": score,
        "error": error,
        "raw": run.data,
        "grade_s": round(run.duration_s, 3),
        "stderr": run.result.stderr[-2000:],
    }


def measure_baseline(task: Task, cfg: Config) -> dict[str, Any]:
    """Run and grade the task's baseline; never raises for a failing baseline (``error`` says why)."""
    from ..execution import make_executor

    start = time.time()
    root = Path(tempfile.mkdtemp(prefix=f"ai-sci-baseline-{task.name}-"))
    try:
        root.chmod(0o755)
        resources, workspace = root / "resources", root / "workspace"
        shutil.copytree(task.data, resources / "data")
        shutil.copytree(task.baseline, workspace)
        for p in [root, *root.rglob("*")]:  # the sandbox's unprivileged uid reads and writes here
            p.chmod(0o777 if p.is_dir() else 0o666)
        executor = make_executor(cfg, resources_dir=resources)
        commands: list[dict[str, Any]] = []
        try:
            limits = dataclasses.replace(Limits.from_config(cfg.exec), network=False)
            for line in task.spec.baseline.commands:
                res = executor.run(["/bin/sh", "-c", line], workspace=workspace, limits=limits)
                commands.append({"command": line, "exit_code": res.exit_code, "duration_s": res.duration_s})
                if not res.ok:
                    why = res.reason or f"exit {res.exit_code}"
                    return _result(
                        task,
                        start,
                        commands,
                        error=f"baseline command {line!r} failed ({why}): {res.stderr.strip()[-800:]}",
                    )
        finally:
            executor.close()
        graded = grade_workspace(task, workspace, cfg)
        return _result(task, start, commands, **graded)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _result(task: Task, start: float, commands: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "task": task.name,
        "metric": task.spec.metric.name,
        "direction": task.spec.metric.direction,
        "score": fields.pop("score", None),
        "error": fields.pop("error", None),
        "commands": commands,
        "wall_s": round(time.time() - start, 3),
        "measured_at": start,
        **fields,
    }

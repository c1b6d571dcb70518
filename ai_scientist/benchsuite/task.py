"""A bench task: a directory holding ``idea.md``, ``data/``, ``grader/``, ``baseline/``, ``task.yaml``.

``data/`` is what the nodes see (as the resource ``resources/data/``); ``grader/`` is a grader
directory as :mod:`ai_scientist.execution.grader` defines it (hidden data included);
``baseline/`` holds a solution whose files are copied into a fresh workspace beside
``resources/data/`` and whose ``baseline.commands`` run there before it is graded. ``task.yaml``
names the metric, the best score known (and whether it is published) and the data's source and
licence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..base.config import ConfigError
from ..base.userfiles import load_yaml, read_user_text

BUNDLED = Path(__file__).parent / "tasks"
NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,39}$")
BUNDLED_REF = "bundled"
PARTS = ("idea.md", "data", "grader", "baseline", "task.yaml")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricSpec(_Strict):
    name: str = Field(min_length=1)
    direction: Literal["maximize", "minimize"]


class BaselineSpec(_Strict):
    commands: list[str] = Field(default_factory=list)  # shell lines, run in the baseline's workspace
    note: str = ""


class BestKnown(_Strict):
    value: float
    published: bool
    source: str = Field(min_length=1)


class DataSpec(_Strict):
    summary: str = Field(min_length=1)  # the resource summary the nodes' prompts show
    source: str = Field(min_length=1)
    licence: str = Field(min_length=1)


class TaskSpec(_Strict):
    title: str = Field(min_length=1)
    metric: MetricSpec
    baseline: BaselineSpec
    best_known: BestKnown
    data: DataSpec


class TaskError(ConfigError):
    """A task directory that cannot serve (CLI exit 2, before any run starts)."""


@dataclass(frozen=True)
class Task:
    """A checked task directory."""

    name: str
    dir: Path
    spec: TaskSpec

    @property
    def idea(self) -> Path:
        return self.dir / "idea.md"

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def grader(self) -> Path:
        return self.dir / "grader"

    @property
    def baseline(self) -> Path:
        return self.dir / "baseline"

    def normalise(self, score: float, baseline: float) -> float | None:
        """0 at ``baseline``, 1 at the best known score (either direction); None when the two coincide."""
        span = self.spec.best_known.value - baseline
        return None if span == 0 else (score - baseline) / span


def load_task(path: str | Path) -> Task:
    """Check a task directory; raises :class:`TaskError` naming the file and what to fix."""
    d = Path(path).expanduser().resolve()
    if not d.is_dir():
        raise TaskError(f"task {path}: not a directory (a task holds {', '.join(PARTS)})")
    if not NAME.match(d.name):
        raise TaskError(f"task {d}: its directory name must be [a-z0-9_], at most 40 characters")
    missing = [p for p in PARTS if not (d / p).exists()]
    if missing:
        raise TaskError(f"task {d}: missing {', '.join(missing)} (see docs/bench.md, Adding a task)")
    source = d / "task.yaml"
    data = load_yaml(read_user_text(source, str(source), kind="task file"), str(source))
    try:
        spec = TaskSpec.model_validate(data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise TaskError(f"{source}: {where}: {first['msg']}") from None
    return Task(d.name, d, spec)


def task_ref(task: Task) -> str:
    """How ``bench.json`` names a task's directory: ``bundled`` for one shipped in the package (so
    a bench directory reads back from another checkout), else its absolute path."""
    return BUNDLED_REF if task.dir == (BUNDLED / task.name).resolve() else str(task.dir)


def task_dir(name: str, ref: str) -> Path:
    """The directory a :func:`task_ref` names."""
    return (BUNDLED / name).resolve() if ref == BUNDLED_REF else Path(ref).resolve()


def bundled_tasks() -> list[Task]:
    """The tasks shipped in the package, by name."""
    return [load_task(p) for p in sorted(BUNDLED.iterdir()) if (p / "task.yaml").is_file()]


def select_tasks(names: str | None) -> list[Task]:
    """``--tasks a,b``: bundled task names or task directories (a path holding task.yaml); all
    bundled tasks when None. An unknown name is an error listing the bundled ones."""
    if not names:
        return bundled_tasks()
    known = {t.name: t for t in bundled_tasks()}
    out: list[Task] = []
    for item in (s.strip() for s in names.split(",")):
        if not item:
            continue
        if item in known:
            task = known[item]
        elif Path(item).expanduser().is_dir():
            task = load_task(item)
        else:
            raise TaskError(
                f"--tasks: no task {item!r}; bundled: {', '.join(known)} (or give a task directory)"
            )
        if any(t.name == task.name for t in out):
            raise TaskError(f"--tasks: {task.name} given twice")
        out.append(task)
    if not out:
        raise TaskError("--tasks: no task named")
    return out

"""A command's CPU time beside its wall time, and the machine's load around it (issue 28).

Every backend measures the CPU time (user + system) of the command's process tree outside the
sandbox, where the command cannot forge it: the process backends from the kernel's resource
usage of the reaped child (``wait4``: the child and every descendant reaped inside its tree),
Docker from the container's cgroup (``cpuacct``), a Slurm job from its inner sandbox (the job's
runner reaps it so). :func:`tracked` adds what no backend knows alone: the 1-minute load average
at the command's start and end, the machine's core count, and how many other commands of this
process (this run: its workers share one executor) ran during it. :func:`~ai_scientist.base.artifacts.
usage_line` turns a record into the one line reviewers read.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable
from typing import Any

from .base import ExecResult


class _Running:
    """The commands of this process in flight, and for each the others that overlapped it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._active: dict[int, set[int]] = {}

    def start(self) -> int:
        with self._lock:
            me = next(self._ids)
            for seen in self._active.values():
                seen.add(me)
            self._active[me] = set(self._active)
            return me

    def end(self, me: int) -> int:
        """How many other commands ran at some time during ``me``."""
        with self._lock:
            return len(self._active.pop(me, ()))


RUNNING = _Running()


def cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def tracked(run: Callable[..., ExecResult]) -> Callable[..., ExecResult]:
    """``run`` (an executor's) with the load, core count and overlapping commands recorded in
    ``result.load``. A load the backend measured itself (a Slurm job, on its compute node) is
    kept; the overlap is always this process's count."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> ExecResult:
        start, me = _load1(), RUNNING.start()
        try:
            result = run(*args, **kwargs)
        finally:
            others = RUNNING.end(me)
        load = dict(result.load or {})
        if "start" not in load:
            load.update(start=start, end=_load1(), cores=cores())
        load["others"] = others
        result.load = load
        return result

    return wrapper


def cpu_seconds(ru: Any) -> float:
    """User + system seconds of a ``resource.struct_rusage``."""
    return round(float(ru.ru_utime) + float(ru.ru_stime), 4)

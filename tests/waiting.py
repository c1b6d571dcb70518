"""Waiting for a condition instead of sleeping: a test proves what happened (or that it cannot
happen) by waiting for an observable event, with a deadline that only bounds a failure.

Every deadline here scales with the machine's load (``load_scaled``): on 2 cores with 2-4
runnable processes per core a process start, a signal's delivery or a reap takes several times
as long as on an idle machine, and a wait that is only a bound on a failure must not fail then."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def load_scaled(seconds: float) -> float:
    """``seconds`` for an idle machine, stretched by how busy it is now (the 1-minute load per
    core, at least 1x, at most 4x): a deadline that bounds a failure, not a benchmark. Three
    tests' 60 s waits for a Ctrl-C'd run to end failed on a 2-core machine at load 2-4."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * min(4.0, max(1.0, per_core))


def wait_until(cond: Callable[[], T], what: str, timeout: float = 30.0, every: float = 0.02) -> T:
    """``cond()``'s first truthy value; an AssertionError naming ``what`` after ``timeout`` s on an
    idle machine (``load_scaled``: longer on a busy one)."""
    limit = load_scaled(timeout)
    deadline = time.monotonic() + limit
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"after {limit:.0f} s still not true: {what}")
        time.sleep(every)

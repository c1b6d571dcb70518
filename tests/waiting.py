"""Waiting for a condition instead of sleeping: a test proves what happened (or that it cannot
happen) by waiting for an observable event, with a deadline that only bounds a failure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(cond: Callable[[], T], what: str, timeout: float = 30.0, every: float = 0.02) -> T:
    """``cond()``'s first truthy value; an AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout:.0f} s still not true: {what}")
        time.sleep(every)


def load_scaled(seconds: float) -> float:
    """``seconds`` for an idle machine, stretched by how busy it is now (the 1-minute load per
    core, at least 1x, at most 4x): a deadline that bounds a failure, not a benchmark. Three
    tests' 60 s waits for a Ctrl-C'd run to end failed on a 2-core machine at load 2-4."""
    import os

    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * min(4.0, max(1.0, per_core))

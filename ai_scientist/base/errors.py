"""Exit codes and the error classes every layer may raise (the base layer: imports nothing).

Three kinds of failure, three behaviours:

- :class:`UsageError` (and ``config.ConfigError``): the user must fix an input; the CLI
  exits 2 with one line naming the argument or key path, no traceback.
- ordinary exceptions inside a node (``LLMError``, a phase failure, a sandbox error): the node
  is marked buggy with the reason and the run goes on.
- :class:`RunStop`: a condition that must stop the whole run cleanly — the cost cap was
  reached, the disk is full, a replay diverged. It derives from ``BaseException`` on purpose,
  like ``KeyboardInterrupt``: handlers written for failures (``except Exception``) must not
  turn a stop into a buggy node, so no call site needs a re-raise guard. The command layer
  catches it, saves the state and exits with :attr:`RunStop.exit_code`.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NO_WORKING_EXPERIMENT = 3
EXIT_STOPPED = 4  # a limit stopped the run (cost cap, full disk): state saved, resumable
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A problem with the command line the user must fix (exit 2)."""


class ConfigError(Exception):
    """A configuration or input-file problem the user must fix (exit 2); names the key path."""


class RunStop(BaseException):  # noqa: N818 - a stop, not an error of the code
    """Stops the run cleanly; ``status`` goes to ``state.json``, ``hint`` tells what to do next."""

    exit_code = EXIT_STOPPED
    status = "stopped"
    title = "run stopped"

    def hint(self, run_dir: str | Path) -> str:
        return f"ai-scientist resume {run_dir}"


class CostCapExceeded(RunStop):
    """``llm.max_cost_usd`` was crossed: the run stops and can be resumed with a higher cap."""

    status = "cost_cap"

    def hint(self, run_dir: str | Path) -> str:
        return f"raise the cap and resume: ai-scientist resume {run_dir} --set llm.max_cost_usd=<higher>"


class DiskFull(RunStop):
    """A write of the run failed because its filesystem is full (or over quota)."""

    status = "disk_full"

    def __init__(self, message: str, path: str | None = None, what: str = "No space left on device"):
        super().__init__(message)
        self.path = path
        self.what = what

    def located(self, run_dir: str | Path) -> DiskFull:
        """This stop, naming the filesystem of ``run_dir`` when the failed write gave no path."""
        if self.path is not None:
            return self
        mount = mount_point(str(run_dir))
        return DiskFull(
            f"the filesystem at {mount} is full ({self.what}); the run directory {run_dir} is on it",
            str(run_dir),
            self.what,
        )

    def hint(self, run_dir: str | Path) -> str:
        return f"free space on that filesystem, then resume: ai-scientist resume {run_dir}"


class UnrecordedPrompt(RunStop):
    """Replay: the prompt is not in the recorded run, so the replay stops instead of inventing."""

    exit_code = EXIT_INTERNAL
    status = "replay_diverged"
    title = "replay diverged from the recording"

    def hint(self, run_dir: str | Path) -> str:
        return "the recording and this code disagree: compare with `ai-scientist logs RUN show-prompt`"


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def mount_point(path: str) -> str:
    """The mount point of the filesystem holding ``path`` (or its nearest existing parent)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return str(p)


def disk_full_from(exc: BaseException) -> DiskFull | None:
    """The :class:`DiskFull` stop that ``exc`` (or any exception in its chain) stands for, if any.

    Recognises ``OSError`` with ENOSPC / EDQUOT and SQLite's "database or disk is full",
    also when wrapped by our own store errors (``raise ... from exc``).
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, DiskFull):
            return cur
        if isinstance(cur, OSError) and cur.errno in _FULL_ERRNOS:
            where = cur.filename if isinstance(cur.filename, str) else None
            return _full(where, os.strerror(cur.errno or errno.ENOSPC))
        text = str(cur)
        if isinstance(cur, sqlite3.Error) or "database or disk is full" in text:
            if "disk is full" in text or "database or disk is full" in text:
                return _full(getattr(cur, "path", None), "database or disk is full")
        cur = cur.__cause__ or cur.__context__
    return None


def _full(path: str | None, what: str) -> DiskFull:
    if path:
        mount = mount_point(path)
        return DiskFull(f"the filesystem at {mount} is full ({what}, writing {path})", path, what)
    return DiskFull(f"a filesystem of the run is full ({what})", None, what)

"""Where log records go: the terminal stays for progress lines, the run directory keeps the rest.

* Terminal (stderr): WARNING and above from every logger; with ``--verbose`` also INFO.
  Third-party libraries (httpx, httpcore, openai, urllib3, docker ...) log every HTTP request
  at INFO; without this their lines would drown the progress output.
* ``RUN_DIR/run.log``: INFO and above from every logger (third-party included) while a run,
  resume or replay executes, each line passed through the run's secret redactor.

``configure_terminal`` is called once by the CLI; ``RunLog.start`` when a run's services are built,
``RunLog.close`` when they are closed.
Both are idempotent and leave handlers they did not create alone (pytest's capture, say),
except that a bare stream handler another library put on the root logger at import time
(``logging.basicConfig``) gets the same terminal filter.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .paths import RUN_LOG as RUN_LOG  # re-exported: tests and callers name the file by it
from .paths import RunPaths

if TYPE_CHECKING:
    from .redact import Redactor

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_TERMINAL_MARK = "_ai_scientist_terminal"


class _TerminalFilter(logging.Filter):
    """Lets through WARNING and above, or everything from INFO up when verbose."""

    def __init__(self, verbose: bool):
        super().__init__()
        self.floor = logging.INFO if verbose else logging.WARNING

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.floor


class _RedactingFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor | None):
        super().__init__(_FORMAT)
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return self.redactor.redact(text) if self.redactor is not None else text


class _TerminalHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (test captures swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _is_terminal_stream(handler: logging.Handler) -> bool:
    return type(handler) is logging.StreamHandler and getattr(handler, "stream", None) in (
        sys.stderr,
        sys.stdout,
        sys.__stderr__,
        sys.__stdout__,
    )


def configure_terminal(verbose: bool = False) -> None:
    """Root at INFO (so run.log gets library records); the terminal shows WARNING+ (INFO+ if verbose)."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    ours = [h for h in root.handlers if getattr(h, _TERMINAL_MARK, False)]
    if not ours:
        handler: logging.Handler = _TerminalHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        setattr(handler, _TERMINAL_MARK, True)
        root.addHandler(handler)
        ours = [handler]
    for handler in [*ours, *(h for h in root.handlers if _is_terminal_stream(h))]:
        for f in [f for f in handler.filters if isinstance(f, _TerminalFilter)]:
            handler.removeFilter(f)
        handler.addFilter(_TerminalFilter(verbose))


class RunLog:
    """INFO+ records of every logger appended to ``run_dir/run.log`` until :meth:`close`."""

    _current: RunLog | None = None  # one run executes per process; a new one replaces a leftover

    def __init__(self, run_dir: str | Path, redactor: Redactor | None = None):
        self.path = RunPaths(run_dir).log
        self.handler = logging.FileHandler(self.path, encoding="utf-8", delay=True)
        self.handler.setLevel(logging.INFO)
        self.handler.setFormatter(_RedactingFormatter(redactor))
        root = logging.getLogger()
        self._previous_level = root.level
        if root.level == logging.NOTSET or root.level > logging.INFO:
            root.setLevel(logging.INFO)  # library INFO records reach the file even without the CLI
        if not any(getattr(h, _TERMINAL_MARK, False) for h in root.handlers):
            configure_terminal(verbose=False)  # a run started from code is as quiet as from the CLI
        root.addHandler(self.handler)

    @classmethod
    def start(cls, run_dir: str | Path, redactor: Redactor | None = None) -> RunLog:
        if cls._current is not None:
            cls._current.close()
        cls._current = cls(run_dir, redactor)
        return cls._current

    def close(self) -> None:
        root = logging.getLogger()
        if self.handler in root.handlers:
            root.removeHandler(self.handler)
            root.setLevel(self._previous_level)
        self.handler.close()
        if RunLog._current is self:
            RunLog._current = None

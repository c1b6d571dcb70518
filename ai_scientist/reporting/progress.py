"""Live progress of a run: a ``rich`` Live panel on a terminal, plain log lines otherwise.

The orchestrator owns one :class:`Progress` and calls ``update(**fields)``
whenever a count changes and ``event(msg)`` for notable moments. Safe to call
from worker threads. Non-TTY output goes to stderr (stdout carries the run
directory, which scripts read).

The LLM client reports each attempt to it (``attempt_started`` / ``attempt_retrying`` /
``attempt_ended``): the status shows the calls in flight (node, phase/label, attempt) and
every retry is printed as it happens, and each ended attempt refreshes the tokens and cost from
``usage`` (so they keep moving during the report, when no node updates the status). The
counts are the current stage's, as :func:`ai_scientist.treesearch.best.count_nodes` defines them:
search nodes running / good / buggy, seed re-runs apart. The orchestrator shows a resumed run's saved state
(stage, nodes, best, tokens, cost) as soon as it starts, before any node finishes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

FIELDS = ("stage", "running", "good", "buggy", "seed_runs", "best", "tokens", "cost_usd")
# fields whose change alone does not deserve a new plain line (they move on every call)
_NOISY = ("tokens", "cost_usd", "in flight")
IN_FLIGHT_SHOWN = 4  # calls listed by name; more are counted


def _fmt_best(best: Any) -> str:
    if isinstance(best, dict):
        value = best.get("value")
        shown = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
        arrow = {"minimize": "↓", "maximize": "↑"}.get(best.get("direction", ""), "")
        return f"{best.get('name', 'metric')}={shown}{arrow}" + (
            f" ({best['node']})" if best.get("node") else ""
        )
    return "-" if best is None else str(best)


class Progress:
    """``update(stage=, running=, good=, buggy=, seed_runs=, best=, tokens=, cost_usd=)``,
    ``event(msg)``, ``close()``. ``usage()`` (optional) returns the run's cost totals
    (``prompt_tokens``, ``completion_tokens``, ``usd``), read after every LLM attempt."""

    def __init__(
        self,
        stream: TextIO | None = None,
        live: bool | None = None,
        plain_interval_s: float = 30.0,
        usage: Callable[[], Mapping[str, Any]] | None = None,
    ):
        self.stream = stream or sys.stderr
        self.usage = usage
        self.fields: dict[str, Any] = {
            "stage": "-",
            "running": 0,
            "good": 0,
            "buggy": 0,
            "seed_runs": 0,
            "best": None,
            "tokens": 0,
            "cost_usd": 0.0,
        }
        self.extra: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._calls: dict[int, str] = {}  # attempt in flight, by thread id: "n0003 phase1/step2 #2"
        self._interval = plain_interval_s
        self._last_key: tuple = ()
        self._last_time = 0.0
        self._live = None
        self._closed = False
        use_live = self.stream.isatty() if live is None else live
        if use_live:
            from rich.console import Console
            from rich.live import Live

            self._console = Console(file=self.stream)
            self._live = Live(self._panel(), console=self._console, refresh_per_second=4, transient=False)
            self._live.start()

    def line(self) -> str:
        """The status as one line (what plain mode prints)."""
        f = self.fields
        parts = [
            f"stage {f['stage']}",
            f"nodes running {f['running']} / good {f['good']} / buggy {f['buggy']}"
            + (f" (+{f['seed_runs']} seed re-runs)" if f["seed_runs"] else ""),
            f"best {_fmt_best(f['best'])}",
            f"tokens {int(f['tokens']):,}",
            f"cost ${float(f['cost_usd']):.4f}",
        ]
        parts += [f"{k} {v}" for k, v in self.extra.items()]
        return " | ".join(parts)

    def _panel(self) -> Any:
        from rich.table import Table

        f = self.fields
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row("stage", str(f["stage"]))
        table.add_row(
            "nodes",
            f"[yellow]{f['running']} running[/]  [green]{f['good']} good[/]  [red]{f['buggy']} buggy[/]"
            + (f"  ({f['seed_runs']} seed re-runs)" if f["seed_runs"] else ""),
        )
        table.add_row("best", _fmt_best(f["best"]))
        table.add_row("tokens", f"{int(f['tokens']):,}")
        table.add_row("cost", f"${float(f['cost_usd']):.4f}")
        for k, v in self.extra.items():
            table.add_row(k, str(v))
        return table

    def update(self, **fields: Any) -> None:
        """Set any of FIELDS (other keys are shown as extra rows)."""
        with self._lock:
            if self._closed:
                return
            for k, v in fields.items():
                (self.fields if k in FIELDS else self.extra)[k] = v
            if self._live is not None:
                self._live.update(self._panel())
                return
            key = tuple((k, str(v)) for k, v in self.fields.items() if k not in _NOISY) + tuple(
                (k, str(v)) for k, v in self.extra.items() if k not in _NOISY
            )
            now = time.monotonic()
            if key != self._last_key or now - self._last_time >= self._interval:
                self._emit(self.line())
                self._last_key, self._last_time = key, now

    # ------------------------------------------------- LLM attempts --
    def attempt_started(self, node_id: str, phase: str, label: str, attempt: int) -> None:
        """An LLM request was sent (called by the client from the worker's thread)."""
        self._set_call(f"{node_id} {phase}/{label}" + (f" attempt {attempt}" if attempt > 1 else ""))
        self._refresh_usage()  # the calls before this one are counted by now

    def attempt_ended(self) -> None:
        """The request of this thread came back (answered or failed)."""
        self._set_call(None)
        self._refresh_usage()

    def _refresh_usage(self) -> None:
        if self.usage is not None:
            total = self.usage()
            tokens = int(total.get("prompt_tokens", 0)) + int(total.get("completion_tokens", 0))
            self.update(tokens=tokens, cost_usd=float(total.get("usd", 0.0)))

    def attempt_retrying(
        self, node_id: str, phase: str, label: str, attempt: int, error: str, wait_s: float
    ) -> None:
        """Attempt ``attempt`` failed with a retryable ``error``; the next one starts in ``wait_s``."""
        self.event(
            f"{node_id} {phase}/{label}: attempt {attempt} failed ({error[:200]}); retrying in {wait_s:.0f} s"
        )

    def _set_call(self, what: str | None) -> None:
        with self._lock:
            if what is None:
                self._calls.pop(threading.get_ident(), None)
            else:
                self._calls[threading.get_ident()] = what
            calls = list(self._calls.values())
            shown = "; ".join(calls[:IN_FLIGHT_SHOWN]) + (
                f" (+{len(calls) - IN_FLIGHT_SHOWN} more)" if len(calls) > IN_FLIGHT_SHOWN else ""
            )
            if what is None and self._live is None:
                # an ended call updates silently: a plain line printed now would show the moment
                # between two attempts ("in flight -") instead of the call that is running
                self.extra["in flight"] = shown or "-"
                return
        self.update(**{"in flight": shown or "-"})

    def event(self, msg: str) -> None:
        """A notable moment (stage change, best node, failure) printed above the panel / as a line."""
        with self._lock:
            if self._live is not None:
                self._console.print(msg, markup=False, highlight=False)
            else:
                self._emit(msg)

    def _emit(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"[{stamp}] {text}", file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the live display (idempotent); plain mode prints the final status line."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._live is not None:
                self._live.update(self._panel())
                self._live.stop()
            else:
                self._emit("final: " + self.line())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""Token and USD accounting of a run: ``cost.json`` by role, phase, node and model.

USD comes from ``llm.prices`` (per million tokens): the exact model name, else the
longest configured name the model starts with (``gpt-4o-mini`` prices
``gpt-4o-mini-2024-07-18``). A model with no price costs 0 and is listed under
``unpriced_models`` so a user sees the total is incomplete. Models named
``local:<file>`` (the in-process llama.cpp backend) are free and priced.
Counts: ``calls`` are logical calls (one ``LLMClient.complete``: its retries and repair round
included), ``attempts`` the requests sent (one prompt-log file each, answered or failed),
``failed_attempts`` those that got no answer (timeouts, errors: no tokens, no cost).
``cost.json`` is rewritten atomically after every call (at most once a second once it is
large; ``flush()`` at the end) and reloaded on start, so a resumed run continues its totals.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from ..base.fileio import atomic_write_text, read_json
from .types import Usage

BUCKETS = ("by_role", "by_phase", "by_node", "by_model")
LARGE_BYTES = 64 * 1024
WRITE_INTERVAL_S = 1.0
LOCAL_PREFIX = "local:"


def _empty() -> dict[str, Any]:
    return {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "usd": 0.0,
        "calls": 0,
        "attempts": 0,
        "failed_attempts": 0,
        "estimated_calls": 0,
    }


class CostLedger:
    """Thread-safe running totals, persisted to ``path`` (None: in memory only)."""

    def __init__(
        self, path: str | Path | None, prices: dict[str, Any] | None = None, max_cost_usd: float | None = None
    ):
        self.path = Path(path) if path is not None else None
        self.prices = dict(prices or {})
        self.max_cost_usd = max_cost_usd
        self._lock = threading.Lock()
        self.data = self._load()
        self._dirty, self._last_write, self._last_size = False, float("-inf"), 0

    def _load(self) -> dict[str, Any]:
        fresh: dict[str, Any] = {"total": _empty(), **{b: {} for b in BUCKETS}, "unpriced_models": []}
        if self.path is None:
            return fresh
        try:
            old = read_json(self.path)
        except ValueError as exc:
            raise ValueError(
                f"{self.path}: not valid JSON ({exc}); fix or delete it to restart the totals"
            ) from None
        if old is None:
            return fresh
        if not isinstance(old, dict) or not isinstance(old.get("total"), dict):
            raise ValueError(f"{self.path}: not a cost.json written by ai_scientist (no 'total' object)")
        for key, value in fresh.items():
            old.setdefault(key, value)
        for key in _empty():
            old["total"].setdefault(key, 0)
        return old

    def price_of(self, model: str) -> tuple[float, float] | None:
        """(input, output) USD per million tokens, or None when the model has no price."""
        if model.startswith(LOCAL_PREFIX):
            return (0.0, 0.0)
        price = self.prices.get(model)
        if price is None:
            names = [n for n in self.prices if model.startswith(n)]
            price = self.prices[max(names, key=len)] if names else None
        if price is None:
            return None
        get = price.get if isinstance(price, dict) else lambda k: getattr(price, k)
        return float(get("input_per_mtok")), float(get("output_per_mtok"))

    @property
    def total_usd(self) -> float:
        with self._lock:
            return float(self.data["total"]["usd"])

    def over_cap(self) -> bool:
        """True once the total has reached ``max_cost_usd`` (never when there is no cap)."""
        return self.max_cost_usd is not None and self.total_usd >= self.max_cost_usd

    def add(
        self, role: str, phase: str, node_id: str, model: str, usage: Usage, *, new_call: bool = True
    ) -> float:
        """Account one answered attempt (``new_call``: the first attempt of a call); returns its
        USD cost and rewrites ``cost.json``."""
        price = self.price_of(model)
        usd = 0.0
        if price is not None:
            usd = (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1e6
        with self._lock:
            for t in self._targets(role, phase, node_id, model):
                t["prompt_tokens"] += usage.prompt_tokens
                t["completion_tokens"] += usage.completion_tokens
                t["usd"] += usd
                t["calls"] += int(new_call)
                t["attempts"] = t.get("attempts", 0) + 1
                t["estimated_calls"] += int(usage.estimated)
            if price is None and model not in self.data["unpriced_models"]:
                self.data["unpriced_models"].append(model)
            self._dirty = True
            self._maybe_write()
        return usd

    def add_failed(self, role: str, phase: str, node_id: str, model: str, *, new_call: bool) -> None:
        """Account one attempt that got no answer (timeout, error): counted, no tokens, no cost."""
        with self._lock:
            for t in self._targets(role, phase, node_id, model):
                t["calls"] += int(new_call)
                t["attempts"] = t.get("attempts", 0) + 1
                t["failed_attempts"] = t.get("failed_attempts", 0) + 1
            self._dirty = True
            self._maybe_write()

    def _targets(self, role: str, phase: str, node_id: str, model: str) -> list[dict[str, Any]]:
        keys = {"by_role": role, "by_phase": phase or "-", "by_node": node_id, "by_model": model}
        return [self.data["total"]] + [self.data[b].setdefault(k, _empty()) for b, k in keys.items()]

    def _maybe_write(self) -> None:
        # Rewritten after every call while small; once the per-node table makes it large, at most
        # once a second (and on flush()), so a 2,000-node run does not rewrite it 8,000 times.
        # Compact and without fsync: kill -9 cannot tear it; each call's cost is also in its
        # prompt-log record.
        if self.path is None or not self._dirty:
            return
        now = time.monotonic()
        if self._last_size > LARGE_BYTES and now - self._last_write < WRITE_INTERVAL_S:
            return
        text = json.dumps(self.data, ensure_ascii=False)
        atomic_write_text(self.path, text + "\n", durable=False)
        self._last_size, self._last_write, self._dirty = len(text), now, False

    def flush(self) -> None:
        """Write ``cost.json`` now if it is behind (the run calls this when it ends)."""
        with self._lock:
            self._last_write = float("-inf")
            self._maybe_write()

    def totals(self) -> dict[str, Any]:
        """A copy of the run's total (cheap: for progress displays)."""
        with self._lock:
            return dict(self.data["total"])

    def snapshot(self) -> dict[str, Any]:
        """A copy of the current totals (the content of ``cost.json``)."""
        import copy

        with self._lock:
            return copy.deepcopy(self.data)


def _row(name: str, b: dict[str, Any], width: int) -> str:
    est = f"{b.get('estimated_calls', 0)}" if b.get("estimated_calls") else ""
    return (
        f"{name:<{width}} {b.get('calls', 0):>6} {b.get('attempts', b.get('calls', 0)):>8} "
        f"{b.get('failed_attempts', 0):>6} {b.get('prompt_tokens', 0):>11} "
        f"{b.get('completion_tokens', 0):>11} {b.get('usd', 0.0):>11.4f} {est:>5}"
    )


def format_cost(data: dict[str, Any]) -> str:
    """A plain-text table of a ``cost.json`` (for ``ai-scientist logs RUN cost``)."""
    titles = {"by_role": "role", "by_phase": "phase", "by_model": "model", "by_node": "node"}
    # the first column is as wide as its longest name: model names are never cut
    width = max([32] + [len(name) + 2 for bucket in titles for name in data.get(bucket) or {}])
    header = (
        f"{'':<{width}} {'calls':>6} {'attempts':>8} {'failed':>6} {'prompt tok':>11} {'compl. tok':>11} "
        f"{'USD':>11} {'est.':>5}"
    )
    lines = [header, _row("TOTAL", data.get("total", {}), width)]
    for bucket, title in titles.items():
        entries = data.get(bucket) or {}
        if not entries:
            continue
        lines.append("")
        lines.append(f"by {title}:")
        for name, b in sorted(entries.items(), key=lambda kv: (-kv[1].get("usd", 0.0), kv[0])):
            lines.append(_row(f"  {name}", b, width))
    if data.get("unpriced_models"):
        lines.append("")
        lines.append("no price in llm.prices (counted as $0): " + ", ".join(data["unpriced_models"]))
    lines.append("")
    lines.append(
        "calls = logical LLM calls; attempts = requests sent (one prompt-log file each, retries and "
        "repair rounds included); failed = attempts with no answer (timeouts, errors)"
    )
    if data.get("total", {}).get("estimated_calls"):
        lines.append("est. = answered attempts whose token counts were estimated (backend reported none)")
    return "\n".join(lines)

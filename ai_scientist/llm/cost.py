"""Token and USD accounting of a run: ``cost.json`` by role, phase, node and model.

USD comes from ``llm.prices`` (per million tokens): the exact model name, else the
longest configured name the model starts with (``gpt-4o-mini`` prices
``gpt-4o-mini-2024-07-18``). A model with no price costs 0 and is listed under
``unpriced_models`` so a user sees the total is incomplete. Models named
``local:<file>`` (the in-process llama.cpp backend) are free and priced.
Cached prompt tokens (the part of the prompt the server served from its prefix cache, as it
reported it) are priced at the model's ``cached_per_mtok``, or at its input price when that is
not set (no discount is assumed unless configured); ``cached_tokens`` counts them and
``usd_saved`` is what they cost less than at the input price. ``cached_unknown`` counts answered
attempts whose reported cache count was not trusted (priced as no cache hit).
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
from .call import Usage

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
        "cached_tokens": 0,
        "usd_saved": 0.0,
        "cached_unknown": 0,
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

    def price_of(self, model: str) -> tuple[float, float, float] | None:
        """(input, output, cached input) USD per million tokens, or None when the model has no
        price; the cached price is the input price unless ``cached_per_mtok`` is set."""
        if model.startswith(LOCAL_PREFIX):
            return (0.0, 0.0, 0.0)
        price = self.prices.get(model)
        if price is None:
            names = [n for n in self.prices if model.startswith(n)]
            price = self.prices[max(names, key=len)] if names else None
        if price is None:
            return None
        get = price.get if isinstance(price, dict) else lambda k: getattr(price, k, None)
        given = float(get("input_per_mtok") or 0.0), float(get("output_per_mtok") or 0.0)
        cached = get("cached_per_mtok")
        return given[0], given[1], given[0] if cached is None else float(cached)

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
        cached = usage.cached_tokens or 0
        usd = saved = 0.0
        if price is not None:
            fresh = usage.prompt_tokens - cached
            usd = (fresh * price[0] + cached * price[2] + usage.completion_tokens * price[1]) / 1e6
            saved = cached * (price[0] - price[2]) / 1e6
        with self._lock:
            for t in self._targets(role, phase, node_id, model):
                t["prompt_tokens"] += usage.prompt_tokens
                t["completion_tokens"] += usage.completion_tokens
                t["usd"] += usd
                # entries of a cost.json written before cached tokens were counted lack these keys
                t["cached_tokens"] = t.get("cached_tokens", 0) + cached
                t["usd_saved"] = t.get("usd_saved", 0.0) + saved
                t["cached_unknown"] = t.get("cached_unknown", 0) + int(usage.cached_note is not None)
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
        f"{b.get('failed_attempts', 0):>6} {b.get('prompt_tokens', 0):>11} {b.get('cached_tokens', 0):>11} "
        f"{b.get('completion_tokens', 0):>11} {b.get('usd', 0.0):>11.4f} {b.get('usd_saved', 0.0):>11.4f} "
        f"{est:>5}"
    )


def format_cost(data: dict[str, Any]) -> str:
    """A plain-text table of a ``cost.json`` (for ``ai-scientist logs RUN cost``)."""
    titles = {"by_role": "role", "by_phase": "phase", "by_model": "model", "by_node": "node"}
    # the first column is as wide as its longest name: model names are never cut
    width = max([32] + [len(name) + 2 for bucket in titles for name in data.get(bucket) or {}])
    header = (
        f"{'':<{width}} {'calls':>6} {'attempts':>8} {'failed':>6} {'prompt tok':>11} {'cached tok':>11} "
        f"{'compl. tok':>11} {'USD':>11} {'saved USD':>11} {'est.':>5}"
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
    lines.append(
        "cached tok = prompt tokens the server served from its prefix cache (part of prompt tok; "
        "priced at llm.prices.<model>.cached_per_mtok, else at the input price); saved USD = what "
        "they cost less than at the input price"
    )
    if data.get("total", {}).get("cached_unknown"):
        lines.append(
            f"{data['total']['cached_unknown']} answered attempts reported a cached-token count that "
            "cannot be true (see cached_note in their prompt logs): priced as no cache hit"
        )
    if data.get("total", {}).get("estimated_calls"):
        lines.append("est. = answered attempts whose token counts were estimated (backend reported none)")
    return "\n".join(lines)

"""One row per task x seed, read from what the run left in its directory (never from the bench's memory).

- ``score``: the graded value of the task's metric on the best node of the last stage that chose
  one (``state.json``); None when no node worked or no stage ended;
- ``normalised``: 0 at the baseline measured in the same bench, 1 at the task's best known;
- ``nodes``: search nodes (seed re-runs apart, as ``logs nodes`` counts them), ``good``;
- ``llm_calls``, ``prompt_tokens`` (of which ``cached_tokens``), ``completion_tokens``, ``usd``:
  ``cost.json``'s totals (USD at the configured prices);
- ``wall_s``: the time the run's processes ran, from ``events.jsonl``: each segment from
  ``run_created`` / ``run_resumed`` to the last event before the next one (a killed attempt counts
  up to its last event).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base.fileio import read_json, read_jsonl
from ..base.paths import RunPaths
from ..reporting.runread import load_run
from .task import Task

STARTS = ("run_created", "run_resumed")


def wall_seconds(events: list[dict[str, Any]]) -> float:
    """Sum over the run's process lifetimes as its events show them."""
    total, start, last = 0.0, None, None
    for e in events:
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        if e.get("type") in STARTS:
            if start is not None and last is not None:
                total += last - start
            start = ts
        last = ts
    if start is not None and last is not None:
        total += last - start
    return total


def _metric_value(node: dict[str, Any], name: str) -> float | None:
    for m in [*(node.get("metrics") or []), node.get("metric") or {}]:
        if isinstance(m, dict) and m.get("name") == name and isinstance(m.get("value"), (int, float)):
            return float(m["value"])
    return None


def run_row(task: Task, seed: int, run_dir: Path, baseline: float | None) -> dict[str, Any]:
    """The row of one task x seed run (see the module docstring for each field)."""
    paths = RunPaths(run_dir)
    state = read_json(paths.state, default={}) or {}
    view = load_run(run_dir)
    counts = view.counts().values()
    best = view.recorded_best()
    best_id = best[max(best)] if best else None
    score = _metric_value(view.nodes[best_id], task.spec.metric.name) if best_id else None
    total = (read_json(paths.cost, default={}) or {}).get("total") or {}
    norm = task.normalise(score, baseline) if score is not None and baseline is not None else None
    return {
        "task": task.name,
        "seed": seed,
        "run_dir": str(run_dir),
        "status": state.get("status", "created"),
        "exit_code": state.get("exit_code"),
        "best_node": best_id,
        "metric": task.spec.metric.name,
        "direction": task.spec.metric.direction,
        "score": score,
        "baseline": baseline,
        "best_known": task.spec.best_known.value,
        "normalised": norm,
        "nodes": sum(c.nodes for c in counts),
        "good": sum(c.good for c in counts),
        "llm_calls": int(total.get("calls", 0)),
        "prompt_tokens": int(total.get("prompt_tokens", 0)),
        "cached_tokens": int(total.get("cached_tokens", 0)),
        "completion_tokens": int(total.get("completion_tokens", 0)),
        "usd": float(total.get("usd", 0.0)),
        "wall_s": round(wall_seconds(list(read_jsonl(paths.events))), 1),
    }

"""Read-only view of a run directory for the reporting steps.

Reporting never writes the journal; it reads the latest record of every node
(``journal.jsonl``), picks the best node of each stage and its seed re-runs,
and reads per-node artifacts. Everything here is a pure read: a missing or
torn file yields an empty answer rather than an exception, because reporting
runs at the end of runs that may have crashed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.fileio import read_json, read_jsonl
from ..base.paths import RunPaths


@dataclass
class RunView:
    """The nodes of a run, keyed by id, in creation order."""

    run_dir: Path
    nodes: dict[str, dict[str, Any]]

    def by_stage(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for node in self.nodes.values():
            out.setdefault(int(node.get("stage") or 1), []).append(node)
        return dict(sorted(out.items()))

    def best_per_stage(self) -> dict[int, dict[str, Any]]:
        """Stage number -> best good node with a metric (seed re-runs excluded)."""
        best: dict[int, dict[str, Any]] = {}
        for stage, nodes in self.by_stage().items():
            cands = [
                n
                for n in nodes
                if n.get("status") == "good" and n.get("operation") != "seed_eval" and _value(n) is not None
            ]
            if cands:
                best[stage] = max(cands, key=_score)
        return best

    def seed_runs(self, node_id: str) -> list[dict[str, Any]]:
        """Seed re-runs of ``node_id`` (operation ``seed_eval`` whose parent is that node)."""
        return [
            n
            for n in self.nodes.values()
            if n.get("operation") == "seed_eval" and n.get("parent_id") == node_id
        ]

    def node_dir(self, node_id: str) -> Path:
        return RunPaths(self.run_dir).node(node_id).root

    def metrics(self, node_id: str) -> list[dict[str, Any]]:
        """``nodes/<id>/metrics.json`` metrics, else the journal's ``metrics``/``metric``."""
        try:
            data = read_json(RunPaths(self.run_dir).node(node_id).metrics, default=None)
        except (ValueError, OSError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("metrics"), list):
            return [m for m in data["metrics"] if isinstance(m, dict)]
        node = self.nodes.get(node_id, {})
        if node.get("metrics"):
            return list(node["metrics"])
        return [node["metric"]] if node.get("metric") else []


def _value(node: dict[str, Any]) -> float | None:
    metric = node.get("metric") or {}
    value = metric.get("value")
    return float(value) if isinstance(value, (int, float)) else None


def _score(node: dict[str, Any]) -> float:
    value = _value(node) or 0.0
    return -value if (node.get("metric") or {}).get("direction") == "minimize" else value


def load_run(run_dir: str | Path) -> RunView:
    """Latest journal record per node id (creation order kept)."""
    run_dir = Path(run_dir)
    nodes: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(RunPaths(run_dir).journal):
        node = rec.get("node")
        if isinstance(node, dict) and node.get("id"):
            nodes[str(node["id"])] = node
    return RunView(run_dir, nodes)


def read_text(path: Path, limit: int = 20_000) -> str:
    """A file's text capped at ``limit`` chars ('' when missing or unreadable)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more chars]"

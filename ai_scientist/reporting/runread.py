"""Read-only view of a run directory for the reporting steps.

Reporting never writes the journal; it reads the latest record of every node
(``journal.jsonl``), each stage's best node as the stage's end chose it
(``state.json``; :func:`ai_scientist.treesearch.best.recorded_best`) and its seed
re-runs, the node counts as :func:`~ai_scientist.treesearch.best.count_nodes`
defines them, and per-node artifacts. Everything here is a pure read: a missing or
torn file yields an empty answer rather than an exception, because reporting
runs at the end of runs that may have crashed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.fileio import read_json, read_jsonl
from ..base.paths import RunPaths
from ..treesearch.best import (
    NodeCounts,
    ablation_stage_best,
    counts_by_stage,
    rank_nodes,
    recorded_best,
    select_best,
)
from ..treesearch.node import Metric, Node, NodeError
from ..treesearch.seeds import aggregate_seeds

NODE_ID = re.compile(r"\bn\d{4,}\b")  # how a caption or a summary names a node of the run

# the one seed statistic of the run (the orchestrator's ``treesearch.seeds.aggregate_seeds`` over
# the re-runs): stated in the plots' manifest, the writer's findings and the standard figure; a
# prompt gets it with the run's SEED values (:func:`seed_statistic`), never a config key's name (a
# relay run's plotter was told "seeds agent.seed+1 .. agent.seed+N", a name it never saw: s10 ln 033)
SEED_STATISTIC = (
    "mean ± standard error over the seed re-runs only (each with a SEED other than the search run's); "
    "the node's own search run is not one of them"
)


def seed_statistic(view: RunView, search_seed: int | None) -> str:
    """:data:`SEED_STATISTIC` with the SEED values the run used: those of its seed re-runs (the
    journal's) and the search runs' one (``agent.seed``)."""
    reruns = sorted(
        {
            int(n["seed"])
            for n in view.nodes.values()
            if n.get("operation") == "seed_eval" and isinstance(n.get("seed"), int)
        }
    )
    if not reruns:
        return SEED_STATISTIC
    search = f" (SEED {search_seed})" if search_seed is not None else ""
    return (
        f"mean ± standard error over the seed re-runs only (SEED {', '.join(map(str, reruns))}); "
        f"the node's own search run{search} is not one of them"
    )


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

    def typed(self) -> list[Node]:
        """The nodes as :class:`Node` objects (a record that does not parse is left out)."""
        out = []
        for node in self.nodes.values():
            try:
                out.append(Node.from_dict(node))
            except (NodeError, TypeError, ValueError):
                continue
        return out

    def counts(self) -> dict[int, NodeCounts]:
        """Stage -> node counts (search nodes; seed re-runs apart), the run's one definition."""
        return counts_by_stage(self.typed())

    def recorded_best(self) -> dict[int, str]:
        """Stage -> the best node its end chose (``state.json``), for the stages that ended."""
        try:
            state = read_json(RunPaths(self.run_dir).state, default={}) or {}
        except (ValueError, OSError):
            state = {}
        return {s: i for s, i in recorded_best(state.get("stages")).items() if i in self.nodes}

    def best_per_stage(self) -> dict[int, dict[str, Any]]:
        """Stage number -> its best node: the stage end's choice (which may be a node carried from
        an earlier stage that no node of this one beat); for a stage that never ended (a stopped
        run), the same metric rule over its good search nodes and the node it started from."""
        chosen = self.recorded_best()
        typed = self.typed()
        best: dict[int, dict[str, Any]] = {}
        carried: str | None = None
        for stage in sorted(set(self.by_stage()) | set(chosen)):
            nid = chosen.get(stage)
            if nid is None:
                pool = [n for n in typed if (n.stage == stage and not n.is_seed_eval) or n.id == carried]
                # the ablation stage's best is the node it ablates (treesearch.best, one rule)
                nid = (ablation_stage_best(stage, carried) or select_best(pool)).node_id
            if nid is not None:
                best[stage] = self.nodes[nid]
                carried = nid
        return best

    def ranked_good(self, stage: int) -> list[dict[str, Any]]:
        """The stage's good search nodes best first (primary metric; incomparable ones after)."""
        good = [n for n in self.typed() if n.stage == stage and n.is_good and not n.is_seed_eval]
        return [self.nodes[n.id] for n in rank_nodes(good)]

    def seed_runs(self, node_id: str) -> list[dict[str, Any]]:
        """Seed re-runs of ``node_id`` (operation ``seed_eval`` whose parent is that node)."""
        return [
            n
            for n in self.nodes.values()
            if n.get("operation") == "seed_eval" and n.get("parent_id") == node_id
        ]

    def node_dir(self, node_id: str) -> Path:
        return RunPaths(self.run_dir).node(node_id).root

    def named_in_summaries(self) -> list[str]:
        """The good search nodes the stage-end summaries name (``stage_summaries/stage<N>.json``'s
        prose: tried / worked / failed / next), in stage and text order; a seed re-run named
        stands for the node it re-ran. What the summaries highlight is what the figures and the
        paper centre on, whichever node the stage's end chose as best (relay s8 ln3 032, 041)."""
        paths = RunPaths(self.run_dir)
        files = sorted(paths.stage_summaries.glob("stage*.json")) if paths.stage_summaries.is_dir() else []
        out: list[str] = []
        for file in files:
            try:
                data = read_json(file, default=None)
            except (ValueError, OSError):  # torn: that stage names nothing
                continue
            summary = data.get("summary") if isinstance(data, dict) else None
            text = " ".join(str(v) for v in summary.values()) if isinstance(summary, dict) else ""
            for nid in NODE_ID.findall(text):
                node = self.nodes.get(nid) or {}
                if node.get("operation") == "seed_eval":
                    node = self.nodes.get(str(node.get("parent_id"))) or {}
                good = node.get("status") == "good" and node.get("operation") != "seed_eval"
                if good and node["id"] not in out:
                    out.append(str(node["id"]))
        return out

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


def load_run(run_dir: str | Path) -> RunView:
    """Latest journal record per node id (creation order kept)."""
    run_dir = Path(run_dir)
    nodes: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(RunPaths(run_dir).journal):
        node = rec.get("node")
        if isinstance(node, dict) and node.get("id"):
            nodes[str(node["id"])] = node
    return RunView(run_dir, nodes)


def seed_statistics(view: RunView, stage_info: dict[str, Any], best_id: str) -> dict[str, Any] | None:
    """The seed re-runs of ``best_id`` as the stage's end aggregated them (``state.json``;
    :data:`SEED_STATISTIC`); for a stage that never aggregated (a stopped run), the same statistic
    over the good re-runs in the journal."""
    agg = ((stage_info.get("seeds") or {}) if isinstance(stage_info, dict) else {}).get("aggregate")
    if not (isinstance(agg, dict) and isinstance(agg.get("mean"), (int, float))):
        metrics = [
            Metric.from_dict(s["metric"])
            for s in view.seed_runs(best_id)
            if s.get("status") == "good" and isinstance(s.get("metric"), dict)
        ]
        try:
            agg = aggregate_seeds(metrics).to_dict() if metrics else None
        except (ValueError, TypeError):  # mixed or non-finite metrics: no statistic to report
            agg = None
    return agg


def read_text(path: Path, limit: int = 20_000) -> str:
    """A file's text capped at ``limit`` chars ('' when missing or unreadable)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more chars]"

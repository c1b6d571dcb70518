"""What the serve page shows, read from a run directory (never written, steering apart).

The journal and the events are read incrementally (:class:`JsonlTail`: only the bytes appended
since the last read), so a page open on a 2,000-node run costs the server a few kB per change and
the run nothing: the run writes its files as it always does. Everything returned is JSON-ready and
passed through the run's secrets redactor; the page renders it as text only.
"""

from __future__ import annotations

import collections
import difflib
import json
import os
from pathlib import Path
from typing import Any

from ..base.fileio import read_json, regular_file_inside
from ..base.paths import RunPaths
from ..reporting.runread import RunView, read_text
from ..reporting.viewer import CODE_SUFFIXES, TEXT_CAP, _Images, _prompt_logs, _redactor, node_view
from ..runloop.steering import SteeringState
from ..runloop.steering import summary as steering_summary
from ..treesearch.best import rank_nodes, recorded_best
from ..treesearch.node import Node, NodeError, node_sort_key
from ..treesearch.stages import STAGES

EVENTS_KEPT = 400  # the page lists the latest events
CALL_TEXT_CAP = 200_000  # per message on a node page (one node at a time: the whole prompt, mostly)
DIFF_CAP = 60_000


class JsonlTail:
    """Records of an append-only JSONL file, read from where the last read stopped; a file that
    shrank (a new run, a repaired journal) is read again from the start. A torn last line is left
    for the next read."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.inode: int | None = None

    def read_new(self) -> tuple[list[dict[str, Any]], bool]:
        """(new records, whether the file started over)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return [], False
        reset = st.st_size < self.offset or (self.inode is not None and st.st_ino != self.inode)
        if reset:
            self.offset = 0
        self.inode = st.st_ino
        if st.st_size == self.offset:
            return [], reset
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read(st.st_size - self.offset)
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        out = []
        for line in chunk[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out, reset


def _compact(node: dict[str, Any]) -> dict[str, Any]:
    m = node.get("metric") if isinstance(node.get("metric"), dict) else None
    status = (
        "incomparable" if node.get("incomparable") and node.get("status") == "good" else node.get("status")
    )
    return {
        "id": node.get("id"),
        "parent": node.get("parent_id"),
        "stage": node.get("stage"),
        "op": node.get("operation"),
        "status": status,
        "metric": m.get("value") if m else None,
        "metric_name": m.get("name") if m else None,
        "seed": node.get("seed"),
    }


class RunSource:
    """One run directory as the page sees it; not thread-safe (the server serialises access)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.paths = RunPaths(self.run_dir)
        self.redactor = _redactor(self.run_dir)
        self._journal = JsonlTail(self.paths.journal)
        self._events = JsonlTail(self.paths.events)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=EVENTS_KEPT)
        self.event_count = 0
        self.steering = SteeringState()  # folded from the events as they are read

    # ------------------------------------------------------------ reading --
    def refresh(self) -> None:
        recs, reset = self._journal.read_new()
        if reset:
            self.nodes = {}
        for rec in recs:
            node = rec.get("node")
            if isinstance(node, dict) and node.get("id"):
                self.nodes[str(node["id"])] = node
        evs, reset = self._events.read_new()
        if reset:
            self.events.clear()
            self.event_count = 0
            self.steering = SteeringState()
        self.events.extend(evs)
        self.event_count += len(evs)
        for ev in evs:
            if ev.get("type") in ("steer", "steer_used"):
                self.steering.apply(ev)

    def signature(self) -> list[Any]:
        """What changes when the page has something new to show (file sizes and times)."""
        sig: list[Any] = []
        for p in (self.paths.journal, self.paths.events, self.paths.cost, self.paths.state):
            try:
                st = os.stat(p)
                sig.append([st.st_size, st.st_mtime_ns])
            except FileNotFoundError:
                sig.append(None)
        pending = RunPaths(self.run_dir).steer / "pending"
        sig.append(sorted(os.listdir(pending)) if pending.is_dir() else [])
        return sig

    def _state(self) -> dict[str, Any]:
        try:
            data = read_json(self.paths.state, default={})
        except (ValueError, OSError):
            return {}
        return data if isinstance(data, dict) else {}

    # ------------------------------------------------------------- views --
    def tree(self) -> dict[str, Any]:
        """Every node (compact), the stages, each stage's best and the best path."""
        self.refresh()
        state = self._state()
        best = {str(s): i for s, i in recorded_best(state.get("stages")).items() if i in self.nodes}
        current = state.get("current_stage")
        if current is not None and str(current) not in best:  # a stage in progress: its best so far
            typed = []
            for n in self.nodes.values():
                if (
                    n.get("stage") == current
                    and n.get("status") == "good"
                    and n.get("operation") != "seed_eval"
                ):
                    try:
                        typed.append(Node.from_dict(n))
                    except (NodeError, TypeError, ValueError):
                        continue
            ranked = rank_nodes([n for n in typed if n.is_good])
            if ranked:
                best[str(current)] = ranked[0].id
        last = max(best, key=int) if best else None
        path: list[str] = []
        nid = best[last] if last else None
        while nid and nid in self.nodes and nid not in path:
            path.append(nid)
            nid = self.nodes[nid].get("parent_id")
        return self.redactor.redact_obj(
            {
                "run": self.run_dir.name,
                "status": state.get("status"),
                "current_stage": current,
                "awaiting_gate": state.get("awaiting_gate"),
                "stage_titles": {str(k): v.title for k, v in STAGES.items()},
                "nodes": [_compact(n) for n in self.nodes.values()],
                "best": best,
                "best_path": path[::-1],
                "steering": steering_summary(self.run_dir, self.steering),
            }
        )

    def overview(self) -> dict[str, Any]:
        """Idea, state, stage summaries, cost by role and model, the latest events."""
        self.refresh()
        summaries = []
        for s in STAGES:
            try:
                data = read_json(self.paths.stage_summary(s), default=None)
            except (ValueError, OSError):
                data = None
            if isinstance(data, dict):
                keep = (
                    "stage",
                    "title",
                    "best_node",
                    "best_metric",
                    "seeds",
                    "nodes",
                    "good",
                    "buggy",
                    "summary",
                )
                summaries.append({k: data.get(k) for k in keep})
        try:
            cost = read_json(self.paths.cost, default={}) or {}
        except (ValueError, OSError):
            cost = {}
        state = self._state()
        return self.redactor.redact_obj(
            {
                "run": self.run_dir.name,
                "idea": read_text(self.paths.idea_md, 20_000),
                "state": {k: state.get(k) for k in ("status", "current_stage", "awaiting_gate", "exit_code")},
                "stage_summaries": summaries,
                "cost": {k: cost.get(k) for k in ("total", "by_role", "by_model")},
                "events": list(self.events)[-EVENTS_KEPT:],
                "event_count": self.event_count,
                "steering": steering_summary(self.run_dir, self.steering),
            }
        )

    def has_node(self, node_id: str) -> bool:
        self.refresh()
        return node_id in self.nodes

    def node(self, node_id: str) -> dict[str, Any]:
        """Everything the node page shows (the caller checked :meth:`has_node`)."""
        view = RunView(self.run_dir, self.nodes)
        nd = self.paths.node(node_id).root
        data = node_view(view, self.nodes[node_id], _prompt_logs(nd), _Images(), None, CALL_TEXT_CAP)
        parent = self.nodes[node_id].get("parent_id")
        data["diff"] = self._diff(parent, data["code"]) if parent in self.nodes else None
        data["children"] = [i for i, n in self.nodes.items() if n.get("parent_id") == node_id]
        return self.redactor.redact_obj(data)

    def _diff(self, parent_id: str, code: list[dict[str, str]]) -> str:
        """Unified diff of the node's code files against its parent's."""
        theirs = code_files(self.paths.node(parent_id).workspace)
        ours = {f["name"]: f["text"] for f in code}  # what the page shows, read as the viewer reads it
        out: list[str] = []
        for name in sorted(set(theirs) | set(ours), key=str):
            a, b = theirs.get(name, ""), ours.get(name, "")
            if a != b:
                out += difflib.unified_diff(
                    a.splitlines(keepends=True),
                    b.splitlines(keepends=True),
                    f"{parent_id}/{name}",
                    f"{name}",
                )
        text = "".join(out)
        return text if len(text) <= DIFF_CAP else text[:DIFF_CAP] + "\n[... diff cut]"

    def prompt_log(self, node_id: str, name: str) -> str | None:
        """The exact text of one prompt-log file of the node (None: no such file)."""
        for p in _prompt_logs(self.paths.node(node_id).root):
            if p.name == name:
                return p.read_text(encoding="utf-8", errors="replace")
        return None


def code_files(ws: Path) -> dict[str, str]:
    """A workspace's code files as the viewer lists them (first 10; no symlink followed out)."""
    out: dict[str, str] = {}
    if ws.is_dir():
        for p in sorted(ws.rglob("*"))[:200]:
            if p.suffix in CODE_SUFFIXES and len(out) < 10 and regular_file_inside(ws, p):
                out[str(p.relative_to(ws))] = read_text(p, TEXT_CAP)
    return out


def is_run_dir(path: Path) -> bool:
    """A run directory: its journal, or (a run just created, no node yet) its resolved config."""
    paths = RunPaths(path)
    return paths.journal.exists() or paths.config.exists()


def find_runs(root: Path) -> dict[str, Path]:
    """Run name -> directory: ``root`` itself when it is a run, else the runs directly under it."""
    if is_run_dir(root):
        return {root.resolve().name: root}
    found = {}
    for child in sorted(root.iterdir(), key=lambda p: node_sort_key(p.name)) if root.is_dir() else []:
        if child.is_dir() and is_run_dir(child):
            found[child.name] = child
    return found

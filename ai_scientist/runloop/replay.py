"""Replay: re-run a recorded run with no LLM and no experiment execution.

LLM answers come from the recorded prompt logs (the replay backend, keyed by the
exact messages and parameters), and command results from the recorded
``exec/`` records, in the order each node ran them; the workspace files the
experiment wrote are restored from the recording. The replayed run makes every
decision again from scratch, so its tree (node ids, parents, operations,
statuses, decisions) must equal the original's; any divergence shows up as an
unrecorded prompt naming the node, phase and first differing message.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..base.config import validate
from ..base.fileio import read_json
from ..base.idea import Idea
from ..base.paths import RunPaths, node_of_workspace
from ..base.run import Run
from ..execution.base import ExecResult

if TYPE_CHECKING:
    from ..execution.base import Limits


class ReplayDiverged(RuntimeError):
    """The replayed run asked for a command the recording does not have."""


def replay_run(src: Path, out_root: Path) -> Run:
    """A new run directory configured to replay ``src``."""
    data = yaml.safe_load(RunPaths(src).config.read_text(encoding="utf-8")) or {}
    data.setdefault("llm", {})
    data["llm"]["backend"] = "replay"
    data["llm"]["replay_dir"] = str(src.resolve())
    cfg = validate(data, str(RunPaths(src).config))
    idea = Idea(**read_json(RunPaths(src).idea_json))
    run = Run.create(cfg, idea, out_root, f"{src.name}.replay")
    run.event("replay_of", source=str(src.resolve()))
    return run


def _links_in(src: Path, dst: Path) -> Callable[[str, list[str]], list[str]]:
    """``copytree`` ignore: symlinks already restored by an earlier command of the node (copytree
    cannot copy a symlink over an existing one: a node's second command would fail)."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        rel = Path(folder).relative_to(src)
        return [n for n in names if (Path(folder) / n).is_symlink() and (dst / rel / n).is_symlink()]

    return ignore


class ReplayRunner:
    """An Executor that answers from a recorded run's ``nodes/<id>/exec/*.json``."""

    name = "replay"

    def __init__(self, src: Path):
        self.src = Path(src)
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def run(
        self,
        command: list[str] | str,
        *,
        workspace: Path,
        limits: Limits | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        where = node_of_workspace(workspace)
        if where is None:
            raise ReplayDiverged(
                f"{workspace}: not a node workspace (nodes/<id>/workspace); nothing was recorded for it"
            )
        node_id = where[1]
        recorded = RunPaths(self.src).node(node_id)
        with self._lock:
            k = self._next.get(node_id, 0)
            self._next[node_id] = k + 1
        # a command a kill -9 interrupted left its claimed slot empty; the resumed node re-ran it
        records = [r for r in recorded.exec_files() if r.stat().st_size > 0]
        if k >= len(records):
            raise ReplayDiverged(f"node {node_id}: command #{k + 1} {command!r} was not run in the recording")
        rec = read_json(records[k])
        if list(rec.get("command") or []) != list(command if isinstance(command, list) else [command]):
            raise ReplayDiverged(
                f"node {node_id}: command #{k + 1} differs: recorded {rec.get('command')!r}, now {command!r}"
            )
        src_ws = recorded.workspace
        if src_ws.is_dir():
            shutil.copytree(
                src_ws, workspace, dirs_exist_ok=True, symlinks=True, ignore=_links_in(src_ws, workspace)
            )
        names = {f.name for f in dataclasses.fields(ExecResult)}
        return ExecResult(**{k2: v for k2, v in rec.items() if k2 in names})

    def close(self) -> None:
        return None

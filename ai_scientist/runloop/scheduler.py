"""Worker pool of the free-running scheduler, and the recorded order a replay follows.

The orchestrator (main thread) creates nodes and hands them to a :class:`WorkerPool`;
each node runs on its own thread in one of ``size`` slots, and the main thread
collects finished nodes one at a time (``wait``), so a worker that finishes frees its
slot for the next node at once: there is no batch barrier.

Every ``node_selected`` event of a free-running run records ``waiting``: the nodes
that were not finished in the journal state the decision was made on (all others
were). A replay (:func:`recorded_waiting`) starts a node only when a later decision
needs it finished, so each replayed decision sees exactly the finished nodes the
recorded one saw (see docs/pipeline.md, "Scheduling").
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..base.fileio import read_jsonl
from ..base.paths import RunPaths
from ..treesearch.node import Node


class WorkerPool:
    """Up to ``size`` node threads; queued nodes start as slots free up (``start_queued``).

    ``prepare(node, item, slot)`` is called on the main thread when the node starts and
    returns what ``target(node, prepared, slot)`` gets on the node's thread (``target``
    must not raise); ``item`` is whatever the caller queued with the node. Only the
    main thread calls the methods.
    """

    def __init__(
        self, size: int, prepare: Callable[[Node, Any, int], Any], target: Callable[[Node, Any, int], None]
    ):
        self.size = size
        self._prepare = prepare
        self._target = target
        self._queued: list[tuple[Node, Any]] = []
        self._running: dict[str, tuple[threading.Thread, int]] = {}
        self._done: queue.Queue[str] = queue.Queue()

    # --------------------------------------------------------------- state --
    @property
    def running_ids(self) -> list[str]:
        return list(self._running)

    @property
    def queued_ids(self) -> list[str]:
        return [n.id for n, _ in self._queued]

    @property
    def free_slots(self) -> int:
        return self.size - len(self._running) - len(self._queued)

    def next_slot(self) -> int:
        """The slot the next node to start gets (0 when all are busy)."""
        used = {slot for _, slot in self._running.values()}
        return min(set(range(self.size)) - used, default=0)

    @property
    def idle(self) -> bool:
        return not self._running and not self._queued

    # ------------------------------------------------------------- changes --
    def add(self, node: Node, item: Any) -> None:
        """Queue ``node``; it starts on the next ``start_queued`` that has a free slot for it."""
        self._queued.append((node, item))

    def start_queued(self, only: Iterable[str] | None = None) -> None:
        """Start queued nodes (those in ``only``, if given) in queue order while slots are free."""
        wanted = None if only is None else set(only)
        used = {slot for _, slot in self._running.values()}
        for node, item in list(self._queued):
            if len(self._running) >= self.size:
                return
            if wanted is not None and node.id not in wanted:
                continue
            slot = min(set(range(self.size)) - used)
            used.add(slot)
            self._queued.remove((node, item))
            prepared = self._prepare(node, item, slot)
            t = threading.Thread(
                target=self._run, args=(node, prepared, slot), daemon=True, name=f"worker-{node.id}"
            )
            self._running[node.id] = (t, slot)
            t.start()

    def _run(self, node: Node, item: Any, slot: int) -> None:
        try:
            self._target(node, item, slot)
        finally:
            self._done.put(node.id)

    def wait(self, timeout: float | None = 0.2) -> list[str]:
        """Ids of nodes whose thread ended (collected, slots freed), waiting up to ``timeout``
        for the first; [] when none ended in time. Short waits keep Ctrl-C deliverable."""
        out: list[str] = []
        try:
            out.append(self._done.get(timeout=timeout) if timeout else self._done.get_nowait())
            while True:
                out.append(self._done.get_nowait())
        except queue.Empty:
            pass
        for nid in out:
            thread, _ = self._running.pop(nid)
            thread.join()
        return out


def recorded_waiting(src: str | Path) -> dict[str, frozenset[str]] | None:
    """For each node a free-running recording selected: the nodes not finished when it was
    selected. None when the recording has no such record (a batch-scheduled or older run:
    its replay uses the batch scheduler, which reproduces it). A run killed between a decision
    and its node's creation decided on that id again after its resume: the last decision counts."""
    path = RunPaths(Path(src)).events
    if not path.exists():
        return None
    out: dict[str, frozenset[str]] = {}
    for ev in read_jsonl(path):
        if ev.get("type") == "node_selected" and "waiting" in ev:
            out[ev["node_id"]] = frozenset(ev["waiting"])
    return out or None

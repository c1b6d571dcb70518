"""Steering a run from outside its process: requests as files, applied as run events.

Anyone who may write the run directory steers it (``ai-scientist steer``, the ``serve`` page):
a request is one JSON file written atomically into ``RUN/steer/pending/``. The orchestrator
picks the pending requests up at its safe points — before each decision and at each approval
gate — in file-name order (a nanosecond timestamp first), appends one ``steer`` event per request
to ``events.jsonl`` and moves the file to ``RUN/steer/done/``. The run needs no server of its own,
and a request written while no process runs waits for the next ``resume``.

Each ``steer`` event records ``at``, the id the next node would get when it was applied. What a
request changes depends only on the events and ``at``, never on timing, which is what lets
``resume`` fold the events back into the same :class:`SteeringState` and ``replay`` apply the
recorded events at the same decisions (it reads them from the recording instead of the
directory), reproducing a steered run's tree:

- ``note`` / ``withdraw``: a note to the model; every node created at or after ``at`` carries the
  notes active at its creation in the ``user_note`` layer of its plan and code prompts (and the
  idea proposals decided then), until a ``withdraw`` names it;
- ``block`` / ``unblock``: a node the search must not expand (the decision takes the next-best
  candidate; a stage with none left ends as stalled);
- ``expand``: the next decision expands that node (debug when buggy, else the stage's expand
  operation), once; recorded as a ``steer_used`` event when a decision takes it;
- ``pause`` / ``resume``: no new node starts; the nodes in flight finish; the process waits,
  reading the directory, until a ``resume`` (a replay never waits: pausing changes no decision);
- ``approve``: passes an approval gate (``agent.gates``): at a gate the run stops with exit code
  :data:`EXIT_GATE` (state saved) until a ``steer approve`` is followed by ``resume``.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import RunStop, UsageError
from ..base.fileio import atomic_write_json, read_json, read_jsonl
from ..base.paths import RunPaths
from ..treesearch.node import node_sort_key

EXIT_GATE = 5  # stopped at an approval gate (agent.gates): state saved; approve, then resume
ACTIONS = ("pause", "resume", "note", "withdraw", "block", "unblock", "expand", "approve")
GATES = ("stage_end", "reporting")
MAX_NOTE_CHARS = 4000


class GateStop(RunStop):
    """The run reached an approval gate that no ``steer approve`` has passed yet."""

    exit_code = EXIT_GATE
    status = "awaiting_approval"
    title = "run stopped at an approval gate"

    def __init__(self, gate: str):
        super().__init__(f"gate {gate} needs approval (agent.gates)")
        self.gate = gate

    def hint(self, run_dir: str | Path) -> str:
        return f"ai-scientist steer {run_dir} approve && ai-scientist resume {run_dir}"


def steer_dir(run_dir: Path) -> Path:
    return RunPaths(run_dir).steer


def _check_node(node: str | None) -> str:
    if not node or not isinstance(node, str) or len(node) > 64 or not node.isalnum():
        raise UsageError(f"a node id such as n0003 is needed, got {node!r}")
    return node


def make_request(action: str, *, text: str | None = None, node: str | None = None,
                 note: str | None = None, gate: str | None = None, source: str = "cli") -> dict[str, Any]:  # fmt: skip
    """A validated request (raises :class:`UsageError` naming what is wrong)."""
    if action not in ACTIONS:
        raise UsageError(f"unknown steering action {action!r}; one of {', '.join(ACTIONS)}")
    req: dict[str, Any] = {"id": f"{time.time_ns():020d}-{secrets.token_hex(4)}", "action": action,
                           "source": source, "created": time.time()}  # fmt: skip
    if action == "note":
        if not isinstance(text, str) or not text.strip():
            raise UsageError("a note needs its text")
        if len(text) > MAX_NOTE_CHARS:
            raise UsageError(f"a note is at most {MAX_NOTE_CHARS} characters, got {len(text)}")
        req["text"] = text.strip()
    elif action == "withdraw":
        if not isinstance(note, str) or not note:
            raise UsageError("withdraw needs the note's id (ai-scientist steer RUN status lists them)")
        req["note"] = note
    elif action in ("block", "unblock", "expand"):
        req["node"] = _check_node(node)
    elif action == "approve":
        if not isinstance(gate, str) or gate.split(":")[0] not in GATES:
            raise UsageError(f"approve needs a gate such as stage_end:1 or reporting, got {gate!r}")
        req["gate"] = gate
    return req


def write_request(run_dir: Path, req: dict[str, Any]) -> Path:
    """Write ``req`` into ``RUN/steer/pending/`` atomically (the orchestrator never reads a
    half-written request); returns the file."""
    paths = RunPaths(Path(run_dir))
    if not (paths.journal.exists() or paths.config.exists()):  # (a run just created has no journal yet)
        raise UsageError(f"{run_dir}: not a run directory (no journal.jsonl, no config.resolved.yaml)")
    return atomic_write_json(steer_dir(run_dir) / "pending" / f"{req['id']}.json", req)


def pending_requests(run_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The pending requests in the order they were made; an unreadable file is skipped (it may
    be another writer's temporary file)."""
    folder = steer_dir(run_dir) / "pending"
    out = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = read_json(p)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("action") in ACTIONS and data.get("id"):
            out.append((p, data))
    return out


def _at_or_before(at: str, node_id: str) -> bool:
    return node_sort_key(at) <= node_sort_key(node_id)


@dataclass
class SteeringState:
    """What the ``steer`` events so far say (a fold over them, in order)."""

    paused: bool = False
    notes: dict[str, str] = field(default_factory=dict)  # active notes: id -> text
    blocked: set[str] = field(default_factory=set)
    expand: list[tuple[str, str]] = field(default_factory=list)  # (request id, node id), in order
    approved: set[str] = field(default_factory=set)
    applied: set[str] = field(default_factory=set)  # request ids
    history: list[dict[str, Any]] = field(default_factory=list)  # the steer events

    def apply(self, ev: dict[str, Any]) -> None:
        if ev.get("type") == "steer_used":
            self.expand = [e for e in self.expand if e[0] != ev.get("request")]
            return
        rid, action = str(ev.get("request")), ev.get("action")
        if rid in self.applied:
            return
        self.applied.add(rid)
        self.history.append(ev)
        if action in ("pause", "resume"):
            self.paused = action == "pause"
        elif action == "note":
            self.notes[rid] = str(ev.get("text") or "")
        elif action == "withdraw":
            self.notes.pop(str(ev.get("note")), None)
        elif action == "block":
            self.blocked.add(str(ev.get("node")))
        elif action == "unblock":
            self.blocked.discard(str(ev.get("node")))
        elif action == "expand":
            self.expand.append((rid, str(ev.get("node"))))
        elif action == "approve":
            self.approved.add(str(ev.get("gate")))

    @classmethod
    def from_events(cls, events: Iterable[dict[str, Any]]) -> SteeringState:
        state = cls()
        for ev in events:
            if ev.get("type") in ("steer", "steer_used"):
                state.apply(ev)
        return state

    def notes_at(self, node_id: str) -> list[tuple[str, str]]:
        """The notes active when ``node_id`` was created: (id, text), oldest first."""
        active: dict[str, str] = {}
        for ev in self.history:
            if not _at_or_before(str(ev.get("at")), node_id):
                continue
            if ev.get("action") == "note":
                active[str(ev["request"])] = str(ev.get("text") or "")
            elif ev.get("action") == "withdraw":
                active.pop(str(ev.get("note")), None)
        return list(active.items())


def note_text(notes: list[tuple[str, str]]) -> str:
    """The ``user_note`` layer's value: each note on its own lines ('' when none: no layer)."""
    return "\n\n".join(text for _, text in notes)


def read_state(run_dir: Path) -> SteeringState:
    """The steering state of a run as its events record it (pending requests not included)."""
    return SteeringState.from_events(read_jsonl(RunPaths(Path(run_dir)).events))


class Steering:
    """The orchestrator's side: picks requests up (or, in a replay, the recorded events) and
    keeps the :class:`SteeringState`. ``event`` writes one run event (``Run.event``)."""

    def __init__(self, run_dir: Path, event: Any, replay_src: Path | None = None):
        self.run_dir = Path(run_dir)
        self._event = event
        self.state = read_state(self.run_dir)
        self.replay_src = replay_src
        self._recorded: list[dict[str, Any]] = []
        if replay_src is not None:
            self._recorded = [e for e in read_jsonl(RunPaths(replay_src).events) if e.get("type") == "steer"]

    def poll(self, at: str) -> list[dict[str, Any]]:
        """Apply what is pending (replay: what the recording applied at or before ``at``);
        returns the events written."""
        written = []
        if self.replay_src is not None:
            for rec in self._recorded:
                if rec["request"] not in self.state.applied and _at_or_before(str(rec.get("at")), at):
                    fields = {k: v for k, v in rec.items() if k not in ("ts", "type", "at")}
                    written.append(self._record(fields, at))
            return written
        for path, req in pending_requests(self.run_dir):
            if req["id"] not in self.state.applied:  # a kill -9 after the event, before the move
                fields = {
                    "request": req["id"],
                    **{k: v for k, v in req.items() if k not in ("id", "created")},
                }
                written.append(self._record(fields, at))
            done = steer_dir(self.run_dir) / "done"
            done.mkdir(parents=True, exist_ok=True)
            os.replace(path, done / path.name)
        return written

    def _record(self, fields: dict[str, Any], at: str) -> dict[str, Any]:
        ev = self._event("steer", at=at, **fields)
        self.state.apply(ev)
        return ev

    def used(self, request: str, node_id: str) -> None:
        """An ``expand`` request was taken by the decision creating ``node_id``."""
        self.state.apply(self._event("steer_used", request=request, node_id=node_id))

    @property
    def waits(self) -> bool:
        """Whether a pause holds the process (a replay never waits)."""
        return self.state.paused and self.replay_src is None


def summary(run_dir: Path, st: SteeringState | None = None) -> dict[str, Any]:
    """The steering state for ``steer RUN status`` and the page: JSON-ready. ``st``: the state
    already folded from the events (the page keeps one as it reads them), else read now."""
    st = read_state(run_dir) if st is None else st
    state = read_json(RunPaths(Path(run_dir)).state, default={}) or {}
    return {
        "paused": st.paused,
        "notes": [{"id": k, "text": v} for k, v in st.notes.items()],
        "blocked": sorted(st.blocked, key=node_sort_key),
        "expand_next": [n for _, n in st.expand],
        "approved": sorted(st.approved),
        "awaiting_gate": state.get("awaiting_gate"),
        "pending": [json.loads(json.dumps(r)) for _, r in pending_requests(run_dir)],
    }


# ------------------------------------------------------------ decisions --


def steer_action(
    view: Any, state: Any, action: Any, steering: SteeringState, max_debug_depth: int = 3
) -> tuple[Any, str | None]:
    """The decision after steering: ``action`` (the policy's), or the node asked to be expanded
    next, or the next-best candidate when ``action`` expands a blocked node. Returns the action
    (None: every candidate is blocked, nothing to create) and the ``expand`` request it used.
    Pure: the journal view, the stage state and the steering state decide."""
    from ..treesearch.best import rank_nodes
    from ..treesearch.policies.base import Action, debuggable_leaves, fanout_action
    from ..treesearch.stages import STAGES

    stage = state.stage
    for rid, nid in steering.expand:
        if nid not in view or nid in steering.blocked:
            continue
        node = view.get(nid)
        ours = node.stage == stage or nid == state.carried_id
        if not ours or not node.is_finished or node.is_seed_eval:
            continue  # in flight, or of another stage: it waits (`steer status` shows it)
        why = f"steered: expand {nid} next (request {rid})"
        if node.is_buggy:
            return Action("debug", nid, node.tree, None, why, {"steer": rid}), rid
        op = STAGES[stage].expand_op
        if op in ("tune", "ablate"):
            fan = fanout_action(view, state, node, why)
            return Action(op, nid, node.tree, fan.idea, f"{why}; {fan.reason}", {"steer": rid}), rid
        return Action(op, nid, node.tree, None, why, {"steer": rid}), rid
    if action.parent_id is None or action.parent_id not in steering.blocked:
        return action, None
    blocked = action.parent_id
    why = f"steered: {blocked} is not to be expanded"
    if action.operation == "debug":
        leaves = [n for n in debuggable_leaves(view, stage, max_debug_depth) if n.id not in steering.blocked]
        if leaves:
            n = leaves[0]
            return Action(
                "debug", n.id, n.tree, None, f"{why}; debug {n.id} instead", {"blocked": blocked}
            ), None
    pool = list(view.good_nodes(stage))
    if state.carried_id and state.carried_id in view and view.get(state.carried_id).is_good:
        pool = [view.get(state.carried_id), *pool]
    ranked = [n for n in rank_nodes(pool) if n.id not in steering.blocked]
    if ranked:
        n = ranked[0]
        op = STAGES[stage].expand_op
        if op in ("tune", "ablate"):
            fan = fanout_action(view, state, n, why)
            return Action(op, n.id, n.tree, fan.idea, f"{why}; {fan.reason}", {"blocked": blocked}), None
        return Action(
            op, n.id, n.tree, None, f"{why}; {op} {n.id}, the best other", {"blocked": blocked}
        ), None
    if stage == 1:
        return Action(
            "draft", None, 0, None, f"{why}; nothing else to grow: draft", {"blocked": blocked}
        ), None
    return None, None

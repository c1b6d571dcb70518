"""One tree-search node (one experiment attempt) and its metric.

A :class:`Node` is an immutable value: the orchestrator makes a changed copy
(``node.with_changes(status="good", ...)``) and hands it to the journal, whose
latest record per id is the node's current state. The field names and values
are the journal contract of the run directory (``journal.jsonl``).

A :class:`Metric` knows its direction; two metrics are comparable only when
name, direction and dataset all agree, and comparing incomparable metrics raises
:class:`IncomparableMetrics` instead of silently mixing them.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, fields, replace
from typing import Any

OPERATIONS = ("draft", "debug", "improve", "tune", "ablate", "seed_eval")
STATUSES = ("pending", "running", "good", "buggy")
PHASES = ("phase0", "phase1", "phase2", "phase3", "phase4", "review", "phase5_plot", "phase5_vlm")
STATE_OPS = ("append", "replace")
# "none": a diagnostic measured beside the result (a fit to flipped labels), no better side; never
# a node's first metric, its headline (phases/metrics.py)
DIRECTIONS = ("maximize", "minimize", "none")

_ID_NUM = re.compile(r"^n(\d+)$")


class NodeError(ValueError):
    """A node or metric value that breaks the journal contract."""


class IncomparableMetrics(ValueError):
    """Two metrics with different name, direction or dataset were compared."""


@functools.lru_cache(maxsize=65536)
def node_sort_key(node_id: str) -> tuple[int, str]:
    """Creation-order key of an id: ``n0002`` < ``n0010`` < ``n10000`` (others sort last)."""
    m = _ID_NUM.match(node_id)
    return (int(m.group(1)), node_id) if m else (1 << 62, node_id)


def format_node_id(number: int) -> str:
    """The id of the ``number``-th node (1-based): ``n0001``; widens past ``n9999``."""
    if number < 1:
        raise NodeError(f"node numbers start at 1, got {number}")
    return f"n{number:04d}"


@dataclass(frozen=True)
class Metric:
    """A measured value; ``direction`` says whether larger (maximize) or smaller is better."""

    name: str
    value: float
    direction: str = "maximize"
    dataset: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise NodeError(f"metric name must be a non-empty string, got {self.name!r}")
        if self.direction not in DIRECTIONS:
            raise NodeError(
                f"metric {self.name!r}: direction must be one of {DIRECTIONS}, got {self.direction!r}"
            )
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise NodeError(f"metric {self.name!r}: value must be a number, got {self.value!r}")
        object.__setattr__(self, "value", float(self.value))
        # precomputed: selection compares thousands of metrics per decision
        valid = math.isfinite(self.value)
        score = (self.value if self.direction == "maximize" else -self.value) if valid else -math.inf
        object.__setattr__(self, "_key", (self.name, self.direction, self.dataset))
        object.__setattr__(self, "_valid", valid)
        object.__setattr__(self, "_score", score)

    @property
    def key(self) -> tuple[str, str, str | None]:
        """What must agree for two metrics to be compared or averaged."""
        return self._key  # type: ignore[attr-defined]

    @property
    def is_valid(self) -> bool:
        """False for NaN / infinite values, which never win a comparison."""
        return self._valid  # type: ignore[attr-defined]

    @property
    def score(self) -> float:
        """The value oriented so that larger is always better (``-inf`` when invalid)."""
        return self._score  # type: ignore[attr-defined]

    def comparable(self, other: Metric) -> bool:
        return self.key == other.key

    def _check(self, other: Metric) -> None:
        if not self.comparable(other):
            raise IncomparableMetrics(
                f"cannot compare metric {self.key} with {other.key}: name, direction and "
                "dataset must all agree"
            )

    def better_than(self, other: Metric, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
        """True when strictly better than ``other`` by more than the tolerance."""
        self._check(other)
        if not self.is_valid:
            return False
        if not other.is_valid:
            return True
        if values_close(self.value, other.value, rel_tol, abs_tol):
            return False
        return self.score > other.score

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "direction": self.direction,
            "dataset": self.dataset,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Metric:
        if not isinstance(data, dict):
            raise NodeError(f"metric must be an object, got {type(data).__name__}")
        unknown = set(data) - {"name", "value", "direction", "dataset"}
        if unknown:
            raise NodeError(f"metric: unknown field(s) {sorted(unknown)}")
        if "name" not in data or "value" not in data:
            raise NodeError(f"metric needs 'name' and 'value', got keys {sorted(data)}")
        return cls(
            name=data["name"],
            value=data["value"],
            direction=data.get("direction", "maximize"),
            dataset=data.get("dataset"),
        )


def values_close(a: float, b: float, rel_tol: float, abs_tol: float) -> bool:
    """``math.isclose`` that treats two NaNs as not close (they never tie)."""
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def _choice(node_id: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise NodeError(f"node {node_id}: field {name!r} must be one of {allowed}, got {value!r}")


@dataclass(frozen=True)
class Node:
    """One experiment attempt; see the module docstring for how it changes."""

    id: str
    parent_id: str | None
    stage: int
    operation: str
    status: str = "pending"
    metric: Metric | None = None
    metrics: tuple[Metric, ...] = ()
    error: str | None = None
    summary: str = ""
    idea: str | None = None
    seed: int | None = None
    depth: int = 0
    tree: int = 0
    phases_done: tuple[str, ...] = ()
    state_op: str = "append"
    created_at: float | None = None
    finished_at: float | None = None
    # why a working node is not comparable with its stage (it changed the evaluation protocol the
    # stage's first working node fixed: runloop/protocol.py); None for every other node
    incomparable: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise NodeError(f"node id must be a non-empty string, got {self.id!r}")
        nid = self.id
        if self.parent_id is not None and not isinstance(self.parent_id, str):
            raise NodeError(f"node {nid}: parent_id must be a string or null")
        if isinstance(self.stage, bool) or self.stage not in (1, 2, 3, 4):
            raise NodeError(f"node {nid}: stage must be 1, 2, 3 or 4, got {self.stage!r}")
        _choice(nid, "operation", self.operation, OPERATIONS)
        _choice(nid, "status", self.status, STATUSES)
        _choice(nid, "state_op", self.state_op, STATE_OPS)
        if self.metric is not None and not isinstance(self.metric, Metric):
            object.__setattr__(self, "metric", Metric.from_dict(self.metric))
        metrics = tuple(m if isinstance(m, Metric) else Metric.from_dict(m) for m in self.metrics)
        object.__setattr__(self, "metrics", metrics)
        phases = tuple(self.phases_done)
        for p in phases:
            _choice(nid, "phases_done[]", p, PHASES)
        object.__setattr__(self, "phases_done", phases)
        for name in ("depth", "tree"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise NodeError(f"node {nid}: {name} must be an integer >= 0, got {v!r}")

    # ----------------------------------------------------------- derived --
    @property
    def is_buggy(self) -> bool:
        return self.status == "buggy"

    @property
    def is_good(self) -> bool:
        """Worked and is comparable with its stage: the nodes selection ranks, counts as good,
        grows and hands on (a working node that changed the evaluation protocol is not)."""
        return self.status == "good" and self.incomparable is None

    @property
    def is_incomparable(self) -> bool:
        """Worked, but changed the stage's evaluation protocol (``incomparable`` says how): kept
        in the tree and the journal, never ranked against the others."""
        return self.status == "good" and self.incomparable is not None

    @property
    def is_finished(self) -> bool:
        return self.status in ("good", "buggy")

    @property
    def in_flight(self) -> bool:
        """Created but not finished (pending or running)."""
        return not self.is_finished

    @property
    def is_draft(self) -> bool:
        return self.operation == "draft"

    @property
    def is_seed_eval(self) -> bool:
        """A multi-seed re-run: never a search candidate, never counted as an iteration."""
        return self.operation == "seed_eval"

    @property
    def number(self) -> int:
        """Creation number parsed from the id (``n0007`` -> 7)."""
        return node_sort_key(self.id)[0]

    def with_changes(self, **changes: Any) -> Node:
        """A copy with ``changes`` applied (validated); the id cannot change."""
        if "id" in changes and changes["id"] != self.id:
            raise NodeError(f"node {self.id}: the id of a node cannot change")
        return replace(self, **changes)

    # ------------------------------------------------------------ (de)ser --
    def to_dict(self) -> dict[str, Any]:
        """The node in the journal's JSON shape (fields in contract order)."""
        out: dict[str, Any] = {}
        for f in NODE_FIELDS:
            v = getattr(self, f)
            if f == "metric":
                v = v.to_dict() if v is not None else None
            elif f == "metrics":
                v = [m.to_dict() for m in v]
            elif f == "phases_done":
                v = list(v)
            out[f] = v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        """Parse a journal node dict; unknown fields are errors (the contract is strict)."""
        if not isinstance(data, dict):
            raise NodeError(f"node must be an object, got {type(data).__name__}")
        unknown = set(data) - set(NODE_FIELDS)
        if unknown:
            raise NodeError(f"node {data.get('id')!r}: unknown field(s) {sorted(unknown)}")
        for req in ("id", "stage", "operation"):
            if req not in data:
                raise NodeError(f"node {data.get('id')!r}: missing field {req!r}")
        kw = {k: data[k] for k in NODE_FIELDS if k in data}
        kw.setdefault("parent_id", None)
        if kw.get("metric") is not None:
            kw["metric"] = Metric.from_dict(kw["metric"])
        kw["metrics"] = tuple(Metric.from_dict(m) for m in kw.get("metrics") or ())
        kw["phases_done"] = tuple(kw.get("phases_done") or ())
        if kw.get("summary") is None:
            kw["summary"] = ""
        return cls(**kw)


NODE_FIELDS = tuple(f.name for f in fields(Node))

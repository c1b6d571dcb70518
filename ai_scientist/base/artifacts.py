"""A node's typed artifacts: phase 4's run record (``run.json``) and the execution review
(``review.json``), each a frozen dataclass with one reader and one writer.

The phases hand these objects to each other (``phases/pipeline.py``); the JSON files are only
where the checkpoint keeps them. :func:`read_artifact` is the one way to read either file (phase 4
and the review on resume, a child's prompts reading its parent's, the replay's recorded refusal,
a seed re-run's identity, the data files a run did not produce) and :func:`write_artifact` the
one way to write it; ``from_json`` / ``to_json`` keep the files' format as the code before them
wrote it (keys, their order, the keys a failed run leaves out), so an old run resumes and a
recorded run replays. A file whose shape is wrong raises ``ValueError`` naming the field — the
checkpoint takes that as a torn file and redoes the phase.

Here in ``base`` (not ``phases``) because the readers span layers: ``base/nodedata.py`` (read by
``reporting/manifest.py``) and ``runloop/protocol.py`` read ``run.json`` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .fileio import atomic_write_json, read_json

# a metric as the pipeline keeps it (phases/metrics.normalise_metrics): {name, value, direction, dataset}
MetricEntry = dict[str, Any]


def _field(data: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], where: str) -> Any:
    value = data[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        raise ValueError(f"{where}: {key} is {type(value).__name__}, not {_names(kinds)}")
    return value


def _optional(data: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], where: str) -> Any:
    return None if data.get(key) is None else _field(data, key, kinds, where)


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _names(kinds: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _as_tuple(kinds))


def _objects(value: Any, key: str, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise ValueError(f"{where}: {key} must be a list of objects")
    return tuple(dict(x) for x in value)


def _metrics(value: Any, key: str, where: str) -> tuple[MetricEntry, ...]:
    entries = _objects(value, key, where)
    for m in entries:
        if "name" not in m or "value" not in m:
            raise ValueError(f"{where}: an entry of {key} has no name or value: {m!r}"[:300])
    return entries


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a JSON object but {type(data).__name__}")
    return data


@dataclass(frozen=True)
class CommandOutput:
    """One run command of phase 4 as recorded: its exit, why it stopped, the tails of its streams."""

    command: str
    exit_code: int | None
    killed_by: str | None
    reason: str
    stdout_tail: str
    stderr_tail: str
    duration_s: float | None

    @classmethod
    def from_json(cls, data: Any) -> CommandOutput:
        where = "run.json outputs"
        d = _object(data, where)
        return cls(
            command=str(d.get("command") or ""),
            exit_code=_optional(d, "exit_code", int, where),
            killed_by=_optional(d, "killed_by", str, where),
            reason=str(d.get("reason") or ""),
            stdout_tail=str(d.get("stdout_tail") or ""),
            stderr_tail=str(d.get("stderr_tail") or ""),
            duration_s=_optional(d, "duration_s", (int, float), where),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "killed_by": self.killed_by,
            "reason": self.reason,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "duration_s": self.duration_s,
        }


@dataclass(frozen=True)
class RunRecord:
    """Phase 4's record (``run.json``): what each run command did, whether the run failed, and
    the node's metrics with where they came from.

    A run that failed before its metrics were read has ``metrics_source`` None (the file then has
    no ``unmeasured_files``/``metrics``/``metrics_source``). With a grader, ``metrics`` are the
    graded ones (``metrics_source`` "grader") and the program's own are kept apart as
    ``self_reported`` (with ``self_reported_source`` and the ``mismatches`` beyond the tolerance);
    without one, ``self_reported`` is None. ``metrics_source`` "review": the execution review
    parses the metrics from the output, and :meth:`with_metrics` gives the record that has them.
    """

    outputs: tuple[CommandOutput, ...]
    duration_s: float
    missing_outputs: tuple[str, ...] = ()
    failure: str | None = None
    unmeasured_files: tuple[str, ...] = ()
    metrics: tuple[MetricEntry, ...] = ()
    metrics_source: str | None = None
    self_reported: tuple[MetricEntry, ...] | None = None
    self_reported_source: str | None = None
    mismatches: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> RunRecord:
        where = "run.json"
        d = _object(data, where)
        graded = d.get("self_reported") is not None
        return cls(
            outputs=tuple(
                CommandOutput.from_json(o) for o in _objects(d.get("outputs") or [], "outputs", where)
            ),
            duration_s=float(_optional(d, "duration_s", (int, float), where) or 0.0),
            missing_outputs=tuple(str(p) for p in _list(d, "missing_outputs", where)),
            failure=_optional(d, "failure", str, where),
            unmeasured_files=tuple(str(p) for p in _list(d, "unmeasured_files", where)),
            metrics=_metrics(d.get("metrics") or [], "metrics", where),
            metrics_source=_optional(d, "metrics_source", str, where),
            self_reported=_metrics(d["self_reported"], "self_reported", where) if graded else None,
            self_reported_source=_optional(d, "self_reported_source", str, where),
            mismatches=_objects(d.get("mismatches") or [], "mismatches", where),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outputs": [o.to_json() for o in self.outputs],
            "duration_s": self.duration_s,
            "missing_outputs": list(self.missing_outputs),
            "failure": self.failure,
        }
        if self.metrics_source is not None:  # the run got as far as reading its metrics
            out["unmeasured_files"] = list(self.unmeasured_files)
            out["metrics"] = [dict(m) for m in self.metrics]
            out["metrics_source"] = self.metrics_source
        if self.self_reported is not None:  # graded: the program's own metrics kept apart
            out["self_reported"] = [dict(m) for m in self.self_reported]
            out["self_reported_source"] = self.self_reported_source
            out["mismatches"] = [dict(m) for m in self.mismatches]
        return out


def _list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: {key} must be a list")
    return value


@dataclass(frozen=True)
class Review:
    """The execution review (``review.json``): what the run found (``findings``, the node's
    summary later), the reviewer's remarks about its own input, a valid run's measurement caveat,
    the grid's headline configuration, the verdict, and — when the review also parsed the metrics
    from the output (agent.merge_calls) — those metrics as answered (``metrics``; None when it was
    not asked). ``error``: the review call failed and this review is the recorded stand-in.

    A review written before issue 28 calls its findings ``summary``; it reads as ``findings``.
    """

    is_bug: bool
    findings: str = ""
    remarks: str = ""
    measurement: str = ""
    headline: str | None = None
    metrics: tuple[MetricEntry, ...] | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> Review:
        where = "review.json"
        d = _object(data, where)
        if "is_bug" not in d:
            raise ValueError(f"{where}: no is_bug")
        findings = d.get("findings") or d.get("summary")
        return cls(
            is_bug=bool(_field(d, "is_bug", bool, where)),
            findings=str(findings or ""),
            remarks=str(d.get("remarks") or ""),
            measurement=str(d.get("measurement") or ""),
            headline=_optional(d, "headline", str, where),
            metrics=_objects(d["metrics"], "metrics", where) if d.get("metrics") is not None else None,
            error=_optional(d, "error", str, where),
        )

    def to_json(self) -> dict[str, Any]:
        # the order the review's schema asks the model for (findings first, the verdict after)
        out: dict[str, Any] = {
            "findings": self.findings,
            "remarks": self.remarks,
            "measurement": self.measurement,
        }
        if self.headline is not None:
            out["headline"] = self.headline
        out["is_bug"] = self.is_bug
        if self.metrics is not None:
            out["metrics"] = [dict(m) for m in self.metrics]
        if self.error is not None:
            out["error"] = self.error
        return out


class JsonArtifact(Protocol):
    def to_json(self) -> dict[str, Any]: ...


A = TypeVar("A", RunRecord, Review)


def read_artifact(path: str | Path, kind: type[A]) -> A | None:
    """The artifact ``kind`` saved at ``path``; None when there is no file. A torn or malformed
    file raises ``ValueError`` (JSONDecodeError is one)."""
    data = read_json(path)
    return None if data is None else kind.from_json(data)


def write_artifact(path: str | Path, artifact: JsonArtifact) -> Path:
    """Save ``artifact`` at ``path`` atomically. Not fsync'd: a phase whose artifact a power loss
    lost is redone (phases/checkpoint.py)."""
    return atomic_write_json(path, artifact.to_json(), durable=False)

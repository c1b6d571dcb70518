"""A node's typed artifacts, each a frozen dataclass with one reader and one writer:

============  =====================  ===========================================================
type          file                   written by
============  =====================  ===========================================================
Plan          ``plan.json``          phase 0 (own call, merged code answer, or the parent's)
CodeAnswer    ``code_answer.json``   phase 2 (files, build and run commands; edits applied)
BuildRecord   ``compile.json``       phase 3
RunRecord     ``run.json``           phase 4 (with CommandOutput; graded and own metrics apart)
Review        ``review.json``        the execution review
PlotsRecord   ``plots.json``         the node's plotting step (figures, refused ones, attempts)
Critique      ``vlm.json``           the vision model's critique of them (its Verdict)
============  =====================  ===========================================================

The phases hand these objects to each other (``phases/pipeline.py``); the JSON files are only
where the checkpoint keeps them. :func:`read_artifact` is the one way to read a file back (a phase
on resume, a child's prompts reading its parent's, the replay's recorded refusal, a seed re-run's
identity, the data files a run did not produce) and :func:`write_artifact` the one way to write
it; ``from_json`` / ``to_json`` keep the files' format as the code before them wrote it (keys,
their order, the keys a failed run leaves out), so an old run resumes and a recorded run replays.
The plan and the code answer are the model's own JSON: they keep the document as answered (see
below). A file whose shape is wrong raises ``ValueError`` naming the field — the checkpoint takes
that as a torn file and redoes the phase.

Here in ``base`` (not ``phases``) because the readers span layers: ``base/nodedata.py`` (read by
``reporting/manifest.py``) and ``runloop/protocol.py`` read ``run.json`` too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from .fileio import atomic_write_json, read_json

# a metric as the pipeline keeps it (phases/metrics.normalise_metrics): {name, value, direction, dataset}
MetricEntry = dict[str, Any]


def _field(data: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ValueError(f"{where}: no {key}")
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


# cpu/wall below this (a one-core command waiting, sleeping, reading, or sharing a busy machine)
# is said in the usage line
LOW_CPU_SHARE = 0.5
# a wall time under this: its ratio is noise (process start-up, the clock tick), not a finding
MIN_WALL_S = 0.05


def usage_line(
    cpu_s: float | None, wall_s: float | None, load: dict[str, Any] | None, cpu_how: str = ""
) -> str:
    """One line: CPU vs wall time (cores used), the load at start and end on the core count, the
    other commands of the run that ran meanwhile; a CPU time well below the wall time said."""
    parts = []
    if cpu_s is not None and wall_s:
        share = cpu_s / wall_s
        text = f"cpu {cpu_s:.2f} s / wall {wall_s:.2f} s ({share:.2f} cores)"
        if wall_s >= MIN_WALL_S and share < LOW_CPU_SHARE:
            text += " — CPU well below wall time: waiting, I/O or contention"
        parts.append(text)
    elif wall_s is not None:
        why = f" ({cpu_how})" if cpu_how else ""
        parts.append(f"cpu not measured{why} / wall {wall_s:.2f} s")
    if load:
        start, end, n = load.get("start"), load.get("end"), load.get("cores")
        if start is not None and end is not None:
            where = f" on {n} core{'s' if n != 1 else ''}" if n else ""
            parts.append(f"load {start:.1f} -> {end:.1f}{where}")
        others = load.get("others")
        if others is not None:
            busy = n and start is not None and end is not None and max(start, end) > n
            parts.append(
                f"{others} other command{'s' if others != 1 else ''} of this run running"
                if others
                # a load above the cores with none of the run's own commands beside it comes from
                # outside the run (relay s10 mm 006 read the two as contradicting each other)
                else "no other command of this run running"
                + (": the load is from outside this run" if busy else "")
            )
    return "; ".join(parts)


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
    # CPU seconds (user + system) of the command's tree, measured outside the sandbox; None: not
    # measured (``cpu_how`` says why) or a run recorded before they were (issue 28)
    cpu_s: float | None = None
    cpu_how: str = ""
    # the 1-minute load at start and end, the core count, other commands of the run meanwhile
    load: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Any) -> CommandOutput:
        where = "run.json outputs"
        d = _object(data, where)
        load = d.get("load")
        return cls(
            command=str(d.get("command") or ""),
            exit_code=_optional(d, "exit_code", int, where),
            killed_by=_optional(d, "killed_by", str, where),
            reason=str(d.get("reason") or ""),
            stdout_tail=str(d.get("stdout_tail") or ""),
            stderr_tail=str(d.get("stderr_tail") or ""),
            duration_s=_optional(d, "duration_s", (int, float), where),
            cpu_s=_optional(d, "cpu_s", (int, float), where),
            cpu_how=str(d.get("cpu_how") or ""),
            load=dict(_object(load, f"{where} load")) if load is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "command": self.command,
            "exit_code": self.exit_code,
            "killed_by": self.killed_by,
            "reason": self.reason,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "duration_s": self.duration_s,
        }
        if self.cpu_s is not None or self.cpu_how or self.load is not None:  # older runs: not written
            out.update(cpu_s=self.cpu_s, cpu_how=self.cpu_how, load=self.load)
        return out

    @property
    def usage(self) -> str:
        """The one line reviewers read: CPU vs wall time, the load, the run's other commands
        (empty for a run recorded before they were measured)."""
        if self.cpu_s is None and not self.cpu_how and self.load is None:
            return ""
        return usage_line(self.cpu_s, self.duration_s, self.load, self.cpu_how)


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


# ------------------------------------------------------------- answers kept as answered --
# The plan and the code answer are the model's JSON: their files hold it as answered (key order,
# and fields the pipeline does not read, kept: a schema does not forbid them, and the prompts that
# show a plan or a program show those bytes). So these types keep the document they were read
# from (``to_json`` gives it back) and expose, checked, the fields the pipeline uses.


def _document(data: Any, where: str) -> dict[str, Any]:
    return copy.deepcopy(dict(_object(data, where)))


def _frozen(document: dict[str, Any]) -> Mapping[str, Any]:
    """The document as a read-only mapping (``to_json`` hands out copies)."""
    return MappingProxyType(document)


def _text(d: Mapping[str, Any], key: str, where: str) -> str:
    """A prose field: "" when absent or null; any other scalar as its text (never a container)."""
    value = d.get(key)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        raise ValueError(f"{where}: {key} is {type(value).__name__}, not text")
    return str(value)


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"{where}: {key} must be a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class NewPackage:
    """A package a plan asks to install that the sandbox probe did not find (with network)."""

    name: str
    manager: str  # "pip" or "apt"
    reason: str = ""


@dataclass(frozen=True)
class Dependencies:
    """A plan's ``dependencies``: installed packages it names by manager, and new ones to install.
    ``data``: the object as answered (the installer's prompt and ``phase1.json`` show it so)."""

    apt: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    new: tuple[NewPackage, ...] = ()
    data: Any = None

    @classmethod
    def from_json(cls, data: Any, where: str = "plan.json dependencies") -> Dependencies:
        if data is None:
            return cls()
        d = _object(data, where)
        new = []
        # a new package without a known manager or a name is no package (schemas.new_packages)
        for item in d.get("new") or []:
            if isinstance(item, dict) and item.get("manager") in ("pip", "apt"):
                name = str(item.get("name", "")).strip()
                if name:
                    new.append(NewPackage(name, str(item["manager"]), str(item.get("reason") or "")))
        return cls(
            apt=_strings(d.get("apt"), "apt", where),
            pip=_strings(d.get("pip"), "pip", where),
            source=_strings(d.get("source"), "source", where),
            new=tuple(new),
            data=copy.deepcopy(d),
        )

    def new_names(self, manager: str) -> tuple[str, ...]:
        return tuple(p.name for p in self.new if p.manager == manager)

    def to_json(self) -> Any:
        return copy.deepcopy(self.data)


@dataclass(frozen=True)
class Plan:
    """A node's plan (``plan.json``): what it is for, how, what it needs installed, notes for its
    own later steps (``guidance``: step name → text, as answered) and where it came from
    (``source``: ``own``, ``merged`` or ``parent``, phases/plan.py; None in a merged answer
    before it is saved)."""

    goal_summary: str
    implementation_strategy: str
    dependencies: Dependencies
    guidance: tuple[tuple[str, str | None], ...]
    source: str | None
    data: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        where = "plan.json"
        d = _document(data, where)
        guidance = d.get("phase_guidance") or {}
        if not isinstance(guidance, dict) or not all(
            v is None or isinstance(v, str) for v in guidance.values()
        ):
            raise ValueError(f"{where}: phase_guidance must be an object of texts")
        return cls(
            goal_summary=_text(d, "goal_summary", where),
            implementation_strategy=_text(d, "implementation_strategy", where),
            dependencies=Dependencies.from_json(d.get("dependencies")),
            guidance=tuple((str(k), v) for k, v in guidance.items()),
            source=_optional(d, "plan_source", str, where),
            data=_frozen(d),
        )

    def guidance_for(self, step: str) -> str | None:
        """The note for one of the node's own steps (``phase1`` ... ``phase4``), as answered."""
        return dict(self.guidance).get(step)

    def with_source(self, source: str) -> Plan:
        return Plan.from_json({**self.data, "plan_source": source})

    def with_unique_dependencies(self) -> Plan:
        """This plan with each dependency list's repeated entries dropped (a grammar cannot forbid
        a weak model's ``["pip", "pip", ...]``; the check and the installer need each name once)."""
        deps = self.data.get("dependencies")
        if not isinstance(deps, dict):
            return self
        unique = {
            k: list(dict.fromkeys(v)) if isinstance(v, list) and all(isinstance(x, str) for x in v) else v
            for k, v in deps.items()
        }
        return Plan.from_json({**self.data, "dependencies": unique})

    def shown(self) -> dict[str, Any]:
        """The plan as the code call's "Plan" layer renders it (``phases/plan_text.j2``): its
        fields as answered, the guidance for writing, building and running only."""
        shown = {k: text for k in ("phase2", "phase3", "phase4") if (text := self.guidance_for(k))}
        return {**self.to_json(), "phase_guidance": shown}

    def to_json(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.data))


@dataclass(frozen=True)
class CodeFile:
    """A file of a code answer: its path in the workspace, its content (text, or base64)."""

    path: str
    content: str
    encoding: str = "utf-8"

    @property
    def is_text(self) -> bool:
        return self.encoding == "utf-8"


@dataclass(frozen=True)
class BuildSpec:
    """A code answer's ``build``: the language, the compiler it names, the build commands."""

    language: str | None = None
    compiler: str | None = None
    commands: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSpec:
    """A code answer's ``run``: the commands, the files they must write, the MPI ranks asked for
    (``ntasks`` as answered: phase 4 checks it against the backend)."""

    commands: tuple[str, ...] = ()
    expected_outputs: tuple[str, ...] = ()
    ntasks: Any = None


@dataclass(frozen=True)
class CodeAnswer:
    """A node's code answer (``code_answer.json``, phase 2): its files (edits already applied:
    ``edits`` stays in ``data`` as answered), how to build and run them, its one-line summary; a
    merged answer (agent.merge_calls) also carries the plan's fields (``plan_data``)."""

    files: tuple[CodeFile, ...]
    build: BuildSpec
    run: RunSpec
    summary: str
    data: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Any) -> CodeAnswer:
        where = "code_answer.json"
        d = _document(data, where)
        files = []
        for f in _objects(d.get("files") or [], "files", where):
            path, content = f.get("path"), f.get("content", "")
            if not isinstance(path, str) or not isinstance(content, str):
                raise ValueError(f"{where}: a file needs a path and a content as text: {f!r}"[:300])
            files.append(CodeFile(path, content, str(f.get("encoding") or "utf-8")))
        build = _object(d.get("build") or {}, f"{where} build")
        run = _object(d.get("run") or {}, f"{where} run")
        return cls(
            files=tuple(files),
            build=BuildSpec(
                language=_optional(build, "language", str, where),
                compiler=_optional(build, "compiler", str, where),
                commands=_strings(build.get("commands"), "build.commands", where),
            ),
            run=RunSpec(
                commands=_strings(run.get("commands"), "run.commands", where),
                expected_outputs=_strings(run.get("expected_outputs"), "run.expected_outputs", where),
                ntasks=run.get("ntasks"),
            ),
            summary=_text(d, "summary", where),
            data=_frozen(d),
        )

    def text_files(self) -> dict[str, str]:
        """The UTF-8 files (path → content): what a program is shown as, and edits anchor on."""
        return {f.path: f.content for f in self.files if f.is_text}

    def commands(self) -> list[str]:
        """The build and run commands, ``"build: <command>"`` / ``"run: <command>"``, build
        first, each once."""
        lines = [f"build: {c}" for c in self.build.commands] + [f"run: {c}" for c in self.run.commands]
        return list(dict.fromkeys(lines))

    def files_json(self) -> list[Any]:
        """The files as answered (what the workspace writer checks and writes)."""
        return copy.deepcopy(list(self.data.get("files") or []))

    def plan_data(self, fields: tuple[str, ...]) -> dict[str, Any]:
        """The plan ``fields`` a merged answer carries, as answered."""
        return {k: copy.deepcopy(self.data[k]) for k in fields if k in self.data}

    def to_json(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.data))


# ------------------------------------------------------------ records the pipeline writes --


@dataclass(frozen=True)
class BuildCommand:
    command: str
    exit_code: int | None
    stderr: str


@dataclass(frozen=True)
class BuildRecord:
    """Phase 3's record (``compile.json``): each build command with its exit and stderr tail,
    whether the build went through, the answer's language (a failed build's record has none)."""

    commands: tuple[BuildCommand, ...]
    ok: bool
    language: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> BuildRecord:
        where = "compile.json"
        d = _object(data, where)
        commands = tuple(
            BuildCommand(
                command=str(c.get("command") or ""),
                exit_code=_optional(c, "exit_code", int, where),
                stderr=str(c.get("stderr") or ""),
            )
            for c in _objects(d.get("commands") or [], "commands", where)
        )
        return cls(
            commands=commands,
            ok=bool(_field(d, "ok", bool, where)),
            language=_optional(d, "language", str, where),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "commands": [
                {"command": c.command, "exit_code": c.exit_code, "stderr": c.stderr} for c in self.commands
            ],
            "ok": self.ok,
        }
        if self.ok:  # a failed build stops before the language is recorded
            out["language"] = self.language
        return out


@dataclass(frozen=True)
class Figure:
    file: str  # a plain name under the node's plots/
    caption: str = ""


@dataclass(frozen=True)
class RejectedFigure:
    file: str
    reason: str


@dataclass(frozen=True)
class PlotAttempt:
    """One answer of the plotting call: the problems found, and the figures refused."""

    attempt: int
    problems: tuple[str, ...]
    rejected: tuple[RejectedFigure, ...]


def _rejected(value: Any, where: str) -> tuple[RejectedFigure, ...]:
    return tuple(
        RejectedFigure(str(r.get("file") or ""), str(r.get("reason") or ""))
        for r in _objects(value or [], "rejected", where)
    )


@dataclass(frozen=True)
class PlotsRecord:
    """The node's plotting step (``plots.json``): the figures kept (copied to ``plots/``), those
    refused with why, how many answers it took and what each was told, the data files it was
    shown, the metrics it was shown (None: none passed), and why it gave up (``error``)."""

    figures: tuple[Figure, ...] = ()
    rejected: tuple[RejectedFigure, ...] = ()
    attempts: int = 0
    history: tuple[PlotAttempt, ...] = ()
    data_files: tuple[str, ...] = ()
    metrics: tuple[MetricEntry, ...] | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> PlotsRecord:
        where = "plots.json"
        d = _object(data, where)
        figures = tuple(
            Figure(str(f.get("file") or ""), str(f.get("caption") or ""))
            for f in _objects(d.get("figures") or [], "figures", where)
        )
        history = tuple(
            PlotAttempt(
                attempt=int(_field(h, "attempt", int, where)),
                problems=tuple(str(p) for p in h.get("problems") or []),
                rejected=_rejected(h.get("rejected"), where),
            )
            for h in _objects(d.get("history") or [], "history", where)
        )
        metrics = d.get("metrics")
        return cls(
            figures=figures,
            rejected=_rejected(d.get("rejected"), where),
            attempts=int(_optional(d, "attempts", int, where) or 0),
            history=history,
            data_files=_strings(d.get("data_files"), "data_files", where),
            metrics=None if metrics is None else _metrics(metrics, "metrics", where),
            error=_optional(d, "error", str, where),
        )

    def to_json(self) -> dict[str, Any]:
        def rejected(items: tuple[RejectedFigure, ...]) -> list[dict[str, str]]:
            return [{"file": r.file, "reason": r.reason} for r in items]

        return {
            "figures": [{"file": f.file, "caption": f.caption} for f in self.figures],
            "rejected": rejected(self.rejected),
            "attempts": self.attempts,
            "history": [
                {"attempt": h.attempt, "problems": list(h.problems), "rejected": rejected(h.rejected)}
                for h in self.history
            ],
            "data_files": list(self.data_files),
            "metrics": None if self.metrics is None else [dict(m) for m in self.metrics],
            "error": self.error,
        }


@dataclass(frozen=True)
class Verdict:
    """The vision model's answer on a node's figures: what they show, the problems it found,
    whether the result is valid (None: the answer did not say) and why."""

    shows: str = ""
    problems: tuple[str, ...] = ()
    valid: bool | None = None
    reason: str = ""

    @classmethod
    def from_json(cls, data: Any) -> Verdict:
        where = "vlm.json critique"
        d = _object(data, where)
        problems = d.get("problems") or []
        if not isinstance(problems, list):
            raise ValueError(f"{where}: problems must be a list")
        valid = d.get("valid")
        return cls(
            shows=_text(d, "shows", where),
            problems=tuple(str(p) for p in problems),
            valid=valid if isinstance(valid, bool) else None,
            reason=_text(d, "reason", where),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "shows": self.shows,
            "problems": list(self.problems),
            "valid": self.valid,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Critique:
    """The critique step of a node's figures (``vlm.json``): the model asked, the figures, and
    its ``verdict``, or why there is none (``skipped``: blind model, no figure, turned off;
    ``error``: the call failed)."""

    model: str
    figures: tuple[str, ...] = ()
    verdict: Verdict | None = None
    skipped: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> Critique:
        where = "vlm.json"
        d = _object(data, where)
        verdict = d.get("critique")
        return cls(
            model=str(d.get("model") or ""),
            figures=_strings(d.get("figures"), "figures", where),
            verdict=Verdict.from_json(verdict) if verdict else None,
            skipped=_optional(d, "skipped", str, where),
            error=_optional(d, "error", str, where),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "figures": list(self.figures)}
        if self.verdict is not None:
            out["critique"] = self.verdict.to_json()
        if self.error is not None:
            out["error"] = self.error
        if self.skipped is not None:
            out["skipped"] = self.skipped
        return out


class JsonArtifact(Protocol):
    def to_json(self) -> dict[str, Any]: ...


A = TypeVar("A", RunRecord, Review, Plan, CodeAnswer, BuildRecord, PlotsRecord, Critique)


def read_artifact(path: str | Path, kind: type[A]) -> A | None:
    """The artifact ``kind`` saved at ``path``; None when there is no file. A torn or malformed
    file raises ``ValueError`` (JSONDecodeError is one)."""
    data = read_json(path)
    return None if data is None else kind.from_json(data)


def write_artifact(path: str | Path, artifact: JsonArtifact) -> Path:
    """Save ``artifact`` at ``path`` atomically. Not fsync'd: a phase whose artifact a power loss
    lost is redone (phases/base.py)."""
    return atomic_write_json(path, artifact.to_json(), durable=False)

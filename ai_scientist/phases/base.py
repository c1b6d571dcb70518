"""What every phase gets: the node, its folders, and the services passed in.

A phase is a function of a :class:`NodeContext` that runs its work through
:func:`checkpoint` and either completes (its artifact written, the
phase name added to ``node.phases_done``) or raises :class:`PhaseFailed` with a
reason that the pipeline records on the node.

The checkpoint of a phase: a done phase is reused, an interrupted one is redone.

Every phase of the node pipeline runs through :func:`checkpoint`, the one place that decides
whether a phase has to run. A phase is *done* when the journal lists it in the node's
``phases_done`` and its artifact (one JSON file in the node directory) reads back. The effects
of a phase happen in one order:

1. ``compute()``: the phase's LLM calls, sandbox commands and workspace writes;
2. the artifact is written atomically (temp file, rename: never seen half-written);
3. the phase is added to ``phases_done`` by a journal update (an fsync'd append).

A crash (kill -9, power loss) before step 3 leaves the phase not done, so ``resume`` runs it
again from its start: an answer the LLM gave but the journal never recorded is asked again,
never half-used, and the records that attempt left are set aside first (:func:`supersede`). After step 3 the phase is reused from its artifact. The artifact is not
fsync'd (it can be recreated): when a power loss loses or truncates it, the phase is redone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..base import failpoints
from ..base.artifacts import A, CodeAnswer, Plan, Review, RunRecord, read_artifact, write_artifact
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import (
    CODE_FILE,
    PLAN_FILE,
    REVIEW_FILE,
    RUN_FILE,
    NodePaths,
    RunPaths,
    numbered_files,
    slug,
)
from ..base.templates import render
from ..llm.call import CallContext, LLMResult

if TYPE_CHECKING:
    from ..base.config import Config
    from ..base.run import Run
    from ..execution.base import Executor
    from ..treesearch.journal import Journal
    from ..treesearch.node import Node
    from .node_memory import NodeMemory


class PhaseFailed(Exception):
    """A phase could not complete; ``reason`` is recorded on the node (status buggy)."""

    def __init__(self, phase: str, reason: str):
        super().__init__(f"{phase}: {reason}")
        self.phase = phase
        self.reason = reason


class PromptBuilder(Protocol):
    """What phases need of prompt assembly; implemented by :class:`.prompts.PromptAdapter`."""

    def build(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        node_id: str,
        role: str = "code",
        conversation: list[dict[str, Any]] | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Assemble the named prompt from layer values: (messages, ledger); ``images`` (image
        parts) go into the last message, counted in the budget."""

    def schema_in_request(self, role: str) -> bool:
        """Whether a structured call's schema travels in the request (enforced by decoding) rather
        than in the prompt text."""

    def schema_as_grammar(self, role: str) -> bool:
        """Whether decoding enforces the schema as a grammar (the local model): only then is an
        enum of names worth its tokens; otherwise the code checks the names."""


class LLM(Protocol):
    def complete(
        self,
        messages: list[dict],
        *,
        role: str,
        ctx: CallContext,
        schema: dict | None = None,
        validator: Callable[[Any], None] | None = None,
    ) -> LLMResult: ...


@dataclass
class NodeContext:
    """Everything one node's phases need; services are passed in, never global."""

    run: Run
    node: Node
    parent: Node | None
    llm: LLM
    executor: Executor
    prompts: PromptBuilder
    environment: dict[str, Any]
    environment_text: str
    resource_text: str = ""
    resources_dir: Path | None = None
    memory: NodeMemory | None = None  # per-node memory view (None when memory.enabled is false)
    journal: Journal | None = None  # every change is recorded
    exec_env: dict[str, str] = field(default_factory=dict)  # extra env for experiment commands
    extra_values: dict[str, Any] = field(default_factory=dict)  # e.g. a forest tree's solved example
    # the node's own plan, handed on by the pipeline once made (its reviewers are told what it set
    # out to do); None before, and for a caller that runs single phases
    plan: Plan | None = None

    @property
    def paths(self) -> NodePaths:
        return RunPaths(self.run.dir).node(self.node.id)

    @property
    def dir(self) -> Path:
        return self.paths.root

    @property
    def workspace(self) -> Path:
        return self.paths.workspace

    @property
    def cfg(self) -> Config:
        return self.run.cfg

    # the parent's artifacts, read once per node through their one reader (the parent is finished:
    # its files no longer change); None for a draft or when the parent has no such file
    @cached_property
    def parent_plan(self) -> Plan | None:
        return parent_artifact(self, PLAN_FILE, Plan)

    @cached_property
    def parent_answer(self) -> CodeAnswer | None:
        return parent_artifact(self, CODE_FILE, CodeAnswer)

    @cached_property
    def parent_run(self) -> RunRecord | None:
        return parent_artifact(self, RUN_FILE, RunRecord)

    @cached_property
    def parent_review(self) -> Review | None:
        return parent_artifact(self, REVIEW_FILE, Review)

    def call_ctx(
        self,
        phase: str,
        label: str,
        ledger: list[dict] | None = None,
        memory_snapshot: dict[str, Any] | None = None,
    ) -> CallContext:
        return CallContext(
            node_id=self.node.id,
            stage=f"stage{self.node.stage}",
            phase=phase,
            label=label,
            ledger=ledger or [],
            memory_snapshot=memory_snapshot,
        )

    def ask(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        phase: str,
        label: str,
        role: str = "code",
        schema: dict | None = None,
        validator: Callable[[Any], None] | None = None,
    ) -> LLMResult:
        """Assemble ``prompt`` (adding the shared layers) and call the LLM, logged under the node.

        With memory on, the answer's memory operations are applied (read rounds are follow-up
        calls in the same conversation) and the final answer is returned.
        """
        from ..context.spec import layers_for

        # memory takes part only in prompts that show it (the execution review and the metrics
        # parsing do not): no memory layer, no memory protocol, no snapshot claiming it was sent
        memory = self.memory if any(x.name == "memory" for x in layers_for(prompt)) else None
        if memory is not None:
            from .node_memory import schema_with_memory

            schema = schema_with_memory(schema)
        full = {
            "environment": self.environment_text,
            "resource_index": self.resource_text,
            "task": self.run.idea.to_markdown(),
            "python": self.cfg.exec.python,
            **self.extra_values,
            **values,
            "response_schema": schema,
        }
        if self.node.is_draft and self.run.idea.code:  # the user's seed code: where drafts start
            full.setdefault("seed_code", self.run.idea.code)
            full.setdefault("seed_code_file", self.run.idea.code_file or "seed_code")
            full.setdefault("seed_code_source", self.run.idea.code_source or "seed code")
        if self.parent is not None and "history" not in full:
            full["history"] = parent_history(self.run.dir, self.parent)
        memory_view = None
        if memory is not None and "memory" not in full:
            memory_view = memory.render(values, history=full.get("history"))
            full["memory"] = memory_view.text
        messages, ledger = self.prompts.build(prompt, full, node_id=self.node.id, role=role)
        ledger, snapshot = memory_records(ledger, memory_view)

        call = self.call_ctx(phase, label, ledger, snapshot)
        result = self.llm.complete(messages, role=role, ctx=call, schema=schema, validator=validator)
        if memory is None:
            return result

        def follow_up(conversation: list[dict[str, str]]) -> LLMResult:
            # read rounds are re-assembled under the same budget (old turns pruned, thinking stripped)
            msgs, led = self.prompts.build(
                prompt, full, node_id=self.node.id, role=role, conversation=conversation
            )
            led, snap = memory_records(led, memory_view)
            ctx2 = self.call_ctx(phase, f"{label}_memory", led, snap)
            return self.llm.complete(msgs, role=role, ctx=ctx2, schema=schema, validator=validator)

        return memory.exchange(result, follow_up)

    def save(self, name: str, data: Any) -> Path:
        # not fsync'd: a phase whose artifact is missing after a power loss is simply redone
        return atomic_write_json(self.paths.file(name), data, durable=False)

    def load(self, name: str) -> Any:
        return read_json(self.paths.file(name))

    def update(self, **changes: Any) -> Node:
        """Record a change of the (immutable) node in the journal and keep the new copy."""
        if self.journal is not None:
            self.node = self.journal.update(self.node.id, **changes)
        else:
            self.node = self.node.with_changes(**changes)
        return self.node

    def mark_done(self, phase: str) -> None:
        if phase not in self.node.phases_done:
            self.update(phases_done=(*self.node.phases_done, phase))


def memory_records(
    ledger: list[dict[str, Any]], view: Any
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The ledger and memory snapshot of one call, as sent: the memory view's own entries
    (``memory.core``, ...) and its snapshot only when the memory layer reached the messages —
    marked cut when the packer cut the layer, left out when it dropped it (or never had it)."""
    if view is None:
        return ledger, None
    layer = next((e for e in ledger if e.get("layer") == "memory"), None)
    if layer is None or layer.get("action") == "dropped":
        return ledger, None
    entries = [dict(e) for e in view.ledger]
    snapshot = dict(view.snapshot)
    if layer.get("action") in ("truncated", "previewed"):
        for e in entries:
            if e.get("action") == "kept":
                e["action"] = "truncated"
                e["reason"] = f"the memory layer was cut to fit the prompt; {e.get('reason') or ''}".rstrip(
                    "; "
                )
        snapshot["layer_cut"] = True
    return ledger + entries, snapshot


def parent_history(run_dir: Path, parent: Node) -> str:
    """A child's ``history`` value: its parent's ``state.md``, then every metric the parent
    measured (the state keeps one line per node; the tail policy keeps this end)."""
    state = RunPaths(run_dir).node(parent.id).state_md
    text = state.read_text(encoding="utf-8").rstrip() if state.exists() else ""
    if parent.metrics:
        measured = render("context/parent_result.j2", node_id=parent.id, metrics=parent.metrics).strip()
        text = f"{text}\n\n{measured}" if text else measured
    return text


def parent_artifact(ctx: NodeContext, name: str, kind: type[A]) -> A | None:
    """The parent's typed artifact ``name`` (its plan, code answer, run record, review), None
    without one; the phases use :class:`NodeContext`'s ``parent_*``, which read it once."""
    if ctx.parent is None:
        return None
    return read_artifact(RunPaths(ctx.run.dir).node(ctx.parent.id).file(name), kind)


def short_json(obj: Any) -> str:
    """``obj`` as JSON for a prompt: one line, no indentation (an indented rendering pays a token
    for every line break and indent of what is mostly node-specific, uncached text), the same form
    the ``json_preview`` policy gives a larger payload; keys in the order given."""
    return json.dumps(obj, ensure_ascii=False)


AnswerLike = CodeAnswer | Mapping[str, Any] | None


def code_answer(answer: AnswerLike) -> CodeAnswer | None:
    """``answer`` as a :class:`CodeAnswer` (a saved answer's JSON goes through its one reader)."""
    if answer is None or isinstance(answer, CodeAnswer):
        return answer
    return CodeAnswer.from_json(answer) if answer else None


def answer_commands(answer: AnswerLike) -> list[str]:
    """A code answer's build and run commands, ``"build: <command>"`` / ``"run: <command>"``,
    build first, each once."""
    typed = code_answer(answer)
    return typed.commands() if typed is not None else []


def commands_text(answer: AnswerLike) -> str:
    """A code answer's build and run commands under a ``### commands`` heading ("" when it has none)."""
    lines = answer_commands(answer)
    return "### commands (build, then run)\n" + "\n".join(lines) if lines else ""


def code_text(answer: AnswerLike) -> str:
    """The text files of a code answer, each under a ``### path`` heading."""
    typed = code_answer(answer)
    files = typed.text_files() if typed is not None else {}
    return "\n\n".join(f"### {path}\n{content}" for path, content in files.items())


# -- the checkpoint of a phase (see the module's docstring) --------------------------------------
SUPERSEDED = ".superseded"

T = TypeVar("T")


def checkpoint(ctx: NodeContext, phase: str, artifact: str, compute: Callable[[], T]) -> T:
    """The result of ``phase`` for ``ctx.node``: its saved ``artifact`` when the phase is done,
    otherwise ``compute()``, saved as ``artifact`` and then marked done in the journal.

    ``compute`` may raise :class:`~.base.PhaseFailed`: nothing is saved and the phase stays not
    done (a failing phase may save a partial record of its own first, for the viewer).
    The failpoint ``phase_saved:<node>:<phase>`` sits between the save and the journal update.
    """
    return _checkpoint(
        ctx, phase, compute, lambda: saved_artifact(ctx, artifact), lambda r: ctx.save(artifact, r)
    )


def checkpoint_typed(
    ctx: NodeContext, phase: str, kind: type[A], artifact: str, compute: Callable[[], A]
) -> A:
    """:func:`checkpoint` of a phase whose artifact is typed (``base/artifacts.py``: the run
    record, the review): read back and saved through the type's one reader and writer."""
    path = ctx.paths.file(artifact)

    def saved() -> A | None:
        try:
            return read_artifact(path, kind)
        except ValueError:  # empty, torn or malformed: the phase is redone
            return None

    return _checkpoint(ctx, phase, compute, saved, lambda r: write_artifact(path, r))


def _checkpoint(
    ctx: NodeContext,
    phase: str,
    compute: Callable[[], T],
    saved: Callable[[], T | None],
    save: Callable[[T], Any],
) -> T:
    if phase in ctx.node.phases_done:
        found = saved()
        if found is not None:
            return found
    supersede(ctx, phase)
    result = compute()
    save(result)
    failpoints.hit(f"phase_saved:{ctx.node.id}:{phase}")
    ctx.mark_done(phase)
    return result


def saved_artifact(ctx: NodeContext, artifact: str) -> Any:
    """The artifact's JSON, or None when it is missing or unreadable (torn by a power loss)."""
    try:
        return ctx.load(artifact)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError: an empty or torn file
        return None


def supersede(ctx: NodeContext, phase: str) -> list[str]:
    """Before ``phase`` is computed: the command records and prompt logs an earlier attempt of it
    left (a kill -9 before the phase was marked done) are renamed ``*.json.superseded``. The node
    keeps them for inspection, but its records are those of the attempt whose result was kept,
    so a replay answers the redone phase's commands and calls from that attempt, not the killed
    one (which may have run as long, or been answered differently). Returns the renamed names."""
    moved = []
    for folder in (ctx.paths.exec, ctx.paths.prompt_logs):
        for path in numbered_files(folder):
            # NNN_<phase>_<label>.json; a phase name may hold "_" itself (phase5_vlm)
            if path.name.split("_", 1)[1].startswith(slug(phase) + "_"):
                for f in (path, path.with_suffix(".md")):  # a prompt log's rendering too
                    if f.exists():
                        f.rename(f.with_name(f.name + SUPERSEDED))
                moved.append(path.name)
    return moved

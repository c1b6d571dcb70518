"""Phases 2/3/4: one structured answer with files, build plan and run commands;
then write the files (safely), compile, run, and read the metrics.

Metrics contract: the experiment writes ``metrics.json`` in its workspace
(``{"metrics": [{"name", "value", "direction", "dataset"}]}`` or a list of such
objects). Only when it is missing does an LLM-written parse of stdout stand in,
and the node records that the metrics came from the fallback.

Provenance: a metric counts only if the run produced it. A ``metrics.json`` the answer wrote as
a file, or one that was there before the first run command and that no run command rewrote
(the build made it, or it is left over), is refused with the reason, and no fallback stands in.
With a grader (``grader.dir``, :mod:`.grading`) the graded metrics are the node's and the
program's own are kept as self-reported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base.artifacts import (
    BuildCommand,
    BuildRecord,
    CodeAnswer,
    CommandOutput,
    Plan,
    RunRecord,
    read_artifact,
    write_artifact,
)
from ..base.fileio import read_file_inside
from ..base.nodedata import unmeasured
from ..base.paths import CODE_FILE as ANSWER_FILE
from ..base.paths import COMPILE_FILE, RUN_FILE, RunPaths
from ..base.templates import render
from ..execution.sandbox_probe import installed_tools
from ..llm.call import LLMError
from ..llm.client import backend_name
from .base import NodeContext, PhaseFailed, checkpoint_typed, code_text, commands_text
from .edits import EditError, expand_answer, with_edits
from .evidence import TUNE_OUTPUT_LINES, run_output_text
from .execution import run_command
from .grading import grade_node
from .metrics import normalise_metrics
from .plan import check_installed, plan_schema
from .plots import data_paths, plot_feedback
from .schemas import (
    CODE_SCHEMA,
    MERGED_CODE_SCHEMA,
    METRICS_PARSER_SCHEMA,
    constrain_build,
    constrain_run,
    validate_code,
    validate_plan,
    with_ntasks,
)

MAX_METRICS_BYTES = 10_000_000
METRICS_FILE = "metrics.json"
# metrics_source of a run whose metrics the execution review's answer carries (agent.merge_calls)
METRICS_FROM_REVIEW = "review"


def _values(ctx: NodeContext, plan: Plan | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "operation": ctx.node.operation,
        "stage": ctx.node.stage,
        "stage_goal": ctx.node.stage,  # the stage_goal layer (seed re-runs make no code call)
    }
    if plan is not None and plan.data:  # a draft planning inside its code answer has no plan yet
        # plain lines, not JSON: a cut keeps head and tail, never a preview pointing at a handle
        values["plan_snippet"] = render("phases/plan_text.j2", plan=plan.shown()).strip()
    if ctx.node.idea:
        values["stage_idea"] = ctx.node.idea
    if ctx.parent is not None:
        answer = ctx.parent_answer
        if answer is not None and answer.data:
            # the files, then how they were built and run (a child restates its build and run
            # commands: a relay run's C child had only the plan's prose for its parent's flags)
            values["prior_code"] = "\n\n".join(t for t in (code_text(answer), commands_text(answer)) if t)
        # a tune changes one setting: its parent's output cut to the last lines of each stream and
        # its figure critique to the verdict (a relay run's one-flag tune prompt was 50 kB: 011, 015)
        tune = ctx.node.operation == "tune"
        run = ctx.parent_run
        if run is not None:
            values["execution_output"] = run_output_text(
                run.outputs, status=True, last_lines=TUNE_OUTPUT_LINES if tune else None
            )
            values["time_feedback"] = f"parent run took {run.duration_s:.1f} s"
        if ctx.parent.error:  # layer parent_error (stage 3 and debug nodes: why the parent failed)
            values["parent_error"] = ctx.parent.error
        # the parent's figures and their critique
        feedback = plot_feedback(ctx.run.dir, ctx.parent.id, verdict_only=tune)
        if feedback:
            values["plot_feedback"] = feedback
    sibling = ctx.extra_values.get("sibling_code")
    if sibling:  # an improve node: the best sibling's program (layer sibling_code, before the tables)
        values["sibling_code"] = render("context/_sibling_code.j2", sib=sibling).strip()
    return values


def generate_code(ctx: NodeContext, plan: Plan | None, merged: bool = False) -> CodeAnswer:
    """Phase 2: ask for the files/build/run answer (validated against the environment).

    ``merged``: the answer also carries the node's plan (``MERGED_CODE_SCHEMA``, label
    ``code+plan``); ``plan`` is then the parent's, shown as the starting point (None for a
    draft, which has none)."""
    return checkpoint_typed(ctx, "phase2", CodeAnswer, ANSWER_FILE, lambda: _code(ctx, plan, merged))


def _validate_merged(ctx: NodeContext, answer: dict) -> None:
    validate_plan(answer)
    check_installed(ctx, answer)
    # tools the answer's own dependencies add are installed by phase 1 before the build
    declared = {str(a).strip() for a in (answer.get("dependencies") or {}).get("apt") or []}
    validate_code(answer, ctx.environment, installed=installed_tools(ctx.dir) | declared)


def _code(ctx: NodeContext, plan: Plan | None, merged: bool = False) -> CodeAnswer:
    if ctx.node.operation == "seed_eval":
        answer = ctx.parent_answer
        if answer is None or not answer.data:
            raise PhaseFailed("phase2", "seed re-run: the parent has no code answer")
    else:
        schema = answer_schema(ctx, merged)
        check = (
            (lambda a: _validate_merged(ctx, a))
            if merged
            else (lambda a: validate_code(a, ctx.environment, installed=installed_tools(ctx.dir)))
        )
        base = _edit_base(ctx)  # the parent's (or the seed code's) files when edits are allowed
        if base:
            # a grammar-constrained backend (llama.cpp) can only pick existing lines as anchors,
            # and run commands among those that run an existing file
            local = backend_name(ctx.llm) == "local"
            schema = with_edits(schema, base, anchor_lines=local)
            if local and ctx.cfg.agent.constrain_answers:
                known = ctx.parent_answer.run.commands if ctx.parent_answer is not None else ()
                schema = constrain_run(schema, list(base), ctx.cfg.exec.python, known)
            check = _expanding(base, check)
        extra: dict[str, Any] = {"seed_code_edits": True} if base and ctx.parent is None else {}
        try:
            raw = ctx.ask(
                "phase234_code",
                {
                    **_values(ctx, plan),
                    "merged_plan": merged,
                    # what this call's schema and the sandbox allow, said only so (relay s7 ln1 001)
                    "code_edits": bool(base),
                    "can_install": bool(ctx.cfg.exec.network),
                    **extra,
                },
                phase="phase2",
                label="code+plan" if merged else "code",
                schema=schema,
                validator=check,
            ).parsed
        except LLMError as exc:
            raise PhaseFailed("phase2", f"no valid code answer: {exc}") from exc
        if base:  # already checked by the validator: the edits apply
            raw = expand_answer(base, raw)
        try:
            answer = CodeAnswer.from_json(raw)
        except ValueError as exc:  # the client checked the schema: only a backend ignoring it gets here
            raise PhaseFailed("phase2", f"the code answer is malformed: {exc}") from exc
    _write_files(ctx, answer)
    ctx.update(summary=(answer.summary or ctx.node.summary or "")[:500])
    return answer


def answer_schema(ctx: NodeContext, merged: bool) -> dict:
    """The code answer's schema: with the plan fields when ``merged``; with
    ``agent.constrain_answers`` its dependencies and build chosen from what the sandbox has."""
    schema = plan_schema(ctx, MERGED_CODE_SCHEMA) if merged else CODE_SCHEMA
    if ctx.cfg.agent.constrain_answers:
        schema = constrain_build(schema, ctx.environment)
    return with_ntasks(schema, max_ntasks(ctx.cfg))


def max_ntasks(cfg: Any) -> int:
    """The MPI ranks a run may ask for: ``exec.slurm.max_ntasks`` under the Slurm backend, else 1."""
    return cfg.exec.slurm.max_ntasks if cfg.exec.backend == "slurm" else 1


def _edit_base(ctx: NodeContext) -> dict[str, str]:
    """The files a node may answer with edits against (``agent.code_edits``): a child's parent's
    text files; a draft's seed code (the user's starting point), as its file."""
    if not ctx.cfg.agent.code_edits or ctx.node.operation == "seed_eval":
        return {}
    if ctx.parent is None:
        code = ctx.run.idea.code if ctx.node.operation == "draft" else None
        return {ctx.run.idea.code_file or "seed_code": code} if code else {}
    return ctx.parent_answer.text_files() if ctx.parent_answer is not None else {}


def _expanding(base: dict[str, str], check: Any) -> Any:
    """``check`` of the answer with its edits applied; a refused edit names the precise problem
    (file, anchor, nearest line), which the client's repair round feeds back to the model."""

    def validate(answer: Any) -> None:
        try:
            full = expand_answer(base, answer) if isinstance(answer, dict) else answer
        except EditError as exc:
            raise ValueError("edits: " + "; ".join(exc.problems)) from None
        check(full)

    return validate


def _write_files(ctx: NodeContext, answer: CodeAnswer) -> None:
    from ..execution.workspace import WorkspaceError, write_files

    try:
        write_files(
            ctx.workspace,
            answer.files_json(),
            max_files=ctx.cfg.exec.max_files,
            max_file_bytes=ctx.cfg.exec.max_file_bytes,
        )
    except WorkspaceError as exc:
        raise PhaseFailed("phase2", f"rejected files: {exc}") from exc


def compile_code(ctx: NodeContext, answer: CodeAnswer) -> BuildRecord:
    """Phase 3: run the build commands (none for interpreted code)."""
    return checkpoint_typed(ctx, "phase3", BuildRecord, COMPILE_FILE, lambda: _build(ctx, answer))


def _build(ctx: NodeContext, answer: CodeAnswer) -> BuildRecord:
    commands = [c for c in answer.build.commands if c.strip()]
    results: list[BuildCommand] = []
    for i, cmd in enumerate(commands, 1):
        res = run_command(ctx, cmd, phase="phase3", label=f"build{i}")
        results.append(BuildCommand(command=cmd, exit_code=res.exit_code, stderr=res.stderr[-3000:]))
        if not res.ok:  # kept for the viewer; the phase is not done
            write_artifact(ctx.paths.file(COMPILE_FILE), BuildRecord(commands=tuple(results), ok=False))
            raise PhaseFailed(
                "phase3", f"build command {i} failed ({res.reason or res.exit_code}): {res.stderr[-800:]}"
            )
    return BuildRecord(commands=tuple(results), ok=True, language=answer.build.language)


def run_experiment(ctx: NodeContext, answer: CodeAnswer) -> RunRecord:
    """Phase 4: run the commands, check expected outputs, read ``metrics.json``."""
    return checkpoint_typed(ctx, "phase4", RunRecord, RUN_FILE, lambda: _run(ctx, answer))


def _run(ctx: NodeContext, answer: CodeAnswer) -> RunRecord:
    run = answer.run
    # what was there before the run (a replay restores the recorded workspace at every command,
    # file times included: it takes the recorded decision instead, see _recorded_refusal)
    replay = getattr(ctx.executor, "name", "") == "replay"
    before = None if replay else file_signature(ctx.workspace / METRICS_FILE)
    before_data = {} if replay else data_signatures(ctx.workspace)
    outputs: list[CommandOutput] = []
    total = 0.0
    failure = None
    ntasks = run.ntasks or 1
    if not isinstance(ntasks, int) or not 1 <= ntasks <= max_ntasks(ctx.cfg):
        raise PhaseFailed(
            "phase4",
            f"run.ntasks={ntasks!r}: at most {max_ntasks(ctx.cfg)} MPI ranks here "
            "(exec.slurm.max_ntasks, with exec.backend: slurm)",
        )
    for i, cmd in enumerate(run.commands, 1):
        res = run_command(ctx, cmd, phase="phase4", label=f"run{i}", ntasks=ntasks)
        total += res.duration_s
        outputs.append(
            CommandOutput(
                command=cmd,
                exit_code=res.exit_code,
                killed_by=res.killed_by,
                reason=res.reason,
                stdout_tail=res.stdout[-2500:],
                stderr_tail=res.stderr[-2500:],
                duration_s=round(res.duration_s, 3),
                cpu_s=res.cpu_s,
                cpu_how=res.cpu_how,
                load=res.load,
            )
        )
        if not res.ok:
            failure = f"run command {i} failed ({res.reason or f'exit {res.exit_code}'})"
            break
    missing = tuple(p for p in run.expected_outputs if not (ctx.workspace / p).exists())
    if failure is None and missing:
        # what the run did write and print: the next draft must tell a wrong list from a run that
        # wrote nothing (a relay run's draft saw only the names it had listed)
        written = sorted(p.name for p in ctx.workspace.iterdir() if p.is_file())[:12]
        said = res.stdout[-300:].strip() if outputs else ""  # the last command run
        failure = (
            f"expected outputs missing: {', '.join(missing)} (expected_outputs lists files the run "
            f"writes; the working directory has: {', '.join(written) or 'no file'})"
            + (f"; stdout ended: {said}" if said else "")
        )
    record = RunRecord(outputs=tuple(outputs), duration_s=total, missing_outputs=missing, failure=failure)
    if failure is not None:
        return record
    graded = bool(ctx.cfg.grader.dir)
    own, source = read_metrics(ctx, outputs, answer=answer, before=before, fallback=not graded)
    refused = _recorded_refusal(ctx) if replay else None
    if refused:
        own, source = [], refused
    record = replace(
        record,
        unmeasured_files=tuple(
            sorted(unmeasured(RunPaths(ctx.executor.src).node(ctx.node.id).root))  # type: ignore[attr-defined]
            if replay
            else unmeasured_files(answer, before_data, ctx.workspace)
        ),
        metrics=tuple(own),
        metrics_source=source,
    )
    if graded:  # the grader's metrics decide; the program's own are kept as self-reported
        record = grade_node(ctx, record, run_s=total)
    return record


def _recorded_refusal(ctx: NodeContext) -> str | None:
    """In a replay: the recording's refusal of a ``metrics.json`` that predated the run, if any."""
    src = getattr(ctx.executor, "src", None)
    recorded = (
        read_artifact(RunPaths(src).node(ctx.node.id).file(RUN_FILE), RunRecord) if src is not None else None
    )
    source = (recorded.metrics_source or "") if recorded is not None else ""
    return source if source.startswith(f"{METRICS_FILE} refused: it existed before") else None


def data_signatures(workspace: Path) -> dict[str, tuple[int, int, int] | None]:
    """:func:`file_signature` of each data file of ``workspace`` (what the plotting call and the
    report read as the experiment's data: :func:`.plots.data_paths`)."""
    return {rel: file_signature(workspace / rel) for rel in data_paths(workspace)}


def unmeasured_files(
    answer: CodeAnswer | None, before: dict[str, tuple[int, int, int] | None], workspace: Path
) -> list[str]:
    """The data files now in ``workspace`` that the run did not produce: written by the answer
    as files, or there before the run (``before``, :func:`data_signatures`) and not rewritten."""
    written = _answer_paths(answer)
    return [
        rel
        for rel in data_paths(workspace)
        if rel in written or (rel in before and file_signature(workspace / rel) == before[rel])
    ]


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of ``path`` (not followed), or None when nothing is there."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _answer_paths(answer: CodeAnswer | None) -> set[str]:
    """The workspace paths the answer itself wrote as files."""
    return {os.path.normpath(f.path.strip()) for f in answer.files} if answer is not None else set()


def refused_metrics(answer: CodeAnswer | None, path: Path, before: tuple[int, int, int] | None) -> str | None:
    """Why ``metrics.json`` does not count as measured (None when the run produced it)."""
    if METRICS_FILE in _answer_paths(answer):
        return (
            f"{METRICS_FILE} refused: the answer wrote it as a file; the run must compute and write "
            "the metrics itself"
        )
    if before is not None and file_signature(path) == before:
        return f"{METRICS_FILE} refused: it existed before the run command and no run command wrote it"
    return None


def read_metrics(
    ctx: NodeContext,
    outputs: Sequence[CommandOutput],
    *,
    answer: CodeAnswer | None = None,
    before: tuple[int, int, int] | None = None,
    fallback: bool = True,
) -> tuple[list[dict], str]:
    """The metrics the run wrote and where they came from (or ``[]`` and why none count).

    ``answer``/``before``: the code answer and :func:`file_signature` of ``metrics.json`` before
    the first run command (see :func:`refused_metrics`); ``fallback``: parse stdout when the
    run wrote no ``metrics.json`` (not with a grader, which measures instead)."""
    path = ctx.workspace / METRICS_FILE
    if path.exists() or path.is_symlink():
        refused = refused_metrics(answer, path, before)
        if refused:
            return [], refused
        try:  # written by generated code: no symlink out, no FIFO / device, bounded size
            data = read_file_inside(ctx.workspace, path, MAX_METRICS_BYTES)
            return normalise_metrics(json.loads(data.decode("utf-8"))), "metrics.json"
        except (ValueError, TypeError) as exc:
            return [], f"metrics.json unreadable: {exc}"
    if not fallback:
        return [], f"no {METRICS_FILE}"
    stdout = "\n".join(o.stdout_tail for o in outputs)[-4000:]
    if not stdout.strip():
        return [], "no metrics.json and no output"
    if ctx.cfg.agent.merge_calls and ctx.node.operation != "seed_eval":
        # the execution review parses them in the same call (pipeline.review_execution)
        return [], METRICS_FROM_REVIEW
    try:
        parsed = ctx.ask(
            "metrics_parse",
            {"execution_output": stdout},
            phase="phase4",
            label="metrics_fallback",
            role="feedback",
            schema=METRICS_PARSER_SCHEMA,
        ).parsed
    except LLMError as exc:
        return [], f"no metrics.json; fallback parser failed: {exc}"
    return normalise_metrics(parsed), "llm_fallback"

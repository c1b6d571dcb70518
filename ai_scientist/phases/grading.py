"""Grading a node's run (``grader.dir``): the grader's metrics are the node's metrics.

Called by phase 4 after the run commands succeeded. The grading is one more command of the
node: its record is ``exec/NNN_phase4_grade.json`` (command, exit code, output; the grader's
logs are its stdout/stderr there), and ``grade.json`` holds the verdict: the graded metrics,
the program's own (self-reported) metrics and where they came from, each mismatch beyond
``grader.tolerance`` and the grader's and the run's wall times. A mismatch is also a run event
(``metric_mismatch``) and a line of the execution review's ``run_result`` layer.

``replay`` answers the grading from the recording like any command: the recorded command
record, and the graded metrics from the recorded ``grade.json`` (the grader is not run again,
so a replay needs no grader directory).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..base import failpoints
from ..base.artifacts import RunRecord
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import GRADE_FILE, RunPaths, claim_numbered
from ..execution.grader import GraderError, grade, load_grader
from .base import NodeContext
from .metrics import normalise_metrics

GRADER_SOURCE = "grader"


def mismatches(graded: list[dict], claimed: list[dict], tolerance: float) -> list[dict]:
    """Self-reported values further than ``tolerance * max(1, |graded|)`` from the graded value
    of the same metric name (a self-reported metric the grader does not measure, e.g. a
    validation accuracy beside a graded test accuracy, is no claim about it)."""
    by_name = {m["name"]: m for m in claimed}
    pairs = [(g, by_name[g["name"]]) for g in graded if g["name"] in by_name]
    out = []
    for g, c in pairs:
        allowed = tolerance * max(1.0, abs(g["value"]))
        if abs(c["value"] - g["value"]) > allowed:
            out.append(
                {
                    "name": g["name"],
                    "graded": g["value"],
                    "self_reported": c["value"],
                    "difference": c["value"] - g["value"],
                    "tolerance": allowed,
                }
            )
    return out


def grade_node(ctx: NodeContext, record: RunRecord, *, run_s: float) -> RunRecord:
    """Grade ``ctx``'s workspace: phase 4's ``record`` (the program's own metrics read) with the
    grader's metrics as the node's (``metrics_source`` "grader") and the program's kept as
    ``self_reported`` with the ``mismatches``; or with the ``failure`` of the grading."""
    own, own_source = list(record.metrics), record.metrics_source or ""
    recorded = _recorded(ctx)
    # a phase 4 record: a resumed phase 4 supersedes it with the run commands' records
    _, exec_path = claim_numbered(ctx.paths.exec, "phase4", "grade")
    verdict: dict[str, Any] = {
        "self_reported": own,
        "self_reported_source": own_source,
        "tolerance": float(ctx.cfg.grader.tolerance),
        "run_s": round(run_s, 3),
    }
    if recorded is not None:  # replay: the recorded command and verdict
        result = ctx.executor.run(list(recorded.get("command") or []), workspace=ctx.workspace)
        data, error, took = recorded.get("raw"), recorded.get("error"), recorded.get("grade_s", 0.0)
    else:
        try:
            grader = load_grader(str(ctx.cfg.grader.dir), "grader.dir")
        except GraderError as exc:  # removed or changed since the run started
            return _failed(ctx, record, verdict, f"grader unusable: {exc}")
        run = grade(grader, ctx.workspace, ctx.cfg)
        result, data, error, took = run.result, run.data, run.error, run.duration_s
    command = {"phase": "phase4", "label": "grade", **result.to_dict()}
    atomic_write_json(exec_path, ctx.run.redactor.redact_obj(command), durable=False)
    failpoints.hit(f"graded:{ctx.node.id}")  # crash tests: graded, the verdict not saved yet
    verdict.update(command=list(result.command), raw=data, grade_s=round(took, 3), error=error)
    if error is None:
        try:
            graded = normalise_metrics(data)
            if not graded:
                raise ValueError("no metric in it")
        except (ValueError, TypeError) as exc:
            error = f"the grader's metrics.json is invalid: {exc}"
    if error is not None:
        return _failed(ctx, record, verdict, error)
    found = mismatches(graded, own, float(ctx.cfg.grader.tolerance))
    verdict.update(graded=graded, mismatches=found)
    ctx.save(GRADE_FILE, verdict)
    if found:
        ctx.run.event("metric_mismatch", node_id=ctx.node.id, mismatches=found)
    return replace(
        record,
        metrics=tuple(graded),
        metrics_source=GRADER_SOURCE,
        self_reported=tuple(own),
        self_reported_source=own_source,
        mismatches=tuple(found),
    )


def _failed(ctx: NodeContext, record: RunRecord, verdict: dict[str, Any], reason: str) -> RunRecord:
    """A grader that fails is the node's error (phase 4), never a crash of the run."""
    ctx.save(GRADE_FILE, {**verdict, "error": reason})
    return replace(
        record, metrics=(), metrics_source=GRADER_SOURCE, failure=f"grading failed: {reason}"[:2000]
    )


def _recorded(ctx: NodeContext) -> dict[str, Any] | None:
    """The recorded verdict when the node is being replayed (its executor is the replay runner)."""
    src = getattr(ctx.executor, "src", None)
    if getattr(ctx.executor, "name", "") != "replay" or src is None:
        return None
    data = read_json(RunPaths(src).node(ctx.node.id).file(GRADE_FILE))
    return data if isinstance(data, dict) else None

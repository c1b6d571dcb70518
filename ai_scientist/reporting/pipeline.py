"""The reporting pipeline: plots -> vlm -> writeup -> review, each step recorded, none fatal.

Every step ends in one ``events.jsonl`` record ``{"type": "report_step",
"step", "status": "ok"|"skipped"|"failed", "reason"}``. A failing step never
stops the run or the later steps that can still work (a review needs a
paper; the writeup works without figures). LaTeX is checked before the
first token is spent: when it is missing the writeup and review are skipped
with the pre-flight message and no LLM call is made for them.

The writeup's writer is ``report.writer`` (:func:`facts.resolve_writer`: the model, or the
pipeline from the run's records; event ``report_writer``); after it, the ``claims`` step matches
every number of ``paper.tex`` against the run's measurements (``paper/claims.json``; the model
writer's reflection rounds already sent it the untraced ones, and the review shows the reviewers
what is left). The embedded
local model writes no review: the review step is skipped with the reason, in ``review.json`` too.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import append_jsonl, atomic_write_json
from ..base.paths import RunPaths
from ..llm.call import LLMError
from ..llm.client import backend_name
from .aggregate import aggregate_plots
from .claims import check_claims
from .errors import StepFailed, StepSkipped
from .facts import resolve_writer, write_facts_paper
from .latex import preflight_latex
from .review import review_paper
from .vlm import run_vlm
from .writeup import ReportOptions, write_paper

if TYPE_CHECKING:
    from ..base.config import Config
    from ..execution.base import Executor
    from ..llm.client import LLMClient

PHASES = ("plots", "vlm", "writeup", "review")
FROM_PHASES = ("plots", "writeup", "review")


def _record(run_dir: Path, step: str, status: str, reason: str = "", **extra: Any) -> dict[str, Any]:
    event = {
        "ts": time.time(),
        "type": "report_step",
        "step": step,
        "status": status,
        "reason": reason,
        **extra,
    }
    append_jsonl(RunPaths(run_dir).events, event)
    return event


def _step(run_dir: Path, step: str, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run one step; the outcome is recorded and returned, never raised (except interrupts)."""
    try:
        result = fn(*args, **kwargs)
    except StepSkipped as exc:
        return _record(run_dir, step, "skipped", str(exc))
    except (StepFailed, LLMError) as exc:
        return _record(run_dir, step, "failed", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bug in one step must not lose the others; the traceback is kept
        tb = traceback.format_exc(limit=8)
        return _record(run_dir, step, "failed", f"internal error {type(exc).__name__}: {exc}", traceback=tb)
    return _record(run_dir, step, "ok", "", result=_brief(step, result))


def _brief(step: str, result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        return {}
    if step == "plots":
        return {
            "figures": [f["file"] for f in result.get("figures", [])],
            "rounds": result.get("rounds_used"),
        }
    if step == "writeup":
        keys: tuple[str, ...] = ("writer", "pdf", "pages", "main_pages", "over_page_limit", "citations",
                                 "references", "invented_citations")  # fmt: skip
        return {k: result.get(k) for k in keys}
    if step == "review":
        return {"decision": result.get("decision"), "mean_scores": result.get("mean_scores")}
    if step == "claims":
        keys = ("numbers", "unmatched", "unmatched_numbers", "self_reported_only", "self_reported_numbers")
        return {k: result.get(k) for k in keys}
    return {"figures_reviewed": len(result.get("figures") or {}), "nodes": len(result.get("nodes") or {})}


def run_reporting(
    run_dir: Path,
    cfg: Config,
    client: LLMClient,
    executor: Executor,
    *,
    memory_digest: str = "",
    from_phase: str | None = None,
    options: ReportOptions | None = None,
) -> dict[str, Any]:
    """Run the reporting steps from ``from_phase`` on; returns {step: event} for each step
    (the claims check after the writeup is recorded in ``events.jsonl``, not returned).

    ``from_phase`` in {plots, writeup, review} (None = plots) re-runs that
    phase and the later ones using what earlier runs left on disk.
    """
    run_dir = Path(run_dir)
    if from_phase is not None and from_phase not in FROM_PHASES:
        raise ValueError(f"from_phase must be one of {', '.join(FROM_PHASES)}, got {from_phase!r}")
    if not cfg.report.enabled:
        return {"report": _record(run_dir, "report", "skipped", "report.enabled is false")}
    opts = options or ReportOptions()
    start = PHASES.index(from_phase or "plots")
    latex_ok, latex_msg = preflight_latex(opts.tool_path)
    _record(run_dir, "preflight", "ok" if latex_ok else "failed", latex_msg)
    out: dict[str, Any] = {}
    if start <= 0:
        out["plots"] = _step(run_dir, "plots", aggregate_plots, run_dir, cfg, client, executor)
    if start <= 1:
        out["vlm"] = _step(run_dir, "vlm", run_vlm, run_dir, cfg, client)
    if start <= 2:
        if latex_ok:
            kw = {"memory_digest": memory_digest, "options": opts}
            writer, why = resolve_writer(cfg, client)
            append_jsonl(
                RunPaths(run_dir).events,
                {"ts": time.time(), "type": "report_writer", "writer": writer, "reason": why},
            )
            write = write_facts_paper if writer == "facts" else write_paper
            out["writeup"] = _step(run_dir, "writeup", write, run_dir, cfg, client, **kw)
            if RunPaths(run_dir).paper_tex.exists():  # a paper that did not compile is checked too
                _step(run_dir, "claims", check_claims, run_dir, writer)  # recorded; not a phase
        else:
            out["writeup"] = _record(run_dir, "writeup", "skipped", latex_msg)
    if start <= 3:
        # a paper written by this call must have compiled; with from_phase=review, an earlier one
        wrote = out.get("writeup")
        local = backend_name(client) == "local"
        if local and cfg.report.num_reviews > 0:
            out["review"] = _skip_local_review(run_dir)
        elif (wrote["status"] == "ok") if wrote else RunPaths(run_dir).paper_tex.exists():
            out["review"] = _step(run_dir, "review", review_paper, run_dir, cfg, client)
        else:
            out["review"] = _record(
                run_dir, "review", "skipped", "no paper: the writeup step did not succeed"
            )
    return out


LOCAL_REVIEW_SKIPPED = (
    "the review model is the embedded local model: its review would be no judgement of the paper "
    "(the 135M model scored papers 1-4/10 whatever they said), so none is asked; for a review, run "
    "with a capable model: ai-scientist run --run-dir RUN --from-phase review --set llm.backend=..."
)


def _skip_local_review(run_dir: Path) -> dict[str, Any]:
    """No review by the embedded model: ``review.json`` says why (a stale review is replaced)."""
    atomic_write_json(
        RunPaths(run_dir).review,
        {
            "skipped": LOCAL_REVIEW_SKIPPED,
            "reviews": [],
            "meta_review": None,
            "decision": None,
            "mean_scores": {},
        },
    )
    return _record(run_dir, "review", "skipped", LOCAL_REVIEW_SKIPPED)

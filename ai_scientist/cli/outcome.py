"""The last lines of every run: how it ended, why, what it produced, and the next command.

Printed to stderr after the progress display has closed, so they are the last thing a user
sees (stdout keeps carrying only the run directory, which scripts read).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..base.errors import EXIT_INTERRUPTED, EXIT_NO_WORKING_EXPERIMENT, EXIT_OK
from ..base.fileio import read_json, read_jsonl
from ..base.paths import RunPaths
from ..reporting.runread import load_run
from ..treesearch.best import NodeCounts

if TYPE_CHECKING:
    from ..base.run import Run


def _metric(run_dir: Path, node_id: str, stage: int | None = None) -> str:
    node = read_json(RunPaths(run_dir).node(node_id).node_json, default={}) or {}
    metric = node.get("metric") or {}
    value = metric.get("value")
    text = node_id
    if isinstance(value, (int, float)):
        text += f" {metric.get('name', 'metric')}={value:.4g}"
    origin = node.get("stage")
    if stage is not None and isinstance(origin, int) and origin != stage:
        text += f" (kept from stage {origin})"  # no node of this stage beat it
    return text


def _seeds_note(info: dict) -> str:
    seeds = info.get("seeds") or {}
    agg = seeds.get("aggregate") if isinstance(seeds, dict) else None
    if not (isinstance(agg, dict) and isinstance(agg.get("mean"), (int, float))):
        return ""
    err = agg.get("stderr")
    n = agg.get("n", "?")
    if n == 1:  # one value has no spread
        return f" (over 1 seed: {agg['mean']:.4g}, one re-run: no spread)"
    return f" (over {n} seed{'' if n == 1 else 's'}: mean {agg['mean']:.4g}" + (
        f" ± {err:.2g} s.e.)" if isinstance(err, (int, float)) else ")"
    )


def _rerank_note(info: dict) -> str:
    """``; chosen over n0005 by the mean over seed re-runs`` when re-ranking changed the best."""
    from ..runloop.stage_facts import rerank_tie

    rerank = ((info.get("best") or {}).get("evidence") or {}).get("seed_rerank") or {}
    note = (
        f"; chosen over {rerank.get('node_id')} by the mean over seed re-runs"
        if rerank.get("changed")
        else ""
    )
    if rerank_tie(rerank):  # a winner inside the seed noise: say so, not just "best"
        note += "; a tie within the seed noise (see its stage facts)"
    return note


def _writer_note(paths: RunPaths) -> str:
    """Who wrote the paper (``writeup.json``'s ``writer``) and why (the ``report_writer`` event)."""
    writer = (read_json(paths.writeup_json, default={}) or {}).get("writer")
    why = next(
        (str(e.get("reason")) for e in reversed(list(read_jsonl(paths.events)))
         if isinstance(e, dict) and e.get("type") == "report_writer"),
        "",
    )  # fmt: skip
    who = {
        "facts": "the pipeline, from the run's records (no model wrote its text)",
        "model": "the writer model",
    }.get(str(writer))
    return f"{who}; {why}" if who and why else (who or "")


def _claims_note(claims: dict) -> str:
    """``"41 numbers, 0 unmatched"`` or ``"12 numbers, 2 unmatched: 97.3, 2024"``; with a grader,
    also the numbers that state only a program's self-reported value (``"; 1 only self-reported
    (not graded): 0.99"``)."""
    n, bad = claims.get("numbers", "?"), claims["unmatched"]
    text = f"{n} numbers in the paper, {bad} unmatched by any measurement"
    shown = [str(x) for x in claims.get("unmatched_numbers") or []][:8]
    text += f": {', '.join(shown)}" if bad and shown else ""
    claimed = [str(x) for x in claims.get("self_reported_numbers") or []]
    if claimed:
        text += f"; {len(claimed)} only self-reported (not graded): {', '.join(claimed[:8])}"
    return text


def best_node(run: Run) -> str | None:
    """The best node of the last stage that has one (what ``logs inspect`` should show first)."""
    stages = run.state.get("stages") or {}
    for stage in sorted(stages, key=int, reverse=True):
        best = ((stages[stage] or {}).get("best") or {}).get("node_id")
        if best:
            return str(best)
    return None


def _report_steps_missing(paths: RunPaths) -> dict[str, str]:
    """Report steps whose last record says failed or skipped: step -> "failed: reason" (first
    line, at most 200 characters), from the run's ``report_step`` events."""
    last: dict[str, dict] = {}
    for event in read_jsonl(paths.events):
        if isinstance(event, dict) and event.get("type") == "report_step":
            last[str(event.get("step"))] = event
    out = {}
    for step, event in last.items():
        if event.get("status") in ("failed", "skipped"):
            reason = str(event.get("reason") or "").strip().splitlines()
            out[step] = f"{event['status']}: {(reason[0] if reason else 'no reason recorded')[:200]}"
    return out


def produced_lines(run: Run) -> list[str]:
    """What the run produced, read from its directory: per stage the nodes that worked and the best
    node with its metric (and seed re-runs), the figures, the paper PDF, the review score."""
    run_dir = Path(run.dir)
    paths = RunPaths(run_dir)
    lines = []
    stages = {int(k): (v or {}) for k, v in (run.state.get("stages") or {}).items()}
    # the counts and each stage's best as the status line, stage facts and writeup have them
    view = load_run(run_dir)
    counts = view.counts()
    chosen = view.recorded_best()
    for stage in sorted(set(stages) | set(counts)):
        c = counts.get(stage, NodeCounts())
        worked = f"{c.good} of {c.nodes} nodes worked"
        if c.incomparable:  # worked, but changed the stage's evaluation protocol: not ranked
            worked += f", {c.incomparable} not comparable"
        if c.buggy:
            worked += f", {c.buggy} buggy"
        info = stages.get(stage, {})
        best = chosen.get(stage)
        if best:
            lines.append(
                f"  stage {stage}: {worked}; best {_metric(run_dir, best, stage)}{_seeds_note(info)}"
                + _rerank_note(info)
            )
        else:
            lines.append(f"  stage {stage}: {worked}; no best node")
    missing = _report_steps_missing(paths)
    figures = sorted(p.name for p in paths.figures.glob("*.png")) if paths.figures.is_dir() else []
    if figures:
        std = (read_json(paths.figures_json, default=None) or {}).get("source") == "standard"
        lines.append(
            f"  figures: {len(figures)} in {paths.figures}"
            + (" (the pipeline's standard figures)" if std else "")
        )
    elif "plots" in missing:
        lines.append(f"  figures: none — {missing['plots']}")
    pdf = paths.paper_pdf
    if pdf.is_file():
        lines.append(f"  paper: {pdf}")
        writer = _writer_note(paths)
        if writer:
            lines.append(f"  written by: {writer}")
    elif "writeup" in missing:
        lines.append(f"  paper: none — {missing['writeup']}")
    claims = read_json(paths.paper / "claims.json", default=None)
    if isinstance(claims, dict) and isinstance(claims.get("unmatched"), int):
        lines.append(f"  claims: {_claims_note(claims)} ({paths.paper / 'claims.json'})")
    review = read_json(paths.review, default=None)
    if isinstance(review, dict) and review.get("skipped"):
        lines.append(f"  review: skipped — {review['skipped']}")
    elif isinstance(review, dict):
        overall = (review.get("mean_scores") or {}).get("overall")
        decision = review.get("decision")
        score = f"overall {overall:.3g}/10" if isinstance(overall, (int, float)) else "no score"
        lines.append(f"  review: {score}" + (f", decision {decision}" if decision else ""))
    elif "review" in missing:
        lines.append(f"  review: none — {missing['review']}")
    best = best_node(run)
    if best:
        lines.append(f"  inspect the best node: ai-scientist logs {run_dir} inspect {best}")
    return lines


def print_outcome(
    run: Run,
    code: int,
    *,
    reason: str | None = None,
    hint: str | None = None,
    saved: str = "state saved",
    title: str = "run stopped",
    stream: TextIO | None = None,
) -> None:
    """Print the outcome block; ``reason``/``hint`` come from a stop, else from the run's state."""
    out = stream or sys.stderr
    run_dir = run.dir
    if code == EXIT_OK:
        head = f"run completed (exit 0): {run_dir}"
        body = produced_lines(run)
        nxt = f"ai-scientist view {run_dir}   # or: ai-scientist logs {run_dir} nodes"
    elif code == EXIT_NO_WORKING_EXPERIMENT:
        why = reason or run.state.get("result_reason") or "no node of stage 1 produced valid metrics"
        head = f"run finished without a working experiment (exit 3): {why}"
        body = produced_lines(run)
        nxt = f"ai-scientist logs {run_dir} nodes   # each node's error; then: logs {run_dir} inspect NODE"
    elif code == EXIT_INTERRUPTED:
        head = f"{title} (exit 130): {reason or 'interrupted'}; {saved}"
        body = []
        nxt = hint or f"ai-scientist resume {run_dir}"
    else:
        head = f"{title} (exit {code}): {reason or run.state.get('status')}; {saved}"
        body = []
        nxt = hint or f"ai-scientist resume {run_dir}"
    print("\n".join([head, *body, f"next: {nxt}"]), file=out, flush=True)

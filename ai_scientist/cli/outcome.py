"""The last lines of every run: how it ended, why, what it produced, and the next command.

Printed to stderr after the progress display has closed, so they are the last thing a user
sees (stdout keeps carrying only the run directory, which scripts read).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..base.errors import EXIT_INTERRUPTED, EXIT_NO_WORKING_EXPERIMENT, EXIT_OK
from ..base.fileio import read_json
from ..base.paths import RunPaths

if TYPE_CHECKING:
    from ..base.run import Run


def _metric(run_dir: Path, node_id: str) -> str:
    node = read_json(RunPaths(run_dir).node(node_id).node_json, default={}) or {}
    metric = node.get("metric") or {}
    value = metric.get("value")
    if not isinstance(value, (int, float)):
        return node_id
    return f"{node_id} {metric.get('name', 'metric')}={value:.4g}"


def produced_lines(run: Run) -> list[str]:
    """What the run produced: best node per stage, figures, paper, review score."""
    run_dir = Path(run.dir)
    paths = RunPaths(run_dir)
    lines = []
    for stage, info in sorted((run.state.get("stages") or {}).items(), key=lambda kv: int(kv[0])):
        best = ((info or {}).get("best") or {}).get("node_id")
        if best:
            seeds = (info or {}).get("seeds") or {}
            agg = seeds.get("aggregate") if isinstance(seeds, dict) else None
            extra = ""
            if isinstance(agg, dict) and isinstance(agg.get("mean"), (int, float)):
                err = agg.get("stderr")
                extra = f" (over {agg.get('n', '?')} seeds: mean {agg['mean']:.4g}" + (
                    f" ± {err:.2g} s.e.)" if isinstance(err, (int, float)) else ")"
                )
            lines.append(f"  stage {stage} best: {_metric(run_dir, best)}{extra}")
    figures = sorted(p.name for p in paths.figures.glob("*.png")) if paths.figures.is_dir() else []
    if figures:
        lines.append(f"  figures: {len(figures)} in {paths.figures}")
    pdf = paths.paper_pdf
    if pdf.is_file():
        lines.append(f"  paper: {pdf}")
    review = read_json(paths.review, default=None)
    if isinstance(review, dict):
        overall = (review.get("mean_scores") or {}).get("overall")
        decision = review.get("decision")
        score = f"overall {overall:.3g}/10" if isinstance(overall, (int, float)) else "no score"
        lines.append(f"  review: {score}" + (f", decision {decision}" if decision else ""))
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

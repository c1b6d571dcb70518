"""The paper review keeps its place when its figures do not fit the budget (issue 28).

A relay run whose model had an 8,192-token window lost its whole review: "prompt 'review' cannot
fit 5529 tokens with 5 image(s)". The figures now go to a vision reviewer only as far as the budget
holds them beside the paper (halved until they fit, then none; their captions stay in the text):
the review happens, within its budget. Expectations from the run's own files.
"""

from __future__ import annotations

import json

from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, start_run


def _images(rec: dict) -> int:
    return sum(
        1
        for m in rec["messages"]
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    )


def test_a_review_whose_figures_do_not_fit_is_sent_with_fewer(tmp_path):
    latex_or_skip(("pdflatex",))
    matplotlib_or_skip()
    code, run_dir, _ = start_run(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "context.max_prompt_tokens=1900",
    )
    assert code == 0
    steps = {e["step"]: e for e in events(run_dir) if e["type"] == "report_step"}
    assert steps["review"]["status"] == "ok", steps["review"]
    figures = json.loads((run_dir / "paper" / "writeup.json").read_text())["figures"]
    logs = [
        json.loads(p.read_text()) for p in sorted((run_dir / "nodes" / "run" / "prompt_logs").glob("*.json"))
    ]
    (review,) = [r for r in logs if r["phase"] == "review" and r["label"] == "review_1"]
    assert review["prompt_tokens_with_images"] <= review["budget"]["limit"]
    shown = _images(review)
    assert shown < len(figures), (shown, len(figures))  # not all fit beside the paper at 1,900 tokens
    sent = "".join(str(m["content"]) for m in review["messages"])
    assert all(f["caption"] in sent for f in figures)
    # the paper as a reviewer reads it: without the template's layout-measuring lines, every figure kept
    tex = (run_dir / "paper" / "paper.tex").read_text()
    assert "ai-scientist-figure" in tex and "pdfsavepos" in tex
    assert "ai-scientist-" not in sent and "pdfsavepos" not in sent and "setbox0" not in sent
    for line in tex.splitlines():
        if line.strip().startswith(("\\includegraphics", "\\section")):
            assert line.strip() in sent, line


def test_the_reviewer_is_framed_for_the_field_of_the_runs_experiment(tmp_path):
    """A relay run's reviewer of a cache-blocking benchmark was framed for a machine-learning venue:
    the venue's field follows the kind of experiment the run's metrics (else its idea) say."""
    from ai_scientist_testing.bench_support import recorded_run

    from ai_scientist.context.kinds import experiment_kinds
    from ai_scientist.reporting.review import venue
    from ai_scientist.reporting.runread import load_run
    from ai_scientist.reporting.vlm import run_kinds

    run = recorded_run()
    view = load_run(run)
    names = [m["name"] for nid in view.nodes for m in view.metrics(nid)]
    assert names  # the recorded run's metrics decide, not its idea's words
    kinds = run_kinds(run)
    assert kinds == experiment_kinds(names)
    assert kinds and venue("workshop", kinds).startswith("a machine-learning workshop")
    bench = experiment_kinds(["gflops_blocked", "time_s"], "")
    assert venue("conference", bench) == "a high-performance computing conference"
    assert "computational science" in venue("workshop", experiment_kinds(["l2error"], ""))
    assert "machine-learning" in venue("workshop", [])

"""The whole product: search, then plots, VLM, LaTeX paper and reviews, then `--from-phase`."""

from __future__ import annotations

import json

import pytest
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, start_run

from ai_scientist.base.config import load_config
from ai_scientist.cli.main import main
from ai_scientist.context import Budget, counter_for
from ai_scientist.context.spec import LAYERS, PROMPTS
from ai_scientist.context.tokens import messages_tokens


@pytest.mark.slow
def test_search_then_reporting_then_rerun_review(tmp_path, capsys):
    latex_or_skip()
    matplotlib_or_skip()
    code, run_dir, responder = start_run(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
        # no critique in the loop: the report step critiques each stage's best node itself (prompt
        # plot_critique); the loop's own critique is tested in test_node_plots.py
        "agent.plots.critique=false",
    )
    assert code == 0
    steps = {e["step"]: e for e in events(run_dir) if e["type"] == "report_step"}
    assert steps["plots"]["status"] == "ok", steps["plots"]
    assert steps["writeup"]["status"] == "ok", steps["writeup"]
    assert steps["review"]["status"] == "ok", steps["review"]
    figs = json.loads((run_dir / "figures" / "figures.json").read_text())
    assert figs and (run_dir / "figures" / "train_loss.png").exists()
    assert list((run_dir / "paper").glob("*.pdf"))
    review = json.loads((run_dir / "review.json").read_text())
    # issue 28: one reviewer, so no "consensus" meta-review restating it; its decision is the review's
    assert review["meta_review"] is None and review["meta_review_note"]
    assert review["decision"] == review["reviews"][0]["decision"]
    assert (run_dir / "tree.html").exists()

    # issue 14: every call of the run, the reporting ones included (aggregation, VLM plot critique
    # and figure review, writeup, review), went through the one prompt path: a ledger naming a
    # declared prompt's layers, and messages (counted again here) within the run's budget
    cfg = load_config(run_dir / "config.resolved.yaml")
    asked = set()
    for log in sorted((run_dir / "nodes").glob("*/prompt_logs/*.json")):
        rec = json.loads(log.read_text())
        assert rec["ledger"], rec["call_id"]
        layers = [e["layer"] for e in rec["ledger"] if e["layer"] in LAYERS]
        names = {name for name, declared in PROMPTS.items() if declared == layers}
        assert names, (rec["call_id"], layers)
        counter = counter_for(rec["params"]["model"])
        limit = Budget.from_config(cfg.context).limit_for(counter)
        assert messages_tokens(rec["messages"], counter) <= limit, rec["call_id"]
        asked |= names
    assert {
        "plot_aggregate",
        "plot_critique",
        "figure_review",
        "writeup",
        "review",
    } <= asked, asked
    assert "review_meta" not in asked

    # re-run only the review phase on the finished run
    before = len(responder.calls)
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                "--from-phase",
                "review",
                "--run-dir",
                str(run_dir),
                "--set",
                "llm.backend=replay",
                "--set",
                f"llm.replay_dir={run_dir}",
            ]
        )
        == 0
    )
    review_steps = [e for e in events(run_dir) if e["type"] == "report_step" and e["step"] == "review"]
    assert len(review_steps) == 2 and review_steps[-1]["status"] == "ok"
    assert len(responder.calls) == before

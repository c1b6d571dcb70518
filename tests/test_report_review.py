"""Review: the form's schema and ranges, the ensemble with reflections, meta-review, figure review."""

from __future__ import annotations

import json

import pytest
from test_report_support import REVIEW, ScriptedClient, report_cfg

from ai_scientist.reporting.errors import StepFailed, StepSkipped
from ai_scientist.reporting.review import REVIEW_SCHEMA, SCORES, check_review, review_paper


def _paper_run(run_copy, tmp_path):
    run = run_copy(tmp_path)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    (run / "paper" / "paper.tex").write_text(
        "\\documentclass{article}\\begin{document}Warm-up study.\\end{document}"
    )
    return run


def test_schema_lists_every_field_with_ranges():
    fields = ("summary strengths weaknesses originality quality clarity significance questions limitations "
              "ethical_concerns soundness presentation contribution overall confidence decision").split()  # fmt: skip
    assert set(REVIEW_SCHEMA["required"]) == set(fields) == set(REVIEW_SCHEMA["properties"])
    assert REVIEW_SCHEMA["properties"]["overall"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert SCORES["confidence"] == (1, 5)
    assert check_review(REVIEW) == []
    bad = {**REVIEW, "overall": 11, "clarity": True, "decision": "Maybe", "extra": 1}
    problems = check_review(bad)
    assert any("overall=11" in p for p in problems) and any("clarity" in p for p in problems)
    assert any("decision" in p for p in problems) and "unknown field extra" in problems


def test_ensemble_reflections_and_meta(tmp_path, run_copy):
    run = _paper_run(run_copy, tmp_path)
    seen = []

    def respond(messages, schema, ctx, role):
        seen.append(ctx.label)
        score = 3 if "reflect" in ctx.label else 5
        return json.dumps({**REVIEW, "overall": score})

    cfg = report_cfg(tmp_path, num_reviews=3, num_reflections=2)
    result = review_paper(run, cfg, ScriptedClient(respond, supports_vision=False))
    assert seen == [
        "review_1", "review_1_reflect_1", "review_1_reflect_2",
        "review_2", "review_2_reflect_1", "review_2_reflect_2",
        "review_3", "review_3_reflect_1", "review_3_reflect_2", "meta_review",
    ]  # fmt: skip
    assert [r["overall"] for r in result["reviews"]] == [3, 3, 3]  # the reflected reviews are kept
    assert result["mean_scores"]["overall"] == 3 and result["decision"] == "Reject"
    assert result["figure_review"] == {"skipped": "the paper has no figures"}
    assert json.loads((run / "review.json").read_text()) == result


def test_invalid_reviews_fail_the_step(tmp_path, run_copy):
    run = _paper_run(run_copy, tmp_path)
    client = ScriptedClient(lambda m, s, c, r: json.dumps({**REVIEW, "overall": 42}), supports_vision=False)
    with pytest.raises(StepFailed, match="overall=42"):
        review_paper(run, report_cfg(tmp_path, num_reflections=0), client)
    assert not (run / "review.json").exists()


def test_no_paper_is_a_skip(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(lambda *a: json.dumps(REVIEW))
    with pytest.raises(StepSkipped, match="no paper"):
        review_paper(run, report_cfg(tmp_path), client)
    assert client.calls == []

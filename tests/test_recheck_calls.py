"""A call that checks again says what changed since the first, or is not sent (issue 28).

The figure review of a figure already reviewed under another caption (the paper's, after the
writeup) or redrawn names what changed and what the earlier review found; the same figure with the
same caption is not asked again. A reviewer's reflection round says the paper is unchanged and,
after the first round, which fields the last round changed; a round that changes nothing ends the
reflection. Expectations come from the calls' own prompt logs and answers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from test_report_support import REVIEW, ScriptedClient, default_responder, report_cfg

from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.review import REVIEW_SCHEMA, review_paper
from ai_scientist.reporting.vlm import review_figures


def _figure_records(run: Path) -> list[dict[str, Any]]:
    logs = sorted((run / "nodes" / "run" / "prompt_logs").glob("*.json"))
    return [r for r in (json.loads(p.read_text()) for p in logs) if r["label"].startswith("figure_")]


def _brief(rec: dict[str, Any]) -> str:
    return rec["messages"][-1]["content"][-1]["text"]


def test_a_second_figure_review_says_what_changed_and_what_the_first_found(tmp_path: Path, run_copy):
    run = run_copy(tmp_path)
    pngs = sorted(run.glob("nodes/*/plots/*.png"))
    shutil.copyfile(pngs[0], run / "figures" / "loss.png")
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    first_caption, second_caption = "Loss per epoch.", "Validation loss of the best node per stage."
    for caption in (first_caption, second_caption, second_caption):  # the third: nothing changed
        review_figures(run, cfg, llm, [{"file": "loss.png", "caption": caption}])
    first, second = _figure_records(run)  # the third was not sent
    assert "Reviewed before" not in _brief(first)
    earlier = json.loads(first["response"]["raw"])  # what the first review answered
    brief = _brief(second)
    assert f'only its caption was revised (it was: "{first_caption}")' in brief
    assert f"scored it {earlier['score']}" in brief
    for issue in earlier["issues"]:
        assert issue in brief
    # the image redrawn: said so (the caption is the same as last time)
    other = next(p for p in pngs if p.read_bytes() != pngs[0].read_bytes())
    shutil.copyfile(other, run / "figures" / "loss.png")
    review_figures(run, cfg, llm, [{"file": "loss.png", "caption": second_caption}])
    third = _figure_records(run)[-1]
    assert "the image was redrawn since." in _brief(third)


def test_a_reflection_round_says_what_changed_and_one_that_changes_nothing_ends_it(tmp_path, run_copy):
    run = run_copy(tmp_path)
    (run / "paper").mkdir(exist_ok=True)
    (run / "paper" / "paper.tex").write_text("\\documentclass{article}\\begin{document}Study.\\end{document}")
    answers = {"review_1": 6, "review_1_reflect_1": 4, "review_1_reflect_2": 4, "review_1_reflect_3": 3}

    def respond(messages, schema, ctx, role):
        return json.dumps({**REVIEW, "overall": answers[ctx.label]})

    client = ScriptedClient(respond, supports_vision=False)
    review_paper(run, report_cfg(tmp_path, num_reviews=1, num_reflections=3), client)
    sent = [c["ctx"].label for c in client.calls]
    # round 2 changed nothing (4 -> 4): round 3 would repeat its request, so it is not sent
    assert sent == ["review_1", "review_1_reflect_1", "review_1_reflect_2"]
    texts = ["\n".join(str(m["content"]) for m in c["messages"]) for c in client.calls]
    assert "the paper (above) is the one you reviewed, unchanged" in texts[1]
    replies = [json.loads(respond(None, None, c["ctx"], None)) for c in client.calls]
    changed = [k for k in REVIEW_SCHEMA["properties"] if replies[1].get(k) != replies[0].get(k)]
    assert changed == ["overall"]
    assert f"your last round changed {', '.join(changed)} of your review" in texts[2]

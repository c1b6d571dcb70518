"""Review few-shot examples (``report.review``): pairs from a directory, fitted to a token budget.

Expectations come from the fixture files and from the messages really sent:
the example section of each first-review prompt is counted with the review
model's counter and must fit ``fewshot_max_tokens``.
"""

from __future__ import annotations

import json

import pytest
from test_report_support import REVIEW, ScriptedClient, report_cfg

from ai_scientist.context.tokens import counter_for
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.errors import StepFailed
from ai_scientist.reporting.review import review_paper

V2_REVIEW = {
    "Summary": "A careful study of warm-up.",
    "Strengths": ["clear"],
    "Overall": 6,
    "Decision": "Accept",
}


def _fixture(tmp_path):
    d = tmp_path / "fewshot"
    d.mkdir()
    (d / "a_warmup.txt").write_text("Paper A: warm-up schedules for Adam. " * 20)
    (d / "a_warmup.json").write_text(json.dumps({"review": json.dumps(V2_REVIEW)}))  # AI-Scientist-v2 form
    (d / "b_noise.md").write_text("Paper B: label noise and early stopping. " * 20)
    (d / "b_noise.json").write_text(json.dumps({"summary": "Solid.", "overall": 5}))
    (d / "c_long.tex").write_text("Paper C: a very long paper about pruning. " * 1500)
    (d / "c_long.json").write_text(json.dumps({"summary": "Too long.", "overall": 3}))
    (d / "notes.json").write_text("{}")  # no paper beside it: not an example
    return d


def _paper_run(run_copy, tmp_path):
    run = run_copy(tmp_path)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    (run / "paper" / "paper.tex").write_text(
        "\\documentclass{article}\\begin{document}Our study.\\end{document}"
    )
    return run


def _client():
    return ScriptedClient(lambda m, s, c, r: json.dumps(REVIEW), supports_vision=False)


def _examples_section(call) -> str:
    user = call["messages"][-1]["content"]
    assert "Now the paper you are to review." in user
    return user[user.index("### Example:") : user.index("Now the paper you are to review.")]


def test_examples_fit_the_budget_and_are_ledgered(tmp_path, run_copy):
    run, d = _paper_run(run_copy, tmp_path), _fixture(tmp_path)
    budget = 1500
    review = {"fewshot_dir": str(d), "fewshot_max_examples": 3, "fewshot_max_tokens": budget}
    cfg = report_cfg(tmp_path, num_reviews=2, num_reflections=1, review=review)
    client = _client()
    result = review_paper(run, cfg, client)
    counter = counter_for(cfg.model_for("review"))
    firsts = [c for c in client.calls if c["ctx"].label in ("review_1", "review_2")]
    assert len(firsts) == 2
    for call in firsts:
        section = _examples_section(call)
        assert counter.count(section) <= budget  # what was really sent fits the budget
        assert "Paper A: warm-up" in section and '"Summary": "A careful study of warm-up."' in section
        assert "Paper B: label noise" in section and "Paper C: a very long" in section
        assert "more characters of this example cut" in section  # C did not fit whole
        # the examples' own entries (fewshot:<name>); the prompt's layers (issue 14) come first
        ledger = {e["layer"]: e for e in call["ctx"].ledger if e["layer"].startswith("fewshot:")}
        assert [ledger[f"fewshot:{n}"]["action"] for n in ("a_warmup", "b_noise", "c_long")] == [
            "kept", "kept", "truncated"
        ]  # fmt: skip
        assert sum(e["tokens_after"] for e in ledger.values()) <= budget
        assert ledger["fewshot:c_long"]["tokens_before"] > budget
    for call in client.calls:
        if call["ctx"].label not in ("review_1", "review_2"):
            assert "### Example:" not in call["messages"][-1]["content"]  # reflections and meta: none
    fs = result["reviewer"]["fewshot"]
    assert fs["examples"] == ["a_warmup", "b_noise", "c_long"] and fs["dir"] == str(d)
    assert (
        fs["tokens"]
        == sum(e["tokens_after"] for e in firsts[0]["ctx"].ledger if e["layer"].startswith("fewshot:"))
        <= budget
        == fs["budget_tokens"]
    )
    assert result["reviewer"]["models"] == [cfg.model_for("review")]
    assert json.loads((run / "review.json").read_text())["reviewer"] == result["reviewer"]


def test_max_examples_and_a_small_budget_drop_examples(tmp_path, run_copy):
    run, d = _paper_run(run_copy, tmp_path), _fixture(tmp_path)
    cfg = report_cfg(tmp_path, num_reviews=1, num_reflections=0, review={"fewshot_dir": str(d)})
    client = _client()
    fs = review_paper(run, cfg, client)["reviewer"]["fewshot"]  # defaults: 1 example
    assert fs["examples"] == ["a_warmup"]
    assert [x["name"] for x in fs["dropped"]] == ["b_noise", "c_long"]
    assert "fewshot_max_examples is 1" in fs["dropped"][0]["reason"]
    assert "Paper B" not in client.calls[0]["messages"][-1]["content"]

    review = {"fewshot_dir": str(d), "fewshot_max_examples": 3, "fewshot_max_tokens": 60}
    client = _client()
    fs = review_paper(run, report_cfg(tmp_path, num_reviews=1, num_reflections=0, review=review), client)
    fs = fs["reviewer"]["fewshot"]
    assert fs["examples"] == [] and fs["tokens"] == 0 and len(fs["dropped"]) == 3
    assert "### Example:" not in client.calls[0]["messages"][-1]["content"]
    assert {e["action"] for e in client.calls[0]["ctx"].ledger if e["layer"].startswith("fewshot")} == {
        "dropped"
    }


def test_no_fewshot_dir_changes_nothing(tmp_path, run_copy):
    run = _paper_run(run_copy, tmp_path)
    client = _client()
    result = review_paper(run, report_cfg(tmp_path, num_reviews=1, num_reflections=0), client)
    ledger = client.calls[0]["ctx"].ledger
    assert result["reviewer"]["fewshot"] is None and not [
        e for e in ledger if e["layer"].startswith("fewshot:")
    ]
    assert next(e for e in ledger if e["layer"] == "fewshot")["reason"] == "no content"
    assert client.calls[0]["messages"][-1]["content"].startswith("## Paper (LaTeX source)\n")


def test_bad_fewshot_dir_fails_the_step_naming_the_key(tmp_path, run_copy):
    run = _paper_run(run_copy, tmp_path)
    for target in (tmp_path / "nope", tmp_path):
        cfg = report_cfg(tmp_path, review={"fewshot_dir": str(target)})
        client = _client()
        with pytest.raises(StepFailed, match="report.review.fewshot_dir"):
            review_paper(run, cfg, client)
        assert client.calls == []


def test_ledger_reaches_the_prompt_log(tmp_path, run_copy):
    run, d = _paper_run(run_copy, tmp_path), _fixture(tmp_path)
    review = {"fewshot_dir": str(d), "fewshot_max_examples": 2}
    cfg = report_cfg(tmp_path, num_reviews=1, num_reflections=0, review=review)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(lambda m, s, c: json.dumps(REVIEW)))
    result = review_paper(run, cfg, llm)
    logs = sorted((run / "nodes" / "run" / "prompt_logs").glob("*_review_review_1.json"))
    assert len(logs) == 1
    record = json.loads(logs[0].read_text())
    assert [(e["layer"], e["action"]) for e in record["ledger"] if e["layer"].startswith("fewshot:")] == [
        ("fewshot:a_warmup", "kept"), ("fewshot:b_noise", "kept"), ("fewshot:c_long", "dropped")
    ]  # fmt: skip
    assert "Paper B: label noise" in record["messages"][-1]["content"]
    assert result["reviewer"] == {
        "models": [record["model"]],
        "backend": "scripted",
        "fewshot": result["reviewer"]["fewshot"],
    } and record["model"] == cfg.model_for("review")


def test_review_prompts_are_assembled_under_the_budget(tmp_path, run_copy):
    """Issue 14: a review prompt measured 7,752 tokens against a 6,000-token budget; now every
    review call (reviews, reflections, meta-review) is a prompt of the layer table, cut to fit."""
    from ai_scientist.context import Budget
    from ai_scientist.context.tokens import messages_tokens

    run = run_copy(tmp_path)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    body = "\n".join(f"Line {i}: results of the label-noise study, table {i % 7}." for i in range(3000))
    (run / "paper" / "paper.tex").write_text(f"HEAD-MARK\n{body}\nTAIL-MARK\n")
    cfg = report_cfg(tmp_path, num_reviews=2, num_reflections=1)
    cfg.context.max_prompt_tokens = 6000
    llm = make_client(cfg, run, None, backend=ScriptedBackend(lambda m, s, c: json.dumps(REVIEW)))
    logs = run / "nodes" / "run" / "prompt_logs"
    before = set(logs.glob("*.json"))  # the search's own run-level calls (stage summaries)
    review_paper(run, cfg, llm)
    records = [json.loads(p.read_text()) for p in sorted(set(logs.glob("*.json")) - before)]
    assert [r["label"] for r in records] == [
        "review_1", "review_1_reflect_1", "review_2", "review_2_reflect_1", "meta_review"
    ]  # fmt: skip
    for rec in records:
        counter = counter_for(rec["params"]["model"])
        sent = messages_tokens(rec["messages"], counter)
        assert sent <= Budget.from_config(cfg.context).limit_for(counter), (rec["label"], sent)
        paper = next(e for e in rec["ledger"] if e["layer"] == "paper")
        assert paper["action"] == "truncated" and paper["tokens_before"] > 6000
        user = rec["messages"][1]["content"]
        assert "HEAD-MARK" in user and "TAIL-MARK" in user  # head and tail of the paper kept

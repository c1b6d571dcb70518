"""Issue 28 (report side, items 3-5): the paper's reflection round gives the room left in words;
a compile fix (a page overrun, a LaTeX error) does not re-send the run's findings, while a
reflection round, which checks numbers, gets them byte for byte as the draft did (one prefix a
cache serves); and a sentence whose comparison word the two numbers it compares contradict goes
back to the writer like an untraced number.

Expectations come from what was sent (the writer's prompt logs), the run's journal and the
paper's own check (``paper/claims.json``, ``paper/writeup.json``), never from constants."""

from __future__ import annotations

import json
import re

from components import needs_latex
from pipeline_support import prompt_records
from test_report_support import SECTIONS, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.claims import Claim, Measurement, comparisons, extract_numbers
from ai_scientist.reporting.reflection import word_count
from ai_scientist.reporting.writeup import write_paper

_ROOM = re.compile(
    r"Your sections hold (\d+) words; about (\d+) more fit, so keep them to at most (\d+) words"
)


def _two_values(run) -> tuple[str, str]:
    """Two good search nodes' val_accuracy as 4-decimal text, (lower, higher), distinct."""
    nodes = {r["node"]["id"]: r["node"] for r in read_jsonl(run / "journal.jsonl")}
    values = sorted(
        {
            f"{n['metric']['value']:.4f}"
            for n in nodes.values()
            if n["status"] == "good" and n["operation"] != "seed_eval" and n.get("metric")
        }
    )
    assert len(values) >= 2, values
    return values[0], values[-1]


def _writer_calls(run) -> list[dict]:
    return [r for r in prompt_records(run) if r["node_id"] == "run" and r["phase"] == "writeup"]


def _text(record: dict) -> str:
    return "\n".join(m["content"] for m in record["messages"] if isinstance(m.get("content"), str))


@needs_latex(("pdflatex",))
def test_a_reflection_round_gets_the_room_left_and_the_contradicted_comparison(tmp_path, run_copy):
    run = run_copy(tmp_path)
    lo, hi = _two_values(run)
    wrong = f"The tuned node reached {lo}, higher than the {hi} of the draft."
    right = f"The draft reached {hi}, higher than the {lo} of the tuned node."
    draft = {**SECTIONS, "results": f"{wrong} {right}"}
    asked: list[str] = []

    def respond(messages, schema, ctx):
        if ctx.label.startswith("reflect"):
            prompt = messages[-1]["content"]
            asked.append(prompt)
            # the writer corrects the word it was told contradicts the values, and adds text up
            # to the word budget it was given (a revision that takes the room it was offered)
            room = _ROOM.search(prompt)
            assert room, prompt[-3000:]
            pad = " ".join(["The measurements above are the search runs of each node."] * 40).split()
            extra = " ".join(pad[: int(room.group(2))])
            fixed = wrong.replace("higher", "lower")
            return json.dumps(
                {**draft, "results": f"{fixed} {right}", "conclusion": draft["conclusion"] + " " + extra}
            )
        return json.dumps(draft)

    cfg = report_cfg(tmp_path, citations={"enabled": False}, writeup_reflections=2, compile_fix_rounds=1)
    summary = write_paper(run, cfg, make_client(cfg, run, None, backend=ScriptedBackend(respond)))

    # the draft's check found the one wrong comparison, of one metric, and no other
    first = summary["reflections"][0]
    assert [s for s in first["contradicted"]] and len(first["contradicted"]) == 1
    assert wrong.rstrip(".") in first["contradicted"][0] and right.rstrip(".") not in first["contradicted"][0]
    prompt = asked[0]
    assert "with a word their measured values contradict" in prompt
    said = re.search(
        rf'"higher" says {lo} larger than {hi}, but the run measured val_accuracy (\S+) \({lo}\) vs (\S+) \({hi}\)',
        prompt,
    )
    assert said and (f"{float(said[1]):.4f}", f"{float(said[2]):.4f}") == (lo, hi)
    # the room: the words of the sections the prompt shows, and a limit above them
    sent = json.loads(re.search(r"^Your current sections \(JSON\):\n(.*)$", prompt, re.M).group(1))
    words, more, limit = (int(x) for x in _ROOM.search(prompt).groups())
    assert words == word_count(sent) and limit == words + more
    # the revision used the room it was given and still fits; the comparison was corrected
    assert first["outcome"] == "applied" and first["contradicted_after"] == []
    assert summary["over_page_limit"] is False and summary["main_pages"] <= cfg.report.page_limit
    claims = json.loads((run / "paper" / "claims.json").read_text())
    assert claims["contradicted"] == 0
    assert all("with a word their measured values contradict" not in p for p in asked[1:])


@needs_latex(("pdflatex",))
def test_a_compile_fix_sends_no_findings_and_a_reflection_keeps_the_drafts_prefix(tmp_path, run_copy):
    run = run_copy(tmp_path)
    para = " ".join(["The method trains each node on its own seed and keeps its result."] * 40)
    long = {**SECTIONS, **{k: f"{para}\n\n{para}\n\n{para}" for k in ("method", "experiments", "results")}}

    def respond(messages, schema, ctx):
        return json.dumps(long if ctx.label == "sections" else SECTIONS)

    cfg = report_cfg(tmp_path, citations={"enabled": False}, writeup_reflections=1, compile_fix_rounds=1)
    write_paper(run, cfg, make_client(cfg, run, None, backend=ScriptedBackend(respond)))
    calls = {r["label"]: r for r in _writer_calls(run)}
    assert {"sections", "fix_1", "reflect_1"} <= set(calls), sorted(calls)
    findings = (run / "paper" / "writer_inputs.md").read_text()  # what the writer was given
    draft, fix, reflect = (_text(calls[k]) for k in ("sections", "fix_1", "reflect_1"))
    assert findings.strip()[:2000] in draft and findings.strip()[:2000] in reflect
    assert "## Run findings" not in fix and findings.strip()[:2000] not in fix
    assert "sent with your draft and are not repeated here" in fix
    assert "runs to page" in fix  # the overrun, with its word budget, is what the fix is for
    # the reflection's request differs from the draft's only after the shared prefix
    head = draft.split("## This call\n", 1)[0]
    assert reflect.split("## This call\n", 1)[0] == head
    by_layer = {e["layer"]: e for e in calls["fix_1"]["ledger"]}
    assert "findings" not in by_layer or by_layer["findings"]["action"] == "dropped"


def _claims(text: str) -> list[Claim]:
    return extract_numbers(text)


def test_comparison_words_are_read_only_in_their_two_forms():
    acc = [
        Measurement(0.8715, "n0002 val_accuracy", "metric", metric="val_accuracy", direction="maximize"),
        Measurement(0.8433, "n0010 val_accuracy", "metric", metric="val_accuracy", direction="maximize"),
        Measurement(0.52, "n0002 train_loss", "metric", metric="train_loss", direction="minimize"),
        Measurement(0.61, "n0010 train_loss", "metric", metric="train_loss", direction="minimize"),
    ]

    def flagged(text: str) -> list[str]:
        return [c["word"] for c in comparisons(text, _claims(text), acc)]

    assert flagged("L2 gave 0.8433, higher than the 0.8715 without it.") == ["higher"]
    assert flagged("L2 gave 0.8715, higher than the 0.8433 without it.") == []
    assert flagged("A loss of 0.61 is better than 0.52.") == ["better"]  # minimize: lower is better
    assert flagged("A loss of 0.52 is better than 0.61.") == []
    assert flagged("A loss of 0.52 is lower than 0.61.") == []
    assert flagged("The penalty improves accuracy from 0.8715 to 0.8433.") == ["improves"]
    assert flagged("The penalty reduces the loss from 0.61 to 0.52.") == []
    assert flagged("n0010 (0.8433) outperforms n0002 (0.8715).") == ["outperforms"]
    # not read: a negation, two metrics, a word in another sentence, a word after both numbers
    assert flagged("L2 gave 0.8433, not higher than the 0.8715 without it.") == []
    assert flagged("Accuracy 0.8433 is higher than the loss 0.61.") == []
    assert flagged("Accuracy was 0.8433. Higher values than 0.8715 came later.") == []
    assert flagged("We saw 0.8433 and 0.8715, the first higher.") == []


def test_room_is_left_out_when_the_pages_are_over_or_unknown():
    from ai_scientist.reporting.reflection import room_message

    sections = {"abstract": "word " * 500}
    assert room_message(None, 4, sections) == ""
    assert room_message(5, 4, sections) == ""
    msg = room_message(3, 4, sections, figure_pages=1.0, last_fill=0.5)
    words, more, limit = (int(x) for x in _ROOM.search(msg).groups())
    # 2.5 pages filled, 1 of figures: 500 words on 1.5 pages of text, 3 pages of text allowed
    assert words == 500 and limit == int(500 * 3 / 1.5 * 0.95) and more == limit - words


@needs_latex(("pdflatex",))
def test_a_contradicted_comparison_left_in_the_paper_is_shown_to_the_reviewers(tmp_path, run_copy):
    from ai_scientist.reporting.review import measured_facts

    run = run_copy(tmp_path)
    lo, hi = _two_values(run)
    wrong = f"The tuned node reached {lo}, higher than the {hi} of the draft."
    draft = {**SECTIONS, "results": wrong}
    cfg = report_cfg(tmp_path, citations={"enabled": False}, writeup_reflections=0)
    write_paper(
        run, cfg, make_client(cfg, run, None, backend=ScriptedBackend(lambda m, s, c: json.dumps(draft)))
    )
    from ai_scientist.reporting.claims import check_claims

    (found,) = check_claims(run, "model")["contradictions"]  # what the claims step records
    text = measured_facts(run)
    assert (
        f'"{found["sentence"]}": "higher" says {lo} larger than {hi}; measured: {found["measured"]}.' in text
    )

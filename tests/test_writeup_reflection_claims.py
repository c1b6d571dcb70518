"""Issue 30 item 4: the numbers of a model's paper that no measurement of the run matches go back to
the writer in a reflection round, each with where it stands and the measured values nearest to it;
a writer that prints the measured value instead leaves none, and the round's log says so.

Expectations come from what was sent (the reflection prompt's log) and the run's records (its
journal), never from constants of the test."""

from __future__ import annotations

import json
import re

import pytest
from components import needs_latex
from test_report_support import SECTIONS, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.claims import extract_numbers, matches, run_measurements
from ai_scientist.reporting.writeup import write_paper

# the writer's draft: every number traced but one, a loss nobody measured
DRAFT = {
    **SECTIONS,
    "title": "Linear warm-up",
    "abstract": "We test a linear warm-up.",
    "introduction": "Warm-up matters.",
    "related_work": "Prior work.",
    "method": "We minimise the validation loss.",
    "experiments": "Four stages, each from the best node of the one before.",
    "results": "The draft reached a validation loss of {typed} (stage 1).",  # near the run's values
    "conclusion": "Warm-up helps a little.",
}
# one unmatched number in the reflection prompt: "TEXT" in "... CONTEXT ...": nearest measured: SRC = V; ...
_LISTED = re.compile(
    r'^  - "(?P<text>[^"]+)" in "\.\.\. (?P<context>.*?) \.\.\.": nearest measured: (?P<near>.*)\.$', re.M
)


def _run(run_copy, tmp_path, fix: bool):
    """The pipeline's run, a writer that types a number 0.03 below the best node's metric (no
    measurement of the run has it); with ``fix`` its reflection replaces each number the
    reflection prompt lists by the first measured value named for it. Returns the number too."""
    run = run_copy(tmp_path)
    stages = json.loads((run / "state.json").read_text())["stages"]
    best = stages[max(stages, key=int)]["best"]["node_id"]
    nodes = {r["node"]["id"]: r["node"] for r in read_jsonl(run / "journal.jsonl")}
    # 0.03 below the best, lowered further while some measurement of the run matches it (a run
    # whose other node measured a value that rounds to it)
    measured = run_measurements(run)
    value = nodes[best]["metric"]["value"] - 0.03
    while any(m for c in extract_numbers(f"{value:.2f}") for m in measured if matches(c, m)):
        value -= 0.01
    typed = f"{value:.2f}"
    sent: list[str] = []
    sections = {k: v.format(typed=typed) if k == "results" else v for k, v in DRAFT.items()}

    def respond(messages, schema, ctx):
        nonlocal sections
        if ctx.label.startswith("reflect"):
            prompt = messages[-1]["content"]
            sent.append(prompt)
            for m in _LISTED.finditer(prompt) if fix else ():
                first = m.group("near").split("; ")[0].rsplit(" = ", 1)[1]
                sections = {k: v.replace(m.group("text"), first) for k, v in sections.items()}
        return json.dumps(sections)

    cfg = report_cfg(tmp_path, citations={"enabled": False}, writeup_reflections=2, compile_fix_rounds=0)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    return run, write_paper(run, cfg, llm), sent, typed


def _recorded(run, source: str) -> float:
    """The value the journal holds for a ``nearest`` source: ``nX name`` (a node's metric) or
    ``stage S seed re-runs of nX: mean`` (the mean of nX's good seed re-runs)."""
    nodes = {r["node"]["id"]: r["node"] for r in read_jsonl(run / "journal.jsonl")}
    seeds = re.fullmatch(r"stage \d+ seed re-runs of (\w+): mean", source)
    if seeds:
        values = [n["metric"]["value"] for n in nodes.values()
                  if n["operation"] == "seed_eval" and n["parent_id"] == seeds.group(1) and n["status"] == "good"]  # fmt: skip
        return sum(values) / len(values)
    node, name = source.split()[:2]
    return next(m["value"] for m in nodes[node]["metrics"] if m["name"] == name)


@needs_latex(("pdflatex",))
def test_an_unmatched_number_goes_back_with_its_nearest_measurements_and_is_fixed(tmp_path, run_copy):
    run, summary, sent, typed = _run(run_copy, tmp_path, fix=True)
    (prompt,) = sent  # one round: after the fix nothing was left, so no second round was asked
    listed = list(_LISTED.finditer(prompt))
    assert [m.group("text") for m in listed] == [typed]  # the one number no measurement matches
    assert f"validation loss of {typed} (stage 1)." in listed[0].group("context")
    # each value named is the run's record of its source
    for near in listed[0].group("near").split("; "):
        source, value = near.rsplit(" = ", 1)
        assert float(value) == pytest.approx(_recorded(run, source), abs=5e-7), near
    first = listed[0].group("near").split("; ")[0].rsplit(" = ", 1)[1]
    (round1,) = [r for r in summary["reflections"] if r["unmatched"]]
    assert round1["unmatched"] == [typed] and round1["unmatched_after"] == []
    assert round1["outcome"] == "applied"
    claims = json.loads((run / "paper" / "claims.json").read_text())
    assert claims["unmatched"] == 0 and claims["writer"] == "model"
    assert f"validation loss of {first} (stage 1)" in (run / "paper" / "paper.tex").read_text()


@needs_latex(("pdflatex",))
def test_a_writer_that_keeps_the_number_is_asked_each_round_and_it_stays_unmatched(tmp_path, run_copy):
    run, summary, sent, typed = _run(run_copy, tmp_path, fix=False)
    assert len(sent) == 2  # writeup_reflections=2: the number was named in both rounds
    for prompt in sent:
        assert [m.group("text") for m in _LISTED.finditer(prompt)] == [typed]
    assert [r["unmatched_after"] for r in summary["reflections"]] == [[typed], [typed]]
    claims = json.loads((run / "paper" / "claims.json").read_text())
    assert claims["unmatched_numbers"] == [typed]
    (row,) = [c for c in claims["claims"] if c["source"] is None]
    # results only, and no single seed re-run's value while summaries are near (the run has them)
    assert row["nearest"] and {n["kind"] for n in row["nearest"]} <= {"metric", "seed statistic"}
    assert not [n for n in row["nearest"] if "(seed " in n["source"] or n["source"].endswith(": value")]

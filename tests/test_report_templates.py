"""``report.template``: the workshop (one column, 4 pages) and conference (two columns, 8 pages)
papers compile, and the page limit of each is enforced as before (an overrun goes back to the writer)."""

from __future__ import annotations

import pytest
from components import needs_latex
from test_report_support import SECTIONS, ScriptedClient, default_responder, report_cfg

from ai_scientist.base.config import validate
from ai_scientist.reporting.writeup import write_paper

NEEDS_LATEX = needs_latex()
SENTENCE = "The validation loss of the linear warm-up schedule was compared against the constant schedule. "
LONG = {**SECTIONS, **{k: (SENTENCE * 40 + "\n\n") * 3 for k in ("method", "experiments", "results")}}


def test_template_sets_the_default_page_limit():
    assert validate({}).report.page_limit == 4
    assert validate({"report": {"template": "conference"}}).report.page_limit == 8
    assert validate({"report": {"template": "conference", "page_limit": 4}}).report.page_limit == 4


@NEEDS_LATEX
@pytest.mark.parametrize(("template", "limit", "columns"), [("workshop", 4, False), ("conference", 8, True)])
def test_both_templates_compile_within_their_limit(tmp_path, template, limit, columns, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder())
    summary = write_paper(run, report_cfg(tmp_path, citations={"enabled": False}, template=template), client)
    tex = (run / "paper" / "paper.tex").read_text()
    assert (run / "paper" / "paper.pdf").read_bytes().startswith(b"%PDF")
    assert summary["template"] == template and summary["page_limit"] == limit
    assert 1 <= summary["main_pages"] <= limit and not summary["over_page_limit"]
    assert ("twocolumn" in tex) is columns
    assert f"The paper must fit in {limit} pages" in client.calls[0]["messages"][-1]["content"]


@NEEDS_LATEX
def test_long_paper_overruns_the_workshop_but_fits_the_conference(tmp_path, run_copy):
    run = run_copy(tmp_path / "w")
    client = ScriptedClient(default_responder(sections=(LONG,)))
    cfg = report_cfg(tmp_path, citations={"enabled": False}, template="workshop", compile_fix_rounds=1)
    summary = write_paper(run, cfg, client)
    assert summary["over_page_limit"] and summary["main_pages"] > 4
    assert "the limit is 4 pages" in summary["problems"][0]
    assert [c["ctx"].label for c in client.calls] == ["sections", "fix_1"]  # the overrun went back

    run = run_copy(tmp_path / "c")
    client = ScriptedClient(default_responder(sections=(LONG,)))
    cfg = report_cfg(tmp_path, citations={"enabled": False}, template="conference", compile_fix_rounds=1)
    summary = write_paper(run, cfg, client)
    assert not summary["over_page_limit"] and summary["main_pages"] <= 8 and summary["problems"] == []
    assert [c["ctx"].label for c in client.calls] == ["sections"]

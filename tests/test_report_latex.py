"""LaTeX: safe text, tool pre-flight (no tokens when missing), the compile-fix loop, page counting."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from components import needs_latex
from hypothesis import given, settings
from hypothesis import strategies as st
from test_report_support import SECTIONS, ScriptedClient, default_responder, real_client, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.reporting import latex
from ai_scientist.reporting.errors import StepFailed
from ai_scientist.reporting.pipeline import run_reporting
from ai_scientist.reporting.writeup import ReportOptions, write_paper

NEEDS_LATEX = needs_latex()


def test_latex_text_escapes_everything_but_whitelisted_math():
    out = latex.latex_text(
        r"50% of #1 & a_b {x} ~ ^ \end{document} $\alpha^2$ $\input{x}$ \cite{k1,zz}", {"k1"}
    )
    assert r"50\% of \#1 \& a\_b \{x\} \textasciitilde{} \textasciicircum{}" in out
    assert r"\textbackslash{}end\{document\}" in out
    assert r"$\alpha^2$" in out  # whitelisted math kept
    assert r"\$\textbackslash{}input\{x\}\$" in out  # unknown command inside math: escaped
    assert r"~\cite{k1}" in out and "zz" not in out  # unknown citation key dropped
    assert (
        latex.latex_text("naïve — “quoted” 😀 αβ")
        == r"naïve --- ``quoted'' ? \ensuremath{\alpha}\ensuremath{\beta}"
    )


def test_safe_math_rejects_unbalanced_and_unknown():
    assert latex.safe_math(r"\frac{a}{b} + \mathbb{R}^d")
    assert not latex.safe_math(r"\frac{a}{b")
    assert not latex.safe_math(r"\write18{ls}")
    assert not latex.safe_math("a}{b")


def test_preflight_reports_missing_tools_with_install_hint():
    ok, msg = latex.preflight_latex(tool_path="")
    assert not ok and "pdflatex" in msg and "bibtex" in msg and "apt-get install" in msg
    rows = latex.check_reporting_tools(tool_path="")
    assert {r["name"] for r in rows} >= {"latexmk", "pdflatex", "bibtex", "chktex"}
    assert not any(r["ok"] for r in rows) and all("not found" in r["detail"] for r in rows)


def test_latex_missing_spends_no_tokens(tmp_path, run_copy):
    run = run_copy(tmp_path)
    cfg = report_cfg(tmp_path)
    client, backend = real_client(run, cfg, default_responder())
    logs = set(run.glob("nodes/run/prompt_logs/*"))  # the search's own run-level calls
    out = run_reporting(
        run, cfg, client, executor=None, from_phase="writeup", options=ReportOptions(tool_path="")
    )
    assert backend.calls == 0 and set(run.glob("nodes/run/prompt_logs/*")) == logs  # no token spent
    assert out["writeup"]["status"] == "skipped" and "pdflatex" in out["writeup"]["reason"]
    assert out["review"]["status"] == "skipped"
    events = list(read_jsonl(run / "events.jsonl"))
    pre = next(e for e in events if e.get("step") == "preflight")
    assert pre["status"] == "failed" and "apt-get install" in pre["reason"]


@NEEDS_LATEX
def test_preflight_ok_here():
    ok, msg = latex.preflight_latex()
    assert ok, msg


@NEEDS_LATEX
def test_compile_error_fixed_in_loop(tmp_path, run_copy):
    run = run_copy(tmp_path)
    broken = {**SECTIONS, "results": "Loss fell as $x^$ shows."}  # passes the whitelist, breaks LaTeX
    client = ScriptedClient(default_responder(sections=(broken, SECTIONS)))
    cfg = report_cfg(tmp_path, citations={"enabled": False})
    summary = write_paper(run, cfg, client)
    assert (run / "paper" / "paper.pdf").read_bytes().startswith(b"%PDF")
    assert summary["failed_builds"] == 1 and "paper.tex:" in summary["problems"][0]
    fix_prompt = client.calls[-1]["messages"][-1]["content"]
    assert client.calls[-1]["ctx"].label == "fix_1"
    assert "Log excerpt" in fix_prompt and "$x^$" in fix_prompt  # the offending source line is shown
    assert summary["citations"].startswith("citations disabled")
    assert [c["role"] for c in client.calls] == ["writeup", "writeup"]


@NEEDS_LATEX
def test_compile_error_never_fixed_fails_with_excerpt(tmp_path, run_copy):
    run = run_copy(tmp_path)
    broken = {**SECTIONS, "results": "Loss fell as $x^$ shows."}
    client = ScriptedClient(default_responder(sections=(broken,)))
    cfg = report_cfg(tmp_path, citations={"enabled": False}, compile_fix_rounds=1)
    with pytest.raises(StepFailed, match="did not compile after 2 attempt"):
        write_paper(run, cfg, client)
    saved = json.loads((run / "paper" / "writeup.json").read_text())
    assert saved["pdf"] is None and len(saved["problems"]) == 2


@NEEDS_LATEX
def test_page_limit_overrun_goes_back_to_the_model(tmp_path, run_copy):
    run = run_copy(tmp_path)
    long = {**SECTIONS, "method": ("A long method paragraph. " * 120 + "\n\n") * 12}
    client = ScriptedClient(default_responder(sections=(long, SECTIONS)))
    cfg = report_cfg(tmp_path, citations={"enabled": False}, page_limit=4)
    summary = write_paper(run, cfg, client)
    assert "limit is 4 pages" in summary["problems"][0]
    assert summary["main_pages"] <= 4 and not summary["over_page_limit"]


def test_count_pages_from_log_and_raw_pdf(tmp_path):
    pdf = tmp_path / "x.pdf"
    pdf.write_bytes(
        b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >>\n2 0 obj << /Type /Page >>\n3 0 obj << /Type /Page >>"
    )
    assert latex.count_pages(pdf, "Output written on paper.pdf (7 pages, 1234 bytes).") == 7
    assert latex.count_pages(pdf, "", tool_path="") == 2


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
    | st.text(alphabet="\\{}$%&#_^~<>|abc \n", max_size=80)
)
def test_latex_text_never_emits_unknown_commands_or_unbalanced_braces(text):
    out = latex.latex_text(text, {"k1"}, {"fig:1"})
    allowed = latex.MATH_COMMANDS | {"textbackslash", "textasciitilde", "textasciicircum", "textless",
                                      "textgreater", "textbar", "ensuremath", "textsuperscript", "cite", "ref"}  # fmt: skip
    assert set(re.findall(r"\\([A-Za-z]+)", out)) <= allowed
    unescaped = re.sub(r"\\[{}$%&#_]", "", out)
    assert unescaped.count("{") == unescaped.count("}")
    assert unescaped.count("$") % 2 == 0  # math always closed
    assert "%" not in unescaped and "#" not in unescaped


@NEEDS_LATEX
def test_pdflatex_bibtex_fallback_without_latexmk(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("pdflatex", "bibtex", "kpsewhich"):
        (tools / name).symlink_to(shutil.which(name))
    assert latex.find_tool("latexmk", str(tools)) is None
    ok, msg = latex.preflight_latex(str(tools))
    assert ok and "pdflatex+bibtex" in msg
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "paper.tex").write_text(
        "\\documentclass{article}\\begin{document}See \\cite{a}.\\label{endofmain}"
        "\\bibliographystyle{plain}\\bibliography{references}\\end{document}\n"
    )
    (paper / "references.bib").write_text(
        "@article{a,\n  title = {T},\n  author = {A. B},\n  year = {2020},\n  journal = {J}\n}\n"
    )
    result = latex.compile_pdf(paper, timeout=120, tool_path=str(tools))
    assert result.ok and result.pages == 1 and result.main_pages == 1
    assert "\\bibitem{a}" in (paper / "paper.bbl").read_text()  # bibtex ran between the pdflatex passes


@needs_latex(("chktex",))
def test_chktex_warnings_are_reported(tmp_path):
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\\begin{document}As shown in \\cite{x}.\\end{document}\n"
    )
    warnings = latex.run_chktex(tmp_path)
    assert any("paper.tex:1:" in w and "Non-breaking space" in w for w in warnings), warnings

"""Writeup checks: citations over several rounds (deduplicated, BibTeX-checked) and duplicate figures.

A fake Semantic Scholar on 127.0.0.1 answers per query, with the same paper
under two queries and a preprint/published pair (different ids, one title),
so the expected references follow from its table.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from components import needs_latex
from PIL import Image
from test_report_support import (
    SECTIONS,
    FakeS2,
    ScriptedClient,
    _plot_png,
    default_responder,
    report_cfg,
)

from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.citations import check_bibtex, to_bibtex
from ai_scientist.reporting.images import duplicate_figures
from ai_scientist.reporting.reflection import paper_feedback
from ai_scientist.reporting.writeup import ReportOptions, _checked_bibtex, gather_citations, write_paper


def _p(pid, title, year=2020):
    return {
        "paperId": pid,
        "title": title,
        "year": year,
        "venue": "ICML",
        "authors": [{"name": "Ada Lovelace"}],
    }


TABLE = {
    "warm-up": [_p("w1", "Warm-up schedules"), _p("s1", "Shared baseline study")],
    "adam": [_p("a1", "Adam revisited"), _p("s1", "Shared baseline study")],  # s1 again: same id
    "schedules": [_p("w2", "Warm-up Schedules", 2021), _p("c1", "Cosine schedules")],  # w1's title again
}


class QueryS2:
    def __init__(self):
        self.queries: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("query", [""])[0]
                outer.queries.append(q)
                body = json.dumps({"data": TABLE.get(q, [])}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def s2():
    server = QueryS2()
    yield server
    server.close()


def _gather(run_copy, tmp_path, s2, answers, rounds=3):
    run = run_copy(tmp_path)
    replies = list(answers)
    client = ScriptedClient(lambda m, s, c, r: json.dumps({"queries": replies.pop(0)}))
    cfg = report_cfg(tmp_path, citations={"rounds": rounds})
    papers, notice = gather_citations(
        run, cfg, client, {"idea": "warm-up", "stages": []}, ReportOptions(s2_base_url=s2.url, environ={})
    )
    return papers, notice, client


def test_rounds_deduplicate_papers_and_queries(tmp_path, s2, run_copy):
    answers = [["warm-up", "adam"], ["Warm-up", "schedules"], []]
    papers, notice, client = _gather(run_copy, tmp_path, s2, answers)
    assert [p["paperId"] for p in papers] == ["w1", "s1", "a1", "c1"]  # s1 once; w2 is w1's title
    assert len({p["key"] for p in papers}) == 4
    assert s2.queries == ["survey", "warm-up", "adam", "schedules"]  # probe, then no query searched twice
    assert notice == "4 reference(s) from Semantic Scholar for 3 queries in 3 round(s)"
    second = client.calls[1]["messages"][-1]["content"]
    assert "Round 2 of 3" in second and '\n- "warm-up": ' in second and '\n- "adam": ' in second
    adam = next(x for x in second.splitlines() if x.startswith('- "adam": '))
    assert "Adam revisited (2020)" in adam and "Cosine" not in second  # round 2 saw round 1's papers
    assert len(client.calls) == 3


def test_rounds_stop_when_nothing_new_turns_up(tmp_path, s2, run_copy):
    papers, notice, client = _gather(
        run_copy, tmp_path, s2, [["adam"], ["nothing here"], ["never asked"]], rounds=5
    )
    assert [p["paperId"] for p in papers] == ["a1", "s1"] and len(client.calls) == 2
    assert notice.endswith("for 2 queries in 2 round(s)")


def test_bibtex_check_drops_bad_entries():
    good = {**_p("g", "Fine title"), "key": "lovelace2020fine"}
    bad = {**_p("b", "{}"), "key": "lovelace2020paper"}
    assert check_bibtex(to_bibtex(good["key"], good)) == []
    assert check_bibtex(to_bibtex(bad["key"], bad)) == ["empty or missing title"]
    assert check_bibtex("@article{k,\n  title = {a{b},\n  author = {c}\n}\n") == ["unbalanced braces"]
    assert check_bibtex("article k") == ["no '@type{key,' header"]
    kept, dropped = _checked_bibtex([good, bad])
    assert kept == [good] and dropped == ["lovelace2020paper: empty or missing title"]


def _figures(run):
    figs = run / "figures"
    figs.mkdir(exist_ok=True)
    _plot_png(figs / "loss.png", 1)
    with Image.open(figs / "loss.png") as img:  # the same plot saved again, larger and as JPEG
        img.resize((480, 360)).save(figs / "loss_copy.jpg")
    _plot_png(figs / "acc.png", 2)
    entries = [{"file": f, "caption": f"Figure {f}."} for f in ("loss.png", "loss_copy.jpg", "acc.png")]
    (figs / "figures.json").write_text(json.dumps({"figures": entries}))
    return figs


def test_perceptual_duplicates_are_found(tmp_path, run_copy):
    figs = _figures(run_copy(tmp_path))
    dups = duplicate_figures([figs / "loss.png", figs / "loss_copy.jpg", figs / "acc.png"])
    assert [(a.name, b.name) for a, b, _ in dups] == [("loss.png", "loss_copy.jpg")] and dups[0][2] <= 6


@needs_latex(("pdflatex",))
def test_duplicate_figure_is_removed_and_fed_back(tmp_path, run_copy):
    run = run_copy(tmp_path)
    _figures(run)
    client = ScriptedClient(default_responder(sections=(SECTIONS,)))
    summary = write_paper(run, report_cfg(tmp_path, citations={"enabled": False}), client)
    assert [(f["file"], f["label"]) for f in summary["figures"]] == [
        ("loss.png", "fig:1"),
        ("acc.png", "fig:2"),
    ]
    assert (
        len(summary["duplicate_figures"]) == 1
        and "loss_copy.jpg repeats loss.png" in summary["duplicate_figures"][0]
    )
    prompt = client.calls[0]["messages"][-1]["content"]
    assert "# Figure check\n- loss_copy.jpg repeats loss.png" in prompt
    assert "loss_copy" not in (run / "paper" / "paper.tex").read_text()
    assert (run / "paper" / "paper.pdf").read_bytes().startswith(b"%PDF")


# ------------------------------------------------------------- reflection --

FIGS = [{"file": "loss.png", "label": "fig:1"}, {"file": "acc.png", "label": "fig:2"}]


def test_feedback_names_each_problem_and_is_empty_when_none():
    sections = {"results": "See Figure \\ref{fig:1} and \\ref{fig:7}."}
    vlm = {
        "acc.png": {"issues": ["axis labels missing"], "caption_matches": False},
        "loss.png": {"issues": []},
    }
    chk = [f'on the line "stages 1-{i}": column 9: Wrong length of dash' for i in range(12)]
    fb = paper_feedback(sections, FIGS, vlm, chk, 6, 4, ["b.png repeats a.png: removed"])
    assert fb[0] == "Figure fig:2 (acc.png) is never referenced: discuss it with \\ref{fig:2}."
    assert fb[1].startswith("\\ref{fig:7} points to no figure (usable labels: fig:1, fig:2)")
    assert fb[2].startswith("Figure fig:2 (acc.png), as the vision model saw it: axis labels missing; "
                            "the caption does not match what the figure shows.")  # fmt: skip
    # the writer writes text only: said once after the figures' remarks, not once per figure
    assert fb[3].startswith("You cannot redraw this figure or change its caption")
    assert sum("cannot redraw" in f for f in fb) == 1
    assert fb[4] == "Figure check: b.png repeats a.png: removed."
    assert fb[5].startswith('LaTeX style warnings (chktex) in your text: on the line "stages 1-0"')
    assert fb[5].endswith("(and 2 more lines).")
    # the overrun with its size and a word budget, cutting prose and not caveats (issue 28)
    assert fb[6].startswith("The main text runs to page 6; the limit is 4 pages, so it is 2 pages over.")
    assert "words" in fb[6] and "keep every caveat" in fb[6]
    ok = {"results": "Figures \\ref{fig:1} and \\ref{fig:2}."}
    assert paper_feedback(ok, FIGS, {"acc.png": {"issues": []}}, [], 4, 4, []) == []


def test_feedback_names_a_math_span_printed_as_text_and_why():
    from ai_scientist.reporting.latex import latex_text

    body = "w \\leftarrow w - \\eta g"
    sections = {
        "method": f"We update ${body}$ and keep $\\alpha = 0.1$.",
        "results": "See \\ref{fig:1} \\ref{fig:2}.",
    }
    fb = paper_feedback(sections, FIGS, {}, [], 4, 4, [])
    assert fb == [
        f"The math ${body}$ in method is printed as plain text: it uses \\leftarrow, not an allowed "
        "command. Rewrite it with the allowed commands or in words."
    ]
    # the document really prints it as text and keeps the allowed span as math
    tex = latex_text(sections["method"])
    assert "$\\alpha = 0.1$" in tex and f"${body}$" not in tex


def _reflect_run(run_copy, tmp_path, reflect_sections):
    run = run_copy(tmp_path)
    _figures(run)  # loss.png, its copy (removed as a duplicate), acc.png
    (run / "figures" / "vlm.json").write_text(
        json.dumps({"figures": {"acc.png": {"issues": ["axis labels missing"]}}})
    )
    first = {
        **SECTIONS,
        "introduction": "Warm-up matters.",
        "related_work": "Prior work.",
        "results": "See Figure \\ref{fig:1}.",
    }

    def respond(messages, schema, ctx):
        return json.dumps(reflect_sections if ctx.label.startswith("reflect") else first)

    cfg = report_cfg(tmp_path, citations={"enabled": False}, writeup_reflections=1, compile_fix_rounds=0)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    return run, write_paper(run, cfg, llm)


@needs_latex(("pdflatex",))
def test_reflection_round_feeds_problems_back_and_is_prompt_logged(tmp_path, run_copy):
    revised = {**SECTIONS, "introduction": "Warm-up matters.", "related_work": "Prior work.",
               "results": "Figure \\ref{fig:1} shows the loss; Figure \\ref{fig:2} the accuracy, now labelled."}  # fmt: skip
    run, summary = _reflect_run(run_copy, tmp_path, revised)
    (round1,) = summary["reflections"]
    assert round1["outcome"] == "applied"
    fb = round1["feedback"]
    assert "Figure fig:2 (acc.png) is never referenced: discuss it with \\ref{fig:2}." in fb
    assert any(f == "Figure fig:2 (acc.png), as the vision model saw it: axis labels missing." for f in fb)
    assert any(f.startswith("Figure check: loss_copy.jpg repeats loss.png") for f in fb)
    assert summary["sections"]["results"] == revised["results"]
    assert "\\ref{fig:2}" in (run / "paper" / "paper.tex").read_text()
    logs = sorted((run / "nodes" / "run" / "prompt_logs").glob("*_writeup_reflect_1.json"))
    assert len(logs) == 1
    sent = json.loads(logs[0].read_text())["messages"][-1]["content"]
    assert all(f"- {f}" in sent for f in fb) and "Reflection round 1 of 1" in sent


@needs_latex(("pdflatex",))
def test_a_revision_that_breaks_the_build_is_reverted(tmp_path, run_copy):
    broken = {**SECTIONS, "results": "Loss fell as $x^$ shows, see \\ref{fig:2}."}
    run, summary = _reflect_run(run_copy, tmp_path, broken)
    (round1,) = summary["reflections"]
    assert round1["outcome"].startswith("reverted: the revision did not compile (LaTeX compile failed")
    tex = (run / "paper" / "paper.tex").read_text()
    assert "$x^$" not in tex and "See Figure~\\ref{fig:1}." in tex  # the last good paper is what is left
    assert summary["pdf"] == "paper/paper.pdf" and (run / "paper" / "paper.pdf").read_bytes().startswith(
        b"%PDF"
    )
    assert summary["sections"]["results"] == "See Figure \\ref{fig:1}."


@needs_latex(("pdflatex",))
def test_revision_that_drops_every_citation_still_builds(tmp_path, run_copy):
    # the first draft cites the one reference; the reflection's revision cites nothing: the
    # rebuild must not fail on the first build's bibtex state
    server = FakeS2()
    draft = default_responder()

    def respond(messages, schema, ctx, role):
        text = draft(messages, schema, ctx, role)
        if role == "writeup" and ctx.label.startswith("reflect"):
            sections = {k: re.sub(r" \\cite\{[^}]*\}", "", v) for k, v in json.loads(text).items()}
            return json.dumps(sections)
        return text

    try:
        run = run_copy(tmp_path)
        _figures(run)
        client = ScriptedClient(respond)
        cfg = report_cfg(tmp_path, writeup_reflections=1)
        summary = write_paper(run, cfg, client, options=ReportOptions(s2_base_url=server.url, environ={}))
    finally:
        server.close()
    assert summary["references"] == ["liu2019warm"]
    (round1,) = summary["reflections"]
    assert round1["outcome"] == "applied", round1
    assert "\\cite" not in (run / "paper" / "paper.tex").read_text()
    assert [c["ctx"].label for c in client.calls if c["role"] == "writeup"] == ["sections", "reflect_1"]


# ------------------------------------------------- bounds of a local model --


class _NamedBackend(ScriptedBackend):
    """A scripted backend under another name: the writer's schema depends on the backend."""

    def __init__(self, name: str, responder):
        super().__init__(responder)
        self.name = name


@needs_latex(("pdflatex",))
@pytest.mark.parametrize("backend", ["local", "openai"])
def test_a_local_models_sections_fit_its_max_tokens(tmp_path, backend, run_copy):
    """The embedded model filled 20,000-character sections until the call timed out (three
    attempts of 120 s in a main-job run): with the local backend each section's bound is its
    share of ``agent.writeup.max_tokens``, so an answer filled to every bound still ends before
    the cut; a remote model keeps 20,000 characters a section. Read from the schemas sent."""
    from grammar_support import assert_llama_parses

    from ai_scientist.base.config import validate

    run = run_copy(tmp_path)
    sent = []

    def respond(messages, schema, ctx):
        sent.append(schema)
        return json.dumps(SECTIONS)

    data = report_cfg(tmp_path, citations={"enabled": False}).model_dump()
    data["agent"]["writeup"]["max_tokens"] = 2048
    cfg = validate(data)
    llm = make_client(cfg, run, None, backend=_NamedBackend(backend, respond))
    write_paper(run, cfg, llm)
    assert sent
    for schema in sent:
        props = schema["properties"]
        bounds = [props[k]["maxLength"] for k in props]
        if backend == "local":
            assert sum(bounds) + 400 <= 2048 * 4, bounds  # within max_tokens at 4 characters a token
            assert min(props[k]["maxLength"] for k in props if k not in ("title", "abstract")) >= 200
        else:
            assert all(props[k]["maxLength"] == 20_000 for k in props if k not in ("title", "abstract"))
    if backend == "local":
        assert_llama_parses(sent[0])


def test_many_figures_are_drawn_smaller_so_they_leave_the_text_its_pages():
    """Six figures at the template's height filled half of a 4-page paper, and the writer was asked
    to cut its text three times; each figure now gets at most its share of FIGURE_SHARE of the pages
    (never below 0.12 of the text height), and a paper with few figures keeps the template's size."""
    from ai_scientist.reporting import latex
    from ai_scientist.reporting.writeup import assemble

    figs = [{"file": f"f{i}.png", "label": f"fig:{i}", "caption": "c"} for i in range(1, 7)]
    for template, columns in (("workshop", 1), ("conference", 2)):
        base = latex.FIGURE_HEIGHT[f"{template}.tex.j2"]
        for n in (1, 2, 6, 12):
            tex = assemble(SECTIONS, (figs * 2)[:n], [], 4, template)
            heights = {float(h) for h in re.findall(r"height=([0-9.]+)\\textheight", tex)}
            assert len(heights) == 1, heights
            (h,) = heights
            assert 0.12 <= h <= base
            # together they take about the share of the pages (a two-column page holds two)
            if h > 0.12:
                assert n * (h + latex.CAPTION_HEIGHT) / columns <= 4 * latex.FIGURE_SHARE + 1e-6
            if n * (base + latex.CAPTION_HEIGHT) / columns <= 4 * latex.FIGURE_SHARE:
                assert h == base  # few figures: the template's own size

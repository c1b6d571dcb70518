"""Writeup checks: citations over several rounds (deduplicated, BibTeX-checked) and duplicate figures.

A fake Semantic Scholar on 127.0.0.1 answers per query, with the same paper
under two queries and a preprint/published pair (different ids, one title),
so the expected references follow from its table.
"""

from __future__ import annotations

import json
import shutil
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image
from test_report_support import SECTIONS, ScriptedClient, _plot_png, default_responder, make_run, report_cfg

from ai_scientist.reporting.citations import check_bibtex, to_bibtex
from ai_scientist.reporting.images import duplicate_figures
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


def _gather(tmp_path, s2, answers, rounds=3):
    run = make_run(tmp_path)
    replies = list(answers)
    client = ScriptedClient(lambda m, s, c, r: json.dumps({"queries": replies.pop(0)}))
    cfg = report_cfg(tmp_path, citations={"rounds": rounds})
    papers, notice = gather_citations(
        run, cfg, client, {"idea": "warm-up", "stages": []}, ReportOptions(s2_base_url=s2.url, environ={})
    )
    return papers, notice, client


def test_rounds_deduplicate_papers_and_queries(tmp_path, s2):
    answers = [["warm-up", "adam"], ["Warm-up", "schedules"], []]
    papers, notice, client = _gather(tmp_path, s2, answers)
    assert [p["paperId"] for p in papers] == ["w1", "s1", "a1", "c1"]  # s1 once; w2 is w1's title
    assert len({p["key"] for p in papers}) == 4
    assert s2.queries == ["survey", "warm-up", "adam", "schedules"]  # probe, then no query searched twice
    assert notice == "4 reference(s) from Semantic Scholar for 3 queries in 3 round(s)"
    second = client.calls[1]["messages"][-1]["content"]
    assert "Round 2 of 3" in second and "Queries already searched: warm-up; adam" in second
    assert "- Adam revisited (2020)" in second and "Cosine" not in second  # round 2 saw round 1's papers
    assert len(client.calls) == 3


def test_rounds_stop_when_nothing_new_turns_up(tmp_path, s2):
    papers, notice, client = _gather(tmp_path, s2, [["adam"], ["nothing here"], ["never asked"]], rounds=5)
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


def test_perceptual_duplicates_are_found(tmp_path):
    figs = _figures(make_run(tmp_path))
    dups = duplicate_figures([figs / "loss.png", figs / "loss_copy.jpg", figs / "acc.png"])
    assert [(a.name, b.name) for a, b, _ in dups] == [("loss.png", "loss_copy.jpg")] and dups[0][2] <= 6


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="LaTeX not installed (see docs/reporting.md)")
def test_duplicate_figure_is_removed_and_fed_back(tmp_path):
    run = make_run(tmp_path)
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

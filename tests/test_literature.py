"""Literature from several sources (issue 36): fake Semantic Scholar, OpenAlex, Crossref and arXiv
servers on 127.0.0.1 answering in each service's documented response shape; the user's own
library (a .bib and two PDFs the tests make with matplotlib, read back by pypdf); no invented
citation in the paper; ``ideate`` with only the library.

Expectations come from what the fake servers sent and received and from what the pipeline wrote
(prompt logs, references.bib, the compiled PDF's text), never from constants of the code.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.ideation import IdeationResponder
from ai_scientist_testing.scripted import PAPER_SECTIONS, ExampleResponder
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, prompt_records, start_run
from test_report_support import unreachable_url

from ai_scientist.base.config import ConfigError, load_config, validate
from ai_scientist.cli.ideate import IdeationOptions, run_ideation
from ai_scientist.cli.main import build_parser, main
from ai_scientist.ideation.schema import ACTION_SCHEMA, EVIDENCE_KEY
from ai_scientist.literature.cascade import Machine, build
from ai_scientist.literature.local import LocalLibrary, load_library, parse_bibtex
from ai_scientist.literature.records import title_key
from ai_scientist.literature.sources import SourceOffline
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.citations import unknown_cite_keys

# ------------------------------------------------------------ fake services --


class FakeService:
    """One service on 127.0.0.1: each request gets the next of ``answers`` (the last repeats),
    each ``(status, headers, body, delay_s)``; ``requests`` records path and headers."""

    def __init__(self, answers: list[tuple[int, dict[str, str], bytes, float]]):
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests.append({"path": self.path, "headers": dict(self.headers)})
                status, headers, body, delay = (
                    outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                )
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def ok_json(body: dict, delay: float = 0.0) -> tuple[int, dict[str, str], bytes, float]:
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode(), delay


def throttled(retry_after: str | None) -> tuple[int, dict[str, str], bytes, float]:
    return (
        429,
        ({"Retry-After": retry_after} if retry_after else {}),
        b'{"message": "Too Many Requests"}',
        0.0,
    )


def s2_body(papers: list[dict]) -> dict:
    """Semantic Scholar's /graph/v1/paper/search answer."""
    return {"total": len(papers), "offset": 0, "data": [
        {"paperId": p["id"], "title": p["title"], "year": p.get("year"), "venue": p.get("venue", ""),
         "abstract": p.get("abstract"), "url": f"https://www.semanticscholar.org/paper/{p['id']}",
         "authors": [{"authorId": str(i), "name": n} for i, n in enumerate(p.get("authors", []))],
         "externalIds": {k: v for k, v in (("DOI", p.get("doi")), ("ArXiv", p.get("arxiv"))) if v}}
        for p in papers]}  # fmt: skip


def inverted(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, w in enumerate(text.split()):
        out.setdefault(w, []).append(i)
    return out


def openalex_body(papers: list[dict]) -> dict:
    """OpenAlex's /works?search= answer (abstracts as an inverted index)."""
    return {"meta": {"count": len(papers), "page": 1, "per_page": 25}, "results": [
        {"id": f"https://openalex.org/{p['id']}", "doi": f"https://doi.org/{p['doi']}" if p.get("doi") else None,
         "title": p["title"], "display_name": p["title"], "publication_year": p.get("year"),
         "authorships": [{"author": {"display_name": n}} for n in p.get("authors", [])],
         "primary_location": {"landing_page_url": p.get("landing"), "source": {"display_name": p.get("venue")}},
         "locations": [], "abstract_inverted_index": inverted(p["abstract"]) if p.get("abstract") else None}
        for p in papers]}  # fmt: skip


def crossref_body(papers: list[dict]) -> dict:
    """Crossref's /works?query= answer (JATS abstracts)."""
    return {"status": "ok", "message-type": "work-list", "message-version": "1.0.0", "message": {
        "total-results": len(papers), "items-per-page": 20, "items": [
            {"DOI": p["doi"], "title": [p["title"]], "URL": f"https://doi.org/{p['doi']}",
             "author": [{"given": n.split()[0], "family": n.split()[-1], "sequence": "first"}
                        for n in p.get("authors", [])],
             "issued": {"date-parts": [[p.get("year"), 1, 1]]}, "container-title": [p.get("venue", "")],
             **({"abstract": f"<jats:p>{p['abstract']}</jats:p>"} if p.get("abstract") else {})}
            for p in papers]}}  # fmt: skip


def arxiv_body(papers: list[dict]) -> bytes:
    """arXiv's /api/query answer: an Atom feed."""
    entries = "".join(
        f"<entry><id>http://arxiv.org/abs/{p['arxiv']}v2</id><published>{p['year']}-01-05T00:00:00Z</published>"
        f"<title>{p['title']}</title><summary>{p.get('abstract', '')}</summary>"
        + "".join(f"<author><name>{n}</name></author>" for n in p.get("authors", []))
        + "</entry>"
        for p in papers
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom" '
        'xmlns:arxiv="http://arxiv.org/schemas/atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">'
        f"<title>ArXiv Query</title><opensearch:totalResults>{len(papers)}</opensearch:totalResults>{entries}</feed>"
    ).encode()


WARMUP = {"id": "s2a", "title": "On the Variance of the Adaptive Learning Rate", "year": 2020,
          "doi": "10.1234/radam.2020", "authors": ["Liyuan Liu"], "venue": "ICLR"}  # fmt: skip
OPENALEX_ONLY = {"id": "W7", "title": "Warm-up Schedules Revisited", "year": 2022, "doi": "10.5555/wsr",
                 "authors": ["Ann Other"], "abstract": "We revisit warm-up schedules for adaptive optimisers."}  # fmt: skip


@pytest.fixture
def services():
    made: list[FakeService] = []

    def make(answers):
        made.append(FakeService(answers))
        return made[-1]

    yield make
    for s in made:
        s.close()


def cascade_for(tmp_path, urls: dict[str, str], waits: list[float] | None = None, env=None, **citations):
    cfg = validate({"report": {"citations": {"sources": list(urls), **citations}}})
    notes: list[str] = []
    c = build(cfg, tmp_path / "cache", Machine(base_urls=urls, environ=env or {},
              sleep=(waits.append if waits is not None else lambda s: None)), on_note=notes.append)  # fmt: skip
    return c, notes


# ------------------------------------------------------------ the cascade --


@pytest.mark.parametrize("retry_after, expected_waits", [("3", [3.0, 3.0]), (None, [2.0, 4.0])])
def test_s2_throttling_falls_through_to_openalex(tmp_path, services, retry_after, expected_waits):
    s2 = services([throttled(retry_after)])
    oa = services([ok_json(openalex_body([OPENALEX_ONLY]))])
    waits: list[float] = []
    cascade, notes = cascade_for(tmp_path, {"semantic_scholar": s2.url, "openalex": oa.url}, waits)
    found = cascade.search("warm-up schedules", 5)
    # S2 tried max_attempts times, waiting Retry-After (or backing off 2, 4 s), then skipped
    assert len(s2.requests) == 3 and waits == expected_waits
    assert [p["title"] for p in found] == [OPENALEX_ONLY["title"]] and found[0]["sources"] == ["openalex"]
    assert found[0]["abstract"] == OPENALEX_ONLY["abstract"]  # rebuilt from the inverted index
    assert found[0]["doi"] == OPENALEX_ONLY["doi"]
    assert len(notes) == 1 and "Semantic Scholar skipped for the rest of this run" in notes[0]
    assert "HTTP 429" in notes[0]
    cascade.search("another query", 5)  # skipped for the run: not asked again
    assert len(s2.requests) == 3 and len(oa.requests) == 2 and len(notes) == 1


def test_a_retry_after_longer_than_accepted_skips_at_once(tmp_path, services):
    s2 = services([throttled("3600")])
    oa = services([ok_json(openalex_body([OPENALEX_ONLY]))])
    waits: list[float] = []
    cascade, notes = cascade_for(tmp_path, {"semantic_scholar": s2.url, "openalex": oa.url}, waits)
    assert cascade.search("warm-up", 5)[0]["title"] == OPENALEX_ONLY["title"]
    assert len(s2.requests) == 1 and waits == [] and "asking to wait 3600 s" in notes[0]


def test_a_source_that_times_out_is_skipped_for_the_run(tmp_path, services):
    slow = services([ok_json(s2_body([WARMUP]), delay=3.0)])
    oa = services([ok_json(openalex_body([OPENALEX_ONLY]))])
    cascade, notes = cascade_for(tmp_path, {"semantic_scholar": slow.url, "openalex": oa.url}, timeout_s=0.5)
    t0 = time.monotonic()
    assert cascade.search("adaptive learning rate", 5)[0]["title"] == OPENALEX_ONLY["title"]
    assert time.monotonic() - t0 < 2.5  # one timeout, no retry of an unreachable source
    assert "Semantic Scholar unreachable" in notes[0] and "timed out" in notes[0]
    cascade.search("second query", 5)
    assert len(slow.requests) == 1 and len(oa.requests) == 2


def test_no_source_left_is_offline(tmp_path):
    cascade, notes = cascade_for(
        tmp_path, {"semantic_scholar": unreachable_url(), "arxiv": unreachable_url()}
    )
    with pytest.raises(SourceOffline, match="no literature source answers"):
        cascade.search("anything", 3)
    assert len(notes) == 2 and not cascade.available


def test_duplicates_across_sources_are_merged(tmp_path, services):
    p1 = dict(WARMUP)  # S2 has no abstract for it; OpenAlex (same DOI, other case) has
    p2 = {"id": "s2b", "title": "Attention Is All You Need", "year": 2017, "arxiv": "1706.03762",
          "authors": ["Ashish Vaswani"]}  # fmt: skip
    p1_oa = p1 | {"id": "W1", "doi": p1["doi"].upper(), "abstract": "Warm-up reduces the variance of Adam."}
    p3 = {
        "id": "W3",
        "title": "Robust Losses: A Survey",
        "year": 2021,
        "doi": "10.9/robust",
        "authors": ["B C"],
    }
    p2_cr = p2 | {"doi": "10.48550/arXiv.1706.03762"}  # Crossref knows it by its arXiv DOI
    p3_cr = p3 | {
        "title": "robust losses - a survey",
        "doi": "10.9/other-doi",
    }  # same title modulo case/punct
    p5 = {"title": "Label Smoothing Explained", "year": 2019, "doi": "10.7/ls", "authors": ["D E"]}
    p2_ax = p2 | {"abstract": "The Transformer."}
    p4 = {"title": "Layer Normalization", "year": 2016, "arxiv": "1607.06450", "authors": ["Jimmy Ba"]}
    s2 = services([ok_json(s2_body([p1, p2]))])
    oa = services([ok_json(openalex_body([p1_oa, p3]))])
    cr = services([ok_json(crossref_body([p2_cr, p3_cr, p5]))])
    ax = services([(200, {"Content-Type": "application/atom+xml"}, arxiv_body([p2_ax, p4]), 0.0)])
    urls = {"semantic_scholar": s2.url, "openalex": oa.url, "crossref": cr.url, "arxiv": ax.url}
    cascade, notes = cascade_for(tmp_path, urls)
    found = cascade.search("optimisers", 10)
    assert notes == []
    assert [title_key(p["title"]) for p in found] == [title_key(x["title"]) for x in (p1, p2, p3, p5, p4)]
    by = {title_key(p["title"]): p for p in found}
    one = by[title_key(p1["title"])]
    assert one["sources"] == ["semantic_scholar", "openalex"] and one["abstract"] == p1_oa["abstract"]
    assert one["doi"] == p1["doi"]
    assert by[title_key(p2["title"])]["sources"] == ["semantic_scholar", "crossref", "arxiv"]
    assert by[title_key(p2["title"])]["abstract"] == "The Transformer."  # filled from arXiv
    assert by[title_key(p3["title"])]["sources"] == ["openalex", "crossref"]
    assert by[title_key(p4["title"])]["arxiv"] == "1607.06450" and by[title_key(p4["title"])]["year"] == 2016
    assert by[title_key(p5["title"])]["authors"] == [{"name": "D E"}]
    # each service was asked in its own documented form
    assert "/graph/v1/paper/search?" in s2.requests[0]["path"] and "limit=10" in s2.requests[0]["path"]
    assert (
        oa.requests[0]["path"].startswith("/works?search=optimisers")
        and "per-page=10" in oa.requests[0]["path"]
    )
    assert (
        cr.requests[0]["path"].startswith("/works?query=optimisers") and "rows=10" in cr.requests[0]["path"]
    )
    assert ax.requests[0]["path"].startswith("/api/query?search_query=all%3Aoptimisers")
    # cached: the same query asks nothing again
    assert cascade.search("optimisers", 10) == found[:10]
    assert [len(s.requests) for s in (s2, oa, cr, ax)] == [1, 1, 1, 1]


def test_enough_papers_from_the_first_source_ask_no_other(tmp_path, services):
    s2 = services([ok_json(s2_body([WARMUP]))])
    oa = services([ok_json(openalex_body([OPENALEX_ONLY]))])
    cascade, _ = cascade_for(tmp_path, {"semantic_scholar": s2.url, "openalex": oa.url})
    assert [p["title"] for p in cascade.search("radam", 1)] == [WARMUP["title"]] and oa.requests == []


def test_keys_are_sent_as_each_service_asks_and_never_written(tmp_path, services):
    s2 = services([throttled("1")])
    oa = services([ok_json(openalex_body([OPENALEX_ONLY]))])
    env = {
        "S2_API_KEY": "s2-secret-123",
        "OPENALEX_API_KEY": "oa-secret-456",
        "AI_SCIENTIST_CONTACT_EMAIL": "me@x.org",
    }
    cascade, notes = cascade_for(tmp_path, {"semantic_scholar": s2.url, "openalex": oa.url}, env=env)
    cascade.search("warm-up", 3)
    assert {k.lower(): v for k, v in s2.requests[0]["headers"].items()}["x-api-key"] == "s2-secret-123"
    assert "api_key=oa-secret-456" in oa.requests[0]["path"] and "mailto=me%40x.org" in oa.requests[0]["path"]
    written = " ".join(notes) + "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert "secret" not in written


def test_a_source_budget_is_per_run(tmp_path, services):
    s2 = services([ok_json(s2_body([WARMUP]))])
    cascade, notes = cascade_for(tmp_path, {"semantic_scholar": s2.url}, budget=2)
    cascade.search("a", 1)
    cascade.search("b", 1)
    with pytest.raises(SourceOffline):
        cascade.search("c", 1)
    assert len(s2.requests) == 2 and "budget of 2 requests" in notes[0]


def test_sources_and_references_are_checked(tmp_path, capsys):
    with pytest.raises(ConfigError, match="report.citations.sources"):
        load_config(None, ["report.citations.sources=[google_scholar]"])
    with pytest.raises(ConfigError, match="report.citations.sources.*at most once"):
        load_config(None, ["report.citations.sources=[arxiv, arxiv]"])
    with pytest.raises(ConfigError, match="report.references"):
        load_config(None, ["report.references=[/nonexistent/refs.bib]"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="report.references.*holds no .bib file and no PDF"):
        load_config(None, [f"report.references=[{tmp_path / 'empty'}]"])
    assert main(["run", "--idea", "x.md", "--references", "/nonexistent/refs.bib"]) == 2
    assert "report.references" in capsys.readouterr().err
    bad = tmp_path / "bad.bib"
    bad.write_text("@misc{nokey, note = {no title here}}\n")
    topic = tmp_path / "topic.md"
    topic.write_text("# T\nA topic.\n")
    assert main(["ideate", str(topic), "--references", str(bad)]) == 2
    assert "no BibTeX entry with a title" in capsys.readouterr().err
    assert (
        not (tmp_path / "topic.json.d").exists() and not (tmp_path / "topic.json").exists()
    )  # nothing written


# ------------------------------------------------------------ the library --

BIB = r"""
@inproceedings{natarajan2013noisy,
  title = {Learning with {Noisy} Labels},
  author = {Natarajan, Nagarajan and Dhillon, Inderjit S. and Ravikumar, Pradeep},
  booktitle = {NeurIPS},
  year = 2013,
  abstract = {We study binary classification with class-conditional random label noise and give
              unbiased estimators of the loss for logistic regression.},
}
@article{zhang2017rethinking,
  title = "Understanding deep learning requires rethinking generalization",
  author = {Zhang, Chiyuan and Bengio, Samy},
  journal = {ICLR},
  year = {2017},
}
"""
PDF_PAGES = {
    # title in the metadata, the same paper as the .bib's first entry: merged into it
    "natarajan.pdf": ("Learning with Noisy Labels", "Natarajan, Dhillon",
                      ["Learning with Noisy Labels", "Abstract: symmetric label noise leaves the Bayes",
                       "classifier of logistic regression unchanged; we call this rank preservation."]),
    # no metadata title: the first line is the title
    "early_stopping.pdf": (None, None,
                           ["Early Stopping Against Label Noise in Small Networks", "A. Author 2020",
                            "Abstract: stopping at the validation minimum keeps small networks from",
                            "memorising flipped labels, a robustness margin of several points."]),
}  # fmt: skip


def make_library(root: Path) -> tuple[Path, Path]:
    """A .bib file and a folder of two PDFs written with matplotlib's PDF backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root.mkdir(parents=True, exist_ok=True)
    bib = root / "refs.bib"
    bib.write_text(BIB)
    pdfs = root / "pdfs"
    pdfs.mkdir(exist_ok=True)
    with matplotlib.rc_context({"pdf.fonttype": 42}):  # TrueType: text a PDF reader can extract
        for name, (title, author, lines) in PDF_PAGES.items():
            fig = plt.figure(figsize=(6, 8))
            for i, line in enumerate(lines):
                fig.text(0.05, 0.9 - 0.05 * i, line, fontsize=9)
            meta = {k: v for k, v in (("Title", title), ("Author", author)) if v}
            fig.savefig(pdfs / name, format="pdf", metadata=meta)
            plt.close(fig)
    return bib, pdfs


def test_the_library_reads_bibtex_and_pdfs_and_merges_them(tmp_path):
    matplotlib_or_skip()
    bib, pdfs = make_library(tmp_path / "lib")
    records = load_library([bib, pdfs])
    entries = parse_bibtex(BIB)
    titles = [title_key(e["title"]) for e in entries] + [title_key(PDF_PAGES["early_stopping.pdf"][2][0])]
    assert [title_key(r["title"]) for r in records] == titles  # the natarajan PDF merged into its entry
    natarajan = records[0]
    assert natarajan["key"] == "natarajan2013noisy" and natarajan["year"] == 2013
    assert "rank preservation" in natarajan["text"]  # the PDF's first page, read by pypdf
    assert natarajan["authors"][0] == {"name": "Natarajan, Nagarajan"}
    early = records[2]
    assert "memorising flipped labels" in early["abstract"] and early["year"] == 2020
    hits = [r["title"] for r in load_library_search(records, "label noise small networks")]
    assert hits[0] == early["title"] and natarajan["title"] in hits
    assert load_library_search(records, "quantum chromodynamics") == []


def load_library_search(records, query):
    from ai_scientist.literature.local import LocalLibrary

    return LocalLibrary(records).search(query, 5)


# ------------------------------------------------ an offline run with --references --


class CitingWriter(ExampleResponder):
    """The example LLM, whose writer cites every key listed to it and, until told that it is no
    reference, also ``\\cite{fake2024}``."""

    TOLD = "\\cite{fake2024}: this key names no reference"

    def __init__(self) -> None:
        super().__init__()
        self.writer_prompts: list[str] = []

    def _writeup(self, text: str, ctx) -> str:
        if "citation" in ctx.label:
            return super()._writeup(text, ctx)
        self.writer_prompts.append(text)
        listed = (
            text.split("# Citation keys you may use", 1)[1].split("\n# ", 1)[0]
            if "# Citation keys" in text
            else ""
        )
        keys = re.findall(r"^- (\S+): ", listed, re.M)
        extra = "" if self.TOLD in text else " Others claim the opposite \\cite{fake2024}."
        cites = f" Closest to ours is \\cite{{{','.join(keys)}}}." if keys else ""
        return json.dumps({**PAPER_SECTIONS, "related_work": PAPER_SECTIONS["related_work"] + cites + extra})


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    latex_or_skip()
    matplotlib_or_skip()
    tmp = tmp_path_factory.mktemp("offline_refs")
    bib, pdfs = make_library(tmp / "lib")
    # exactly what `ai-scientist run --references refs.bib --references pdfs/` adds to the overrides
    args = build_parser().parse_args(
        ["run", "--idea", "x", "--references", str(bib), "--references", str(pdfs)]
    )
    override = f"report.references={json.dumps([str(Path(r).resolve()) for r in args.references])}"
    writer = CitingWriter()
    code, run_dir, _ = start_run(
        tmp, "report.enabled=true", "report.num_reviews=0", "report.writeup_reflections=1",
        "report.citations.sources=[semantic_scholar]",  # the one service, unreachable: offline
        f"report.citations.base_urls={{semantic_scholar: {unreachable_url()}}}",
        "agent.stages.stage2_max_iters=0", "agent.stages.stage3_max_iters=0", "agent.stages.stage4_max_iters=0",
        override, responder=writer,
    )  # fmt: skip
    assert code == 0
    return run_dir, load_library([bib, pdfs]), writer


def test_offline_run_with_references_cites_only_the_library(offline_run):
    run_dir, library, _ = offline_run
    summary = json.loads((run_dir / "paper" / "writeup.json").read_text())
    assert summary["pdf"] == "paper/paper.pdf"
    assert "from your library" in summary["citations"] and "Semantic Scholar skipped" in summary["citations"]
    entries = parse_bibtex((run_dir / "paper" / "references.bib").read_text())
    assert entries, summary["citations"]
    titles = {title_key(r["title"]) for r in library}
    assert {title_key(e["title"]) for e in entries} <= titles  # only records of the library
    assert {e["ID"] for e in entries} == set(summary["references"])
    # the writer's prompt carried each cited paper's own text (the .bib abstract or the PDF's page)
    logs = [r for r in prompt_records(run_dir) if r["phase"] == "writeup" and r["label"] == "sections"]
    sent = "\n".join(m["content"] for m in logs[0]["messages"] if isinstance(m["content"], str))
    for e in entries:
        rec = next(r for r in library if title_key(r["title"]) == title_key(e["title"]))
        gist = " ".join((rec["abstract"] or rec["text"]).split())[:120]
        assert gist in " ".join(sent.split()), e["ID"]


def test_an_invented_citation_is_removed_and_the_writer_told(offline_run):
    run_dir, _, writer = offline_run
    summary = json.loads((run_dir / "paper" / "writeup.json").read_text())
    assert summary["invented_citations"] == {"draft": ["fake2024"], "final": []}
    step = next(e for e in events(run_dir) if e["type"] == "report_step" and e["step"] == "writeup")
    assert step["result"]["invented_citations"] == summary["invented_citations"]  # events.jsonl says it too
    told = [r for r in summary["reflections"] if any("fake2024" in f for f in r["feedback"])]
    assert told and told[0]["outcome"] == "applied"
    assert sum(CitingWriter.TOLD in p for p in writer.writer_prompts) == 1  # the reflection prompt said so
    tex = (run_dir / "paper" / "paper.tex").read_text()
    assert "fake2024" not in tex and unknown_cite_keys([tex], summary["references"]) == []
    log = (run_dir / "paper" / "paper.log").read_text(errors="replace")
    assert not re.search(r"Citation `[^']*' .*undefined", log)  # LaTeX's warning for a `?` citation
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(run_dir / "paper" / "paper.pdf"), "-"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert "[?]" not in text and "References" in text


# ------------------------------------------------------------ ideate offline --


def test_ideate_offline_with_a_library_reports_novelty_evidence_from_it(tmp_path, capsys):
    matplotlib_or_skip()
    bib, pdfs = make_library(tmp_path / "lib")
    topic = tmp_path / "topic.md"
    topic.write_text(
        "# Label noise workshop\n\n## Keywords\nlabel noise\n\n## Abstract\nA workshop abstract that "
        "only the first round needs to read, about robustness to noisy labels.\n\n## TL;DR\nNoisy labels.\n"
    )
    titles = ["Label noise and early stopping in small networks"]
    responder = IdeationResponder(titles, searches=1)
    argv = ["ideate", str(topic), "--out", str(tmp_path / "ideas.json"), "--s2-url", unreachable_url(),
            "--references", str(bib), "--references", str(pdfs), "--num-ideas", "1"]  # fmt: skip
    code = run_ideation(build_parser().parse_args(argv), backend=ScriptedBackend(responder),
                        options=IdeationOptions(environ={}, sleep=lambda s: None))  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "your library (3 papers) is searched first" in err and "from library" in err
    ev = json.loads((tmp_path / "ideas.json").read_text())[0][EVIDENCE_KEY]
    library = {title_key(r["title"]) for r in load_library([bib, pdfs])}
    assert ev["novelty_checked"] and ev["sources"] == ["library"]
    assert ev["papers"] and {title_key(p["title"]) for p in ev["papers"]} <= library
    # the library had fewer papers than asked for, so the unreachable service was tried: one note
    assert [n for n in ev["notes"] if "Semantic Scholar skipped" in n and "unreachable" in n] == ev["notes"][
        :1
    ]
    # the prompts: the topic's abstract in round 1 only; the action schema never inline (the
    # scripted backend takes it in the prompt: the client's one copy); the search still offered
    r1, r2 = [t for _, label, t in responder.prompts][:2]
    assert "only the first round needs to read" in r1 and "only the first round needs to read" not in r2
    schema = json.dumps(ACTION_SCHEMA, separators=(",", ":"))
    assert r1.count('"Risk Factors and Limitations"') <= 2 and r1.count(schema) <= 1
    assert 'then choose "search"' in r2 and "Early Stopping Against Label Noise" in r2
    assert "[in the user's own library]" in r2  # the model knows where the papers came from


def test_ideas_already_proposed_sit_next_to_their_instruction(tmp_path):
    bib = tmp_path / "refs.bib"
    bib.write_text(BIB)
    topic = tmp_path / "topic.md"
    topic.write_text("# Label noise\nRobustness of small models to noisy labels.\n")
    responder = IdeationResponder(["Label noise in logistic regression", "Early stopping on noisy labels"])
    argv = ["ideate", str(topic), "--out", str(tmp_path / "ideas.json"), "--s2-url", unreachable_url(),
            "--references", str(bib), "--num-ideas", "2"]  # fmt: skip
    assert run_ideation(build_parser().parse_args(argv), backend=ScriptedBackend(responder),
                        options=IdeationOptions(environ={}, sleep=lambda s: None)) == 0  # fmt: skip
    second = next(t for i, label, t in responder.prompts if i == "idea002" and label == "round1")
    listed, instruction, fmt = (second.index(s) for s in ("## Ideas already proposed", "Draft a new research",
                                                          "Answer with one JSON object"))  # fmt: skip
    assert listed < instruction < fmt
    assert "Label noise in logistic regression" in second[listed:instruction]


def test_doctor_shows_which_sources_answer(tmp_path, services):
    from ai_scientist.cli.doctor import SECTIONS, readable

    s2 = services([ok_json(s2_body([WARMUP]))])
    cr = services([(503, {}, b"down", 0.0)])
    matplotlib_or_skip()
    bib, pdfs = make_library(tmp_path / "lib")
    cfg = validate({"report": {"references": [str(bib), str(pdfs)], "citations": {
        "sources": ["semantic_scholar", "crossref", "arxiv"],
        "base_urls": {"semantic_scholar": s2.url, "crossref": cr.url, "arxiv": unreachable_url()}}}})  # fmt: skip
    rows = {r["name"]: readable(r) for r in SECTIONS["literature"](cfg)}
    assert list(rows) == ["library", "semantic_scholar", "crossref", "arxiv"]
    assert rows["library"]["status"] == "found" and rows["library"]["detail"].startswith("3 papers")
    assert rows["semantic_scholar"]["status"] == "answers" and s2.url in rows["semantic_scholar"]["detail"]
    assert rows["crossref"]["status"] == "failing" and "HTTP 503" in rows["crossref"]["detail"]
    assert rows["arxiv"]["status"] == "offline" and "does not answer here" in rows["arxiv"]["detail"]
    assert len(cr.requests) == 1  # one probe, no retry: doctor is quick


@pytest.mark.parametrize("example", ["label_noise", "blocked_matmul"])
def test_the_examples_libraries_read_whole_and_answer_their_idea(example):
    # examples/*/references.bib is what an offline run of the example cites (--references): each
    # entry reads whole (key, title, authors without LaTeX left over, year, a summary the writer is
    # shown), and a search with the idea's own title finds them
    root = Path(__file__).resolve().parents[1] / "examples" / example
    text = (root / "references.bib").read_text(encoding="utf-8")
    declared = re.findall(r"^@\w+\{([^,]+),", text, re.M)
    records = load_library([root / "references.bib"])
    assert [r["key"] for r in records] == declared and len(declared) >= 3
    for rec in records:
        names = " ".join(a["name"] for a in rec["authors"])
        assert rec["title"] and rec["year"] and rec["authors"] and len(rec["abstract"]) > 100, rec["key"]
        assert "\\" not in names + rec["title"] and "{" not in names + rec["title"], rec["key"]
    title = (root / "idea.md").read_text(encoding="utf-8").splitlines()[0].lstrip("# ")
    assert len(LocalLibrary(records).search(title, 5)) >= 2, title

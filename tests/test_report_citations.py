"""Semantic Scholar: key header, cache, 429 back-off honouring Retry-After, offline skip."""

from __future__ import annotations

import pytest
from components import needs_latex
from test_report_support import (
    FakeS2,
    ScriptedClient,
    default_responder,
    report_cfg,
    unreachable_url,
)

from ai_scientist.reporting.citations import CitationsError, CitationsOffline, S2Client, bib_key, to_bibtex
from ai_scientist.reporting.writeup import ReportOptions, write_paper


@pytest.fixture
def s2():
    server = FakeS2()
    yield server
    server.close()


def test_search_sends_key_and_caches(tmp_path, s2):
    client = S2Client(cache_dir=tmp_path / "cache", base_url=s2.url, api_key="k-123456")
    first = client.search("warm-up", 3)
    again = client.search("warm-up", 3)
    assert first == again and first[0]["title"].startswith("On {Warm-up}")
    assert len(s2.requests) == 1 and s2.requests[0]["key"] == "k-123456"
    assert "limit=3" in s2.requests[0]["path"] and len(list((tmp_path / "cache").glob("*.json"))) == 1


def test_429_waits_for_retry_after(tmp_path):
    server = FakeS2(throttle=2)
    waits: list[float] = []
    try:
        client = S2Client(cache_dir=tmp_path, base_url=server.url, sleep=waits.append)
        assert client.search("x", 1)[0]["paperId"] == "abc123"
    finally:
        server.close()
    assert waits == [7.0, 7.0] and len(server.requests) == 3 and server.requests[0]["key"] is None


def test_persistent_429_gives_up_with_advice(tmp_path):
    server = FakeS2(throttle=10)
    waits: list[float] = []
    try:
        client = S2Client(cache_dir=tmp_path, base_url=server.url, sleep=waits.append, max_attempts=3)
        with pytest.raises(CitationsError, match="api_key_env"):
            client.search("x", 1)
    finally:
        server.close()
    assert len(waits) == 2


def test_offline_raises_offline(tmp_path):
    client = S2Client(cache_dir=tmp_path, base_url=unreachable_url(), timeout_s=2)
    with pytest.raises(CitationsOffline, match="unreachable"):
        client.search("x", 1)


def test_bibtex_is_safe():
    paper = {"title": "On {Warm-up} & Learning_Rates \\evil", "year": 2019, "venue": "ICLR",
             "authors": [{"name": "Liyuan Liu"}], "url": "https://x.org/a b%"}  # fmt: skip
    taken: set[str] = set()
    key = bib_key(paper, taken)
    assert key == "liu2019warm" and bib_key(paper, taken) == "liu2019warm2"
    bib = to_bibtex(key, paper)
    assert "title = {On Warm-up \\& Learning\\_Rates evil}" in bib and "url = {https://x.org/ab}" in bib
    assert bib.count("{") == bib.count("}")


@needs_latex(("pdflatex",))
def test_writeup_offline_skips_citations_with_notice(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder())
    summary = write_paper(
        run, report_cfg(tmp_path), client, options=ReportOptions(s2_base_url=unreachable_url())
    )
    assert summary["citations"].startswith("citations skipped: no literature source answers")
    assert "Semantic Scholar unreachable" in summary["citations"]
    assert summary["references"] == [] and summary["pdf"] == "paper/paper.pdf"
    assert "citation" not in client.roles()  # no tokens spent on queries that cannot be searched
    tex = (run / "paper" / "paper.tex").read_text()
    assert "\\bibliography" not in tex and "\\cite" not in tex  # the unknown key was dropped

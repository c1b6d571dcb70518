"""The ideation's literature tool: the cascade of :mod:`ai_scientist.literature` (the user's
library first, then the services of ``ideation.sources``), cached.

A search never raises: its :class:`Search` record says ``ok`` (some source answered; its note
names the sources skipped on the way), ``offline`` (no source is left: later searches are not
tried again, so an offline machine does not wait once per round, and :attr:`Literature.available`
tells the loop to stop offering the search) or ``skipped`` (an empty query). Each paper names
the sources that returned it (``library`` for the user's own).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..literature.cascade import Cascade
from ..literature.sources import SourceOffline

ABSTRACT_CHARS = 400  # per paper, in the prompt; the evidence stored with the idea has no abstracts


@dataclass
class Search:
    query: str
    status: str  # ok | offline | error | skipped
    papers: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _paper(p: dict[str, Any]) -> dict[str, Any]:
    authors = [a.get("name") for a in p.get("authors") or [] if isinstance(a, dict) and a.get("name")]
    return {
        "paperId": p.get("paperId"),
        "title": p.get("title"),
        "year": p.get("year"),
        "venue": p.get("venue") or "",
        "authors": authors[:4],
        "url": p.get("url") or "",
        "doi": p.get("doi") or "",
        "sources": list(p.get("sources") or []),
        "abstract": (p.get("abstract") or p.get("text") or "")[:ABSTRACT_CHARS],
    }


class Literature:
    """Searches through ``cascade``; remembers that no source is left."""

    def __init__(self, cascade: Cascade, max_results: int):
        self.cascade = cascade
        self.max_results = max_results
        self.offline_note = ""

    @property
    def available(self) -> bool:
        return not self.offline_note and self.cascade.available

    def search(self, query: str) -> Search:
        query = " ".join(query.split())
        if not query:
            return Search(query, "skipped", note="empty query: nothing searched")
        if not self.available:
            self.offline_note = self.offline_note or self._offline(self.cascade.unavailable_reason())
            return Search(query, "offline", note=self.offline_note)
        seen = len(self.cascade.notes)
        try:
            found = self.cascade.search(query, self.max_results)
        except SourceOffline as exc:
            self.offline_note = self._offline(str(exc))
            return Search(query, "offline", note=self.offline_note)
        papers = [_paper(p) for p in found if isinstance(p, dict) and p.get("title")]
        notes = self.cascade.notes[seen:] + ([] if papers else ["no papers found"])
        return Search(query, "ok", papers, note="; ".join(notes))

    @staticmethod
    def _offline(why: str) -> str:
        return f"literature search offline, novelty NOT checked: {why}"


def evidence(searches: list[Search]) -> dict[str, Any]:
    """What is stored with an idea: every query, its outcome, the papers (no abstracts), the notes."""
    # failures, and the sources an answered search skipped on the way (empty result notes aside)
    notes = sorted({s.note for s in searches if s.status in ("offline", "error") or "skipped" in s.note})
    checked = any(s.status == "ok" for s in searches)
    sources = sorted({src for s in searches for p in s.papers for src in p.get("sources") or []})
    return {
        "novelty_checked": checked,
        "sources": sources,  # which sources the papers came from ("library": the user's own)
        "queries": [{"query": s.query, "status": s.status, "papers": len(s.papers)} for s in searches],
        "papers": [
            {k: v for k, v in p.items() if k != "abstract"} | {"query": s.query}
            for s in searches
            for p in s.papers
        ],
        "notes": notes or ([] if checked else ["no literature search was made"]),
    }

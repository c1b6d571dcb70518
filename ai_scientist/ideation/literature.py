"""The ideation's literature tool: Semantic Scholar search through the cached reporting client.

A search never raises: its :class:`Search` record says ``ok``, ``offline``
(nothing reachable: later searches are not tried again, so an offline machine
does not wait once per round) or ``error`` (e.g. HTTP 429 still after the
client's back-off), with a note a reader of the idea can act on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..reporting.citations import CitationsError, CitationsOffline, S2Client

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
        "abstract": (p.get("abstract") or "")[:ABSTRACT_CHARS],
    }


class Literature:
    """Searches through ``client`` (an :class:`S2Client`); remembers that the service is offline."""

    def __init__(self, client: S2Client, max_results: int):
        self.client = client
        self.max_results = max_results
        self.offline_note = ""

    def search(self, query: str) -> Search:
        query = " ".join(query.split())
        if not query:
            return Search(query, "skipped", note="empty query: nothing searched")
        if self.offline_note:
            return Search(query, "offline", note=self.offline_note)
        try:
            found = self.client.search(query, self.max_results)
        except CitationsOffline as exc:
            self.offline_note = f"literature search offline, novelty NOT checked: {exc}"
            return Search(query, "offline", note=self.offline_note)
        except CitationsError as exc:
            return Search(query, "error", note=f"literature search failed, novelty NOT checked: {exc}")
        papers = [_paper(p) for p in found if isinstance(p, dict) and p.get("title")]
        return Search(query, "ok", papers, note="" if papers else "no papers found")


def evidence(searches: list[Search]) -> dict[str, Any]:
    """What is stored with an idea: every query, its outcome, the papers (no abstracts), the notes."""
    notes = sorted({s.note for s in searches if s.status in ("offline", "error")})
    checked = any(s.status == "ok" for s in searches)
    return {
        "novelty_checked": checked,
        "queries": [{"query": s.query, "status": s.status, "papers": len(s.papers)} for s in searches],
        "papers": [
            {k: v for k, v in p.items() if k != "abstract"} | {"query": s.query}
            for s in searches
            for p in s.papers
        ],
        "notes": notes or ([] if checked else ["no literature search was made"]),
    }

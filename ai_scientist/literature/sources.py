"""The public paper-search services, each parsed from its documented response shape.

Semantic Scholar (``/graph/v1/paper/search``: ``{"data": [...]}``), OpenAlex (``/works?search=``:
``{"results": [...]}``, abstracts as an inverted index), Crossref (``/works?query=``:
``{"message": {"items": [...]}}``, JATS abstracts) and arXiv (``/api/query``: an Atom feed).

Each source handles its own rate limit: at most one request per ``min_interval_s`` (the
services' published pace), a 429 or 5xx waits for ``Retry-After`` (or 2, 4, ... s) and retries
up to ``max_attempts`` times, a ``Retry-After`` longer than ``max_wait_s`` is not waited for,
and ``budget`` bounds the requests of one run. An unreachable server raises
:class:`SourceOffline`; any other failure :class:`SourceError` (:class:`SourceThrottled` for the
rate limit). Keys are sent as the service asks (header or parameter) and never appear in a
message or the cache. Every answer is cached under ``cache_dir``: a re-run asks nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..base.fileio import atomic_write_json, read_json
from .records import Record, record


class SourceOffline(Exception):
    """The service cannot be reached (no network, DNS, refused, timeout)."""


class SourceError(Exception):
    """The service answered with an error that retrying did not fix, or its budget is used."""


class SourceThrottled(SourceError):
    """The service kept answering 429 (or asked for a longer wait than we accept)."""


@dataclass
class HttpSource:
    """One service; subclasses say how to ask (:meth:`request`) and how to read (:meth:`parse`)."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    default_url: ClassVar[str] = ""
    key_hint: ClassVar[str] = "retry later"

    cache_dir: Path
    base_url: str = ""
    api_key: str | None = None
    contact: str | None = None  # an e-mail address: OpenAlex's and Crossref's polite pool
    timeout_s: float = 10.0
    max_attempts: int = 3
    max_wait_s: float = 30.0
    budget: int = 1000
    min_interval_s: float = 0.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    used: int = field(default=0, init=False)
    _last: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = (self.base_url or self.default_url).rstrip("/")

    # -- what each service differs in
    def request(self, query: str, limit: int) -> tuple[str, dict[str, str]]:
        raise NotImplementedError

    def parse(self, body: bytes) -> list[Record]:
        raise NotImplementedError

    # -- shared
    def search(self, query: str, limit: int) -> list[Record]:
        """Records matching ``query`` (cached); raises SourceOffline / SourceError."""
        key = hashlib.sha256(f"{self.name}\n{query}\n{limit}".encode()).hexdigest()[:24]
        cached = read_json(self.cache_dir / f"{key}.json", default=None)
        if isinstance(cached, dict) and isinstance(cached.get("records"), list):
            return cached["records"]
        if self._last is not None and self.min_interval_s:
            wait = self._last + self.min_interval_s - self.clock()
            if wait > 0:
                self.sleep(wait)
        url, headers = self.request(query, limit)
        try:
            found = [r for r in self.parse(self._get(url, headers)) if r.get("title")][:limit]
        except (ValueError, KeyError, TypeError, AttributeError, ET.ParseError) as exc:
            raise SourceError(f"{self.label} sent an answer that is not its documented shape: {exc}") from exc
        atomic_write_json(
            self.cache_dir / f"{key}.json", {"query": query, "source": self.name, "records": found}
        )
        return found

    def probe(self) -> None:
        """One tiny request (not cached, not counted); raises SourceOffline / SourceError."""
        url, headers = self.request("survey", 1)
        self.parse(self._get(url, headers, count=False))

    def _get(self, url: str, headers: dict[str, str], count: bool = True) -> bytes:
        headers = {"User-Agent": "ai-scientist/0.1", **headers}
        for attempt in range(1, self.max_attempts + 1):
            if count:
                if self.used >= self.budget:
                    raise SourceError(
                        f"{self.label}: its budget of {self.budget} requests for this run is used"
                    )
                self.used += 1
            self._last = self.clock()
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, headers=headers), timeout=self.timeout_s
                ) as r:
                    return r.read()
            except urllib.error.HTTPError as exc:
                if exc.code != 429 and exc.code < 500:
                    raise SourceError(f"{self.label} answered HTTP {exc.code}") from None
                wait = self._wait(exc.headers.get("Retry-After"), attempt)
                if wait is None:
                    raise SourceThrottled(
                        f"{self.label} answered HTTP {exc.code} asking to wait "
                        f"{exc.headers.get('Retry-After')} s (more than {self.max_wait_s:g} s); {self.key_hint}"
                    ) from None
                if attempt == self.max_attempts:
                    raise SourceThrottled(
                        f"{self.label} answered HTTP {exc.code} {self.max_attempts} times; {self.key_hint}"
                    ) from None
                self.sleep(wait)
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                why = getattr(exc, "reason", None) or exc
                why = getattr(why, "strerror", None) or str(why) or type(why).__name__  # no "[Errno -2]"
                raise SourceOffline(f"{self.label} unreachable at {self.base_url}: {why}") from None
        raise SourceError("unreachable")  # the loop always returns or raises

    def _wait(self, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before the next attempt; None when the server asks for too long."""
        try:
            wait = float(retry_after) if retry_after else 2.0**attempt
        except ValueError:  # an HTTP date: not worth parsing, back off instead
            wait = 2.0**attempt
        if retry_after and wait > self.max_wait_s:
            return None
        return max(0.0, min(wait, self.max_wait_s))


def _q(params: dict[str, Any]) -> str:
    return urllib.parse.urlencode({k: v for k, v in params.items() if v not in (None, "")})


@dataclass
class SemanticScholar(HttpSource):
    name: ClassVar[str] = "semantic_scholar"
    label: ClassVar[str] = "Semantic Scholar"
    default_url: ClassVar[str] = "https://api.semanticscholar.org"
    key_hint: ClassVar[str] = "set an API key (report.citations.api_key_env) or retry later"
    FIELDS: ClassVar[str] = "title,authors,year,venue,abstract,externalIds,url"

    def request(self, query: str, limit: int) -> tuple[str, dict[str, str]]:
        params = _q({"query": query, "limit": limit, "fields": self.FIELDS})
        return f"{self.base_url}/graph/v1/paper/search?{params}", (
            {"x-api-key": self.api_key} if self.api_key else {}
        )

    def parse(self, body: bytes) -> list[Record]:
        out = []
        for p in json.loads(body).get("data") or []:
            ext = p.get("externalIds") or {}
            out.append(record(
                source=self.name, paperId=p.get("paperId"), title=p.get("title"), year=p.get("year"),
                authors=[a.get("name") for a in p.get("authors") or [] if isinstance(a, dict)],
                venue=p.get("venue"), abstract=p.get("abstract"), url=p.get("url"),
                doi=ext.get("DOI"), arxiv=ext.get("ArXiv"),
            ))  # fmt: skip
        return out


def openalex_abstract(index: Any) -> str:
    """OpenAlex's ``abstract_inverted_index`` (word -> positions) as text."""
    if not isinstance(index, dict):
        return ""
    at = {pos: word for word, positions in index.items() for pos in positions or []}
    return " ".join(at[i] for i in sorted(at))


@dataclass
class OpenAlex(HttpSource):
    name: ClassVar[str] = "openalex"
    label: ClassVar[str] = "OpenAlex"
    default_url: ClassVar[str] = "https://api.openalex.org"
    key_hint: ClassVar[str] = "set a key (report.citations.openalex_key_env) or retry later"

    def request(self, query: str, limit: int) -> tuple[str, dict[str, str]]:
        params = _q({"search": query, "per-page": limit, "api_key": self.api_key, "mailto": self.contact})
        return f"{self.base_url}/works?{params}", {}

    def parse(self, body: bytes) -> list[Record]:
        out = []
        for w in json.loads(body).get("results") or []:
            locations = [w.get("primary_location") or {}, *(w.get("locations") or [])]
            arxiv = next((str(loc.get("landing_page_url")) for loc in locations
                          if "arxiv.org/abs/" in str(loc.get("landing_page_url") or "")), "")  # fmt: skip
            source = (w.get("primary_location") or {}).get("source") or {}
            out.append(record(
                source=self.name, paperId=w.get("id"), title=w.get("title") or w.get("display_name"),
                year=w.get("publication_year"), venue=source.get("display_name"),
                authors=[(a.get("author") or {}).get("display_name") for a in w.get("authorships") or []],
                abstract=openalex_abstract(w.get("abstract_inverted_index")),
                url=w.get("doi") or w.get("id"), doi=w.get("doi"), arxiv=arxiv,
            ))  # fmt: skip
        return out


@dataclass
class Crossref(HttpSource):
    name: ClassVar[str] = "crossref"
    label: ClassVar[str] = "Crossref"
    default_url: ClassVar[str] = "https://api.crossref.org"
    SELECT: ClassVar[str] = "DOI,title,author,issued,container-title,abstract,URL"

    def request(self, query: str, limit: int) -> tuple[str, dict[str, str]]:
        params = _q({"query": query, "rows": limit, "select": self.SELECT, "mailto": self.contact})
        headers = {"Crossref-Plus-API-Token": f"Bearer {self.api_key}"} if self.api_key else {}
        return f"{self.base_url}/works?{params}", headers

    def parse(self, body: bytes) -> list[Record]:
        out = []
        for it in (json.loads(body).get("message") or {}).get("items") or []:
            parts = ((it.get("issued") or {}).get("date-parts") or [[None]])[0] or [None]
            out.append(record(
                source=self.name, paperId=it.get("DOI"), title=(it.get("title") or [""])[0],
                authors=[" ".join(x for x in (a.get("given"), a.get("family")) if x) or a.get("name")
                         for a in it.get("author") or []],
                year=parts[0], venue=(it.get("container-title") or [""])[0],
                abstract=re.sub(r"<[^>]+>", " ", str(it.get("abstract") or "")),  # JATS markup
                url=it.get("URL"), doi=it.get("DOI"),
            ))  # fmt: skip
        return out


_ATOM = {"a": "http://www.w3.org/2005/Atom", "arxiv": "http://arxiv.org/schemas/atom"}


@dataclass
class Arxiv(HttpSource):
    name: ClassVar[str] = "arxiv"
    label: ClassVar[str] = "arXiv"
    default_url: ClassVar[str] = "https://export.arxiv.org"

    def request(self, query: str, limit: int) -> tuple[str, dict[str, str]]:
        terms = re.findall(r"[\w\-]+", query)[:8]
        search = " AND ".join(f"all:{t}" for t in terms) or "all:survey"
        return f"{self.base_url}/api/query?{_q({'search_query': search, 'max_results': limit})}", {}

    def parse(self, body: bytes) -> list[Record]:
        out = []
        for e in ET.fromstring(body).findall("a:entry", _ATOM):
            text = lambda tag, e=e: (e.findtext(tag, default="", namespaces=_ATOM) or "").strip()  # noqa: E731
            out.append(record(
                source=self.name, paperId=text("a:id"), title=text("a:title"), abstract=text("a:summary"),
                year=text("a:published")[:4], venue=text("arxiv:journal_ref") or "arXiv",
                authors=[a.findtext("a:name", default="", namespaces=_ATOM) for a in e.findall("a:author", _ATOM)],
                url=text("a:id"), doi=text("arxiv:doi"), arxiv=text("a:id"),
            ))  # fmt: skip
        return out


SOURCES: dict[str, type[HttpSource]] = {c.name: c for c in (SemanticScholar, OpenAlex, Crossref, Arxiv)}
# the services' published pace without a key (seconds between requests)
MIN_INTERVAL_S = {"semantic_scholar": 1.0, "openalex": 0.1, "crossref": 0.1, "arxiv": 3.0}

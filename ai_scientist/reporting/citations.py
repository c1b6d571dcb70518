"""Citations from Semantic Scholar: search, on-disk cache, 429 back-off, offline skip.

The API key is optional (environment variable named by
``report.citations.api_key_env``) and only ever sent as a request header.
Every answer is cached under ``paper/s2_cache/`` so a re-run of the writeup
asks nothing twice. A 429 waits for ``Retry-After`` (capped) and retries a
bounded number of times; an unreachable server raises ``CitationsOffline``,
which the writeup turns into a notice and a paper without references.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import atomic_write_json, read_json
from .latex import _plain

if TYPE_CHECKING:
    from ..base.config import Config

DEFAULT_BASE_URL = "https://api.semanticscholar.org"
FIELDS = "title,authors,year,venue,abstract,externalIds,url"


class CitationsOffline(Exception):
    """Semantic Scholar cannot be reached (no network, DNS, refused, timeout)."""


class CitationsError(Exception):
    """Semantic Scholar answered with an error that retrying did not fix."""


@dataclass
class S2Client:
    """A small Semantic Scholar search client; ``sleep`` is injectable so tests do not wait."""

    cache_dir: Path
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    timeout_s: float = 10.0
    max_attempts: int = 4
    max_wait_s: float = 30.0
    sleep: Callable[[float], None] = time.sleep

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """Papers matching ``query`` (cached); raises CitationsOffline / CitationsError."""
        key = hashlib.sha256(f"{query}\n{limit}".encode()).hexdigest()[:24]
        cached = read_json(self.cache_dir / f"{key}.json", default=None)
        if isinstance(cached, dict) and "data" in cached:
            return cached["data"]
        params = urllib.parse.urlencode({"query": query, "limit": limit, "fields": FIELDS})
        url = f"{self.base_url.rstrip('/')}/graph/v1/paper/search?{params}"
        data = self._get(url).get("data") or []
        atomic_write_json(self.cache_dir / f"{key}.json", {"query": query, "data": data})
        return data

    def probe(self) -> None:
        """One tiny request; raises CitationsOffline when the server cannot be reached."""
        self._get(f"{self.base_url.rstrip('/')}/graph/v1/paper/search?query=survey&limit=1&fields=title")

    def _get(self, url: str) -> dict[str, Any]:
        headers = {"User-Agent": "ai-scientist/0.1"}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        for attempt in range(1, self.max_attempts + 1):
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, headers=headers), timeout=self.timeout_s
                ) as r:
                    return json.loads(r.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                if exc.code == 429 or exc.code >= 500:
                    if attempt == self.max_attempts:
                        raise CitationsError(
                            f"Semantic Scholar answered HTTP {exc.code} {self.max_attempts} times; "
                            "set an API key (report.citations.api_key_env) or retry later"
                        ) from exc
                    self.sleep(self._wait(exc.headers.get("Retry-After"), attempt))
                    continue
                raise CitationsError(f"Semantic Scholar answered HTTP {exc.code} for {url}") from exc
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                raise CitationsOffline(f"Semantic Scholar unreachable at {self.base_url}: {exc}") from exc
            except json.JSONDecodeError as exc:
                raise CitationsError(f"Semantic Scholar sent invalid JSON: {exc}") from exc
        raise CitationsError("unreachable")  # loop always returns or raises

    def _wait(self, retry_after: str | None, attempt: int) -> float:
        try:
            wait = float(retry_after) if retry_after else 2.0**attempt
        except ValueError:
            wait = 2.0**attempt
        return max(0.0, min(wait, self.max_wait_s))


def client_for(cfg: Config, cache_dir: Path, base_url: str, environ: Mapping[str, str]) -> S2Client:
    """An S2Client using the key from ``report.citations.api_key_env`` when set."""
    key = environ.get(cfg.report.citations.api_key_env) or None
    return S2Client(cache_dir=cache_dir, base_url=base_url, api_key=key)


def _bib_field(text: Any) -> str:
    # braces and backslashes confuse bibtex's brace counting: drop them, escape the rest
    return _plain(re.sub(r"[{}\\]", "", str(text or "")))


def bib_key(paper: dict[str, Any], taken: set[str]) -> str:
    authors = paper.get("authors") or [{}]
    last = (authors[0].get("name") or "anon").split()[-1] if authors else "anon"
    word = next((w for w in re.findall(r"[A-Za-z]+", paper.get("title") or "") if len(w) > 3), "paper")
    base = re.sub(r"[^a-z0-9]", "", f"{last}{paper.get('year') or ''}{word}".lower()) or "ref"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}{n}", n + 1
    taken.add(key)
    return key


def to_bibtex(key: str, paper: dict[str, Any]) -> str:
    authors = " and ".join(_bib_field(a.get("name")) for a in paper.get("authors") or [] if a.get("name"))
    fields = {
        "title": _bib_field(paper.get("title")),
        "author": authors or "Anonymous",
        "year": str(paper.get("year") or ""),
        "journal": _bib_field(paper.get("venue")) or "arXiv",
        "url": re.sub(r"[{}\\%#\s]", "", str(paper.get("url") or "")),
    }
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items() if v)
    return f"@article{{{key},\n{body}\n}}\n"


def _title_key(title: Any) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", str(title or "").lower()))


def collect(
    client: S2Client,
    queries: list[str],
    max_results: int,
    seen: set[str] | None = None,
    keys: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Search each query; papers not in ``seen`` (by id or by title: a preprint and its published
    version are one paper) with a bibtex key not in ``keys``, in first-seen order. Pass the same
    ``seen`` and ``keys`` to later rounds to deduplicate across them."""
    seen = set() if seen is None else seen
    keys = set() if keys is None else keys
    out: list[dict[str, Any]] = []
    for query in queries:
        for paper in client.search(query, max_results):
            pid = str(paper.get("paperId") or "")
            title = _title_key(paper.get("title"))
            if not title or title in seen or (pid and pid in seen):
                continue
            seen.update(x for x in (pid, title) if x)
            out.append({"key": bib_key(paper, keys), "query": query, **paper})
    return out


def check_bibtex(entry: str) -> list[str]:
    """Problems of one BibTeX entry (empty when bibtex will accept it): key, braces, fields."""
    problems = []
    m = re.match(r"@(\w+)\{([^,\s{}]+),", entry)
    if not m:
        return ["no '@type{key,' header"]
    depth = 0
    for ch in entry:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        problems.append("unbalanced braces")
    for name in ("title", "author"):
        f = re.search(rf"\b{name} = \{{(.*?)\}},?\n", entry)
        if not f or not f.group(1).strip():
            problems.append(f"empty or missing {name}")
    return problems

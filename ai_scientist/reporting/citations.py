"""Citations: the BibTeX of the records the literature sources returned, and their collection.

The searching itself is :mod:`ai_scientist.literature` (the user's library, then Semantic
Scholar, OpenAlex, Crossref and arXiv, each with its rate-limit handling and cache). Every entry
of ``references.bib`` is built here from a record a source returned, never from the model's
text: a ``\\cite`` key outside these records is no reference (see :func:`unknown_cite_keys`).
``S2Client`` / ``CitationsOffline`` / ``CitationsError`` are the Semantic Scholar source and the
sources' errors under their earlier names.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from ..literature.records import identities
from ..literature.sources import SemanticScholar, SourceError, SourceOffline
from .latex import _REF, _plain

DEFAULT_BASE_URL = SemanticScholar.default_url
S2Client = SemanticScholar
CitationsOffline = SourceOffline
CitationsError = SourceError


def _bib_field(text: Any) -> str:
    # braces and backslashes confuse bibtex's brace counting: drop them, escape the rest
    return _plain(re.sub(r"[{}\\]", "", str(text or "")))


def bib_key(paper: dict[str, Any], taken: set[str]) -> str:
    """The user's own key (a library's BibTeX entry) when it is free, else ``lastYEARword``."""
    own = str(paper.get("key") or "")
    if re.fullmatch(r"[A-Za-z0-9:_.\-]+", own) and own not in taken:
        taken.add(own)
        return own
    authors = paper.get("authors") or [{}]
    last = (authors[0].get("name") or "anon").split()[-1] if authors else "anon"
    word = next((w for w in re.findall(r"[A-Za-z]+", paper.get("title") or "") if len(w) > 3), "paper")
    base = re.sub(r"[^a-z0-9]", "", f"{last}{paper.get('year') or ''}{word}".lower()) or "ref"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}{n}", n + 1
    taken.add(key)
    return key


def first_author(paper: dict[str, Any]) -> str:
    """ "Surname" or "Surname et al." of a record's authors ("" when it names none): the writer
    may write "X et al." only from what it is shown (relay s7 ln1 040)."""
    names = [str(a.get("name") or "").strip() for a in paper.get("authors") or [] if isinstance(a, dict)]
    names = [n for n in names if n]
    if not names:
        return ""
    first = names[0]
    # BibTeX's "Surname, Given" or a service's "Given Surname"
    surname = first.split(",")[0].strip() if "," in first else first.split()[-1]
    return surname + (" et al." if len(names) > 1 else "")


def to_bibtex(key: str, paper: dict[str, Any]) -> str:
    """One entry from a record: title, authors, year, venue, DOI, arXiv id, URL."""
    authors = " and ".join(_bib_field(a.get("name")) for a in paper.get("authors") or [] if a.get("name"))
    arxiv = str(paper.get("arxiv") or "")
    venue = _bib_field(paper.get("venue"))
    if arxiv and (not venue or venue.lower() == "arxiv"):
        venue = f"arXiv preprint arXiv:{arxiv}"
    fields = {
        "title": _bib_field(paper.get("title")),
        "author": authors or "Anonymous",
        "year": str(paper.get("year") or ""),
        "journal": venue,
        "doi": re.sub(r"[{}\\%#\s]", "", str(paper.get("doi") or "")),
        "eprint": re.sub(r"[^A-Za-z0-9./\-]", "", arxiv),
        "url": re.sub(r"[{}\\%#\s]", "", str(paper.get("url") or "")),
    }
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items() if v)
    kind = "article" if venue else "misc"  # no venue known (a PDF of the user's): no empty journal
    return f"@{kind}{{{key},\n{body}\n}}\n"


def collect(
    client: Any,
    queries: list[str],
    max_results: int,
    seen: set[str] | None = None,
    keys: set[str] | None = None,
    hits: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Search each query (``client``: a :class:`~ai_scientist.literature.cascade.Cascade` or one
    source); papers not in ``seen`` (by DOI, arXiv id or title: a preprint and its published
    version are one paper) with a bibtex key not in ``keys``, in first-seen order. Pass the same
    ``seen`` and ``keys`` to later rounds to deduplicate across them; ``hits`` gets, per query, how
    many papers the search returned (new or not)."""
    seen = set() if seen is None else seen
    keys = set() if keys is None else keys
    out: list[dict[str, Any]] = []
    for query in queries:
        results = client.search(query, max_results)
        if hits is not None:
            hits[query] = len(results)
        for paper in results:
            ids = identities(paper)
            if not ids or ids & seen:
                continue
            seen.update(ids)
            out.append({**paper, "key": bib_key(paper, keys), "query": query})
    return out


def unknown_cite_keys(texts: Collection[str], known: Collection[str]) -> list[str]:
    """The ``\\cite`` keys of ``texts`` that are no record's key (made up by the writer), sorted."""
    found = {
        k.strip()
        for t in texts
        for m in _REF.finditer(str(t or ""))
        if m.group(1).startswith("cite")
        for k in m.group(2).split(",")
        if k.strip()
    }
    return sorted(found - set(known))


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

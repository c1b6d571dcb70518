"""One paper record for every source, and the merge of duplicates across sources.

A record is a dict: ``title``, ``authors`` (``[{"name": ...}]``), ``year``, ``venue``,
``abstract``, ``url``, ``doi``, ``arxiv`` (id without version), ``paperId`` (the source's own
id), ``sources`` (the names of the sources that returned it) and, for the user's library,
``key`` (the user's BibTeX key) and ``text`` (a PDF's first pages). Two records are one paper
when they share a DOI, an arXiv id or a title equal modulo case and punctuation; the first
record's fields win, the later one fills what it lacks.
"""

from __future__ import annotations

import re
from typing import Any

Record = dict[str, Any]

_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.I)
_ARXIV_ID = re.compile(r"(\d{4}\.\d{4,5}|[a-z\-]+(?:\.[a-z]{2})?/\d{7})(v\d+)?", re.I)


def title_key(title: Any) -> str:
    """The title modulo case, punctuation and spacing."""
    return " ".join(re.findall(r"[a-z0-9]+", str(title or "").lower()))


def norm_doi(doi: Any) -> str:
    d = str(doi or "").strip().lower()
    d = re.sub(r"^(https?://)?(dx\.)?doi\.org/", "", d)
    return d.removeprefix("doi:")


def norm_arxiv(value: Any) -> str:
    """An arXiv id without its version (``2101.00001``), from an id, an abs URL or an arXiv DOI."""
    v = str(value or "").strip()
    m = _ARXIV_DOI.match(v)
    if m:
        v = m.group(1)
    v = re.sub(r"^(https?://)?(export\.)?arxiv\.org/(abs|pdf)/", "", v, flags=re.I).removesuffix(".pdf")
    v = v.removeprefix("arXiv:").removeprefix("arxiv:")
    m = _ARXIV_ID.fullmatch(v)
    return m.group(1).lower() if m else ""


def record(**fields: Any) -> Record:
    """A record with every field present (empty when unknown) and its identifiers normalised."""
    authors = [{"name": str(a).strip()} for a in fields.pop("authors", None) or [] if str(a or "").strip()]
    r: Record = {
        "title": " ".join(str(fields.pop("title", "") or "").split()),
        "authors": authors,
        "year": _year(fields.pop("year", None)),
        "venue": " ".join(str(fields.pop("venue", "") or "").split()),
        "abstract": " ".join(str(fields.pop("abstract", "") or "").split()),
        "url": str(fields.pop("url", "") or ""),
        "doi": norm_doi(fields.pop("doi", "")),
        "arxiv": norm_arxiv(fields.pop("arxiv", "")),
        "paperId": str(fields.pop("paperId", "") or ""),
        "sources": [fields.pop("source")] if fields.get("source") else [],
    }
    if not r["arxiv"] and _ARXIV_DOI.match(r["doi"]):
        r["arxiv"] = norm_arxiv(r["doi"])
    r.update({k: v for k, v in fields.items() if v not in (None, "")})
    return r


def _year(value: Any) -> int | None:
    m = re.search(r"(1[89]|20)\d\d", str(value or ""))
    return int(m.group(0)) if m else None


def identities(r: Record) -> set[str]:
    ids = {f"title:{title_key(r.get('title'))}"} if title_key(r.get("title")) else set()
    if r.get("doi"):
        ids.add(f"doi:{r['doi']}")
    if r.get("arxiv"):
        ids.add(f"arxiv:{r['arxiv']}")
    return ids


def merge(into: Record, other: Record) -> Record:
    """``into`` with the fields it lacks taken from ``other`` (both are the same paper)."""
    for k, v in other.items():
        if k == "sources":
            into["sources"] = into.get("sources", []) + [s for s in v if s not in into.get("sources", [])]
        elif not into.get(k) and v:
            into[k] = v
    return into


def merge_all(records: list[Record], more: list[Record]) -> list[Record]:
    """``records`` then each of ``more`` that is a new paper; a duplicate fills its first copy."""
    out = list(records)
    index: dict[str, Record] = {i: r for r in out for i in identities(r)}
    for r in more:
        same = next((index[i] for i in identities(r) if i in index), None)
        if same is not None:
            merge(same, r)
            target = same
        else:
            target = dict(r)
            out.append(target)
        index.update({i: target for i in identities(target)})
    return out

"""The user's own library: BibTeX files and PDFs, searched offline (``--references``,
``report.references``).

A ``.bib`` entry becomes a record with its own key and fields (``abstract`` included); a PDF's
first pages (pypdf) become its ``text``, and its title, authors and year come from the PDF's
metadata or its first lines. A PDF whose title or DOI matches an entry of a ``.bib`` adds its
text to that entry. A search scores each record by the query's words found in its title (3)
and in its abstract or text (1): the records with a score, best first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..base.errors import ConfigError
from .records import Record, merge_all, record

TEXT_CHARS = 4000  # of a PDF's first pages kept as the record's text
PAGES = 2
STOPWORDS = frozenset(
    "the and for with from that this into over under about using based via are was were their its "
    "our new study analysis approach method methods model models learning paper".split()
)


# ------------------------------------------------------------------ BibTeX --


def _bib_value(text: str, i: int) -> tuple[str, int]:
    """The value starting at ``text[i]`` (``{...}``, ``"..."`` or a bare word) and the index after it."""
    if text[i] == "{":
        depth, j = 0, i
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i + 1 : j], j + 1
            j += 1
        raise ValueError("unbalanced braces")
    if text[i] == '"':
        j = text.index('"', i + 1)
        return text[i + 1 : j], j + 1
    m = re.match(r"[^,}\s]+", text[i:])
    return (m.group(0) if m else ""), i + (m.end() if m else 0)


def parse_bibtex(text: str) -> list[dict[str, str]]:
    """Entries as ``{"ENTRYTYPE", "ID", field: value}`` (values with braces and accents removed)."""
    entries = []
    for m in re.finditer(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text):
        kind = m.group(1).lower()
        if kind in ("comment", "string", "preamble"):
            continue
        entry = {"ENTRYTYPE": kind, "ID": m.group(2)}
        i = m.end()
        while i < len(text):
            f = re.compile(r"\s*(\w[\w\-]*)\s*=\s*").match(text, i)
            if not f:
                break
            value, i = _bib_value(text, f.end())
            entry[f.group(1).lower()] = _plain(value)
            s = re.compile(r"\s*,?").match(text, i)
            i = s.end() if s else i
            if text[i : i + 1] == "}" or re.match(r"\s*}", text[i:]):
                break
        entries.append(entry)
    return entries


def _plain(value: str) -> str:
    value = re.sub(r"\\[`'^\"~=.uvHcdbk]\{?(\w)\}?", r"\1", value)  # accents: keep the letter
    return " ".join(value.replace("{", "").replace("}", "").split())


def bib_records(path: Path) -> list[Record]:
    try:
        entries = parse_bibtex(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"references {path}: cannot read it as BibTeX: {exc}") from None
    out = []
    for e in entries:
        if not e.get("title"):
            continue
        out.append(record(
            source="library", key=e["ID"], title=e["title"], year=e.get("year"),
            authors=[a for a in re.split(r"\s+and\s+", e.get("author", "")) if a],
            venue=e.get("journal") or e.get("booktitle") or e.get("publisher"),
            abstract=e.get("abstract"), url=e.get("url"), doi=e.get("doi"),
            arxiv=e.get("eprint") if "arxiv" in (e.get("archiveprefix") or e.get("eprinttype") or "").lower() else "",
            paperId=f"{path.name}#{e['ID']}", file=str(path),
        ))  # fmt: skip
    return out


# -------------------------------------------------------------------- PDF --


def pdf_record(path: Path) -> Record:
    """A record from the PDF's metadata and first pages; ConfigError when pypdf cannot read it."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        text = "\n".join((page.extract_text() or "") for page in reader.pages[:PAGES])
        meta: Any = reader.metadata or {}
    except (OSError, PdfReadError, ValueError) as exc:
        raise ConfigError(f"references {path}: pypdf cannot read this PDF: {exc}") from None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    title = str(meta.get("/Title") or "").strip() or (lines[0] if lines else path.stem.replace("_", " "))
    authors = [a.strip() for a in re.split(r",|;|\band\b", str(meta.get("/Author") or "")) if a.strip()]
    m = re.search(r"\babstract\b[:.\s]*(.+)", text, re.I | re.S)
    abstract = (m.group(1) if m else "\n".join(lines[1:]))[:1500]
    doi = re.search(r"\b10\.\d{4,9}/[^\s\"<>]+", text)
    year = re.search(r"\b(19|20)\d\d\b", text)
    return record(
        source="library", title=title, authors=authors, abstract=abstract,
        year=year.group(0) if year else meta.get("/CreationDate"),
        doi=doi.group(0).rstrip(".,;") if doi else "", text=" ".join(text.split())[:TEXT_CHARS],
        paperId=path.name, file=str(path),
    )  # fmt: skip


# ---------------------------------------------------------------- library --


def load_library(paths: Sequence[str | Path]) -> list[Record]:
    """Every record of the given ``.bib`` files, PDFs and folders of them (searched recursively);
    a PDF matching a BibTeX entry (title or DOI) is merged into it. ConfigError for a path that
    does not exist or is neither."""
    bibs: list[Record] = []
    pdfs: list[Record] = []
    for given in paths:
        p = Path(given).expanduser()
        if p.is_dir():
            files = sorted(x for x in p.rglob("*") if x.suffix.lower() in (".bib", ".pdf"))
        elif p.is_file() and p.suffix.lower() in (".bib", ".pdf"):
            files = [p]
        else:
            raise ConfigError(
                f"references {p}: not a .bib file, a PDF or a folder of them"
                + ("" if p.exists() else " (it does not exist)")
            )
        if not files:
            raise ConfigError(f"references {p}: the folder holds no .bib file and no PDF")
        for f in files:
            if f.suffix.lower() == ".bib":
                found = bib_records(f)
                if not found:
                    raise ConfigError(f"references {f}: no BibTeX entry with a title in it")
                bibs += found
            else:
                pdfs.append(pdf_record(f))
    return merge_all(merge_all([], bibs), pdfs)


def _words(text: Any) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", str(text or "").lower()) if len(w) > 2 and w not in STOPWORDS}


class LocalLibrary:
    """The user's library as a source: searched first, never offline, never throttled."""

    name = "library"
    label = "your library"

    def __init__(self, records: list[Record]):
        self.records = records

    def search(self, query: str, limit: int) -> list[Record]:
        terms = _words(query)
        scored = []
        for i, r in enumerate(self.records):
            title, body = _words(r.get("title")), _words(f"{r.get('abstract')} {r.get('text')}")
            score = sum(3 * (t in title) + (t in body) for t in terms)
            if score:
                scored.append((-score, i, r))
        return [dict(r) for _, _, r in sorted(scored, key=lambda x: x[:2])[:limit]]

    def probe(self) -> None:
        """The library is on this machine: nothing to reach."""

    def __len__(self) -> int:
        return len(self.records)

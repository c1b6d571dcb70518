"""What of a resource's contents a prompt shows: its file tree and excerpts of the relevant files.

The resource-index layer lists every item (digest, size, where it is in the sandbox); for the
items that are staged it also gives a short tree (the first ``TREE_FILES`` files with their
sizes) and, for the ``EXCERPT_FILES`` text files most relevant to the node, their contents: the
whole file up to ``EXCERPT_CHARS`` characters, its head otherwise, with the path where the code
can read the rest. The model gets the rest of a file by having its program read it at run time
(the file is mounted read-only in every sandbox at the same relative path); nothing else is
needed, and it is what the code that adapts a template would do anyway.

Relevance is lexical and deterministic: the words (3+ letters, no stop words) shared with the
task text, counted three times in the item's id, summary, tags and the file's path and once in
the file's first lines; ties keep the index order, then the path order. Files are ranked by name
first and only the best ``MAX_READ`` are opened, so a dataset of thousands of files costs a
bounded amount of reading per prompt. Only regular files are
read (a symlink is never followed, so a staged item cannot point the orchestrator at a host
file), and only text (no NUL byte in the first 8 KiB, valid UTF-8).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXCERPT_FILES = 4  # files shown with contents (top-K by relevance; all of them when fewer)
EXCERPT_CHARS = 2000  # a file up to this many characters is shown whole, a longer one by its head
TREE_FILES = 12  # files listed per item
MAX_FILES = 5000  # files walked per item
MAX_READ = 64  # files opened per prompt to find the excerpts (the best named first)
SNIFF_BYTES = 8192

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the and for with from this that these those into onto are was were has have had not but you your "
    "its our can will use using used each per all any one two out how what when where which who why "
    "data file files".split()
)


def words(text: str) -> set[str]:
    """The lower-case words of ``text`` that carry meaning for relevance (3+ characters, no stop words)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


@dataclass(frozen=True)
class ResourceFile:
    """One regular file of a staged item: where it is in the sandbox and on the host."""

    item_id: str
    rel: str  # path inside the item
    size: int
    host: Path  # never shown to the model

    @property
    def sandbox_path(self) -> str:
        return f"resources/{self.item_id}/{self.rel}"


@dataclass(frozen=True)
class Excerpt:
    file: ResourceFile
    text: str
    whole: bool

    @property
    def fence(self) -> str:
        """A code fence longer than any run of backticks in the text (a file cannot close it)."""
        longest = max((len(m) for m in re.findall(r"`+", self.text)), default=0)
        return "`" * max(3, longest + 1)


def item_files(item_root: Path, item_id: str) -> list[ResourceFile]:
    """The regular files under a staged item (sorted; ``.git`` and symlinks left out)."""
    try:
        top = Path(item_root).resolve(strict=True)
    except OSError:
        return []
    if top.is_file():
        return [ResourceFile(item_id, top.name, top.stat().st_size, top)]
    out: list[ResourceFile] = []
    for base, dirs, names in os.walk(top, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(names):
            path = Path(base) / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(ResourceFile(item_id, path.relative_to(top).as_posix(), st.st_size, path))
            if len(out) >= MAX_FILES:
                return out
    return out


def read_text_head(path: Path, max_chars: int) -> tuple[str, bool] | None:
    """(the first ``max_chars`` characters, whether that is the whole file), or None for a binary
    file or one that cannot be opened without following a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(max(SNIFF_BYTES, max_chars * 4 + 4))
        at_end = not fh.read(1)
    sniff = raw[:SNIFF_BYTES]
    if b"\0" in sniff:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if at_end or exc.start < len(raw) - 3:  # not just a character cut at the read boundary
            return None
        text = raw[: exc.start].decode("utf-8")
        at_end = False
    if len(text) > max_chars:
        return text[:max_chars], False
    return text, at_end


def _named(item: Any, f: ResourceFile) -> set[str]:
    return words(
        " ".join([item.id, item.summary or "", item.klass or "", *item.tags, f.rel.replace("/", " ")])
    )


def select_excerpts(
    items: list[tuple[Any, list[ResourceFile]]],
    query: str,
    k: int = EXCERPT_FILES,
    max_chars: int = EXCERPT_CHARS,
) -> list[Excerpt]:
    """The ``k`` most relevant text files of the staged ``items`` [(item, its files)], with excerpts.

    Files are first ranked by their names (no reading); only the first ``MAX_READ`` of them are
    opened, so an item of thousands of files costs a bounded amount of reading per prompt."""
    q = words(query)
    by_name = sorted(
        (
            (-3 * len(q & _named(item, f)), order, f.rel, item, f)
            for order, (item, files) in enumerate(items)
            for f in files
        ),
        key=lambda r: r[:3],
    )
    ranked: list[tuple[int, int, str, Excerpt]] = []
    for name_score, order, rel, _item, f in by_name[:MAX_READ]:
        got = read_text_head(f.host, max_chars)
        if got is None:
            continue
        text, whole = got
        score = name_score - len(q & words(text[:SNIFF_BYTES]))
        ranked.append((score, order, rel, Excerpt(f, text, whole)))
    ranked.sort(key=lambda r: r[:3])
    return [r[3] for r in ranked[:k]]


def tree_summary(files: list[ResourceFile], limit: int = TREE_FILES) -> tuple[list[ResourceFile], int]:
    """(the first ``limit`` files of an item, how many more there are)."""
    return files[:limit], max(0, len(files) - limit)

"""Edits instead of rewrites: a child's answer as a list of edits against its parent's files.

An edit is ``{"file", "anchor", "action", "text"}``:

``file``
    a path among the parent's files (a new file is given whole, in the answer's ``files``);
``anchor``
    one or more whole, consecutive lines of that file, exact (whitespace included; one trailing
    newline is ignored), that occur exactly once in the file as it is when the edit applies;
``action``
    ``replace`` (the anchor's lines become ``text``'s lines; an empty ``text`` deletes them) or
    ``insert_after`` (``text``'s lines go after the anchor's last line);
``text``
    the new lines (one trailing newline is ignored: ``"\\n"`` is one empty line, ``""`` none).

Edits apply in order, each to the result of the ones before (an anchor may be a line an earlier
edit wrote). An anchor that does not occur, or occurs more than once, is refused with a message
naming the edit, the file, the anchor and the nearest existing line (or the lines of every
match); :func:`apply_edits` checks every edit and raises :class:`EditError` with all the problems
at once, so one retry can fix them all, and changes nothing (all or nothing).

:func:`edits_schema` is the JSON schema of the list for the backend: ``file`` is an enum of the
parent's paths and, with ``anchor_lines``, ``anchor`` an enum of the lines that are unique in
their file (so a constrained decoder can only pick an existing line); with it, a backend without
constrained decoding still gets every answer checked here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base.artifacts import CodeAnswer

ACTIONS = ("replace", "insert_after")
MAX_EDITS = 40
MAX_ANCHOR_CHARS = 4_000
MAX_TEXT_CHARS = 30_000
MAX_ANCHOR_ENUM = 400  # at most this many anchor lines in a constrained schema (grammar size)
_SHOWN = 160  # characters of an anchor or line quoted in a message


@dataclass(frozen=True)
class Edit:
    file: str
    anchor: str
    action: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "anchor": self.anchor, "action": self.action, "text": self.text}


class EditError(ValueError):
    """Some edits could not be applied; ``problems`` holds one precise message per failed edit."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


def _lines(text: str) -> list[str]:
    """The lines of a block: one trailing newline ignored; the empty text has no lines (``"\\n"``
    is one empty line)."""
    if not text:
        return []
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def _quote(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def find_block(lines: list[str], block: list[str]) -> list[int]:
    """0-based start indexes of every occurrence of ``block`` as consecutive whole lines."""
    n = len(block)
    if n == 0:
        return []
    first = block[0]
    return [i for i in range(len(lines) - n + 1) if lines[i] == first and lines[i : i + n] == block]


def nearest_line(lines: list[str], anchor: list[str]) -> tuple[int, str] | None:
    """(1-based number, text) of the file line most like the anchor's first line missing from the
    file (its first line when each line exists but not as one consecutive block)."""
    present = set(lines)
    probe = next((a for a in anchor if a not in present), anchor[0])
    best: tuple[float, int] | None = None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        ratio = difflib.SequenceMatcher(None, probe.strip(), line.strip(), autojunk=False).ratio()
        if best is None or ratio > best[0]:
            best = (ratio, i)
    return None if best is None else (best[1] + 1, lines[best[1]])


def parse_edits(raw: Any) -> tuple[list[Edit], list[str]]:
    """Edits from an answer's ``edits`` value, and the problems of the malformed entries."""
    if not isinstance(raw, list):
        return [], [f"edits must be a list of objects, got {type(raw).__name__}"]
    if len(raw) > MAX_EDITS:
        return [], [f"edits: {len(raw)} edits, at most {MAX_EDITS}"]
    out, problems = [], []
    for k, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            problems.append(f"edit {k}: must be an object with file, anchor, action, text")
            continue
        missing = [key for key in ("file", "anchor", "action", "text") if not isinstance(item.get(key), str)]
        if missing:
            problems.append(f"edit {k}: missing or not a string: {', '.join(missing)}")
            continue
        if item["action"] not in ACTIONS:
            problems.append(f"edit {k}: action {item['action']!r} is not one of {', '.join(ACTIONS)}")
            continue
        if len(item["anchor"]) > MAX_ANCHOR_CHARS or len(item["text"]) > MAX_TEXT_CHARS:
            problems.append(f"edit {k}: anchor or text too long ({MAX_ANCHOR_CHARS}/{MAX_TEXT_CHARS} chars)")
            continue
        out.append(Edit(item["file"], item["anchor"], item["action"], item["text"]))
    return out, problems


def apply_edits(files: dict[str, str], edits: list[Edit]) -> dict[str, str]:
    """The parent's ``files`` (path -> text) with ``edits`` applied in order; a new dict, the
    input unchanged. Raises :class:`EditError` naming every edit that cannot apply."""
    current = {path: text.split("\n") for path, text in files.items()}
    problems: list[str] = []
    for k, edit in enumerate(edits, 1):
        where = f"edit {k} ({edit.action}) in {edit.file!r}"
        lines = current.get(edit.file)
        if lines is None:
            known = ", ".join(repr(p) for p in sorted(files)) or "none"
            problems.append(
                f"{where}: no such file among the parent's files ({known}); give a new file whole in 'files'"
            )
            continue
        anchor = _lines(edit.anchor)
        if not any(a.strip() for a in anchor):
            problems.append(f"{where}: the anchor is empty or blank; quote an existing line of the file")
            continue
        if edit.action not in ACTIONS:
            problems.append(f"{where}: action must be one of {', '.join(ACTIONS)}")
            continue
        hits = find_block(lines, anchor)
        if not hits:
            near = nearest_line(lines, anchor)
            hint = (
                f"; nearest existing line {near[0]}: {_quote(near[1])}" if near else "; the file has no lines"
            )
            problems.append(f"{where}: anchor not found: {_quote(edit.anchor.rstrip(chr(10)))}{hint}")
            continue
        if len(hits) > 1:
            at = ", ".join(str(i + 1) for i in hits[:10])
            problems.append(
                f"{where}: anchor {_quote(edit.anchor.rstrip(chr(10)))} matches {len(hits)} times "
                f"(lines {at}); add neighbouring lines to the anchor so it matches once"
            )
            continue
        start, end = hits[0], hits[0] + len(anchor)
        new = _lines(edit.text)
        if edit.action == "replace":
            current[edit.file] = lines[:start] + new + lines[end:]
        else:
            current[edit.file] = lines[:end] + new + lines[end:]
    if problems:
        raise EditError(problems)
    return {path: "\n".join(lines) for path, lines in current.items()}


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in after if before.get(p) != after[p])


def unique_lines(files: dict[str, str], limit: int = MAX_ANCHOR_ENUM) -> list[str]:
    """Non-blank lines that occur exactly once in their file (valid one-line anchors), in file
    order, at most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    for path in sorted(files):
        lines = files[path].split("\n")
        counts: dict[str, int] = {}
        for line in lines:
            counts[line] = counts.get(line, 0) + 1
        for line in lines:
            if line.strip() and counts[line] == 1 and line not in seen and len(line) <= MAX_ANCHOR_CHARS:
                seen.add(line)
                out.append(line)
                if len(out) >= limit:
                    return out
    return out


def edits_schema(files: dict[str, str], *, anchor_lines: bool = False) -> dict[str, Any]:
    """The JSON schema of an ``edits`` list against ``files`` (see the module docstring)."""
    anchor: dict[str, Any] = {"type": "string", "maxLength": MAX_ANCHOR_CHARS}
    choices = unique_lines(files) if anchor_lines else []
    if choices:
        anchor = {"type": "string", "enum": choices}
    paths = sorted(files)
    file_schema: dict[str, Any] = (
        {"type": "string", "enum": paths} if paths else {"type": "string", "maxLength": 200}
    )
    return {
        "type": "array",
        "maxItems": MAX_EDITS,
        "items": {
            "type": "object",
            "properties": {
                "file": file_schema,
                "anchor": anchor,
                "action": {"type": "string", "enum": list(ACTIONS)},
                "text": {"type": "string", "maxLength": MAX_TEXT_CHARS},
            },
            "required": ["file", "anchor", "action", "text"],
        },
    }


def edits_validator(files: dict[str, str]) -> Callable[[Any], dict[str, str]]:
    """A validator for the LLM client: an answer whose ``edits`` do not apply to ``files`` raises
    ``ValueError`` with every precise problem, which the client's repair round feeds back to the
    model; a good answer yields the resulting files."""

    def check(answer: Any) -> dict[str, str]:
        raw = answer.get("edits") if isinstance(answer, dict) else None
        edits, problems = parse_edits(raw)
        if problems:
            raise ValueError("; ".join(problems))
        try:
            return apply_edits(files, edits)
        except EditError as exc:
            raise ValueError("edits: " + "; ".join(exc.problems)) from None

    return check


def _text_of(lines: list[str]) -> str:
    """The ``text`` of an edit for ``lines`` (a trailing newline, so one empty line survives)."""
    return "\n".join(lines) + "\n" if lines else ""


def _unique_window(cur: list[str], a: int, b: int) -> tuple[int, int]:
    """Grow ``cur[a:b]`` by neighbouring lines until it is a non-blank block occurring once."""
    while True:
        block = cur[a:b]
        if block and any(x.strip() for x in block) and len(find_block(cur, block)) == 1:
            return a, b
        if b < len(cur) and (a == 0 or (b - a) % 2 == 0):
            b += 1
        elif a > 0:
            a -= 1
        else:  # the whole file: unique by definition unless blank
            return a, b


def make_edits(before: dict[str, str], after: dict[str, str]) -> list[Edit]:
    """Edits that turn ``before[path]`` into ``after[path]`` for every path in both (line diff,
    bottom-up so each anchor's position is still the parent's; each anchor grown with
    neighbouring lines until it is unique): ``apply_edits(before, make_edits(before, after))``
    equals ``before`` updated with those files. Paths only in ``after`` are new files (whole)."""
    out: list[Edit] = []
    for path in sorted(set(before) & set(after)):
        try:
            out += _file_edits(path, before[path], after[path])
        except EditError:
            # a change next to nothing but blank lines: one edit replacing the whole file
            if not before[path].strip():
                raise
            out.append(
                Edit(path, _text_of(before[path].split("\n")), "replace", _text_of(after[path].split("\n")))
            )
    return out


def _file_edits(path: str, before: str, after: str) -> list[Edit]:
    out: list[Edit] = []
    cur = before.split("\n")
    new = after.split("\n")
    ops = difflib.SequenceMatcher(None, cur, new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):
        if tag == "equal":
            continue
        if i1 == i2 and cur:  # pure insertion: anchor the line before (or the first line)
            a, b = _unique_window(cur, i1 - 1 if i1 > 0 else 0, i1 if i1 > 0 else 1)
        else:
            a, b = _unique_window(cur, i1, i2)
        if not cur[a:b] or not any(x.strip() for x in cur[a:b]):
            raise EditError([f"{path!r}: no line to anchor an edit on; give the file whole"])
        if tag == "insert" and b == i1:
            edit = Edit(path, _text_of(cur[a:b]), "insert_after", _text_of(new[j1:j2]))
        else:
            lo, hi = min(a, i1), max(b, i2)
            edit = Edit(path, _text_of(cur[lo:hi]), "replace", _text_of(cur[lo:i1] + new[j1:j2] + cur[i2:hi]))
        out.append(edit)
        cur = apply_edits({path: "\n".join(cur)}, [edit])[path].split("\n")
    return out


def expand_answer(parent_files: dict[str, str], answer: dict[str, Any]) -> dict[str, Any]:
    """A code answer with ``edits`` as a whole-files answer: every parent file, edited, plus the
    answer's own ``files`` (new files, or whole replacements), in the parent's order then the new
    ones; ``edits`` kept as given, so the node records both. An answer with files but no edits
    is returned as it is; one with neither keeps the parent's files unchanged (``edits: []``).
    Raises :class:`EditError` when an edit does not apply."""
    if not answer.get("edits"):
        if answer.get("files"):
            return answer
        return {**answer, "edits": [], "files": [{"path": p, "content": t} for p, t in parent_files.items()]}
    edits, problems = parse_edits(answer["edits"])
    if problems:
        raise EditError(problems)
    edited = apply_edits(parent_files, edits)
    whole = {f["path"]: f for f in answer.get("files") or [] if isinstance(f, dict) and "path" in f}
    files = [whole.pop(p, {"path": p, "content": edited[p]}) for p in parent_files]
    return {**answer, "files": files + list(whole.values())}


def text_files(answer: CodeAnswer | dict[str, Any] | None) -> dict[str, str]:
    """The UTF-8 files of a code answer (path -> content): what edits can anchor on. A raw answer
    (a dict: the model's, before its edits are applied and it is checked) is read leniently."""
    if isinstance(answer, CodeAnswer):
        return answer.text_files()
    out: dict[str, str] = {}
    for f in (answer or {}).get("files") or []:
        if isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("content"), str):
            if f.get("encoding", "utf-8") == "utf-8":
                out[f["path"]] = f["content"]
    return out


EDITS_DESCRIPTION = (
    "Instead of giving every file whole in 'files': edits against the parent's files, applied in order. "
    "anchor: one or more whole consecutive lines of that file, exact, occurring once; action replace "
    "(text replaces the anchor's lines; empty text deletes them) or insert_after (text goes after them). "
    'Both work on whole lines: one newline at the end of anchor or text is ignored, so "x" and "x\\n" '
    'are the same one line (text needs no newline of its own) and "\\n" is one empty line. '
    "'files' then holds only new files (or a file given whole)."
)


def with_edits(
    schema: dict[str, Any], files: dict[str, str], *, anchor_lines: bool = False
) -> dict[str, Any]:
    """A code-answer ``schema`` that also accepts ``edits`` against ``files`` (the parent's), with
    ``files`` no longer required (an answer may give edits only)."""
    edits = {**edits_schema(files, anchor_lines=anchor_lines), "description": EDITS_DESCRIPTION}
    return {
        **schema,
        "properties": {**schema["properties"], "edits": edits},
        "required": [r for r in schema.get("required", []) if r != "files"],
    }

"""Research ideas: markdown (title + sections) or AI-Scientist-v2 JSON, validated.

Markdown form::

    # Title
    ## Hypothesis
    ...
    ## Experiments
    ...
    ## Evaluation
    ...
    ## Risks
    ...

JSON form: an object (or a list of objects; pick one with ``FILE#N``) with the
AI-Scientist-v2 keys ``Name, Title, Short Hypothesis, Related Work, Abstract,
Experiments, Risk Factors and Limitations``.

Grader: a markdown section ``## Grader`` whose first line names a directory (in backticks or
not), or a JSON key ``grader``; a relative path is taken from the idea file's folder. It is the
same as ``run --grader DIR`` (which wins when both are given) and, like the seed code, never
appears in a prompt: describe what is graded in ``## Evaluation``.

Seed code (AI-Scientist-v2's ``--load_code``): the starting point of the first drafts. It comes
from ``run --load-code FILE`` (:func:`with_seed_code`), from a markdown section ``## Code`` (also
``## Seed Code``, ``## Code To Use``, ``## Code To Potentially Use``) holding one fenced block
(its language tag names the file: `````python`` -> ``seed_code.py``; text around the fence is
not part of the code), or from a ``Code`` key (a string) of a JSON idea. It is kept apart from
the idea's text: :meth:`Idea.to_markdown` (the ``task`` layer of every prompt) leaves it out, and
only the prompts of draft nodes show it (the ``seed_code`` layer).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError, UsageError
from .userfiles import load_json, read_user_text


class IdeaError(ConfigError):
    """The idea file is missing, unreadable or incomplete (CLI exit 2)."""


@dataclass
class Idea:
    name: str
    title: str
    hypothesis: str
    experiments: str
    evaluation: str = ""
    risks: str = ""
    abstract: str = ""
    related_work: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    code: str = ""  # seed code for the first drafts (not part of to_markdown)
    code_file: str = ""  # its file name, as the drafts' prompts show it
    code_source: str = ""  # where it came from ("--load-code x.py", "idea section '## Code'", ...)
    # the grader's directory (a '## Grader' section, a JSON 'grader' key; resolved against the
    # idea file's folder); never part of to_markdown: no prompt names it
    grader: str = ""

    def to_markdown(self) -> str:
        parts = [f"# {self.title}", ""]
        for head, body in (
            ("Abstract", self.abstract),
            ("Hypothesis", self.hypothesis),
            ("Related Work", self.related_work),
            ("Experiments", self.experiments),
            ("Evaluation", self.evaluation),
            ("Risks", self.risks),
            *self.extra.items(),
        ):
            if body.strip():
                parts += [f"## {head}", body.strip(), ""]
        return "\n".join(parts).rstrip() + "\n"


_SECTION_ALIASES = {
    "hypothesis": "hypothesis",
    "short hypothesis": "hypothesis",
    "experiments": "experiments",
    "experiment": "experiments",
    "evaluation": "evaluation",
    "metrics": "evaluation",
    "risks": "risks",
    "risk factors and limitations": "risks",
    "risk factors": "risks",
    "abstract": "abstract",
    "related work": "related_work",
    "name": "name",
}

# headings (markdown) and keys (JSON) that hold the seed code instead of idea text
_CODE_HEADINGS = ("code", "seed code", "code to use", "code to potentially use")
# a fence's language tag -> the seed code's file extension (the name is only a label in prompts)
_CODE_EXT = {
    "python": "py", "py": "py", "python3": "py", "c": "c", "cpp": "cpp", "c++": "cpp", "cc": "cpp",
    "cuda": "cu", "cu": "cu", "fortran": "f90", "f90": "f90", "julia": "jl", "jl": "jl", "rust": "rs",
    "rs": "rs", "go": "go", "bash": "sh", "sh": "sh", "shell": "sh", "r": "R", "java": "java",
}  # fmt: skip
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")


SLUG_MAX = 48


def _slug(text: str) -> str:
    """The idea's name in a run directory: lower-case words joined by ``_``, at most
    ``SLUG_MAX`` characters, cut at a word boundary (a single over-long word is cut)."""
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    if len(slug) > SLUG_MAX:
        head = slug[: SLUG_MAX + 1]  # one more: a word that ends exactly at the limit is kept
        slug = head[: head.rfind("_")] if "_" in head[1:] else slug[:SLUG_MAX]
    return slug.strip("_") or "idea"


def _text(v: object) -> str:
    if isinstance(v, list):
        return "\n".join(f"- {x}" if not isinstance(x, (dict, list)) else f"- {json.dumps(x)}" for x in v)
    if isinstance(v, dict):
        return json.dumps(v, indent=2)
    return "" if v is None else str(v)


def _fence_open(line: str) -> tuple[str, str] | None:
    """``(fence, language)`` when ``line`` opens a fenced block."""
    m = _FENCE.match(line)
    return (m.group(1), m.group(2).lower()) if m else None


def _fence_closes(line: str, fence: str) -> bool:
    """A closing fence: at most 3 spaces, then at least as many of the opening fence's character."""
    indent = len(line) - len(line.lstrip(" "))
    s = line.strip()
    return indent <= 3 and len(s) >= len(fence) and set(s) == {fence[0]}


def _seed_name(language: str) -> str:
    ext = _CODE_EXT.get(language)
    return f"seed_code.{ext}" if ext else "seed_code"


def _code_block(lines: list[str], head: str, source: str) -> tuple[str, str]:
    """The one fenced block of the ``## <head>`` section: ``(code, file name)``."""
    blocks: list[tuple[str, list[str]]] = []
    fence: str | None = None
    for line in lines:
        if fence is None:
            opened = _fence_open(line)
            if opened:
                fence = opened[0]
                blocks.append((opened[1], []))
        elif _fence_closes(line, fence):
            fence = None
        else:
            blocks[-1][1].append(line)
    if len(blocks) != 1:
        found = "no fenced code block" if not blocks else f"{len(blocks)} fenced code blocks"
        raise IdeaError(
            f"{source}: section '## {head}' (seed code) holds {found}; "
            "put the code in exactly one ``` block, or pass it with --load-code FILE"
        )
    language, body = blocks[0]
    code = "\n".join(body)
    if not code.strip():
        raise IdeaError(f"{source}: section '## {head}' (seed code) has an empty code block")
    return code + "\n", _seed_name(language)


def parse_markdown(text: str, source: str = "idea") -> Idea:
    title = ""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    fence: tuple[str, int] | None = None  # (fence, line number) of the open fenced block
    for number, line in enumerate(text.splitlines(), 1):
        # a '#' line inside a fenced block (a comment in seed code) is not a heading
        if fence is not None:
            if _fence_closes(line, fence[0]):
                fence = None
            if current is not None:
                sections[current].append(line)
            continue
        opened = _fence_open(line)
        if opened:
            fence = (opened[0], number)
            if current is not None:
                sections[current].append(line)
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m and len(m.group(1)) == 1 and not title:
            title = m.group(2).strip()
            current = None
            continue
        if m:
            current = m.group(2).strip()
            sections.setdefault(current, [])
            continue
        if current is not None:
            sections[current].append(line)
        elif line.strip().lower().startswith("title:") and not title:
            title = line.split(":", 1)[1].strip()
    if fence is not None:
        raise IdeaError(f"{source}: the {fence[0]} fence opened at line {fence[1]} is never closed")
    fields: dict[str, str] = {}
    extra: dict[str, str] = {}
    code = code_file = code_source = ""
    grader = ""
    for head, lines in sections.items():
        if head.lower().rstrip(":") == "grader":
            grader = _grader_line(lines, f"{source}: section '## {head}'")
            continue
        if head.lower().rstrip(":") in _CODE_HEADINGS:
            if code:
                raise IdeaError(
                    f"{source}: two seed-code sections ('## {head}' and an earlier one); keep one"
                )
            code, code_file = _code_block(lines, head, source)
            code_source = f"the idea's '## {head}' section"
            continue
        body = "\n".join(lines).strip()
        key = _SECTION_ALIASES.get(head.lower().rstrip(":"))
        if key:
            fields[key] = body
        else:
            extra[head] = body
    idea = _build(title, fields, extra, source)
    idea.code, idea.code_file, idea.code_source = code, code_file, code_source
    idea.grader = grader
    return idea


def _grader_line(lines: list[str], where: str) -> str:
    """The directory a ``## Grader`` section names: its first non-empty line, backticks removed."""
    for line in lines:
        text = line.strip().strip("`").strip()
        if text:
            return text
    raise IdeaError(f"{where} names no directory; write the grader's directory on its first line")


def parse_json(data: object, source: str = "idea") -> Idea:
    if not isinstance(data, dict):
        raise IdeaError(f"{source}: an idea must be a JSON object, got {type(data).__name__}")
    fields: dict[str, str] = {}
    extra: dict[str, str] = {}
    title = _text(data.get("Title") or data.get("title") or "")
    code = code_file = code_source = grader = ""
    for k, v in data.items():
        if k.lower() == "title":
            continue
        if k.lower() == "grader":
            if not isinstance(v, str) or not v.strip():
                raise IdeaError(f"{source}: key {k!r} must name the grader's directory (a string)")
            grader = v.strip()
            continue
        if k.lower() == "code":
            code, code_file = _json_code(v, f"{source}: key {k!r}")
            code_source = f"the idea's {k!r} key"
            continue
        key = _SECTION_ALIASES.get(k.lower())
        if key:
            fields[key] = _text(v)
        else:
            extra[k] = _text(v)
    idea = _build(title, fields, extra, source)
    idea.code, idea.code_file, idea.code_source = code, code_file, code_source
    idea.grader = grader
    return idea


def _json_code(value: object, where: str) -> tuple[str, str]:
    """A JSON idea's ``Code``: raw code (AI-Scientist-v2 puts Python there) or one fenced block."""
    if not isinstance(value, str):
        raise IdeaError(f"{where} (seed code) must be a string, got {type(value).__name__}")
    if not value.strip():
        raise IdeaError(f"{where} (seed code) is empty; leave the key out for no seed code")
    lines = value.strip("\n").splitlines()
    opened = _fence_open(lines[0])
    if opened and len(lines) > 1 and _fence_closes(lines[-1], opened[0]):
        return _code_block(lines, "Code", where)
    return value if value.endswith("\n") else value + "\n", "seed_code"


def with_seed_code(idea: Idea, path: str | Path) -> Idea:
    """``idea`` with the seed code of ``run --load-code FILE`` (exit 2 naming ``--load-code``).

    The file is read defensively (a regular file, at most 1 MiB, UTF-8, no NUL byte); an idea
    that already carries seed code is refused rather than silently overridden.
    """
    what = f"--load-code {path}"
    try:
        code = read_user_text(path, what)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if not code.strip():
        raise UsageError(f"{what}: file is empty")
    if "\x00" in code:
        raise UsageError(f"{what}: contains NUL bytes (a binary file?); give a source file")
    if idea.code:
        raise UsageError(
            f"{what}: the idea already has seed code ({idea.code_source}); give the seed code once"
        )
    name = Path(path).name
    return dataclasses.replace(idea, code=code, code_file=name, code_source=f"--load-code {name}")


def _build(title: str, fields: dict[str, str], extra: dict[str, str], source: str) -> Idea:
    missing = [n for n in ("hypothesis", "experiments") if not fields.get(n, "").strip()]
    if not title.strip():
        missing.insert(0, "title")
    if missing:
        raise IdeaError(
            f"{source}: missing or empty: {', '.join(missing)} "
            "(markdown needs '# Title', '## Hypothesis', '## Experiments'; "
            "JSON needs 'Title', 'Short Hypothesis', 'Experiments')"
        )
    return Idea(
        name=_slug(fields.get("name") or title),
        title=title.strip(),
        hypothesis=fields.get("hypothesis", ""),
        experiments=fields.get("experiments", ""),
        evaluation=fields.get("evaluation", ""),
        risks=fields.get("risks", ""),
        abstract=fields.get("abstract", ""),
        related_work=fields.get("related_work", ""),
        extra=extra,
    )


def load_idea(spec: str | Path) -> Idea:
    """Load ``FILE`` or ``FILE#N`` (N-th idea of a JSON list); raises :class:`IdeaError`."""
    spec = str(spec)
    index: int | None = None
    m = re.match(r"^(.*)#(\d+)$", spec)
    if m and not Path(spec).exists():
        spec, index = m.group(1), int(m.group(2))
    path = Path(spec)
    try:
        text = read_user_text(path, f"--idea {path}")
    except ConfigError as exc:
        raise IdeaError(str(exc)) from None
    if not text.strip():
        raise IdeaError(f"--idea {path}: file is empty")
    if path.suffix.lower() == ".json" or text.lstrip().startswith(("{", "[")):
        try:
            data = load_json(text, f"--idea {path}")
        except ConfigError as exc:
            raise IdeaError(str(exc)) from None
        if isinstance(data, list):
            if not data:
                raise IdeaError(f"--idea {path}: the JSON list holds no idea")
            i = index or 0
            if i >= len(data):
                raise IdeaError(f"--idea {path}#{i}: the file holds {len(data)} ideas (0..{len(data) - 1})")
            return _grader_from(parse_json(data[i], f"--idea {path}#{i}"), path)
        return _grader_from(parse_json(data, f"--idea {path}"), path)
    return _grader_from(parse_markdown(text, f"--idea {path}"), path)


def _grader_from(idea: Idea, path: Path) -> Idea:
    """``idea`` with its grader directory taken from the idea file's folder when relative."""
    if idea.grader and not Path(idea.grader).expanduser().is_absolute():
        idea.grader = str((path.parent / idea.grader).resolve())
    return idea

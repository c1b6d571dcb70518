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
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
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


def parse_markdown(text: str, source: str = "idea") -> Idea:
    title = ""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
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
    fields: dict[str, str] = {}
    extra: dict[str, str] = {}
    for head, lines in sections.items():
        body = "\n".join(lines).strip()
        key = _SECTION_ALIASES.get(head.lower().rstrip(":"))
        if key:
            fields[key] = body
        else:
            extra[head] = body
    return _build(title, fields, extra, source)


def parse_json(data: object, source: str = "idea") -> Idea:
    if not isinstance(data, dict):
        raise IdeaError(f"{source}: an idea must be a JSON object, got {type(data).__name__}")
    fields: dict[str, str] = {}
    extra: dict[str, str] = {}
    title = _text(data.get("Title") or data.get("title") or "")
    for k, v in data.items():
        if k.lower() == "title":
            continue
        key = _SECTION_ALIASES.get(k.lower())
        if key:
            fields[key] = _text(v)
        else:
            extra[k] = _text(v)
    return _build(title, fields, extra, source)


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
            return parse_json(data[i], f"--idea {path}#{i}")
        return parse_json(data, f"--idea {path}")
    return parse_markdown(text, f"--idea {path}")

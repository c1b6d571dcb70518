"""Plain records the memory store hands out (JSON-able through ``asdict``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CoreEntry:
    """The visible value of one core key on a branch (``branch`` is where it was written)."""

    key: str
    value: str
    importance: int
    seq: int
    branch: str
    expires_at: float | None = None

    @property
    def chars(self) -> int:
        return len(self.key) + len(self.value)

    @property
    def group(self) -> str:
        """Entry group shown in the prompt: the key's prefix before the first ``.`` or ``/``."""
        for sep in (".", "/"):
            if sep in self.key:
                return self.key.split(sep, 1)[0]
        return "general"


@dataclass
class RecallEvent:
    """One recall event; ``id`` is ``r<N>``."""

    id: str
    kind: str
    text: str
    node_id: str | None
    branch: str
    created: float


@dataclass
class Consolidation:
    """A recall range folded into archival passage ``archival_id``, citing the events it replaced."""

    archival_id: str
    event_ids: list[str]
    summary: str
    reason: str = "consolidated"


@dataclass
class Evicted:
    """A core entry moved to archival because core exceeded ``core_max_chars``."""

    key: str
    archival_id: str
    importance: int
    chars: int


@dataclass
class CoreWrite:
    """Result of ``core_set``: the entry written and what overflow evicted."""

    key: str
    seq: int
    evicted: list[Evicted] = field(default_factory=list)


def rid(n: int) -> str:
    return f"r{n}"


def aid(n: int) -> str:
    return f"a{n}"


def parse_id(ident: str | int, prefix: str) -> int:
    """``"a12"`` / ``"12"`` / ``12`` -> 12 for the given prefix; ``ValueError`` otherwise."""
    if isinstance(ident, int) and not isinstance(ident, bool):
        return ident
    s = str(ident).strip().lstrip("#")
    if s.lower().startswith(prefix):
        s = s[len(prefix) :]
    if not s.isdigit():
        raise ValueError(f"{ident!r} is not a {prefix}<number> id")
    return int(s)

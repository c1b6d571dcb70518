"""Ledger entries: one per prompt layer, saying what packing did to it and why.

The dict form (:meth:`LedgerEntry.to_dict`) is the shared prompt-log contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

ACTIONS = ("kept", "truncated", "previewed", "dropped", "stripped", "replaced", "appended")


@dataclass
class LedgerEntry:
    layer: str
    action: str
    policy: str
    chars_before: int
    chars_after: int
    tokens_before: int
    tokens_after: int
    tokens_exact: bool
    reason: str
    handle: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"ledger action {self.action!r} is not one of {ACTIONS}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

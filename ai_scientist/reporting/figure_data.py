"""The data a report figure plots, for its review: the result files its part of the aggregation
script reads and the lists of numbers in them, compactly.

A figure review listed only the nodes its caption named and, for a loss-curve figure, gave no loss
value at all (relay s8 ln3 034, 038): the reviewer could not tell a curve drawn from the data from
one drawn wrong. The script's figure part (:class:`~.vlm.FigureUse`) names what it reads: a copied
file's path (``data/<node>/results.json``), a glob of them, a format string, or a file name beside
the node ids it lists. Each list of numbers it reads is shown as its key path, its length and its
first, last, lowest and highest values — the list the script names by key when it names one, else
the lists named like a curve (a loss, an error, an accuracy per step).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..base.nodedata import CONFIG_LIST, SETTING_NAME, record_name
from ..treesearch.seeds import distinct_digits
from .runread import NODE_ID

MIN_VALUES = 3  # fewer numbers are a pair of settings, not a curve
MAX_SERIES = 24  # lists shown for one figure; the rest counted
MAX_FILE_BYTES = 5_000_000
MAX_DEPTH = 6
CURVE_KEY = re.compile(r"loss|error|residual|acc|curve|history|per_epoch|per_step", re.IGNORECASE)


def read_files(fig_dir: Path, literals: list[str], patterns: list[re.Pattern[str]]) -> list[str]:
    """The copied data files (``data/<node>/...`` under ``fig_dir``) the figure's part of the script
    reads, in path order: a literal that is the path or a glob of it, a pattern (an f-string's)
    matching it, or a literal naming its file beside one naming its node."""
    root = fig_dir / "data"
    if not root.is_dir():
        return []
    files = sorted(p.relative_to(fig_dir).as_posix() for p in root.rglob("*") if p.is_file())
    named = {i for lit in literals for i in NODE_ID.findall(lit)}
    out = []
    for rel in files:
        parts = rel.split("/")
        by_name = parts[-1] in literals and len(parts) > 2 and parts[1] in named
        globbed = any(("*" in lit or "?" in lit) and fnmatch.fnmatch(rel, lit) for lit in literals)
        if rel in literals or globbed or by_name or any(p.fullmatch(rel) for p in patterns):
            out.append(rel)
    return out


def _lists(
    value: Any, path: str = "", depth: int = 0, owner: Any = None
) -> Iterator[tuple[str, list[Any], str]]:
    """(key path, list, its record's name) of every list of numbers (nulls allowed) under
    ``value``."""
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _lists(v, f"{path}.{k}" if path else str(k), depth + 1, value)
    elif isinstance(value, list):
        nums = [v for v in value if v is not None]
        if nums and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums):
            yield path, value, record_name(owner, 60)
        else:
            for i, v in enumerate(value[:50]):
                yield from _lists(v, f"{path}[{i}]", depth + 1, None)


def _key(path: str) -> str:
    """The last key of a key path, without list indices (``runs[2].train_loss`` -> ``train_loss``)."""
    return re.sub(r"\[\d+\]", "", path).rsplit(".", 1)[-1]


def _compact(values: list[Any]) -> str:
    nums = [float(v) for v in values if v is not None]
    ends = [nums[0], nums[-1], min(nums), max(nums)]
    d = distinct_digits(ends, least=4)
    first, last, low, high = (f"{x:.{d}g}" for x in ends)
    nulls = len(values) - len(nums)
    return (
        f"{len(values)} values{f' ({nulls} null)' if nulls else ''}, first {first}, last {last}, "
        f"lowest {low}, highest {high}"
    )


def figure_series(fig_dir: Path, files: list[str], used: Any) -> list[str]:
    """One line per list of numbers the figure reads from ``files`` (JSON, under ``fig_dir``):
    those whose key the figure's script uses (``used(key) -> bool``), else those named like a curve
    (:data:`CURVE_KEY`); never a setting's list (``base.nodedata``: a schedule or a configuration's); each
    with its record's name; at most :data:`MAX_SERIES`, then how many more."""
    found: list[tuple[str, str, list[Any], str]] = []
    for rel in files:
        path = fig_dir / rel
        if path.suffix.lower() != ".json" or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found += [
            (rel, key, v, name)
            for key, v, name in _lists(data)
            if len([x for x in v if x is not None]) >= MIN_VALUES
            and not SETTING_NAME.match(_key(key))
            and not CONFIG_LIST.search(re.sub(r"\[\d+\]", "", key))
        ]
    chosen = [f for f in found if used(_key(f[1]))] or [f for f in found if CURVE_KEY.search(_key(f[1]))]
    lines = [
        f"- {rel} {key}{f' ({name})' if name else ''}: {_compact(v)}"
        for rel, key, v, name in chosen[:MAX_SERIES]
    ]
    more = len(chosen) - len(lines)
    return lines + ([f"- ({more} more such lists not shown)"] if more > 0 else [])

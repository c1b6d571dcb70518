"""The lines of a node's program that define its data files, for the plotting call (issue 28).

A plotting call needs to know what the data mean — ``"tile": 0`` for an unblocked kernel,
``tile = n`` for no blocking, ``"best_s": null`` for a kernel whose result was wrong (relay s7 mm2
003, 007, 013, 017, 023, 027) — and that is defined by the program that wrote them, not by the
files' outlines. The whole program (5-13 kB in a relay run, most of it kernels and helpers) cost
every plotting call its tokens for the few lines that matter. :func:`data_lines` finds those
lines: the ones naming a data file (its name, or a format string that yields it), writing one of
its fields (``"tile":`` / ``rec["tile"] =``), naming one of its string values (``"naive"``: the
call that runs that condition, with its arguments), a CSV file's column, or a metric's name
(``m("speedup_n1024" + sfx, ...)``: the metric's definition) or the format string a run's name is
built from (``run(f"grid_l2={lam}_lr={lr}", ...)``) — each with the lines around it. A field naming
the runs is listed with its values however many there are (compactly past :data:`MAX_NAMES`).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTEXT = 2  # lines shown either side of a matching line: a comment above, the arguments below
MAX_CHARS = 6000  # the excerpt at most (a relay run's whole program was 13 kB)
MAX_VALUES = 60  # distinct string values of the data looked for
MAX_VALUE_CHARS = 40  # longer strings are prose (a "check" description), not a condition's name
MAX_FILE_BYTES = 5_000_000
MAX_KEYS = 200
MAX_CATEGORIES = 12  # a string field with more distinct values names runs, not conditions
# a field naming the runs (``"name": "grid_l2=0.01_lr=0.1"``): its values are listed too, all of
# them up to MAX_NAMES (and NAMES_CHARS), else the first NAMES_HEAD and how many there are (relay
# s9 ln 007, 013, 019, 023: the run names were left to guess)
NAME_KEYS = frozenset({"name", "label", "condition", "config", "run", "run_name", "variant", "setting", "id"})
MAX_NAMES = 30
NAMES_CHARS = 900
NAMES_HEAD = 8
MAX_NAME_CHARS = 80
MAX_NAME_VALUES = 200  # distinct run names counted at most

# a quoted string of the program ("..." or '...'), escapes allowed
_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'')
# what a format string leaves to run time: printf conversions, Python's {} fields
_FORMAT_FIELD = re.compile(r"%[-+ #0-9.*]*[a-zA-Z]|\{[^{}]*\}")


@dataclass(frozen=True)
class DataLines:
    """The excerpt (one block per program file, each line with its number), which data files no
    line names (their writer builds the name another way), and how many matching lines were left
    out for room."""

    text: str
    unnamed: tuple[str, ...]
    left_out: int
    # each string field of the JSON data with its distinct values (a few, short): the conditions
    # a figure separates, also where the program writes them from a variable
    # (``"method": trainer.__name__``: relay s7 ln2 013, 020 read the names from the whole program)
    categories: tuple[tuple[str, tuple[str, ...]], ...] = ()


def data_lines(
    program: Mapping[str, str],
    workspace: Path,
    files: Iterable[str],
    metric_names: Iterable[str],
    max_chars: int = MAX_CHARS,
) -> DataLines:
    """The lines of ``program`` (path -> text) that define the data ``files`` (relative to
    ``workspace``) and the metrics ``metric_names``, with :data:`CONTEXT` lines around each, in
    program order, at most ``max_chars``: lines naming a file first, then the headline metric's
    (the first), those writing a field, those naming a value or a column, and those naming
    another metric (its value is in the prompt)."""
    files = list(files)
    names = {f: {f, Path(f).name} for f in files}
    keys, values, categories = _fields(workspace, files)
    run_names = {v for k, vs in categories if k in NAME_KEYS for v in vs if not v.startswith("... ")}
    metrics = [m for m in dict.fromkeys(metric_names) if m]
    key_writes = [
        re.compile(rf"\\?[\"']{re.escape(k)}\\?[\"']\s*:(?!:)|\[\s*[\"']{re.escape(k)}[\"']\s*\]\s*=(?!=)")
        for k in keys
    ]
    hits: dict[tuple[str, int], int] = {}  # (path, line index) -> rank (lower is kept first)
    named: set[str] = set()
    for path, text in program.items():
        for i, line in enumerate(text.splitlines()):
            literals = [a or b for a, b in _LITERAL.findall(line)]
            rank = None
            for f, forms in names.items():
                if any(_names(lit, form) for lit in literals for form in forms):
                    named.add(f)
                    rank = 0
            if rank is None and metrics and any(_names_metric(lit, metrics[0]) for lit in literals):
                rank = 1  # the headline's definition
            if rank is None and any(p.search(line) for p in key_writes):
                rank = 2
            if rank is None and any(lit in values for lit in literals):
                rank = 3
            if rank is None and any(
                _FORMAT_FIELD.search(lit) and any(_exact_or_format(lit, n) for n in run_names)
                for lit in literals
            ):
                rank = 3  # the format string a run's name is built from: f"grid_l2={lam}_lr={lr}"
            if rank is None and any(_names_metric(lit, m) for lit in literals for m in metrics):
                rank = 4
            if rank is not None:
                hits[(path, i)] = rank
    shown, left_out = _within(program, hits, max_chars)
    return DataLines(shown, tuple(f for f in files if f not in named), left_out, categories)


def _exact_or_format(literal: str, name: str) -> bool:
    """The literal is ``name``, or a format string yielding it ("results_%s.json") with a fixed
    part of 3 characters or more."""
    if literal == name:
        return True
    if not _FORMAT_FIELD.search(literal):
        return False
    parts = _FORMAT_FIELD.split(literal)
    return any(len(p) >= 3 for p in parts) and bool(
        re.fullmatch(".+".join(re.escape(p) for p in parts), name)
    )


def _names(literal: str, name: str) -> bool:
    """The literal is the name, or a format string yielding it ("results_%s.json"), or a piece of
    it at least 4 characters long that starts or ends it ("results_" + label + ".json")."""
    if len(literal) < 3:
        return False
    if _exact_or_format(literal, name):
        return True
    return (
        len(literal) >= 4
        and "." in name
        and (
            (name.startswith(literal) and not literal.endswith("."))
            or (name.endswith(literal) and literal.startswith((".", "_", "-")) and "." in literal)
        )
    )


def _names_metric(literal: str, metric: str) -> bool:
    """The literal is the metric's name, a format string yielding it ("gflops_t%d_n1024"), or its
    stem followed by a suffix added at run time ("speedup_n1024" + sfx)."""
    if len(literal) < 3:
        return False
    if _exact_or_format(literal, metric):
        return True
    return len(literal) >= 4 and metric.startswith(literal) and metric[len(literal)] in "_-."


def _fields(
    workspace: Path, files: list[str]
) -> tuple[set[str], set[str], tuple[tuple[str, tuple[str, ...]], ...]]:
    """The field names of the JSON data files and the columns of the CSV ones (``keys``), the
    short string values of the JSON files with the CSV columns (``values``: looked for as quoted
    strings anywhere: a condition's name, a header row), and each field holding only short
    strings, at most :data:`MAX_CATEGORIES` distinct ones, with them in order of appearance."""
    keys: set[str] = set()
    values: set[str] = set()
    by_key: dict[str, list[Any]] = {}

    def walk(v: Any, depth: int) -> None:
        if depth > 8:
            return
        if isinstance(v, dict):
            for k, x in list(v.items())[:MAX_KEYS]:
                if len(keys) < MAX_KEYS:
                    keys.add(str(k))
                if track[0] and not isinstance(x, (dict, list)) and len(by_key) < MAX_KEYS:
                    seen = by_key.setdefault(str(k), [])
                    cap = MAX_NAME_VALUES if str(k) in NAME_KEYS else MAX_CATEGORIES
                    if x not in seen and len(seen) <= cap:
                        seen.append(x)
                walk(x, depth + 1)
        elif isinstance(v, list):
            for x in v[:MAX_KEYS]:
                walk(x, depth + 1)
        elif isinstance(v, str) and 2 <= len(v) <= MAX_VALUE_CHARS and len(values) < MAX_VALUES:
            values.add(v)

    track = [True]  # metrics.json's fields (direction, dataset) are listed with the metrics
    for rel in files:
        path = workspace / rel
        track[0] = Path(rel).name != "metrics.json"
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            if path.suffix.lower() == ".json":
                walk(json.loads(path.read_text(encoding="utf-8")), 0)
            elif path.suffix.lower() in (".csv", ".tsv"):
                with path.open(encoding="utf-8", errors="replace", newline="") as fh:
                    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
                    header = next(csv.reader(fh, delimiter=delimiter), [])
                values.update(c.strip() for c in header if 2 <= len(c.strip()) <= MAX_VALUE_CHARS)
        except (OSError, ValueError):
            continue  # unreadable: its outline says so
    categories = tuple(
        (k, tuple(seen))
        for k, seen in by_key.items()
        if 1 < len(seen) <= MAX_CATEGORIES
        and all(isinstance(x, str) and 0 < len(x) <= MAX_VALUE_CHARS for x in seen)
    ) + tuple(
        (k, _names_listed(seen))
        for k, seen in by_key.items()
        if k in NAME_KEYS
        and len(seen) > MAX_CATEGORIES
        and all(isinstance(x, str) and 0 < len(x) <= MAX_NAME_CHARS for x in seen)
    )
    # a value that is also a field's name is found as the field's write
    return keys, values - keys, categories


def _names_listed(seen: list[Any]) -> tuple[str, ...]:
    """A run-name field's values: all of them when few and short, else the first
    :data:`NAMES_HEAD` and "... (N in all)" (N counted up to :data:`MAX_NAME_VALUES`)."""
    names = [str(x) for x in seen]
    if len(names) <= MAX_NAMES and sum(len(n) + 2 for n in names) <= NAMES_CHARS:
        return tuple(names)
    count = f"{len(names)}" if len(names) <= MAX_NAME_VALUES else f"over {MAX_NAME_VALUES}"
    return (*names[:NAMES_HEAD], f"... ({count} in all)")


def _within(program: Mapping[str, str], hits: dict[tuple[str, int], int], max_chars: int) -> tuple[str, int]:
    """The matching lines with their context, best-ranked first until ``max_chars``, rendered in
    program order: one block per file, each line numbered; and how many matching lines did not fit."""
    lines = {path: text.splitlines() for path, text in program.items()}
    chosen: set[tuple[str, int]] = set()
    size, left_out = 0, 0
    # within a rank, the lines nearest a line naming a data file first: the fields of the call that
    # writes the file (a relay run's results.json dump, the last 20 lines of a 320-line program, was
    # "left out for room" behind the per-epoch history's keys written earlier: s10 ln 013, 020)
    files_at = {path: [i for (p, i), r in hits.items() if p == path and r == 0] for path in program}

    def near(path: str, i: int) -> int:
        return min((abs(i - j) for j in files_at[path]), default=len(lines[path]))

    for (path, i), _rank in sorted(
        hits.items(), key=lambda kv: (kv[1], near(*kv[0]), list(program).index(kv[0][0]), kv[0][1])
    ):
        span = [
            (path, j)
            for j in range(max(0, i - CONTEXT), min(len(lines[path]), i + CONTEXT + 1))
            if (path, j) not in chosen
        ]
        cost = sum(len(lines[p][j]) + 8 for p, j in span)
        if size + cost > max_chars:
            left_out += 1
            continue
        chosen.update(span)
        size += cost
    blocks = []
    for path in program:
        idx = sorted(j for p, j in chosen if p == path)
        if not idx:
            continue
        out, last = [], None
        width = len(str(idx[-1] + 1))
        for j in idx:
            if last is not None and j > last + 1:
                out.append("...")
            out.append(f"{j + 1:>{width}}| {lines[path][j]}")
            last = j
        blocks.append(f"### {path}\n" + "\n".join(out))
    return "\n\n".join(blocks), left_out


def names_any(text: str, files: Iterable[str]) -> bool:
    """Whether ``text`` (a plotting script) names one of ``files`` by a quoted string (the name,
    its base name, a format string yielding it, or a piece starting or ending it)."""
    literals = [a or b for a, b in _LITERAL.findall(text)]
    return any(_names(lit, form) for f in files for form in {f, Path(f).name} for lit in literals)

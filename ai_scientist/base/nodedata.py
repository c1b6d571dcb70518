"""Which files in a node's workspace are the data its experiment saved.

One rule for every reader of a workspace — the node's own plotting call (``phases/plots.py``) and
the run's data manifest (``reporting/manifest.py``) — so a library's cache (matplotlib writes
``.cache/matplotlib/fontlist-v330.json`` into the working directory of a program that imports it),
compiled bytecode or the pipeline's own figures are never offered as results to plot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from .artifacts import RunRecord, read_artifact
from .paths import RUN_FILE, NodePaths

# ``.jsonl`` (one record a line) and plain-text tables (``.dat``, ``.txt``) are what a C program
# writes (relay s9 mm 023: the raw n=4096 records ``res_big_a.jsonl`` were not offered to plot)
DATA_SUFFIXES = (".npy", ".npz", ".json", ".jsonl", ".csv", ".tsv", ".dat", ".txt")
# plain-text files that are data only when they hold numeric columns (not a requirements.txt or a log)
TABLE_SUFFIXES = (".dat", ".txt")
TABLE_PROBE_LINES = 20  # lines read to tell a numeric table from prose ...
TABLE_PROBE_BYTES = 8192  # ... within this many bytes
TABLE_COUNT_BYTES = 5_000_000  # a larger table's lines are not counted
# folders whose files are never the experiment's data: caches and installed packages a tool left
# in the working directory, and the figures the pipeline itself makes (node_plots/, plots/)
NOT_DATA_DIRS = frozenset({"__pycache__", "site-packages", "node_modules", "node_plots", "plots"})


def is_node_data(rel_path: str | PurePath) -> bool:
    """True when ``rel_path`` (relative to the workspace) names a data file of the experiment: a
    data suffix (:data:`DATA_SUFFIXES`), and no part of the path hidden (``.cache/``, ``.git/``,
    ``.hidden.json``) or one of :data:`NOT_DATA_DIRS`. Pure: looks at the path only (whether it is
    a regular file inside the workspace is the caller's check)."""
    path = PurePosixPath(rel_path)
    parts = path.parts
    if not parts or path.is_absolute() or ".." in parts:
        return False
    if path.suffix.lower() not in DATA_SUFFIXES:
        return False
    return not any(p.startswith(".") or p in NOT_DATA_DIRS for p in parts)


def holds_node_data(workspace: Path, rel_path: str | PurePath) -> bool:
    """:func:`is_node_data`, and for a plain-text file (:data:`TABLE_SUFFIXES`) that it is a table
    of numbers (:func:`numeric_table`)."""
    if not is_node_data(rel_path):
        return False
    return PurePosixPath(rel_path).suffix.lower() not in TABLE_SUFFIXES or numeric_table(workspace / rel_path)


_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^(?:nan|inf|-inf)$", re.IGNORECASE)


def numeric_table(path: Path) -> bool:
    """Whether the text file's first :data:`TABLE_PROBE_LINES` lines (comments ``#`` and a header
    line aside; within :data:`TABLE_PROBE_BYTES`, no NUL byte) are rows of numbers split by spaces,
    tabs or commas, at least one such row."""
    rows = headers = 0
    try:
        with path.open("rb") as fh:  # a bounded read: a binary .dat may hold no line break at all
            head = fh.read(TABLE_PROBE_BYTES)
    except OSError:
        return False
    if b"\0" in head:
        return False
    lines = head.decode("utf-8", errors="replace").splitlines()
    if len(head) == TABLE_PROBE_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last one may be cut mid-number
    for line in lines[:TABLE_PROBE_LINES]:
        words = [w for w in re.split(r"[\s,;]+", line.strip()) if w]
        if not words or line.lstrip().startswith(("#", "%")):
            continue
        if all(_NUMBER.match(w) for w in words):
            rows += 1
        elif rows or headers:  # one header line may come first, no prose after it
            return False
        else:
            headers = 1
    return rows > 0


def table_outline(path: Path) -> dict[str, Any]:
    """A numeric text table's first line (at most 300 characters) and, up to
    :data:`TABLE_COUNT_BYTES`, its line count (``lines``)."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        out: dict[str, Any] = {"first_line": fh.readline(300).strip()}
        if path.stat().st_size <= TABLE_COUNT_BYTES:
            fh.seek(0)
            out["lines"] = sum(1 for _ in fh)
    return out


def jsonl_records(path: Path) -> list[Any]:
    """The JSON values of a ``.jsonl`` file, one a non-empty line; ``ValueError`` naming the first
    line that is no JSON."""
    out: list[Any] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"line {i} is no JSON ({exc})") from None
    return out


def unmeasured(node_dir: Path) -> frozenset[str]:
    """Workspace paths of the data files the node's run did not produce: the code answer wrote
    them, or they were there before the run command and no run command rewrote them (phase 4's
    ``unmeasured_files`` in ``run.json``). Never the experiment's results."""
    try:
        record = read_artifact(NodePaths(Path(node_dir)).file(RUN_FILE), RunRecord)
    except ValueError:
        return frozenset()
    return frozenset(record.unmeasured_files) if record is not None else frozenset()


# What a data file's lists and records are, for every reader of them (a review's per-step lists,
# ``phases/plots.py``; a paper figure review's, ``reporting/figure_data.py``):
# a list of a setting the program sets (a learning-rate schedule), not a measurement (relay s9 ln:
# per-epoch lr lists filled a review's slots while the accuracy curves were left out) ...
SETTING_NAME = re.compile(
    r"^(?:lr\d*|learning_rate|step_size|eta|schedule|lr_schedule|momentum)$", re.IGNORECASE
)
# ... and a configuration's values (config.lr_grid, params.sizes, a *_grid), no series at all (relay
# s9 ln2 002-018, 033-038: a 3-value config.lr_grid was reviewed as one)
CONFIG_LIST = re.compile(
    r"(?:^|\.)(?:config|configuration|settings|params|hparams|args)(?:\.|\[|$)|(?:^|[._])grid$", re.IGNORECASE
)
# a record's name-like fields, in the order one is taken: which condition its lists are
CONDITION_KEYS = ("name", "label", "condition", "config", "method", "variant", "setting", "run", "id")


def record_name(record: Any, limit: int = 80) -> str:
    """The record's first name-like string field (:data:`CONDITION_KEYS`) on one line, cut to
    ``limit`` characters; "" when it has none or is no record."""
    if not isinstance(record, dict):
        return ""
    for k in CONDITION_KEYS:
        v = record.get(k)
        if isinstance(v, str) and v.strip():
            return " ".join(v.split())[:limit]
    return ""

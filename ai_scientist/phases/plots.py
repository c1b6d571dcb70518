"""A working node's own figures: LLM-written plotting code, run in the sandbox, checked, critiqued.

After the execution review found no bug (and before the node is marked good), two checkpointed
steps run, as AI-Scientist-v2 does for every working node:

``phase5_plot``
    The model (role ``plotting``, prompt ``node_plot``) sees the data files the node's experiment
    saved in the workspace (name, size, outline, each string field's values) with the lines of its
    program that write them (:mod:`.data_lines`; the whole program only when no line names a data
    file), its plan, the stage's protocol, a benchmark's machine and load, and answers
    ``{script, figures}``.
    The script runs in the node's sandbox (``exec/NNN_phase5_plot_plotK.json``) and saves PNGs under
    ``workspace/node_plots/``. Every declared figure is checked (a regular file inside the
    workspace, at most :data:`MAX_FIGURE_BYTES`, opens as an image, not tiny, not blank). Good
    ones are copied to ``nodes/<id>/plots/``; rejected ones are listed with the reason. On any
    problem the model gets one more call with the precise problems, then the step gives up. A
    plotting failure never makes the experiment buggy: ``plots.json`` records it, with an event.
``phase5_vlm``
    When the ``vlm_feedback`` model can see images (:func:`~ai_scientist.llm.vision.vision_skip_reason`),
    it critiques the kept figures (prompt ``node_vlm``, the images appended to the user message):
    ``{shows, problems, valid, reason}``, saved as ``nodes/<id>/vlm.json``. A blind model is
    skipped with the reason recorded there. :func:`plot_feedback` renders the critique as the
    ``plot_feedback`` layer of the node's children; a critique with ``valid: false`` fails the node
    (status buggy, the critique's reason as the error), so the search debugs it instead of picking it.

Seed re-runs (``seed_eval``) re-measure a chosen node: they are not plotted.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.artifacts import (
    CodeAnswer,
    Critique,
    Figure,
    PlotAttempt,
    PlotsRecord,
    RejectedFigure,
    RunRecord,
    Verdict,
    read_artifact,
)
from ..base.fileio import atomic_write_text, regular_file_inside
from ..base.images import SAFE_FIGURE_NAME as _SAFE_NAME
from ..base.images import check_figure, image_part, plot_schema
from ..base.nodedata import (
    CONFIG_LIST,
    NOT_DATA_DIRS,
    SETTING_NAME,
    TABLE_SUFFIXES,
    holds_node_data,
    jsonl_records,
    record_name,
    table_outline,
    unmeasured,
)
from ..base.paths import PLOTS_FILE, RUN_FILE, VLM_FILE, RunPaths
from ..base.templates import render
from ..execution.environment import machine_text
from ..llm.call import LLMError
from ..llm.vision import is_vision_refusal, vision_skip_reason
from ..treesearch.seeds import distinct_digits
from .base import NodeContext, PhaseFailed, checkpoint_typed
from .data_lines import DataLines, data_lines, names_any
from .evidence import (
    judged_protocol,
    judged_stage,
    node_facts,
    node_kinds,
    own_plan,
    program_values,
    run_result_text,
    shows_machine,
)
from .execution import run_command

PLOT_PHASE = "phase5_plot"
VLM_PHASE = "phase5_vlm"
PLOT_SCRIPT = "plot_node.py"
PLOT_DIR = "node_plots"  # inside the workspace: where the script saves its PNGs
ATTEMPTS = 2  # the first answer and one retry with the precise problems
MAX_FIGURE_BYTES = 5_000_000
MAX_FIGURE_SIDE = 6000
MAX_DATA_FILES = 30
DATA_DEPTH = 3  # the top level and two folders down (data/<run>/results.json)
INLINE_OUTLINE_CHARS = 300  # a longer outline, or one several files share, is shown once by label
OUTLINE_DEPTH = 6  # levels of a JSON file's outline (a list of runs of lists of records is 4)
OUTLINE_KEYS = 30  # keys outlined per object (further ones by name)
OUTLINE_NAMES = 40  # keys an "<each of N keys: ...>" entry names, all of them up to this many
OUTLINE_NAME_CHARS = 800  # ... while their names fit in this many characters
OUTLINE_CHARS = 2500  # one file's outline at most (json_outline: fewer levels, never a cut token)
METRICS_JSON = "metrics.json"  # the experiment's metrics file (phases/experiment.py reads it)

CRITIQUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "shows": {"type": "string", "maxLength": 2000},
        "problems": {"type": "array", "items": {"type": "string", "maxLength": 500}, "maxItems": 12},
        "valid": {"type": "boolean"},
        "reason": {"type": "string", "maxLength": 1000},
    },
    "required": ["shows", "problems", "valid", "reason"],
    "additionalProperties": False,
}


def wants_plots(ctx: NodeContext) -> bool:
    return ctx.cfg.agent.plots.enabled and ctx.node.operation != "seed_eval"


# ------------------------------------------------------------ plotting --


def make_plots(ctx: NodeContext, answer: CodeAnswer, metrics: Any = None, caveat: str = "") -> PlotsRecord:
    """The ``phase5_plot`` step (checkpointed): ``plots.json``, a :class:`PlotsRecord`.

    ``metrics``: the node's metrics as read after its run (shown to the plotting and critique calls);
    ``caveat``: the execution review's measurement caveat (``review.measurement``), or "".
    """
    return checkpoint_typed(
        ctx, PLOT_PHASE, PlotsRecord, PLOTS_FILE, lambda: _plots(ctx, answer, metrics, caveat)
    )


def data_files(
    workspace: Path, skip: frozenset[str] = frozenset(), nullable: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """The data files the experiment saved (:func:`~ai_scientist.base.nodedata.holds_node_data`: no
    cache, hidden or pipeline folder; up to :data:`DATA_DEPTH` levels deep), each with an outline,
    in path order; the first :data:`MAX_DATA_FILES` (:func:`count_data_files` counts them all).
    ``skip``: files the run did not produce (phase 4's ``unmeasured_files``); ``nullable``: see
    :func:`json_outline`."""
    out: list[dict[str, Any]] = []
    for rel in data_paths(workspace):
        if rel in skip:
            continue
        path = workspace / rel
        if not regular_file_inside(workspace, path):
            continue  # a planted symlink / FIFO: never read
        out.append({"file": rel, "bytes": path.stat().st_size, **_outline(path, nullable)})
        if len(out) >= MAX_DATA_FILES:
            break
    return out


def count_data_files(workspace: Path, skip: frozenset[str] = frozenset()) -> int:
    """How many data files :func:`data_files` would list without its cap."""
    return sum(
        1
        for rel in data_paths(workspace)
        if rel not in skip and regular_file_inside(workspace, workspace / rel)
    )


def data_paths(workspace: Path) -> list[str]:
    """Relative paths of the workspace's data files, sorted; folders that never hold data (hidden,
    caches, our plots) are not entered at all (a font cache can hold thousands of files)."""
    found: list[str] = []
    if not workspace.is_dir():
        return found
    for root, dirs, files in os.walk(workspace):
        rel_root = Path(root).relative_to(workspace)
        depth = len(rel_root.parts)
        dirs[:] = (
            []
            if depth + 1 >= DATA_DEPTH
            else sorted(d for d in dirs if not d.startswith(".") and d not in NOT_DATA_DIRS)
        )
        found += [(rel_root / f).as_posix() for f in files if holds_node_data(workspace, rel_root / f)]
    return sorted(found)


def _outline(path: Path, nullable: frozenset[str] = frozenset()) -> dict[str, Any]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".json" and path.stat().st_size <= 5_000_000:
            data = json.loads(path.read_text(encoding="utf-8"))
            top = list(data) if isinstance(data, dict) else []
            return {"structure": json_outline(data, nullable), "top_keys": top}
        if suffix == ".jsonl" and path.stat().st_size <= 5_000_000:
            records = jsonl_records(path)  # outlined as the list of its records
            return {"records": len(records), "structure": json_outline(records, nullable)}
        if suffix in TABLE_SUFFIXES:  # a numeric text table: its first line and its line count
            return table_outline(path)
        if suffix in (".npy", ".npz"):
            import numpy as np

            if suffix == ".npy":
                arr = np.load(path, mmap_mode="r", allow_pickle=False)
                return {"shape": list(arr.shape), "dtype": str(arr.dtype)}
            with np.load(path, allow_pickle=False) as z:
                return {"arrays": {k: {"shape": list(z[k].shape), "dtype": str(z[k].dtype)} for k in z.files}}
        if suffix in (".csv", ".tsv"):
            with path.open(encoding="utf-8", errors="replace") as fh:
                return {"header": fh.readline().strip()[:300]}
    except (ValueError, OSError) as exc:
        return {"error": f"unreadable: {exc}"[:300]}
    return {}


# the loss-like lists of a node's data files a review sees (head and tail of each): "a loss that
# never decreases" can only be judged from per-epoch values, which the output rarely prints; an
# objective, a negative log-likelihood, a squared error or a cross-entropy ("train_ce_noisy") is
# one too (relay s9 ln2 002, 006, 012: "train_objective" and "train_ce_noisy" were not reviewed)
SERIES_NAME = re.compile(
    r"loss|error|residual|objective|nll|mse|cross_?entropy|(?:^|[_\W])ce(?:$|[_\W])", re.IGNORECASE
)
MAX_SERIES = 8
MAX_BRIEF_SERIES = 24  # further lists, one line each (length, first, last, lowest, highest)
SERIES_ENDS = 3  # values shown from each end
SERIES_FILE_BYTES = 5_000_000


def loss_series(
    workspace: Path,
    skip: frozenset[str] = frozenset(),
    parent: Path | None = None,
    headline: tuple[str, float] | None = None,
    config: str = "",
) -> tuple[list[dict[str, Any]], int]:
    """:func:`loss_lists` as (the lists shown, how many there are in all)."""
    view = loss_lists(workspace, skip, parent, headline, config)
    return view.shown, view.total


def loss_lists(
    workspace: Path,
    skip: frozenset[str] = frozenset(),
    parent: Path | None = None,
    headline: tuple[str, float] | None = None,
    config: str = "",
) -> SeriesView:
    """The numeric lists of the workspace's JSON data files whose key names a loss, an error or a
    residual (nulls allowed), each as ``{"path", "file", "n", "nulls", "head", "tail"}`` (``tail``
    empty when the list is short enough to show whole): at most :data:`MAX_SERIES` with their
    values and :data:`MAX_BRIEF_SERIES` more one line each, the rest named (``left_out``).
    The headline condition's lists come first (``"headline": True``, :func:`_headline_records`:
    the record holding the node's primary metric's value, told from tied ones by the headline's
    settings — ``config``, the protocol's "l2=0.01, lr=0.1", and a data file's own ``headline``
    record): the condition the node's result measures (relay s7 ln1 012, 027; s9 ln 006 hid the
    headline's curve among "30 more such lists"). Then the others in file and key order; with
    ``parent`` (the parent node's workspace), the lists whose file and key the parent's data do
    not have are the first to get a place (a child's new conditions are what its review judges),
    shown in that order too: s9 ln 012's list started at runs[14] and wrapped to runs[0]. Each list
    says which condition it is (``"condition"``: its record's name-like field)."""
    found = _all_series(workspace, skip)
    old = {(f["file"], f["path"]) for f in _all_series(parent, frozenset(), values=False)} if parent else None
    holders = _headline_records(
        {id(f["record"]): (f["record"], _condition(f["record"]) or _record_path(f["path"])) for f in found},
        headline,
        _headline_settings(workspace, skip, config),
    )
    for i, f in enumerate(found):
        f["at"] = i
        f["headline"] = id(f["record"]) in holders
        f["new"] = old is not None and (f["file"], f["path"]) not in old
        f["condition"] = _condition(f.pop("record"))
    found = _same_values_once(_ranked(found))
    # the first MAX_SERIES with their values, the next ones one line each (first, last, lowest,
    # highest): a review is asked to judge every condition's curve (s8 ln 002, 006)
    shown = _in_order(found[: MAX_SERIES + MAX_BRIEF_SERIES])
    for i, f in enumerate(shown):
        f["brief"] = i >= MAX_SERIES
    rest = found[MAX_SERIES + MAX_BRIEF_SERIES :]
    return SeriesView(shown, len(found), left_out_text([(f["file"], f["path"]) for f in _in_order(rest)]))


@dataclass(frozen=True)
class SeriesView:
    """Per-step lists a review is shown: ``shown`` (the headline condition's first, then file
    and key order), ``total`` (how many there are) and ``left_out`` (the others, named compactly:
    "results.json runs[5-13].val_acc"), so a reader knows which ones it does not see."""

    shown: list[dict[str, Any]]
    total: int
    left_out: str = ""


def _ranked(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Which lists get a place first: measurements before a setting's schedule; among each, the
    headline's, then a child's new ones, then the rest."""
    return sorted(found, key=lambda f: (f.get("setting", False), not f["headline"], not f["new"], f["at"]))


def _in_order(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline's lists first, the others in file and key order."""
    return sorted(found, key=lambda f: (not f["headline"], f["at"]))


def left_out_text(paths: list[tuple[str, str]], max_groups: int = 12) -> str:
    """(file, key path) pairs named compactly: one entry per file and key pattern, the list
    indices as ranges — "results.json runs[0-3, 5-13].val_acc, runs[0-13].lr" (s9 ln 006: "30
    more such lists not shown" did not say that the headline's curve was one of them)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for rel, path in paths:
        idx = [int(m) for m in re.findall(r"\[(\d+)\]", path)]
        pattern = re.sub(r"\[\d+\]", "[{}]", path, count=1) if len(idx) == 1 else path
        groups.setdefault((rel, pattern), []).extend(idx[:1] if len(idx) == 1 else [])
    parts: list[str] = []
    last_file = None
    for (rel, pattern), idx in list(groups.items())[:max_groups]:
        name = pattern.replace("{}", _ranges(idx)) if "{}" in pattern else pattern
        parts.append(name if rel == last_file else f"{rel} {name}")
        last_file = rel
    more = len(groups) - max_groups
    return ", ".join(parts) + (f" and {more} more key patterns" if more > 0 else "")


def _ranges(idx: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    out: list[str] = []
    for i in sorted(set(idx)):
        if out and i == int(out[-1].rpartition("-")[2]) + 1:
            out[-1] = f"{out[-1].partition('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


# a record that names the headline's settings in the data file itself ("headline": {"l2": 0.01, ...})
HEADLINE_KEYS = re.compile(r"headline|primary|main_config", re.IGNORECASE)
SETTING = re.compile(r"([A-Za-z_][\w.]*)\s*=\s*([^,;\s()]+)")


def _headline_settings(workspace: Path, skip: frozenset[str], config: str) -> dict[str, Any]:
    """The headline's settings as key -> value: the ``k=v`` pairs of ``config`` (the protocol's
    headline configuration, from a review), then the scalars of a data file's top-level record
    named like the headline (``"headline": {"l2": 0.01, "lr": 0.1}``), which win."""
    out: dict[str, Any] = {k: v for k, v in SETTING.findall(config or "")}
    for _, data in _json_data(workspace, skip):
        if not isinstance(data, dict):
            continue
        for key, value in data.items():
            if HEADLINE_KEYS.search(str(key)) and isinstance(value, dict):
                out.update({str(k): v for k, v in value.items() if isinstance(v, (str, int, float))})
    return out


def _headline_records(
    records: dict[int, tuple[dict[str, Any], str]],
    headline: tuple[str, float] | None,
    settings: dict[str, Any],
) -> set[int]:
    """The ids of the records that are the headline's condition, or none when that is not clear:
    those holding the headline value under the metric's name (or one like it:
    ``final_val_acc`` for ``val_accuracy``); where several conditions tie on it, those of them
    that match the most of the headline's ``settings`` (without a holder: the records matching
    the most settings, when they are one condition). ``records``: id -> (record, its condition:
    its name-like field or where it sits; "" for a top-level record, which repeats a named one).
    A tie left unresolved marks none: a relay run marked 5 of 13 runs "what val_accuracy
    measures" (s8 ln 002)."""
    holders = [i for i, (r, _) in records.items() if headline is not None and _holds(r, headline)]
    if headline is None or not (holders or settings):
        return set()
    pool = holders or list(records)
    if settings and (len(_conditions(records, pool)) > 1 or not holders):
        scores = [_matches(records[i][0], settings) for i in pool]
        best = max(scores, default=0)
        pool = [i for i, s in zip(pool, scores, strict=True) if best and s == best]
    return set(pool) if pool and len(_conditions(records, pool)) <= 1 else set()


def _conditions(records: dict[int, tuple[dict[str, Any], str]], ids: list[int]) -> set[str]:
    return {records[i][1] for i in ids} - {""}


def _matches(record: dict[str, Any], settings: dict[str, Any]) -> int:
    """How many of ``settings`` the record's own scalar fields have (a key may extend the other:
    ``lr0`` for ``lr``; numbers compared as numbers)."""
    count = 0
    for key, want in settings.items():
        for k, v in record.items():
            if isinstance(v, (list, dict)) or not _same_key(str(k), key):
                continue
            if _same_value(v, want):
                count += 1
                break
    return count


def _same_key(a: str, b: str) -> bool:
    a, b = a.lower(), b.lower()
    return a == b or (
        min(len(a), len(b)) >= 2 and (a.startswith(b) or b.startswith(a)) and abs(len(a) - len(b)) <= 1
    )


def _same_value(have: Any, want: Any) -> bool:
    try:
        return math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(have).strip().lower() == str(want).strip().lower()


def _record_path(path: str) -> str:
    """The key path of the record holding the list at ``path`` ("runs.a.train_loss" -> "runs.a",
    "runs[2].train_loss" -> "runs[2]", a top-level list -> "")."""
    return path.rpartition(".")[0]


def _same_values_once(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per distinct list of a file: a list a program wrote twice (a grid cell and the
    ``main`` alias of it) is shown once, naming the other keys (``"same"``)."""
    first: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
    out = []
    for f in found:
        key = (f["file"], tuple(f.get("values") or ()))
        if f.get("values") and key in first:
            first[key].setdefault("same", []).append(f["path"])
            continue
        first[key] = f
        out.append(f)
    for f in out:
        f.pop("values", None)
        f.setdefault("same", [])
    return out


# the other per-step lists of a node's data files a review sees compactly: a list not named like a
# loss (an accuracy or a weight norm per epoch) whose length is a loss list's (one value a step of
# the same loop) or whose name says it follows the training (relay s7 ln2 023: the per-epoch
# memorisation series, the idea's point, never reached the reviewer: only "train_loss" lists did)
STEP_NAME = re.compile(
    r"acc|norm|grad|fit|score|epoch|step|iter|history|curve|trace|perplexity|learning_rate|(^|_)lr($|_)",
    re.IGNORECASE,
)
MAX_OTHER_SERIES = 12
MIN_STEPS = 3  # fewer values are a pair or a triple of conditions, not a course


def step_series(
    workspace: Any,
    skip: frozenset[str] = frozenset(),
    parent: Any = None,
    headline: tuple[str, float] | None = None,
    config: str = "",
) -> tuple[list[dict[str, Any]], int]:
    """:func:`step_lists` as (the lists shown, how many there are in all)."""
    view = step_lists(workspace, skip, parent, headline, config)
    return view.shown, view.total


def step_lists(
    workspace: Any,
    skip: frozenset[str] = frozenset(),
    parent: Any = None,
    headline: tuple[str, float] | None = None,
    config: str = "",
) -> SeriesView:
    """The numeric per-step lists of the workspace's JSON data files that are not named like a
    loss (those are :func:`loss_lists`'s), each as ``{"file", "path", "n", "nulls",
    "first", "last", "min", "max"}`` (values at 4 significant digits, more where two would read
    alike): a list of :data:`MIN_STEPS` or more numbers whose length is that of a loss-named list
    of the same files, or whose key names a per-step quantity (:data:`STEP_NAME`). At most
    :data:`MAX_OTHER_SERIES`, the rest named (``left_out``); the headline condition's lists first
    (as :func:`loss_lists` finds it: s9 ln 006 hid the headline's val_acc curve), then the others
    in file and key order, a child's new lists (not in ``parent``'s data) the first to get a
    place."""
    found = [
        (rel, key, v, record)
        for rel, data in _json_data(Path(workspace), skip)
        for key, v, record in _walk_lists(data, lambda _k, v: _all_numbers(v))
    ]
    steps = {len(v) for _, path, v, _ in found if SERIES_NAME.search(path.rsplit(".", 1)[-1])}
    out = [
        (rel, path, v, record)
        for rel, path, v, record in found
        if len(v) >= MIN_STEPS
        and not SERIES_NAME.search(path.rsplit(".", 1)[-1])
        and not CONFIG_LIST.search(re.sub(r"\[\d+\]", "", path))
        and (len(v) in steps or STEP_NAME.search(re.sub(r"\[\d+\]", "", path.rsplit(".", 1)[-1])))
    ]
    old = (
        {(rel, path) for rel, path, _ in _numeric_lists(parent, frozenset())} if parent is not None else None
    )
    holders = _headline_records(
        {id(r): (r, _condition(r) or _record_path(path)) for _, path, _, r in out},
        headline,
        _headline_settings(Path(workspace), skip, config),
    )
    items = [
        {
            "file": rel,
            "path": path,
            "values": v,
            "at": i,
            "headline": id(record) in holders,
            # every list's condition, not only the headline's: runs[11-16] of an extra dataset were
            # shown by index alone (relay s9 ln2 022)
            "condition": _condition(record),
            "new": old is not None and (rel, path) not in old,
            "setting": bool(SETTING_NAME.match(path.rsplit(".", 1)[-1])),
        }
        for i, (rel, path, v, record) in enumerate(out)
    ]
    ranked = _ranked(items)
    shown = [
        {
            **_compact(f["file"], f["path"], f["values"]),
            "headline": f["headline"],
            "condition": f["condition"],
        }
        for f in _in_order(ranked[:MAX_OTHER_SERIES])
    ]
    rest = _in_order(ranked[MAX_OTHER_SERIES:])
    return SeriesView(shown, len(out), left_out_text([(f["file"], f["path"]) for f in rest]))


def _compact(rel: str, path: str, items: list[Any]) -> dict[str, Any]:
    nums = [float(v) for v in items if v is not None]
    first = next((v for v in items if v is not None), None)
    last = next((v for v in reversed(items) if v is not None), None)
    ends = [x for x in (first, last, min(nums), max(nums)) if x is not None]
    d = distinct_digits(ends)
    return {
        "file": rel,
        "path": path,
        "n": len(items),
        "nulls": sum(v is None for v in items),
        **{k: f"{x:.{d}g}" for k, x in zip(("first", "last", "min", "max"), ends, strict=True)},
    }


def _numeric_lists(workspace: Any, skip: frozenset[str]) -> list[tuple[str, str, list[Any]]]:
    """Every list of numbers (nulls allowed) in the workspace's JSON data files, as (file, key
    path, list), in file and key order, as deep as a data outline goes."""
    return [
        (rel, key, v)
        for rel, data in _json_data(Path(workspace), skip)
        for key, v, _ in _walk_lists(data, lambda _k, v: _all_numbers(v))
    ]


def _json_data(workspace: Path, skip: frozenset[str]) -> Iterator[tuple[str, Any]]:
    """Each readable JSON data file of the workspace (``data_paths``, ``skip`` left out, none
    above :data:`SERIES_FILE_BYTES`) as (relative path, parsed value), in file order."""
    if not workspace.is_dir():
        return
    for rel in data_paths(workspace):
        path = workspace / rel
        if rel in skip or path.suffix.lower() != ".json" or not regular_file_inside(workspace, path):
            continue
        try:
            if path.stat().st_size > SERIES_FILE_BYTES:
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue  # an unreadable file is the plotting call's to report
        yield rel, data


def _walk_lists(
    value: Any, take: Callable[[str, list[Any]], bool]
) -> Iterator[tuple[str, list[Any], dict[str, Any]]]:
    """The lists under ``value`` that ``take`` (key, list) accepts, as (key path, list, the
    record holding it), in key order, as deep as a data outline goes; a list it refuses is walked
    into (a list of records)."""

    def walk(node: Any, path: str, depth: int) -> Iterator[tuple[str, list[Any], dict[str, Any]]]:
        if depth > OUTLINE_DEPTH:
            return
        if isinstance(node, dict):
            for k, v in node.items():
                key = f"{path}.{k}" if path else str(k)
                if isinstance(v, list) and take(str(k), v):
                    yield key, v, node
                else:
                    yield from walk(v, key, depth + 1)
        elif isinstance(node, list):
            for i, v in enumerate(node[:OUTLINE_KEYS]):
                if isinstance(v, (dict, list)):
                    yield from walk(v, f"{path}[{i}]", depth + 1)

    yield from walk(value, "", 0)


def _all_numbers(items: list[Any]) -> bool:
    nums = [v for v in items if v is not None]
    return bool(nums) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums)


# a record's field naming its condition (a run's "name": "asgd l2=0.01,lr0=0.1")


def _holds(record: dict[str, Any], headline: tuple[str, float]) -> bool:
    """The record reports the headline value under the metric's name (or a field the name
    extends or that extends it: ``val_accuracy`` for ``val_accuracy_full``; or one naming it
    shorter: ``final_val_acc`` for ``val_accuracy``, s9 ln 006)."""
    name, value = headline
    for k, v in record.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        key = str(k)
        if (
            key == name or name.startswith(f"{key}_") or key.startswith(f"{name}_") or _abbreviates(key, name)
        ) and math.isclose(float(v), value, rel_tol=1e-9, abs_tol=1e-12):
            return True
    return False


# words a field adds to a metric's name without changing what it measures
WHEN_WORDS = frozenset({"final", "last", "end", "best", "mean", "avg"})


def _abbreviates(key: str, name: str) -> bool:
    """``final_val_acc`` names ``val_accuracy``: the same words in order, each a prefix of the
    other's (at least two letters), past :data:`WHEN_WORDS`."""
    a = [w for w in key.lower().split("_") if w and w not in WHEN_WORDS]
    b = [w for w in name.lower().split("_") if w and w not in WHEN_WORDS]
    return len(a) == len(b) > 0 and all(
        min(len(x), len(y)) >= 2 and (x.startswith(y) or y.startswith(x)) for x, y in zip(a, b, strict=True)
    )


def _condition(record: dict[str, Any]) -> str:
    """The record's name-like string field, cut to 80 characters, with its dataset label when it
    has one (``l2_0.1 [synthetic_noise0.4]``: an extra condition's record repeats the headline
    data's run names, relay s9 ln2 022); "" when it has neither."""
    name, data = record_name(record), record.get("dataset")
    label = " ".join(data.split())[:80] if isinstance(data, str) and data.strip() else ""
    return f"{name} [{label}]" if name and label else name or label


def _all_series(workspace: Path, skip: frozenset[str], values: bool = True) -> list[dict[str, Any]]:
    """Every loss-like list of the workspace's JSON data files, in file and key order (``values``
    False: their file and key only)."""
    return [
        {**(_series(key, v) if values else {"path": key}), "file": rel, "record": record}
        for rel, data in _json_data(workspace, skip)
        for key, v, record in _walk_lists(data, lambda k, v: bool(SERIES_NAME.search(k)) and _numbers(v))
    ]


def _numbers(items: list[Any]) -> bool:
    """A list of at least two numbers, nulls allowed (a non-finite loss written as null)."""
    nums = [v for v in items if v is not None]
    return (
        len(items) >= 2
        and bool(nums)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums)
    )


def _series(path: str, items: list[Any]) -> dict[str, Any]:
    whole = len(items) <= 2 * SERIES_ENDS + 1
    shown = items if whole else [*items[:SERIES_ENDS], *items[-SERIES_ENDS:]]
    # 4 significant digits, more where two shown values would read alike (a plateau at 1e-6)
    digits = distinct_digits(v for v in shown if v is not None)

    def fmt(v: Any) -> str:
        return "null" if v is None else f"{v:.{digits}g}"

    nums = [v for v in items if v is not None]
    return {
        "path": path,
        "n": len(items),
        "nulls": sum(v is None for v in items),
        "head": [fmt(v) for v in (items if whole else items[:SERIES_ENDS])],
        "tail": [] if whole else [fmt(v) for v in items[-SERIES_ENDS:]],
        "first": fmt(items[0]),
        "last": fmt(items[-1]),
        "min": fmt(min(nums)) if nums else "null",
        "max": fmt(max(nums)) if nums else "null",
        "values": list(items),  # for finding a list written twice; dropped before rendering
    }


def data_files_text(
    files: list[dict[str, Any]], metrics: Any, total: int | None = None, writers: DataLines | None = None
) -> str:
    """The ``data_files`` layer: every file's relative path and size first (a head cut keeps the
    names), each structure once — inline when short and one file's own, else under a label that
    every file sharing it names. ``metrics.json`` holding only the metrics listed under "Run
    result" says so instead of repeating them. ``writers``: the program's lines that define the
    data (:func:`~.data_lines.data_lines`), after the structures."""
    rows: list[dict[str, Any]] = []
    texts: list[str] = []
    for f in files:
        text = _outline_text(f, metrics)
        rows.append({"file": f["file"], "bytes": f["bytes"], "text": text})
        texts.append(text)
    shared: dict[str, dict[str, Any]] = {}
    for row in rows:
        text = row["text"]
        if text and (texts.count(text) > 1 or len(text) > INLINE_OUTLINE_CHARS):
            if text not in shared:
                shared[text] = {"ref": f"S{len(shared) + 1}", "text": text, "count": texts.count(text)}
            row["ref"] = shared[text]["ref"]
    more = max(0, (total or len(files)) - len(files))
    return render(
        "context/_data_files.j2",
        rows=rows,
        shared=list(shared.values()),
        more=more,
        writers=writers.text if writers is not None else "",
        unnamed=list(writers.unnamed) if writers is not None and writers.text else [],
        left_out=writers.left_out if writers is not None else 0,
        categories=list(writers.categories) if writers is not None else [],
    ).strip()


def _outline_text(f: dict[str, Any], metrics: Any) -> str:
    """One file's outline as one line of text ("" when there is none)."""
    listed = bool(metrics) and f["file"] == METRICS_JSON and f.get("top_keys") == ["metrics"]
    return render("context/_data_outline.j2", f=f, metrics_listed=listed).strip()


def _json_outline(value: Any, depth: int = 0) -> str:
    """A JSON value's shape as one line, uncut (:func:`json_outline` fits it to a budget)."""
    return _Outliner().outline(value, depth)


def json_outline(value: Any, nullable: frozenset[str] = frozenset()) -> str:
    """A JSON value's shape as one line of at most :data:`OUTLINE_CHARS`, never cut mid-token
    (relay s8 ln2 007, 013 ended a structure at ``"standardise": b`` with no marker and lost every
    key after it): fewer levels first, deeper objects shown as their key count and names, with a
    marker saying so; then, when even the top level is too long, its first entries and the names
    of the ones left out. ``nullable``: field names the program writes as null
    (:func:`written_null`), typed ``|null`` although this file holds no null."""
    for depth in range(OUTLINE_DEPTH, 0, -1):
        text = _Outliner(depth, nullable).outline(value)
        if len(text) <= OUTLINE_CHARS:
            if depth == OUTLINE_DEPTH:
                return text
            return f"{text} [... cut: objects below level {depth} shown by key count and names ...]"
    return _Outliner(1, nullable).top_entries(value)


class _Outliner:
    """Key names and types, lists as ``[N x item]``, to ``max_depth`` levels. Values of one kind
    are outlined once: a list's records, and an object's values (3 or more: one entry per run,
    per seed) under ``<each of N keys: ...>`` naming every key (up to :data:`OUTLINE_NAMES`) — a
    plotting script indexes them. Merging unites what differs: a field's types (``float|null``),
    list lengths (``[50 or 200 x float]``), fields only some records have (``(in 3 of 5)``)."""

    def __init__(self, max_depth: int = OUTLINE_DEPTH, nullable: frozenset[str] = frozenset()):
        self.max_depth = max_depth
        self.nullable = nullable

    def outline(self, value: Any, depth: int = 0) -> str:
        if isinstance(value, dict):
            return self._object(value, depth)
        if isinstance(value, list):
            return f"[{len(value)} x {self._items(value, depth)}]" if value else "[]"
        return _scalar(value)

    def _object(self, value: dict[str, Any], depth: int) -> str:
        if not value:
            return "{}"
        if depth >= self.max_depth:
            return _collapsed([str(k) for k in value])
        keys = [str(k) for k in value]
        values = list(value.values())
        if len(values) >= 3 and any(isinstance(v, (dict, list)) for v in values) and not _own_lengths(values):
            merged = self._merge(values, depth + 1, strict=True)
            if merged is not None:
                return f"{{<{_each_key(keys)}>: {merged}}}"
        parts = [
            f"{json.dumps(k, ensure_ascii=False)}: {self._field(k, self.outline(v, depth + 1))}"
            for k, v in list(zip(keys, values, strict=True))[:OUTLINE_KEYS]
        ]
        if len(keys) > OUTLINE_KEYS:
            parts.append(f"... {len(keys) - OUTLINE_KEYS} more keys: {_names(keys[OUTLINE_KEYS:])}")
        return "{" + ", ".join(parts) + "}"

    def top_entries(self, value: Any) -> str:
        """The top level's entries while they fit, then how many were left out and their names
        (the last resort of :func:`json_outline`)."""
        if not isinstance(value, dict):
            return self.outline(value)[: OUTLINE_CHARS - 60].rsplit(" ", 1)[0] + " [... cut ...]"
        kept: list[str] = []
        keys = [str(k) for k in value]
        for k, v in value.items():
            part = f"{json.dumps(str(k), ensure_ascii=False)}: {self._field(str(k), self.outline(v, 1))}"
            if sum(len(p) + 2 for p in kept) + len(part) > OUTLINE_CHARS * 3 // 4:
                break
            kept.append(part)
        rest = keys[len(kept) :]
        return "{" + ", ".join(kept) + f", [... cut: {len(rest)} more keys: {_names(rest)} ...]}}"

    def _field(self, key: str, shape: str) -> str:
        """``shape`` typed nullable when the program writes ``key`` as null and no null shows."""
        if key not in self.nullable or "null" in shape.split("|"):
            return shape
        if re.fullmatch(r"[a-z]+(\|[a-z]+)*", shape):
            return f"{shape}|null"
        m = re.fullmatch(r"\[([^\[\]]+ x )([a-z]+(?:\|[a-z]+)*)\]", shape)
        return f"[{m[1]}{m[2]}|null]" if m and "null" not in m[2].split("|") else shape

    def _items(self, items: list[Any], depth: int, count_nulls: bool = True) -> str:
        """What a list holds: every scalar type, in order of appearance, null last and counted
        (a loss list whose non-finite values were written as null is ``float|null (3 null)``: a
        script that assumes floats fails on them); its records, or its lists, merged into one."""
        kinds = _kinds(items)
        records = [x for x in items if isinstance(x, dict)]
        lists = [x for x in items if isinstance(x, list)]
        shapes = []
        if records:
            shapes.append(
                self._records(records, depth + 1, strict=False) or self.outline(records[0], depth + 1)
            )
        if lists:
            shapes.append(self._lists(lists, depth + 1) or self.outline(lists[0], depth + 1))
        nulls = sum(x is None for x in items)
        scalars = [k for k in kinds if k != "null"]
        shown = "|".join(shapes + scalars + (["null"] if nulls else []))
        return f"{shown} ({nulls} null)" if nulls and count_nulls and len(shown) > 4 else shown

    def _merge(self, values: list[Any], depth: int, strict: bool) -> str | None:
        """One outline for several values of one kind, or None when they are not one kind (an
        object and a list; records sharing less than half their keys, when ``strict``)."""
        present = [v for v in values if v is not None]
        null = "|null" if len(present) < len(values) else ""
        if not present:
            return "null"
        if all(not isinstance(v, (dict, list)) for v in present):
            return "|".join(_kinds(values))
        if all(isinstance(v, dict) for v in present):
            shape = self._records(present, depth, strict)
        elif all(isinstance(v, list) for v in present):
            shape = self._lists(present, depth)
        else:
            return None
        return None if shape is None else shape + null

    def _records(self, records: list[dict[str, Any]], depth: int, strict: bool) -> str | None:
        keys: dict[str, list[Any]] = {}
        for rec in records:
            for k, v in rec.items():
                keys.setdefault(str(k), []).append(v)
        shared = sum(len(vs) == len(records) for vs in keys.values())
        if strict and 2 * shared < len(keys):
            return None
        if depth >= self.max_depth:
            return _collapsed(list(keys))
        shapes: dict[str, str] = {}
        for k, vs in keys.items():
            shape = self._merge(vs, depth + 1, strict=False)
            if shape is None:  # an object here, a list there: each distinct shape (at most 3)
                distinct = list(dict.fromkeys(self.outline(v, depth + 1) for v in vs))
                shape = " or ".join(distinct[:3]) + (
                    f" or ... {len(distinct) - 3} more shapes" if len(distinct) > 3 else ""
                )
            shapes[k] = self._field(k, shape)
        first = next(iter(shapes.values()))
        if len(shapes) >= 3 and first[:1] in ("{", "[") and all(s == first for s in shapes.values()):
            return f"{{<{_each_key(list(shapes))}>: {first}}}"
        parts = []
        for k, shape in list(shapes.items())[:OUTLINE_KEYS]:
            n = len(keys[k])
            where = f" (in {n} of {len(records)})" if n < len(records) else ""
            parts.append(f"{json.dumps(k, ensure_ascii=False)}: {shape}{where}")
        if len(keys) > OUTLINE_KEYS:
            parts.append(f"... {len(keys) - OUTLINE_KEYS} more keys: {_names(list(keys)[OUTLINE_KEYS:])}")
        return "{" + ", ".join(parts) + "}"

    def _lists(self, lists: list[list[Any]], depth: int) -> str | None:
        """Lists holding one kind of item as one: their lengths (``50 or 200``, a range past 3
        lengths) and what any of them holds (nulls said, not counted: the counts differ)."""
        held = {_held(x) for x in lists if x}
        if len(held) > 1:
            return None
        lens = sorted({len(x) for x in lists})
        span = " or ".join(map(str, lens)) if len(lens) <= 3 else f"{lens[0]}-{lens[-1]}"
        items = [x for lst in lists for x in lst]
        return f"[{span} x {self._items(items, depth, count_nulls=False)}]" if items else "[]"


def _own_lengths(values: list[Any]) -> bool:
    """Lists of plain values whose lengths differ ({"train_loss": [50 x float], "test_acc": [10 x
    float]}): each is named with its own length — short, and which has which matters."""
    lists = [v for v in values if isinstance(v, list)]
    return (
        len(lists) == len(values)
        and len({len(v) for v in lists}) > 1
        and not any(isinstance(x, (dict, list)) for v in lists for x in v)
    )


def _held(items: list[Any]) -> str:
    """What kind of thing a list holds (records, lists, the scalar types), nulls aside."""
    kinds = {
        "record" if isinstance(x, dict) else "list" if isinstance(x, list) else _scalar(x) for x in items
    }
    return "|".join(sorted(kinds - {"null"}))


def _kinds(values: list[Any]) -> list[str]:
    """The scalar types among ``values`` in order of appearance, null last."""
    kinds = list(dict.fromkeys(_scalar(v) for v in values if not isinstance(v, (dict, list))))
    return [k for k in kinds if k != "null"] + (["null"] if "null" in kinds else [])


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), type(value).__name__)


def _each_key(keys: list[str]) -> str:
    """``each of N keys: a, b, ...``: every key while they are few (a script indexes them: relay
    s8 ln2 007 hid "main" in "grid_l2=0.0_lr=0.01, ..., ablate_no_std_lr0.001"), else the first
    and last ones and how many are left out."""
    listed = ", ".join(keys)
    if len(keys) <= OUTLINE_NAMES and len(listed) <= OUTLINE_NAME_CHARS:
        return f"each of {len(keys)} keys: {listed}"
    return f"each of {len(keys)} keys: {_names(keys, OUTLINE_NAME_CHARS)}"


def _names(keys: list[str], chars: int = 300) -> str:
    """Key names within about ``chars``: the first ones, then how many more and the last one."""
    shown: list[str] = []
    for k in keys[:-1]:
        if sum(len(s) + 2 for s in shown) + len(k) > chars:
            break
        shown.append(k)
    if len(shown) >= len(keys) - 1:
        return ", ".join(keys)
    return f"{', '.join(shown)}, ... ({len(keys) - len(shown) - 1} more), {keys[-1]}"


def _collapsed(keys: list[str]) -> str:
    """An object past the outline's depth: its key count and names."""
    return f"{{... {len(keys)} keys: {_names(keys, 120)}}}"


# where a program writes a field: "name": / \"name\": (C's fprintf) / ["name"] =
_WRITTEN_KEY = re.compile(r"""\\?["']([A-Za-z_][\w.\-]*)\\?["']\s*(?::|\]\s*=(?!=))""")
# a null written, not one tested for ("diverged": any(v is None for v in L))
_NULL_WORD = re.compile(r"(?<!is )(?<!not )(?<!==)(?<!== )(?<!!=)(?<!!= )\b(None|null|NULL|nullptr|nil)\b")


def written_null(text: str) -> frozenset[str]:
    """The field names a program's lines write as null (``"gflops": null`` for a failed kernel,
    ``[v if finite else None ...]``): their outline says ``|null`` even when this run wrote none
    (relay s8 mm2 003 and ln2 003 typed them ``float``). A field's value is what follows its name
    on its line up to the next field's name."""
    found: set[str] = set()
    for line in text.splitlines():
        code = re.sub(r"^\s*\d+\|", "", line)
        hits = list(_WRITTEN_KEY.finditer(code))
        for i, m in enumerate(hits):
            end = hits[i + 1].start() if i + 1 < len(hits) else len(code)
            if _NULL_WORD.search(code[m.end() : end]):
                found.add(m[1])
    return frozenset(found)


def _plots(ctx: NodeContext, answer: CodeAnswer, metrics: Any, caveat: str = "") -> PlotsRecord:
    pcfg = ctx.cfg.agent.plots
    skip = unmeasured(ctx.dir)  # what the answer wrote or was there before the run: no result
    files = data_files(ctx.workspace, skip)
    out_dir = ctx.paths.plots
    shown = tuple(f["file"] for f in files)
    kept = None if metrics is None else tuple(dict(m) for m in metrics)
    if not files:
        return _done(
            ctx,
            PlotsRecord(
                data_files=shown,
                metrics=kept,
                error="the experiment saved no data files (.json, .csv, .npy, .npz) to plot",
            ),
        )
    # what the data mean is defined by the lines of the program that write them: those, not the
    # whole program (5-13 kB a call in relay s7 mm2 and ln2); the program only when no line names
    # a data file (a name built another way)
    names = [str(m.get("name", "")) for m in metrics or [] if isinstance(m, dict)]
    writers = data_lines(answer.text_files(), ctx.workspace, shown, names)
    nullable = written_null(writers.text)  # fields these lines write as null: outlined |null
    if nullable:
        files = data_files(ctx.workspace, skip, nullable)
    script = parent_plot_script(ctx)
    # the parent's script is a starting point only when it reads files this node wrote too (a
    # relay run's child got one that plotted nothing of its new data: s7 ln2 024)
    if script and not names_any(script, shown):
        script = ""
    kinds = node_kinds(ctx, metrics)
    values: dict[str, Any] = {
        **node_facts(ctx),
        **(program_values(ctx, answer) if not writers.text else {"prior_code": ""}),
        "data_files": data_files_text(files, metrics, count_data_files(ctx.workspace, skip), writers=writers),
        "run_result": run_result_text(None, metrics, commands=False),
        "measurement_caveat": caveat,
        "plot_dir": PLOT_DIR,
        "max_figures": pcfg.max_figures,
        "plot_problems": "",
        "previous_script": "",
        "parent_plot_script": script,
        "plot_script_node": ctx.extra_values.get("plot_script_node", ctx.parent.id if ctx.parent else ""),
        "parent_plot_problems": parent_plot_problems(ctx) if script else [],
        **_figure_facts(ctx, kinds),
    }
    schema = plot_schema(pcfg.max_figures)
    problems: list[str] = []
    good: list[Figure] = []
    rejected: list[RejectedFigure] = []
    history: list[PlotAttempt] = []  # per attempt: its problems and refused figures (what the retry was told)
    attempts = 0
    for attempt in range(1, ATTEMPTS + 1):
        attempts = attempt
        try:
            plan = ctx.ask(
                "node_plot",
                values,
                phase=PLOT_PHASE,
                label=f"plot{attempt}",
                role="plotting",
                schema=schema,
            ).parsed
        except LLMError as exc:
            problems = [f"no valid plotting answer: {exc}"[:1500]]
            break
        script = str(plan.get("script") or "")
        problems, good, rejected = _run_and_check(ctx, script, list(plan.get("figures") or []), attempt)
        if len(good) > pcfg.max_figures:
            rejected += [
                RejectedFigure(g.file, f"{g.file}: over agent.plots.max_figures ({pcfg.max_figures})")
                for g in good[pcfg.max_figures :]
            ]
            good = good[: pcfg.max_figures]
        history.append(PlotAttempt(attempt, tuple(problems), tuple(rejected)))
        if not problems:
            break
        values["plot_problems"] = "\n".join(f"- {p}" for p in problems)
        values["previous_script"] = script
    # only the final attempt's figures are kept in nodes/<id>/plots/
    if out_dir.exists():
        shutil.rmtree(out_dir)
    if good:
        out_dir.mkdir(parents=True, exist_ok=True)
        for fig in good:
            shutil.copyfile(ctx.workspace / PLOT_DIR / fig.file, out_dir / fig.file)
    record = PlotsRecord(
        figures=tuple(good),
        rejected=tuple(rejected),
        attempts=attempts,
        history=tuple(history),
        data_files=shown,
        metrics=kept,
        error="\n".join(problems) if problems else None,
    )
    return _done(ctx, record)


def _plots_of(run_dir: Path, node_id: str) -> PlotsRecord | None:
    """A node's plotting record; None without one, or when it is torn (a power loss)."""
    try:
        return read_artifact(RunPaths(run_dir).node(node_id).file(PLOTS_FILE), PlotsRecord)
    except ValueError:
        return None


def _critique_of(run_dir: Path, node_id: str) -> Critique | None:
    """A node's figure critique; None without one, or when it is torn (a power loss)."""
    try:
        return read_artifact(RunPaths(run_dir).node(node_id).file(VLM_FILE), Critique)
    except ValueError:
        return None


def _working_script(run_dir: Path, node_id: str) -> str:
    """The node's plotting script when its figures passed (its ``plots.json`` keeps some), else ""."""
    record = _plots_of(run_dir, node_id)
    if record is None or not record.figures:  # no figure passed, or a torn record: none offered
        return ""
    try:
        return (RunPaths(run_dir).node(node_id).workspace / PLOT_SCRIPT).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # no script
        return ""


def working_plot_source(run_dir: Path, nodes: list[Any], node: Any) -> str | None:
    """The node whose plotting script a child's plotting call is given: its parent's when the
    parent's figures passed, else the latest node of its stage whose plotting worked (a sibling's
    fixed script beats none: a relay run's child got its parent's failed one), else None. A draft
    (no parent) gets none. ``nodes``: the journal's nodes in creation order when the node was
    scheduled (frozen with its stage inputs, so a resume or replay picks the same)."""
    if not node.parent_id:
        return None
    if _working_script(run_dir, node.parent_id):
        return str(node.parent_id)
    for other in reversed(nodes):
        if other.id != node.id and other.stage == node.stage and other.is_good and not other.is_seed_eval:
            if _working_script(run_dir, other.id):
                return str(other.id)
    return None


def parent_plot_script(ctx: NodeContext) -> str:
    """The best available working plotting script for a child's plotting call (the node
    :func:`working_plot_source` chose when the node was scheduled; without that record, the
    parent's when its figures passed); "" for a draft or when no node's plotting worked."""
    if ctx.parent is None:
        return ""
    source = ctx.extra_values.get("plot_script_node", ctx.parent.id)
    return _working_script(ctx.run.dir, str(source)) if source else ""


def parent_plot_problems(ctx: NodeContext) -> list[str]:
    """The problems the vision model found in the figures of the script offered (the parent's, or
    the sibling's :func:`working_plot_source` chose; its ``vlm.json`` critique): a child reusing
    that script fixes them rather than copying them (relay run 2)."""
    if ctx.parent is None:
        return []
    source = str(ctx.extra_values.get("plot_script_node", ctx.parent.id))
    critique = _critique_of(ctx.run.dir, source)
    verdict = critique.verdict if critique is not None else None
    return [p for p in verdict.problems if p.strip()] if verdict is not None else []


def _done(ctx: NodeContext, record: PlotsRecord) -> PlotsRecord:
    ctx.run.event(
        "node_plots",
        node_id=ctx.node.id,
        figures=[f.file for f in record.figures],
        rejected=[{"file": r.file, "reason": r.reason} for r in record.rejected],
        attempts=record.attempts,
        error=(record.error or "")[:1000] or None,
    )
    return record


def _run_and_check(
    ctx: NodeContext, script: str, declared: list[dict[str, Any]], attempt: int
) -> tuple[list[str], list[Figure], list[RejectedFigure]]:
    """Run the script, check its declared figures: (problems, good, rejected)."""
    from ..execution.base import SandboxError

    ws = ctx.workspace
    plot_dir = ws / PLOT_DIR
    if plot_dir.exists():  # a figure left by the first attempt must not pass as new
        shutil.rmtree(plot_dir)
    plot_dir.mkdir(parents=True)
    atomic_write_text(ws / PLOT_SCRIPT, script, durable=False)
    problems: list[str] = []
    try:
        res = run_command(
            ctx, f"{ctx.cfg.exec.python} {PLOT_SCRIPT}", phase=PLOT_PHASE, label=f"plot{attempt}"
        )
        if not res.ok:
            head = f"the plotting script failed ({res.reason or f'exit {res.exit_code}'})"
            problems.append(f"{head}; stderr tail:\n{_relative(res.stderr or '', ws)[-1500:]}")
    except SandboxError as exc:
        problems.append(f"the sandbox could not run the plotting script: {exc}")
    good: list[Figure] = []
    rejected: list[RejectedFigure] = []
    seen: set[str] = set()
    for fig in declared:
        name = str(fig.get("file", "")).removeprefix(f"{PLOT_DIR}/")
        reason = _figure_problem(ws, plot_dir / name, name, seen)
        seen.add(name)
        if reason:
            rejected.append(RejectedFigure(name, reason))
        else:
            good.append(Figure(name, str(fig.get("caption", "")).strip()))
    problems += [r.reason for r in rejected]
    if not declared:
        problems.append("the answer declared no figures")
    return problems, good, rejected


def _relative(text: str, workspace: Path) -> str:
    """``text`` with the workspace's absolute path left out of its file paths: the script runs in
    the workspace, and the absolute path (this node's folder on the host) tells the retry, and the
    children that see these problems as plot feedback, nothing about their own files."""
    for root in dict.fromkeys((str(workspace), str(workspace.resolve()))):
        text = text.replace(root + "/", "")
    return text


def _figure_problem(ws: Path, path: Path, name: str, seen: set[str]) -> str | None:
    """Why the declared figure cannot be kept, or None."""
    if not _SAFE_NAME.match(name):
        return f"{name!r}: the file must be a plain name like loss.png, saved under {PLOT_DIR}/"
    if name in seen:
        return f"{name}: declared twice"
    if not path.exists() and not path.is_symlink():
        return f"{name}: the script did not write {PLOT_DIR}/{name}"
    if not regular_file_inside(ws, path):
        return f"{name}: not a regular file inside the workspace (a symlink or a special file)"
    size = path.stat().st_size
    if size > MAX_FIGURE_BYTES:
        return f"{name}: {size:,} bytes, at most {MAX_FIGURE_BYTES:,} (lower the dpi or the figure size)"
    reason = check_figure(path)
    if reason:
        return reason
    from PIL import Image

    with Image.open(path) as img:
        w, h = img.size
    if max(w, h) > MAX_FIGURE_SIDE:
        return f"{name}: {w}x{h} px, at most {MAX_FIGURE_SIDE} px a side (lower the dpi or the figure size)"
    return None


# ------------------------------------------------------------ critique --


def critique_plots(ctx: NodeContext, plots: PlotsRecord, caveat: str = "") -> Critique:
    """The ``phase5_vlm`` step (checkpointed): ``vlm.json``, a :class:`Critique` (its verdict, or
    why there is none). ``caveat``: the execution review's measurement caveat, or ""."""
    return checkpoint_typed(ctx, VLM_PHASE, Critique, VLM_FILE, lambda: _critique(ctx, plots, caveat))


def _critique(ctx: NodeContext, plots: PlotsRecord, caveat: str = "") -> Critique:
    figures = list(plots.figures)
    verdict, error = None, None
    reason = vision_skip_reason(ctx.cfg, ctx.llm)
    if reason is None and not ctx.cfg.agent.plots.critique:
        reason = "agent.plots.critique is false"
    if reason is None and not figures:
        reason = "no figure to critique: " + (plots.error or "the plotting step kept none")[:500]
    if reason is None:
        try:
            verdict = _ask_vlm(ctx, figures, plots, caveat)
        except LLMError as exc:
            if is_vision_refusal(exc):
                reason = f"the model refused image input: {exc}"
            else:
                error = f"critique failed: {exc}"[:2000]
        except ValueError as exc:  # the client checked the schema: only a backend ignoring it gets here
            error = f"critique failed: the answer is malformed: {exc}"[:2000]
    critique = Critique(
        model=ctx.cfg.model_for("vlm_feedback"),
        figures=tuple(f.file for f in figures),
        verdict=verdict,
        skipped=reason,
        error=error,
    )
    ctx.run.event(
        "node_vlm",
        node_id=ctx.node.id,
        valid=verdict.valid if verdict is not None else None,
        skipped=critique.skipped,
        error=critique.error,
    )
    return critique


def _ask_vlm(ctx: NodeContext, figures: list[Figure], plots: PlotsRecord, caveat: str = "") -> Verdict:
    metrics = list(plots.metrics or [])
    kinds = node_kinds(ctx, metrics)
    facts = node_facts(ctx)
    if facts.get("parent_metrics"):
        # a figure critic checks plausibility against the parent's headline (and its seed spread),
        # not every metric: a relay run's critique got the parent's 13 metrics with seed spreads
        # (~2k characters) beside the node's own (relay s8 ln2 014, 021)
        facts["parent_metrics"] = facts["parent_metrics"][:1]
        facts["parent_metrics_more"] = 0
    values = {
        **facts,
        "task": ctx.run.idea.to_markdown(),
        "python": ctx.cfg.exec.python,
        "run_result": run_result_text(None, metrics, commands=False),
        "measurement_caveat": caveat,
        "kinds": kinds,
        # listed once, with their captions, in the call's brief
        "figures": [{"file": f.file, "caption": f.caption} for f in figures],
        # the stage's other nodes with their results: a figure contradicting theirs is checked
        **judged_stage(ctx),
        # the machine and its load for a benchmark, the stage's protocol, the node's plan
        **_figure_facts(ctx, kinds),
        "response_schema": CRITIQUE_SCHEMA,
    }
    # the figures go in the last message, their tokens set aside before the text is packed
    images = [image_part(ctx.paths.plots / f.file) for f in figures]
    messages, ledger = ctx.prompts.build(
        "node_vlm", values, node_id=ctx.node.id, role="vlm_feedback", images=images
    )
    call = ctx.call_ctx(VLM_PHASE, "plot_critique", ledger)
    answer = ctx.llm.complete(messages, role="vlm_feedback", ctx=call, schema=CRITIQUE_SCHEMA).parsed
    return Verdict.from_json(answer)


def _figure_facts(ctx: NodeContext, kinds: list[str]) -> dict[str, Any]:
    """What both figure calls (plotting and critique) are told besides the data: for a benchmark
    the machine (cores, caches, peak rate: figures relating tiles to the cache sizes need them,
    relay s7 mm2 013-027) and its load while the node's commands ran (a timing under load is
    slow, 004-024); the stage's evaluation protocol (which dataset and configuration is the
    headline, the seed noise: s7 ln2 008), without a later draft's reference program, which is
    for writing code; the node's own plan, whole (s7 mm2 002-006: it was cut with "[...]")."""
    machine = shows_machine(kinds)
    protocol = ctx.extra_values.get("evaluation_protocol")
    return {
        "environment": machine_text(ctx.environment, ctx.run.idea.to_markdown()) if machine else "",
        "run_load": _run_load(ctx) if machine else [],
        "evaluation_protocol": judged_protocol(protocol) if isinstance(protocol, dict) else None,
        # what the node set out to show and how: its figures are drawn and judged against it
        "own_plan": own_plan(ctx),
    }


def _run_load(ctx: NodeContext) -> list[dict[str, str]]:
    """Each run command of the node with its usage line (CPU vs wall time, the load at its start
    and end, the run's other commands meanwhile: ``execution/usage.py``); [] without a record."""
    try:
        record = read_artifact(ctx.dir / RUN_FILE, RunRecord)
    except ValueError:
        return []
    if record is None:
        return []
    return [{"command": o.command, "usage": o.usage} for o in record.outputs if o.usage]


def check_valid(ctx: NodeContext, critique: Critique) -> None:
    """Raise PhaseFailed when the critique judged the node's result invalid."""
    verdict = critique.verdict
    if verdict is not None and verdict.valid is False:
        why = verdict.reason or "no reason given"
        raise PhaseFailed(VLM_PHASE, f"the vision model judged the result invalid from its plots: {why}")


# ------------------------------------------------------- child's layer --


def plot_feedback(run_dir: Path, node_id: str, verdict_only: bool = False) -> str:
    """The ``plot_feedback`` layer of a child of ``node_id``: its parent's figures and their critique.

    Empty when the parent made no figures. The critique's texts go in verbatim; ``verdict_only``
    (a tune's code call: one setting changed) keeps the figures and the verdict, and says how many
    problems and that the description were left out.
    """
    plots, critique = _plots_of(run_dir, node_id), _critique_of(run_dir, node_id)
    # torn by a power loss: no feedback rather than a crash
    paths = RunPaths(run_dir).node(node_id)
    if (plots is None and paths.file(PLOTS_FILE).exists()) or (
        critique is None and paths.file(VLM_FILE).exists()
    ):
        return ""
    figures = plots.figures if plots is not None else ()
    lines: list[str] = []
    if figures:
        lines.append(f"Figures of the parent node {node_id}:")
        lines += [f"- {f.file}: {f.caption or '(no caption)'}" for f in figures]
    if plots is not None and plots.error:
        lines.append(f"Plotting problems of the parent node: {plots.error}")
    verdict = critique.verdict if critique is not None else None
    if verdict is not None and verdict_only:
        n = len(verdict.problems)
        lines.append(
            "Critique by the vision model, its verdict only (this node changes one setting; its "
            f"description of the figures and its {n} problem{'s' if n != 1 else ''} left out):"
        )
        reason = verdict.reason.strip()
        lines.append(
            f"Result judged {'valid' if verdict.valid else 'INVALID'}" + (f": {reason}" if reason else ".")
        )
    elif verdict is not None:
        lines.append("Critique by the vision model:")
        lines.append(f"What the plots show: {verdict.shows}")
        lines.append("Problems:" if verdict.problems else "Problems: none found")
        lines += [f"- {p}" for p in verdict.problems]
        judged = "valid" if verdict.valid else "INVALID"
        reason = verdict.reason.strip()
        lines.append(f"Result judged {judged}" + (f": {reason}" if reason else "."))
    elif critique is not None and critique.skipped and figures:
        lines.append(f"No critique: {critique.skipped}")
    return "\n".join(lines)

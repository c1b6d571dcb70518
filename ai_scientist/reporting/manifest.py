"""Data manifest of a run: what the aggregation script may plot, described precisely.

For the best node of every stage, the other good nodes of each stage, and each one's seed
re-runs (``seed_of`` names the node re-run), the manifest
lists the data files the experiment saved (numpy arrays with shape and dtype,
npz members, JSON structure, CSV headers), the node's metrics, and which node
and seed produced each file. The files are copied under the aggregation
workspace (``figures/data/<node_id>/...``) so the sandboxed script reads
them by the relative path the manifest names, and nothing outside. Which files are the
experiment's data is :func:`ai_scientist.base.nodedata.holds_node_data` (the node's own plotting call
uses it too): nothing under a hidden or cache directory (matplotlib's font cache), bytecode or
the pipeline's own figures. The seed statistic the
manifest states (``seed_statistic``) is the one the writeup and the run's last lines report.
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..base.fileio import regular_file_inside
from ..base.nodedata import TABLE_SUFFIXES, holds_node_data, jsonl_records, table_outline, unmeasured
from ..base.paths import NodePaths
from ..treesearch.tried import sentences
from .runread import RunView, seed_statistic

MAX_FILES_PER_NODE = 40
OTHER_NODES_PER_STAGE = 3  # good nodes of a stage besides its best (role "stage_node")
SUMMARY_CHARS = 900  # a node's findings in the manifest, whole (the review's 500, a caveat's 300)
STAGE_NODES_MAX_CHARS = 40_000  # stage_node entries only while the manifest stays under this
MAX_FILE_BYTES = 50_000_000


def describe_file(path: Path) -> dict[str, Any]:
    """Shape/dtype/keys/columns of one data file; ``error`` says why it could not be read."""
    suffix = path.suffix.lower()
    info: dict[str, Any] = {"kind": suffix.lstrip("."), "bytes": path.stat().st_size}
    try:
        if suffix == ".npy":
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            info.update(shape=list(arr.shape), dtype=str(arr.dtype))
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                info["arrays"] = {k: {"shape": list(z[k].shape), "dtype": str(z[k].dtype)} for k in z.files}
        elif suffix == ".json":
            info["structure"] = _json_outline(json.loads(path.read_text(encoding="utf-8")))
        elif suffix == ".jsonl":  # one record a line: outlined as the list of them
            info["structure"] = _json_outline(jsonl_records(path))
        elif suffix in TABLE_SUFFIXES:  # a numeric text table (base.nodedata.numeric_table)
            info.update(table_outline(path))
        else:
            delim = "\t" if suffix == ".tsv" else ","
            with path.open(newline="", encoding="utf-8", errors="replace") as fh:
                rows = csv.reader(fh, delimiter=delim)
                info["columns"] = next(rows, [])
                info["rows"] = sum(1 for _ in rows)
    except (ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError, csv.Error) as exc:
        info["error"] = f"unreadable: {exc}"
    return info


def _json_outline(value: Any, depth: int = 0) -> Any:
    """Types and list lengths of a JSON value, to depth 3 (values of scalars omitted). An object
    whose values (3 or more) all have one outline shows it once under ``"<each of N keys: k1,
    k2, ...>"``: a capable model's manifest spelled out one run's 12-field structure for each of
    a grid's runs (~1000 lines) and had no room left for the stage-3 and stage-4 nodes."""
    if isinstance(value, dict):
        if depth >= 3:
            return f"object with {len(value)} keys"
        items = list(value.items())
        inner = [_json_outline(v, depth + 1) for _, v in items]
        shared = json.dumps(inner[0], sort_keys=True) if inner else ""
        same = len(items) >= 3 and all(json.dumps(x, sort_keys=True) == shared for x in inner)
        if same or (len(items) >= 3 and _one_kind(inner)):
            # records of one kind merged too: lists of 50 or 200 values, a field null in some
            # (relay s8 ln2 013 spelled out a grid's run record once per key)
            names = [str(k) for k, _ in items]
            listed = names if len(names) <= 40 else [*names[:20], "...", *names[-5:]]
            return {f"<each of {len(names)} keys: {', '.join(listed)}>": inner[0] if same else _merged(inner)}
        return {str(k): x for (k, _), x in list(zip(items, inner, strict=True))[:30]}
    if isinstance(value, list):
        head = _json_outline(value[0], depth + 1) if value else None
        if len(value) > 1 and all(isinstance(v, dict) for v in value):
            # every record, not the first: a relay run's manifest showed a list of conditions as
            # its first (linear, "weights: 2 x float") and hid the keys and lengths of the others
            head = _merged([_json_outline(v, depth + 1) for v in value[:MERGED_ITEMS]])
        kinds = {type(v).__name__ for v in value if not isinstance(v, (dict, list))}
        if len(kinds) > 1 and len(kinds) == len({type(v).__name__ for v in value}):
            head = "|".join(sorted(k.replace("NoneType", "null") for k in kinds))  # [0.5, null, ...]
        return {"list_len": len(value), "item": head}
    return type(value).__name__


MERGED_ITEMS = 200  # the records of a list whose outlines are merged


def _one_kind(outlines: list[Any]) -> bool:
    """Record outlines sharing at least half of all their keys: one kind of record."""
    if not all(isinstance(o, dict) and o for o in outlines):
        return False
    union = set().union(*outlines)
    return 2 * len(set.intersection(*(set(o) for o in outlines))) >= len(union)


def _merged(outlines: list[Any]) -> Any:
    """One outline for several records' outlines: each key of any record, with the records that
    have it counted when not all do, and a key's outlines merged — list lengths as a range
    (``"2-202"``) when only they differ, else ``{"one of": [...]}``."""
    if not all(isinstance(o, dict) for o in outlines):
        return outlines[0]
    keys: dict[str, list[Any]] = {}
    for o in outlines:
        for k, v in o.items():
            keys.setdefault(k, []).append(v)
    out: dict[str, Any] = {}
    for k, vs in keys.items():
        distinct = list({json.dumps(v, sort_keys=True): v for v in vs}.values())
        if len(distinct) == 1:
            merged = distinct[0]
        elif (
            all(isinstance(v, dict) and set(v) == {"list_len", "item"} for v in distinct)
            and len({json.dumps(v["item"], sort_keys=True) for v in distinct}) == 1
        ):
            lens = [v["list_len"] for v in distinct]
            merged = {"list_len": f"{min(lens)}-{max(lens)}", "item": distinct[0]["item"]}
        elif all(isinstance(v, str) for v in distinct):  # scalar types: "float|null"
            names = sorted(
                {"null" if v == "NoneType" else v for v in distinct}, key=lambda t: (t == "null", t)
            )
            merged = "|".join(names)
        else:
            merged = {"one of": distinct[:3]}
        out[k] = (
            merged
            if len(vs) == len(outlines)
            else {
                "in": f"{len(vs)} of {len(outlines)} records",
                **(merged if isinstance(merged, dict) else {"type": merged}),
            }
        )
    return out


def _node_entry(view: RunView, node: dict[str, Any], role: str, dest_root: Path) -> dict[str, Any]:
    nid = str(node["id"])
    workspace = NodePaths(view.node_dir(nid)).workspace
    files: list[dict[str, Any]] = []
    if workspace.is_dir():
        # written by generated code: only regular files really inside it (no symlink out), and
        # only what its run produced (not a file the answer wrote, nor one left from before it)
        skip = unmeasured(view.node_dir(nid))
        found = sorted(
            p
            for p in workspace.rglob("*")
            if holds_node_data(workspace, p.relative_to(workspace))
            and p.relative_to(workspace).as_posix() not in skip
            and regular_file_inside(workspace, p)
        )
        for src in found[:MAX_FILES_PER_NODE]:
            if src.stat().st_size > MAX_FILE_BYTES:
                continue
            rel = Path("data") / nid / src.relative_to(workspace)
            (dest_root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest_root / rel)
            files.append({"path": rel.as_posix(), **describe_file(src)})
    return {
        "node_id": nid,
        "stage": node.get("stage"),
        "role": role,
        "operation": node.get("operation"),
        "seed": node.get("seed"),
        # what the node found, to say what its data is (the writer gets the findings in full)
        "summary": sentences(node.get("summary") or "", SUMMARY_CHARS),
        **_compact_metrics(view.metrics(nid)),
        "files": files,
    }


def _compact_metrics(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """``metrics``: name -> value (6 significant digits; the first is the headline; ``name [dataset]``
    for a name measured on several datasets), and which are
    ``lower_is_better`` and the ``datasets`` only when they are said: a list of one 4-field object
    per metric took most of a capable model's manifest (49 metrics a node, each re-run again)."""
    values: dict[str, Any] = {}
    lower, datasets = [], []
    # a name measured on several datasets keeps one entry per dataset (``acc [noise_0.4]``): keyed by
    # the name alone the last dataset's value stood for all of them (a relay run's plotter drew it)
    # one key form for every metric of the entry: ``name [dataset]`` for all of them when the node
    # measured on several datasets, the bare name when on one (relay s7 ln1 031: some keys with
    # "[synthetic]", some without, in one node)
    several = len({m.get("dataset") for m in metrics}) > 1
    for m in metrics:
        name, value = str(m.get("name", "metric")), m.get("value")
        if several:
            name = f"{name} [{m.get('dataset') or '-'}]"
        values[name] = float(f"{value:.6g}") if isinstance(value, float) else value
        if m.get("direction") == "minimize":
            lower.append(name)
        if m.get("dataset") and m["dataset"] not in datasets:
            datasets.append(str(m["dataset"]))
    return {
        "metrics": values,
        **({"lower_is_better": lower} if lower else {}),
        **({"datasets": datasets} if datasets else {}),
    }


_SHAPE_KEYS = ("structure", "columns", "arrays", "shape", "dtype")


def _share_structures(entries: list[dict[str, Any]]) -> None:
    """A file whose description (JSON outline, CSV columns, arrays) repeats an earlier file's says
    ``"same_structure_as": <that path>`` instead of repeating it: seed re-runs and children save
    the same files, and a capable model's manifest repeated one outline eight times (33 kB,
    previewed until five nodes were hidden)."""
    first: dict[str, str] = {}
    for entry in entries:
        for f in entry["files"]:
            shape = {k: f[k] for k in _SHAPE_KEYS if k in f}
            if not shape or len(json.dumps(shape)) < 80:  # short ones cost less than a reference
                continue
            key = f.get("kind", "") + json.dumps(shape, sort_keys=True)
            if key in first:
                for k in shape:
                    del f[k]
                f["same_structure_as"] = first[key]
            else:
                first[key] = f["path"]


def _with_seeds(view: RunView, node: dict[str, Any], role: str, dest_root: Path) -> list[dict[str, Any]]:
    """The node's entry and one per good seed re-run of it (role ``seed_run``, ``seed_of`` the
    node and ``seed`` its seed; no findings or operation, its metrics by name): a stage-3 condition's re-runs are what says whether its gain replicates."""
    out = [_node_entry(view, node, role, dest_root)]
    for seed_node in view.seed_runs(str(node["id"])):
        if seed_node.get("status") == "good":
            entry = _node_entry(view, seed_node, "seed_run", dest_root)
            # the same program: its operation and its review's findings say nothing new; its
            # metrics stay keyed by name as the node's are (a bare positional list made a relay
            # run's plotter align values by position: s7 ln1 031), its seed field labels them
            del entry["operation"], entry["summary"]
            out.append({**entry, "seed_of": str(node["id"])})
    return out


def _shown(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries as the manifest shows them: stage order, a repeated file layout named once."""
    out = copy.deepcopy(sorted(entries, key=lambda e: (e["_group"][0], e["_group"][1])))
    for e in out:
        del e["_group"]
    _share_structures(out)
    return out


def build_manifest(view: RunView, dest_root: Path, search_seed: int | None = None) -> dict[str, Any]:
    """Describe (and copy under ``dest_root``) the data of each stage's best node and its seeds
    (roles ``best``, ``seed_run``), of every node the stage summaries name (role ``stage_node``,
    never left out for room), then of up to :data:`OTHER_NODES_PER_STAGE` other good nodes
    of each stage, best first (role ``stage_node``), each with its seed re-runs; the entries in
    stage order."""
    entries: list[dict[str, Any]] = []
    listed: set[str] = set()
    for stage, best in view.best_per_stage().items():
        if best["id"] in listed:  # kept from an earlier stage that no node of this one beat
            continue
        listed.add(best["id"])
        entries += [{**e, "_group": (stage, 0)} for e in _with_seeds(view, best, "best", dest_root)]
    # the nodes the stage summaries name, whatever their rank or the size limit: a relay run's
    # summaries highlighted a stage-2 node that the later stages' nodes had crowded out (s8 ln3 032)
    for nid in view.named_in_summaries():
        node = view.nodes[nid]
        if nid not in listed:
            stage = int(node.get("stage") or 0)
            entries += [{**e, "_group": (stage, 0)} for e in _with_seeds(view, node, "stage_node", dest_root)]
            listed.add(nid)
    # every other good node of a stage bears on the idea too (a stage-3 sweep, a control, an
    # ablation): the best few of each stage, so the figures can show more than the winners —
    # while the manifest stays small enough to be shown whole (a previewed list loses its middle
    # entries). The later stages are chosen first: a capable model's manifest filled up with
    # stage-1 and stage-2 nodes and left out the stage-3 conditions and the stage-4 ablation,
    # the run's only tests of the idea beyond its first task.
    for stage in sorted(view.by_stage(), reverse=True):
        ranked = [n for n in view.ranked_good(stage) if n["id"] not in listed][:OTHER_NODES_PER_STAGE]
        for rank, node in enumerate(ranked, 1):
            added = [{**e, "_group": (stage, rank)} for e in _with_seeds(view, node, "stage_node", dest_root)]
            if len(json.dumps(_shown(entries + added))) > STAGE_NODES_MAX_CHARS:
                break
            entries += added
            listed.add(node["id"])
    return {
        "nodes": _shown(entries),
        "data_root": "data",
        "seed_statistic": seed_statistic(view, search_seed),
    }


METRICS_FILE = "metrics.json"  # the file a node's program writes its metrics to (phases/experiment.py)


def _metric_values(path: Path) -> list[Any] | None:
    """The values a metrics file lists (``{"metrics": [{name, value, ...}]}`` or the bare list), as
    the manifest writes values (6 significant digits); None when it is no such file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    items = data.get("metrics") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(m, dict) and "value" in m for m in items):
        return None
    return [float(f"{m['value']:.6g}") if isinstance(m["value"], float) else m["value"] for m in items]


def _same_values(a: list[Any], b: list[Any]) -> bool:
    return sorted(map(repr, a)) == sorted(map(repr, b))


def for_prompt(manifest: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """The manifest as the aggregation call is shown it (``figures/manifest.json`` keeps it whole):
    a seed re-run's ``lower_is_better`` and ``datasets`` are its node's (the same program: said
    once, in the node's entry, and the manifest's header says so) and an entry's empty ``seed`` is
    left out. Every metric value stays: a seed re-run's values are what the figures' spreads are
    drawn from (relay s7 ln2 033: 47 kB, most of it each re-run repeating its node's layout).
    ``root``: where the manifest's files were copied; a node's ``metrics.json`` that holds exactly
    the entry's metrics says so (``holds``) instead of an outline — "same_structure_as" another
    node's metrics file read as the same metrics to a relay run's plotter (s7 ln2 033: the names
    differed); with a grader the entry's metrics are the grader's and the file keeps its outline."""
    out = copy.deepcopy(manifest)
    by_id = {e["node_id"]: e for e in out.get("nodes") or []}
    held: set[str] = set()
    for e in out.get("nodes") or []:
        if e.get("seed") is None:
            e.pop("seed", None)
        parent = by_id.get(e.get("seed_of") or "")
        if parent is not None:
            for key in ("lower_is_better", "datasets"):
                if key in e and e[key] == parent.get(key):
                    del e[key]
        for f in e.get("files") or []:
            if root is not None and Path(f["path"]).name == METRICS_FILE:
                values = _metric_values(root / f["path"])
                if values is not None and _same_values(values, list(e.get("metrics", {}).values())):
                    held.add(f["path"])
    # a file still outlined elsewhere by reference keeps the outline it is referred to for
    referred = {
        f.get("same_structure_as")
        for e in out.get("nodes") or []
        for f in e.get("files") or []
        if f["path"] not in held
    }
    for e in out.get("nodes") or []:
        for f in e.get("files") or []:
            if f["path"] in held:
                if f["path"] not in referred:
                    for k in (*_SHAPE_KEYS, "same_structure_as"):
                        f.pop(k, None)
                f["holds"] = "this entry's metrics (listed above)"
    return out

"""Cost of the search index per node as the tree grows: journal writes and one decision's reads.

    python bench/search_index.py [--quick] [--sizes 200,2000] [--repeats 5] [--seed 0] [--out JSON]

A deterministic history shaped like a ``bfts`` run is written through a real :class:`Journal`
(file appends and fsyncs included; on ``/dev/shm`` when it exists, so the disk adds little):
four stages, drafts first, then improve / debug / tune children of recent good nodes and
seed re-runs, about a quarter of the experiments buggy. Per node: one create and three
updates (running, good or buggy with its metric, the summary), then the reads one decision
makes on a snapshot (``best_choice``, ``buggy_leaves``, ``good_nodes``, two ``count``\\ s and the
stage-3 ``no_improvement_streak``).

The same node states are then applied once more to a bare :class:`SearchIndex`, to time the
index's own writes apart from the file and the ``Node`` copies.

Figures per tree size, in microseconds per node: journal writes, index writes and reads, over
the whole build and over its last fifth ("tail": what a node costs once the tree is that big).
The baseline is the smallest size of the same run: a tail ratio is the tail cost at the large
size over the one at the small size, 1.0 when the cost per node does not grow with the tree;
the verdict uses the index's own cost (index writes + reads). Each size is built ``--repeats``
times, sizes interleaved; the median is reported. Results go to
``bench/results/search_index.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ai_scientist.treesearch import Journal, Metric, Node
from ai_scientist.treesearch.index import SearchIndex
from ai_scientist.treesearch.stages import no_improvement_streak

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "search_index.json"
FLAT_TARGET = 1.25  # tail ratio still called flat (timing noise on shared cores)
KINDS = ("write_us", "index_write_us", "read_us", "tail_write_us", "tail_index_write_us", "tail_read_us")


def _scratch() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="bench-index-", dir=base))


def build(n: int, seed: int, workdir: Path) -> dict[str, Any]:
    """Write an ``n``-node history; per-node write and read times in seconds."""
    rng = random.Random(seed)
    j = Journal(workdir / f"journal-{n}-{time.monotonic_ns()}.jsonl")
    carried = None
    writes: list[float] = []
    reads: list[float] = []
    groups: list[list[Node]] = []  # per node: the states the journal recorded (create, updates)
    for i in range(n):
        stage = 1 + (4 * i) // n
        t0 = time.perf_counter()
        recent = j.good_nodes(stage)[-20:] or j.good_nodes(None)[-20:]
        if stage == 1 and i < n // 40 + 2 or not recent:
            node = j.new_node(stage=stage, operation="draft")
        elif rng.random() < 0.05:
            node = j.new_node(stage=stage, operation="seed_eval", parent_id=rng.choice(recent).id, seed=i)
        else:
            op = {2: "tune", 4: "ablate"}.get(stage) or rng.choice(["improve", "improve", "debug"])
            idea = f"idea {i}" if op in ("tune", "ablate") else None
            node = j.new_node(stage=stage, operation=op, parent_id=rng.choice(recent).id, idea=idea)
        group = [node, j.update(node.id, status="running")]
        if rng.random() < 0.75:
            metric = Metric("val_accuracy", rng.random(), "maximize", "val")
            group.append(j.update(node.id, status="good", metric=metric))
        else:
            group.append(j.update(node.id, status="buggy", error="ZeroDivisionError"))
        group.append(j.update(node.id, summary=f"node {i}"))
        t1 = time.perf_counter()
        groups.append(group)
        view = j.snapshot()
        if carried is None and stage >= 2:
            carried = view.best_node(1)
        view.best_choice(stage, carried.id if carried else None)
        view.buggy_leaves(stage)
        view.good_nodes(stage)
        view.count("search", stage)
        view.count("flight", stage)
        if stage == 3:
            no_improvement_streak(view, 3, carried)
        t2 = time.perf_counter()
        writes.append(t1 - t0)
        reads.append(t2 - t1)
    # the same writes once more on the index alone (no file, no Node copies)
    index = SearchIndex()
    index_writes: list[float] = []
    for created, *updates in groups:
        t0 = time.perf_counter()
        index = index.with_created(created)
        for u in updates:
            index = index.with_updated(u)
        index_writes.append(time.perf_counter() - t0)
    tail = max(1, n // 5)
    figures = {"write": writes, "index_write": index_writes, "read": reads}
    out: dict[str, Any] = {"nodes": len(j)}
    for k, v in figures.items():
        out[f"{k}_us"] = 1e6 * sum(v) / n
        out[f"tail_{k}_us"] = 1e6 * sum(v[-tail:]) / tail
    return out


def measure(sizes: list[int], repeats: int, seed: int) -> list[dict[str, Any]]:
    workdir = _scratch()
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    try:
        build(min(sizes), seed, workdir)  # warm-up: imports, first-call caches
        for _ in range(repeats):
            for n in sizes:
                runs[n].append(build(n, seed, workdir))
                print(
                    f"  {n} nodes: {runs[n][-1]['tail_write_us']:.0f} + {runs[n][-1]['tail_read_us']:.0f} us"
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out = []
    for n in sizes:
        row: dict[str, Any] = {"target_nodes": n, "nodes": runs[n][0]["nodes"], "repeats": repeats}
        for k in KINDS:
            row[k] = round(statistics.median(r[k] for r in runs[n]), 1)
        out.append(row)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    base, large = rows[0], rows[-1]
    out: dict[str, Any] = {"baseline_nodes": base["nodes"], "large_nodes": large["nodes"]}
    for k in ("write", "index_write", "read"):
        b = base[f"tail_{k}_us"]
        out[f"tail_ratio_{k}"] = round(large[f"tail_{k}_us"] / b, 3) if b else None
    # the index's own cost per node: its writes plus one decision's reads
    own = [r["tail_index_write_us"] + r["tail_read_us"] for r in (base, large)]
    out["tail_ratio_index"] = round(own[1] / own[0], 3)
    out["flat"] = own[1] / own[0] <= FLAT_TARGET
    return out


def report(result: dict[str, Any]) -> str:
    head = ["nodes", "journal write", "index write", "reads", "tail journal", "tail index", "tail reads"]
    lines = ["us per node (tail: the last fifth of the build)", "  ".join(head)]
    for r in result["rows"]:
        cells = [str(r["nodes"])] + [f"{r[k]:.1f}" for k in KINDS]
        lines.append("  ".join(c.rjust(len(h)) for c, h in zip(cells, head, strict=True)))
    s = result["summary"]
    verdict = "flat" if s["flat"] else f"NOT flat (target <= {FLAT_TARGET})"
    lines.append(
        f"\nindex cost per node (index writes + reads), tail at {s['large_nodes']} vs "
        f"{s['baseline_nodes']} nodes: {s['tail_ratio_index']}x -> {verdict}; index writes "
        f"{s['tail_ratio_index_write']}x, reads {s['tail_ratio_read']}x, journal writes with the "
        f"file {s['tail_ratio_write']}x"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: sizes 40,160, one repeat")
    ap.add_argument("--sizes", default=None, help="node counts, comma separated (default 200,2000)")
    ap.add_argument("--repeats", type=int, default=None, help="builds per size (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py); writes no results file",
    )
    a = ap.parse_args(argv)
    if a.smoke:
        a.quick = True
        a.out = a.out if a.out != str(RESULTS) else os.devnull
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else ([40, 160] if a.quick else [200, 2000])
    if len(sizes) < 2 or sorted(sizes) != sizes or sizes[0] < 5:
        ap.error("--sizes: at least two increasing node counts, the first >= 5")
    repeats = a.repeats or (1 if a.quick else 5)
    t0 = time.perf_counter()
    rows = measure(sizes, repeats, a.seed)
    result = {
        "command": "python bench/search_index.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg": os.getloadavg(),
        },
        "seed": a.seed,
        "rows": rows,
        "summary": summarise(rows),
        "total_s": round(time.perf_counter() - t0, 1),
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(report(result))
    print(f"\nwritten {out} (total {result['total_s']} s)")
    return result


if __name__ == "__main__":
    main()

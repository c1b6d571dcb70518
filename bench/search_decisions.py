"""Cost of one forest/MCTS decision as the tree grows: indexed answers vs the node scans they replaced.

    python bench/search_decisions.py [--quick] [--sizes 200,2000] [--repeats 7] [--seed 0] [--out JSON]

A deterministic history shaped like an ``mcts`` run with two forest trees is built through a
real :class:`Journal` (on ``/dev/shm`` when it exists): stage 1 (a tenth of the nodes) drafts
and grows both trees, a stage-2 node is carried, and stage 3 hangs both trees under it; children
of recent nodes, a quarter buggy, metrics with ties, some in flight, a few seed re-runs. On the
final journal (its last snapshot) three operations are timed, each with the indexed code
(``treesearch/policies``) and with the scanning reference (``testsupport/ai_scientist_testing/search_scan.py``,
the code it replaced), alternating, in the same process:

- ``mcts pick``: ``policy.next_action`` in stage 3 (UCB statistics of the acting tree);
- ``tree votes``: ``forest.tree_bests`` (each tree's best node, what the consensus counts);
- ``final choice``: ``final_choice(method="consensus")`` (votes, groups, the answer).

Both must return the same value (checked on every call). Figures: median microseconds per call
over ``--repeats`` rounds of 20 calls; the ratio is scan / indexed at the same size. Results go
to ``bench/results/search_decisions.json`` (or ``--out``).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ai_scientist_testing import search_scan as scan

from ai_scientist.treesearch import Journal, Metric, StageState
from ai_scientist.treesearch.policies import MCTSPolicy, final_choice, forest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "search_decisions.json"
TREES = 2
CALLS = 20


def build(n: int, seed: int, workdir: Path) -> tuple[Journal, StageState]:
    """An ``n``-node mcts-shaped journal and the stage-3 state deciding on it."""
    rng = random.Random(seed)
    j = Journal(workdir / f"journal-{n}-{time.monotonic_ns()}.jsonl")

    def finish(node_id: str) -> None:
        j.update(node_id, status="running")
        if rng.random() < 0.03:
            return  # still in flight
        if rng.random() < 0.75:
            value = round(rng.uniform(0.6, 0.95), 2)  # two decimals: ties are common
            j.update(node_id, status="good", metric=Metric("val_accuracy", value, "maximize", "val"))
        else:
            j.update(node_id, status="buggy", error="ZeroDivisionError")

    def grow(stage: int, count: int, anchor: str | None) -> None:
        for _ in range(count):
            tree = rng.randrange(TREES)
            recent = [i for i in j.tree_ids(stage, tree)[-30:]]
            if not recent or rng.random() < 0.05:
                node = (
                    j.new_node(stage=1, operation="draft", tree=tree)
                    if anchor is None
                    else j.new_node(stage=stage, operation="improve", parent_id=anchor, tree=tree)
                )
            elif rng.random() < 0.04:
                node = j.new_node(stage=stage, operation="seed_eval", parent_id=rng.choice(recent), seed=1)
            else:
                op = rng.choice(["improve", "improve", "debug"])
                node = j.new_node(stage=stage, operation=op, parent_id=rng.choice(recent))
            finish(node.id)

    grow(1, max(4, n // 10), None)
    best1 = j.best_node(1)
    assert best1 is not None, "stage 1 found no good node; try another --seed"
    carried = j.new_node(stage=2, operation="tune", parent_id=best1.id, idea="lr 0.01")
    j.update(carried.id, status="good", metric=Metric("val_accuracy", 0.8, "maximize", "val"))
    grow(3, n - len(j), carried.id)
    return j, StageState(3, carried_id=carried.id)


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    for _ in range(CALLS):
        out = fn()
    return (time.perf_counter() - t0) / CALLS, out


def measure(n: int, repeats: int, seed: int, workdir: Path) -> dict[str, Any]:
    j, state = build(n, seed, workdir)
    view = j.snapshot()
    fast, ref = MCTSPolicy(tree_nums=TREES), scan.ScanMCTS(tree_nums=TREES)
    ops: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "mcts_pick": (
            lambda: fast.next_action(view, state, random.Random(1)),
            lambda: ref.next_action(view, state, random.Random(1)),
        ),
        "tree_votes": (
            lambda: forest.tree_bests(view, state, TREES),
            lambda: scan.tree_bests(view, state, TREES),
        ),
        "final_choice": (
            lambda: final_choice(view, state, TREES, method="consensus"),
            lambda: _scan_final_choice(view, state),
        ),
    }
    row: dict[str, Any] = {"nodes": len(j), "stage3_nodes": len(j.stage_nodes(3))}
    for name, (indexed, scanning) in ops.items():
        times: dict[str, list[float]] = {"indexed": [], "scan": []}
        for _ in range(repeats):
            t_i, a = _time(indexed)
            t_s, b = _time(scanning)
            if a != b:
                raise AssertionError(f"{name} at {n} nodes: indexed {a!r} != scan {b!r}")
            times["indexed"].append(t_i)
            times["scan"].append(t_s)
        med = {k: statistics.median(v) for k, v in times.items()}
        row[name] = {
            "indexed_us": round(1e6 * med["indexed"], 1),
            "scan_us": round(1e6 * med["scan"], 1),
            "ratio": round(med["scan"] / med["indexed"], 2),
        }
    return row


def _scan_final_choice(view: Any, state: StageState) -> Any:
    """``final_choice`` with the scanning tree votes (the rest of it is the same code)."""
    saved = forest.tree_bests
    forest.tree_bests = scan.tree_bests
    try:
        return final_choice(view, state, TREES, method="consensus")
    finally:
        forest.tree_bests = saved


def report(result: dict[str, Any]) -> str:
    lines = ["us per call (median); ratio = scan / indexed, measured together"]
    lines.append("nodes  operation      indexed      scan   ratio")
    for r in result["rows"]:
        for name in ("mcts_pick", "tree_votes", "final_choice"):
            x = r[name]
            lines.append(
                f"{r['nodes']:>5}  {name:<12} {x['indexed_us']:>9.1f} {x['scan_us']:>9.1f} {x['ratio']:>6.2f}x"
            )
    base, large = result["rows"][0], result["rows"][-1]
    growth = {
        k: round(large[k]["indexed_us"] / base[k]["indexed_us"], 2) for k in ("mcts_pick", "tree_votes")
    }
    lines.append(
        f"\nindexed cost growth {base['nodes']} -> {large['nodes']} nodes: mcts pick {growth['mcts_pick']}x, "
        f"tree votes {growth['tree_votes']}x"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: sizes 40,160, two repeats")
    ap.add_argument("--sizes", default=None, help="node counts, comma separated (default 200,2000)")
    ap.add_argument("--repeats", type=int, default=None, help="rounds of 20 calls per operation (default 7)")
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
    repeats = a.repeats or (2 if a.quick else 7)
    shm = Path("/dev/shm")
    workdir = Path(
        tempfile.mkdtemp(
            prefix="bench-decisions-", dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None
        )
    )
    t0 = time.perf_counter()
    try:
        measure(sizes[0], 1, a.seed, workdir)  # warm-up: imports, first-call caches
        rows = [measure(n, repeats, a.seed, workdir) for n in sizes]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "command": "python bench/search_decisions.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg": os.getloadavg(),
        },
        "seed": a.seed,
        "rows": rows,
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

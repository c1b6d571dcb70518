"""LLM calls and prompt tokens per node, by operation, with and without ``agent.merge_calls``.

    python bench/calls_per_node.py [--latency 1.0] [--plots] [--out bench/results/calls_per_node.json]

Runs the bundled example (examples/label_noise) twice in this process with the scripted example
LLM — ``agent.merge_calls=false`` (the old behaviour: every child plans in its own call) and
``true`` (the default: a child's plan comes inside its code answer) — on the same configuration
and seed. Counts come from the prompt logs the runs wrote (one per call, repairs not counted
twice), grouped by the operation the journal gives each node; prompt tokens are the logged
``usage.prompt_tokens``. Then the same pair at ``--latency`` seconds per LLM call with one worker,
for nodes per second (all nodes, and the nodes that call the LLM: seed re-runs make none).
``--plots`` keeps the node plotting step (two calls per working node) in the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from argparse import Namespace
from collections import defaultdict
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.base.config import AgentConfig
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
OPERATIONS = ("draft", "debug", "improve", "tune", "ablate", "seed_eval")

CONFIG = [
    "agent.stages.stage1_max_iters=4",
    "agent.stages.stage2_max_iters=4",
    "agent.stages.stage3_max_iters=2",
    "agent.stages.stage4_max_iters=3",
    "agent.stages.stage2_good_nodes=2",
    "agent.search.num_drafts=2",
    "agent.search.debug_prob=1.0",
    "agent.multi_seed_eval.num_seeds=2",
    "agent.num_workers=1",
    "exec.backend=subprocess",
    "exec.timeout=60",
    "memory.embedding.backend=none",
    "report.enabled=false",
]


def run_once(workdir: Path, merge: bool, latency_s: float, plots: bool) -> dict[str, Any]:
    overrides = [*CONFIG, f"agent.merge_calls={str(merge).lower()}"]
    if "plots" in AgentConfig.model_fields:
        overrides.append(f"agent.plots.enabled={str(plots).lower()}")
    name = f"{'merged' if merge else 'baseline'}-{latency_s:g}s"
    args = Namespace(
        config=None,
        overrides=overrides,
        idea=str(IDEA),
        resources=None,
        out=str(workdir),
        name=name,
        from_phase=None,
        run_dir=None,
        stop_after=None,
    )
    run, resources = setup_run(args)
    backend = ScriptedBackend(ExampleResponder(), latency_s=latency_s)
    t0 = time.perf_counter()
    code = execute(run, resources=resources, backend=backend)
    wall = time.perf_counter() - t0
    return {"exit_code": code, "wall_s": round(wall, 3), **count(run.dir)}


def count(run_dir: Path) -> dict[str, Any]:
    """Calls and prompt tokens per node by operation, from the journal and the prompt logs."""
    latest: dict[str, dict] = {}
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        node = json.loads(line)["node"]
        latest[node["id"]] = node
    paths = RunPaths(run_dir)
    per_node: dict[str, dict[str, Any]] = {}
    for nid in latest:
        calls: dict[str, int] = {}
        labels: dict[str, str] = {}
        for p in paths.node(nid).prompt_log_files():
            rec = json.loads(p.read_text(encoding="utf-8"))
            key = str(rec.get("call_id") or p.name)
            tokens = int((rec.get("usage") or {}).get("prompt_tokens") or 0)
            calls[key] = calls.get(key, 0) + tokens  # repair attempts add their prompt tokens
            labels[key] = str(rec.get("label"))
        per_node[nid] = {"calls": len(calls), "prompt_tokens": sum(calls.values()), "labels": labels}
    by_op: dict[str, dict[str, Any]] = defaultdict(lambda: {"nodes": 0, "calls": 0, "prompt_tokens": 0})
    labels_by_op: dict[str, dict[str, int]] = defaultdict(dict)
    for nid, node in latest.items():
        op = node["operation"]
        row = by_op[op]
        row["nodes"] += 1
        row["calls"] += per_node[nid]["calls"]
        row["prompt_tokens"] += per_node[nid]["prompt_tokens"]
        for label in per_node[nid]["labels"].values():
            labels_by_op[op][label] = labels_by_op[op].get(label, 0) + 1
    for op, row in by_op.items():
        row["calls_per_node"] = round(row["calls"] / row["nodes"], 3)
        row["prompt_tokens_per_node"] = round(row["prompt_tokens"] / row["nodes"])
        row["labels"] = labels_by_op[op]
    children = [n for n in latest.values() if n["operation"] in ("debug", "improve", "tune", "ablate")]
    calling = [n for n in latest.values() if n["operation"] != "seed_eval"]
    return {
        "nodes": len(latest),
        "good": sum(1 for n in latest.values() if n["status"] == "good"),
        "calls": sum(r["calls"] for r in per_node.values()),
        "by_operation": dict(sorted(by_op.items(), key=lambda kv: OPERATIONS.index(kv[0]))),
        "children_calls_per_node": round(
            sum(per_node[n["id"]]["calls"] for n in children) / max(1, len(children)), 3
        ),
        "llm_nodes": len(calling),
        "run_dir": str(run_dir),
    }


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def report(result: dict[str, Any]) -> str:
    base, merged = result["counts"]["baseline"], result["counts"]["merged"]
    rows = [["operation", "nodes", "calls/node before", "after", "prompt tok/node before", "after"]]
    for op in OPERATIONS:
        b, m = base["by_operation"].get(op), merged["by_operation"].get(op)
        if not b and not m:
            continue
        rows.append(
            [
                op,
                f"{(b or m)['nodes']}/{(m or b)['nodes']}",
                f"{b['calls_per_node']:.2f}" if b else "-",
                f"{m['calls_per_node']:.2f}" if m else "-",
                str(b["prompt_tokens_per_node"]) if b else "-",
                str(m["prompt_tokens_per_node"]) if m else "-",
            ]
        )
    out = [
        f"Calls and prompt tokens per node (scripted example, plots {'on' if result['plots'] else 'off'}; "
        "before = agent.merge_calls=false, after = true; same run of this script)",
        _table(rows),
        f"children (debug/improve/tune/ablate): {base['children_calls_per_node']:.2f} -> "
        f"{merged['children_calls_per_node']:.2f} calls per node; all nodes: {base['calls']} -> "
        f"{merged['calls']} calls",
    ]
    if result.get("latency"):
        lat = result["latency"]
        b, m = lat["baseline"], lat["merged"]
        out += [
            "",
            f"At {result['latency_s']:g} s per LLM call, one worker:",
            f"  before: {b['nodes']} nodes ({b['llm_nodes']} calling the LLM) in {b['wall_s']:.1f} s = "
            f"{b['nodes'] / b['wall_s']:.3f} nodes/s ({b['llm_nodes'] / b['wall_s']:.3f} LLM nodes/s)",
            f"  after:  {m['nodes']} nodes ({m['llm_nodes']} calling the LLM) in {m['wall_s']:.1f} s = "
            f"{m['nodes'] / m['wall_s']:.3f} nodes/s ({m['llm_nodes'] / m['wall_s']:.3f} LLM nodes/s)",
            f"  ratio after/before (nodes/s): {(m['nodes'] / m['wall_s']) / (b['nodes'] / b['wall_s']):.2f}x",
        ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call (0: skip that part)")
    ap.add_argument("--plots", action="store_true", help="keep the node plotting step in the counts")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "calls_per_node.json"))
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py); writes no results file",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        from ai_scientist_testing.bench_support import SMOKE_RUN

        CONFIG.extend(SMOKE_RUN)  # later overrides win
        args.latency, args.out = 0.0, os.devnull
    result: dict[str, Any] = {"plots": args.plots, "latency_s": args.latency, "config": CONFIG}
    with tempfile.TemporaryDirectory(prefix="calls_per_node_") as tmp:
        work = Path(tmp)
        result["counts"] = {
            "baseline": run_once(work / "counts", False, 0.0, args.plots),
            "merged": run_once(work / "counts", True, 0.0, args.plots),
        }
        if args.latency > 0:
            result["latency"] = {
                "baseline": run_once(work / "latency", False, args.latency, args.plots),
                "merged": run_once(work / "latency", True, args.latency, args.plots),
            }
    for part in ("counts", "latency"):
        for r in (result.get(part) or {}).values():
            r.pop("run_dir", None)
            if r["exit_code"] != 0:
                print(f"a run failed (exit {r['exit_code']})", file=sys.stderr)
                return 1
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

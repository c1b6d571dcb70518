"""What the node plotting step (issue 13) costs: wall time, LLM calls and sandbox time per node.

    python bench/node_plots.py [--latency 0.0] [--out bench/results/node_plots.json]

Runs the bundled example (examples/label_noise) twice in this process with the scripted example
LLM and one worker, on the same configuration and seed: ``agent.plots.enabled=false`` (the
baseline, measured in the same run) and ``true`` (each working node's plotting call, its script
in the sandbox, the figure checks and the critique call). Prints the wall time of each run and the
ratio, calls per run, and the sandbox time of the plotting scripts (from ``exec/*_phase5_plot_*``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
CONFIG = [
    "agent.stages.stage1_max_iters=4",
    "agent.stages.stage2_max_iters=3",
    "agent.stages.stage3_max_iters=2",
    "agent.stages.stage4_max_iters=2",
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


def run_once(workdir: Path, plots: bool, latency_s: float) -> dict[str, Any]:
    args = Namespace(
        config=None,
        overrides=[*CONFIG, f"agent.plots.enabled={str(plots).lower()}"],
        idea=str(IDEA),
        resources=None,
        out=str(workdir),
        name="plots" if plots else "baseline",
        from_phase=None,
        run_dir=None,
        stop_after=None,
    )
    run, resources = setup_run(args)
    responder = ExampleResponder()
    t0 = time.perf_counter()
    code = execute(run, resources=resources, backend=ScriptedBackend(responder, latency_s=latency_s))
    wall = time.perf_counter() - t0
    paths = RunPaths(run.dir)
    nodes: dict[str, dict] = {}
    for line in paths.journal.read_text().splitlines():
        node = json.loads(line)["node"]
        nodes[node["id"]] = node
    plot_s, figures = 0.0, 0
    for nid in nodes:
        for rec_path in paths.node(nid).exec_files():
            if "_phase5_plot_" in rec_path.name:
                plot_s += float(json.loads(rec_path.read_text()).get("duration_s") or 0.0)
        figures += len(list(paths.node(nid).plots.glob("*.png")))
    return {
        "exit_code": code,
        "wall_s": round(wall, 3),
        "nodes": len(nodes),
        "good": sum(1 for n in nodes.values() if n["status"] == "good"),
        "llm_calls": len(responder.calls),
        "plot_calls": sum(1 for c in responder.calls if c[1] == "phase5_plot"),
        "vlm_calls": sum(1 for c in responder.calls if c[1] == "phase5_vlm"),
        "plot_script_s": round(plot_s, 3),
        "figures": figures,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per scripted LLM call")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    a = ap.parse_args()
    if a.smoke:
        from ai_scientist_testing.bench_support import SMOKE_RUN

        CONFIG.extend(SMOKE_RUN)  # later overrides win
    with tempfile.TemporaryDirectory() as tmp:
        base = run_once(Path(tmp) / "off", False, a.latency)
        plots = run_once(Path(tmp) / "on", True, a.latency)
    ratio = plots["wall_s"] / base["wall_s"] if base["wall_s"] else float("nan")
    for name, r in (("plots off", base), ("plots on", plots)):
        print(
            f"{name:9s}: {r['nodes']} nodes ({r['good']} good), {r['llm_calls']} LLM calls "
            f"({r['plot_calls']} plotting, {r['vlm_calls']} critique), {r['figures']} figures, "
            f"wall {r['wall_s']:.2f} s, plotting scripts {r['plot_script_s']:.2f} s"
        )
    print(f"wall time ratio plots on / off: {ratio:.2f}x")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"off": base, "on": plots, "ratio": round(ratio, 3)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

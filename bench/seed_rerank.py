"""How often re-ranking over seeds changes a stage's best (issue 30), and what it costs.

    python bench/seed_rerank.py [--seeds 8] [--smoke] [--workdir DIR] [--out bench/results/seed_rerank.json]
    python bench/seed_rerank.py --runs RUN_DIR [RUN_DIR ...]   # report on existing runs only

Runs the bundled example (examples/label_noise) with the scripted example LLM once per
``agent.seed`` in ``0 .. --seeds-1`` (the seed changes the data every search run and every seed
re-run draws, so each run is another draw of the same search), with the run's defaults for
``agent.multi_seed_eval`` (num_seeds, rerank_candidates, noise_z). The tuning ideas of stage 2 and
the research idea of stage 3 give programs whose accuracies differ by about the seed noise, as
real tuning often does. Every number comes from the runs' own records: per stage that chose a
best by metric (stages 1-3; the ablation stage keeps its carried node), the ``seed_rerank``
event (noise estimate, threshold, candidates within it, means, decision) and the seed re-runs in
the journal (the extra runs re-ranking cost beyond the best's own re-runs).
``--smoke``: one run with small stage caps (the test suite runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
RANKED_STAGES = (1, 2, 3)  # stage 4's best is the node its ablations ran against: never re-ranked

CONFIG = [
    "agent.stages.stage1_max_iters=3",
    "agent.stages.stage2_max_iters=4",
    "agent.stages.stage3_max_iters=2",
    "agent.stages.stage4_max_iters=0",
    "agent.stages.stage2_good_nodes=4",
    "agent.search.num_drafts=2",
    "agent.num_workers=1",
    "agent.plots.enabled=false",
    "exec.backend=subprocess",
    "exec.timeout=60",
    "memory.embedding.backend=none",
    "report.enabled=false",
]
SMOKE = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=2",
    "agent.stages.stage2_good_nodes=2",
    "agent.stages.stage3_max_iters=0",
]


def run_once(workdir: Path, seed: int, extra: list[str]) -> Path:
    args = Namespace(
        config=None,
        overrides=[*CONFIG, *extra, f"agent.seed={seed}"],
        idea=str(IDEA),
        resources=None,
        out=str(workdir),
        name=f"seed{seed}",
        from_phase=None,
        run_dir=None,
        stop_after=None,
    )
    run, resources = setup_run(args)
    code = execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder(buggy_nodes=())))
    if code != 0:
        raise RuntimeError(f"run {run.dir} ended with exit code {code}")
    return run.dir


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def measure(run_dir: Path) -> dict[str, Any]:
    """One run's re-ranking decisions (stages 1-3 that ran a node), from its events and journal."""
    events = _lines(run_dir / "events.jsonl")
    nodes: dict[str, dict] = {}
    for rec in _lines(run_dir / "journal.jsonl"):
        nodes[rec["node"]["id"]] = rec["node"]
    reranks = {e["stage"]: e for e in events if e["type"] == "seed_rerank"}
    findings = {e["stage"]: e for e in events if e["type"] == "finding_seeds"}
    stages = []
    searched = {n["stage"] for n in nodes.values() if n["operation"] != "seed_eval"}
    for e in events:  # a stage that ran no node hands on its carried node unopposed: not counted
        if e["type"] != "stage_best" or e["stage"] not in RANKED_STAGES or e["stage"] not in searched:
            continue
        r = reranks.get(e["stage"]) or {}
        candidates = r.get("candidates") or []
        # the extra re-runs: the candidates' seed re-runs made in this stage
        extra = sum(
            1
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] in candidates and n["stage"] == e["stage"]
        )
        # the re-runs of nodes whose finding is in metrics their parent did not report
        # (agent.multi_seed_eval.finding_reruns): beside the headline's, made in this stage
        found = (findings.get(e["stage"]) or {}).get("node_ids") or []
        finding_runs = sum(
            1
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] in found and n["stage"] == e["stage"]
        )
        best_runs = sum(
            1
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] == e["node_id"] and n["stage"] == e["stage"]
        )
        stages.append(
            {
                "stage": e["stage"],
                "metric_choice": r.get("node_id", e["node_id"]),
                "best": e["node_id"],
                "sigma": (r.get("noise") or {}).get("sigma"),
                "dof": (r.get("noise") or {}).get("dof"),
                "threshold": r.get("threshold"),
                "candidates": candidates,
                "changed": bool(r.get("changed")),
                "extra_seed_runs": extra,
                "best_seed_runs": best_runs,
                "finding_nodes": found,
                "finding_seed_runs": finding_runs,
                "decision": r.get("decision", "no re-ranking (off, or no valid metric)"),
            }
        )
    seed_runs = sum(1 for n in nodes.values() if n["operation"] == "seed_eval")
    return {"run_dir": str(run_dir), "stages": stages, "seed_runs": seed_runs}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    stages = [s for r in runs for s in r["stages"]]
    estimated = [s for s in stages if s["sigma"] is not None]
    contested = [s for s in stages if s["candidates"]]
    changed = [s for s in stages if s["changed"]]
    extra = sum(s["extra_seed_runs"] for s in stages)
    total = sum(r["seed_runs"] for r in runs)
    sigmas = sorted(s["sigma"] for s in estimated)
    return {
        "runs": len(runs),
        "stages": len(stages),
        "with_noise_estimate": len(estimated),
        "with_candidates_within_noise": len(contested),
        "changed": len(changed),
        "changed_share": round(len(changed) / len(stages), 3) if stages else None,
        "changed_share_of_contested": round(len(changed) / len(contested), 3) if contested else None,
        "extra_seed_runs": extra,
        "finding_seed_runs": sum(s.get("finding_seed_runs", 0) for s in stages),
        "seed_runs": total,
        "sigma_median": sigmas[len(sigmas) // 2] if sigmas else None,
        "by_stage": {
            str(k): {
                "stages": sum(s["stage"] == k for s in stages),
                "contested": sum(s["stage"] == k and bool(s["candidates"]) for s in stages),
                "changed": sum(s["stage"] == k and s["changed"] for s in stages),
                # seed re-runs of the stage: the headline's (best + runners-up) and the findings'
                "headline_seed_runs": sum(
                    s.get("best_seed_runs", 0) + s["extra_seed_runs"] for s in stages if s["stage"] == k
                ),
                "finding_seed_runs": sum(s.get("finding_seed_runs", 0) for s in stages if s["stage"] == k),
            }
            for k in RANKED_STAGES
        },
    }


def report(result: dict[str, Any]) -> str:
    s = result["summary"]
    out = [
        f"Re-ranking over seeds: {s['runs']} run(s), {s['stages']} stage decisions (stages 1-3)",
        f"  with a noise estimate: {s['with_noise_estimate']}; median sigma {s['sigma_median']}",
        f"  with runner(s)-up within the noise: {s['with_candidates_within_noise']}",
        f"  best changed by the mean over seeds: {s['changed']} of {s['stages']} ({s['changed_share']})"
        f"; {s['changed_share_of_contested']} of the contested ones",
        f"  cost: {s['extra_seed_runs']} extra seed re-runs of {s['seed_runs']} in all (no LLM call)",
        f"  findings in new metrics re-run: {s['finding_seed_runs']} seed re-runs (finding_reruns)",
    ]
    for k, v in s["by_stage"].items():
        out.append(
            f"  stage {k}: {v['changed']} changed / {v['contested']} contested / {v['stages']} decisions"
            f"; seed re-runs: {v['headline_seed_runs']} for the headline + {v['finding_seed_runs']} for findings"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=8, help="runs, at agent.seed 0 .. N-1")
    ap.add_argument("--smoke", action="store_true", help="one small run (the test suite's check)")
    ap.add_argument("--workdir", default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--runs", nargs="*", default=None, help="report on these existing run directories")
    ap.add_argument("--out", default=None, help="write the result as JSON (default: print only)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.runs:
        measured = [measure(Path(d)) for d in args.runs]
        config: list[str] = []
    else:
        seeds = 1 if args.smoke else args.seeds
        extra = SMOKE if args.smoke else []
        config = [*CONFIG, *extra]
        with tempfile.TemporaryDirectory(prefix="seed_rerank_") as tmp:
            work = Path(args.workdir or tmp)
            measured = [measure(run_once(work, seed, extra)) for seed in range(seeds)]
    result = {
        "config": config,
        "wall_s": round(time.perf_counter() - t0, 1),
        "summary": summarise(measured),
        "runs": measured,
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

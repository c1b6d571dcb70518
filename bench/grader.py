"""The grader's cost per node (issue 30): its wall time against the node's own run time.

    python bench/grader.py [--backends subprocess,bwrap,docker] [--smoke] [--workdir DIR]
                           [--out bench/results/grader.json]

Runs the graded example (examples/graded_classification: public data as a resource, hidden test
labels in its grader directory, named by the idea's ``## Grader`` section) with a scripted LLM
whose programs really solve the task in pure Python (k-nearest neighbours, k chosen on a
validation split; a draft with the linear baseline), once per sandbox backend. Every figure
comes from the run's own records: per graded node, ``grade.json``'s ``grade_s`` (the whole
grading: sandbox start, ``grade.py``, reading ``metrics.json``) and ``run_s`` (the node's run
commands, as phase 4 measured them in the same run), and the graded and self-reported values.
``--smoke``: one small run on the subprocess backend (the test suite runs it).
"""

from __future__ import annotations

import argparse
import json
import statistics
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
TASK = ROOT / "examples" / "graded_classification"

CONFIG = [
    "agent.stages.stage1_max_iters=3",
    "agent.stages.stage2_max_iters=2",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.search.num_drafts=2",
    "agent.multi_seed_eval.num_seeds=2",
    "agent.num_workers=1",
    "agent.plots.enabled=false",
    "exec.timeout=120",
    "memory.embedding.backend=none",
    "report.enabled=false",
]
SMOKE = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.multi_seed_eval.num_seeds=1",
]

# the task's program: reads the public data, picks k on a validation split (k = 0: the linear
# baseline), writes predictions.csv for the grader and its validation accuracy as metrics.json
PROGRAM = """\
import csv, json, math, os, random
K = {k}
data = "resources/classification_data"
rows = [(float(r["x1"]), float(r["x2"]), int(r["label"])) for r in csv.DictReader(open(f"{{data}}/train.csv"))]
test = [(r["id"], float(r["x1"]), float(r["x2"])) for r in csv.DictReader(open(f"{{data}}/test_features.csv"))]
rng = random.Random(int(os.environ.get("SEED", "0")))
rng.shuffle(rows)
val, train = rows[:60], rows[60:]


def knn(points, x1, x2, k):
    near = sorted(points, key=lambda p: (p[0] - x1) ** 2 + (p[1] - x2) ** 2)[:k]
    return int(sum(p[2] for p in near) * 2 > k)


def linear(points):
    w = [0.0, 0.0, 0.0]
    for _ in range(30):
        for x1, x2, y in points:
            z = w[0] + w[1] * x1 + w[2] * x2
            g = 1 / (1 + math.exp(-max(-30, min(30, z)))) - y
            w = [w[0] - 0.05 * g, w[1] - 0.05 * g * x1, w[2] - 0.05 * g * x2]
    return lambda x1, x2: int(w[0] + w[1] * x1 + w[2] * x2 > 0)


if K:
    predict = lambda pts: (lambda x1, x2: knn(pts, x1, x2, K))
else:
    predict = linear
model = predict(train)
acc = sum(model(x1, x2) == y for x1, x2, y in val) / len(val)
final = predict(rows)
with open("predictions.csv", "w", newline="") as fh:
    out = csv.writer(fh)
    out.writerow(["id", "label"])
    out.writerows((i, final(x1, x2)) for i, x1, x2 in test)
json.dump({{"metrics": [{{"name": "val_accuracy", "value": acc, "direction": "maximize"}}]}}, open("metrics.json", "w"))
print(f"val_accuracy={{acc:.4f}} (k={{K}})")
"""


class GradedTaskResponder(ExampleResponder):
    """The example's scripted answers, with the graded task's program: the first draft is the
    linear baseline, every later code answer k-NN with k from 3 upwards (one more per node)."""

    def __init__(self) -> None:
        super().__init__(buggy_nodes=())

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        number = int(ctx.node_id.lstrip("n") or 0)
        k = 0 if number == 1 else 1 + 2 * number
        answer["files"] = [{"path": "experiment.py", "content": PROGRAM.format(k=k), "encoding": "utf-8"}]
        answer["run"] = {
            "commands": ["/usr/bin/python3 experiment.py"],
            "expected_outputs": ["predictions.csv"],
        }
        return json.dumps(answer)


def run_once(workdir: Path, backend: str, extra: list[str]) -> Path:
    args = Namespace(
        config=None,
        overrides=[*CONFIG, *extra, f"exec.backend={backend}"],
        idea=str(TASK / "idea.md"),  # names its grader (## Grader)
        resources=str(TASK / "resources.yaml"),
        out=str(workdir),
        name=backend,
        from_phase=None,
        run_dir=None,
        stop_after=None,
        grader=None,
    )
    run, resources = setup_run(args)
    code = execute(run, resources=resources, backend=ScriptedBackend(GradedTaskResponder()))
    if code != 0:
        raise RuntimeError(f"run {run.dir} ended with exit code {code}")
    return run.dir


def measure(run_dir: Path) -> dict[str, Any]:
    """Per graded node: the grading's and the node's run's wall times, graded and claimed values."""
    nodes = []
    for verdict_path in sorted((run_dir / "nodes").glob("*/grade.json")):
        v = json.loads(verdict_path.read_text())
        if v.get("error"):
            continue
        nodes.append(
            {
                "node": verdict_path.parent.name,
                "grade_s": v["grade_s"],
                "run_s": v["run_s"],
                "graded": v["graded"][0]["value"],
                "self_reported": {m["name"]: m["value"] for m in v["self_reported"]},
                "mismatches": len(v["mismatches"]),
            }
        )
    return {"run_dir": str(run_dir), "nodes": nodes}


def summarise(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    if not nodes:
        return {"nodes": 0}
    grade = [n["grade_s"] for n in nodes]
    run = [n["run_s"] for n in nodes]
    ratios = [n["grade_s"] / n["run_s"] for n in nodes if n["run_s"] > 0]
    return {
        "nodes": len(nodes),
        "grade_s_median": round(statistics.median(grade), 3),
        "grade_s_max": round(max(grade), 3),
        "run_s_median": round(statistics.median(run), 3),
        "grade_over_run_median": round(statistics.median(ratios), 2) if ratios else None,
    }


def report(result: dict[str, Any]) -> str:
    out = ["Grader cost per node (grade_s: the whole grading; run_s: the node's own run commands)"]
    for backend, r in result["backends"].items():
        s = r["summary"]
        out.append(
            f"  {backend}: {s['nodes']} graded nodes; grading median {s.get('grade_s_median')} s "
            f"(max {s.get('grade_s_max')}), node run median {s.get('run_s_median')} s, "
            f"grading/run median {s.get('grade_over_run_median')}"
        )
        for n in r["nodes"]:
            out.append(
                f"    {n['node']}: grade {n['grade_s']:.3f} s, run {n['run_s']:.3f} s, "
                f"graded test_accuracy {n['graded']:.4f}, self-reported {n['self_reported']}"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="subprocess,bwrap,docker", help="comma-separated sandbox backends")
    ap.add_argument(
        "--smoke", action="store_true", help="one small run on subprocess (the test suite's check)"
    )
    ap.add_argument("--workdir", default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--out", default=None, help="write the result as JSON (default: print only)")
    args = ap.parse_args(argv)
    backends = ["subprocess"] if args.smoke else [b for b in args.backends.split(",") if b]
    extra = SMOKE if args.smoke else []
    t0 = time.perf_counter()
    result: dict[str, Any] = {"config": [*CONFIG, *extra], "backends": {}}
    with tempfile.TemporaryDirectory(prefix="grader_bench_") as tmp:
        work = Path(args.workdir or tmp)
        for backend in backends:
            measured = measure(run_once(work, backend, extra))
            result["backends"][backend] = {**measured, "summary": summarise(measured["nodes"])}
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

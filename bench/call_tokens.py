"""Tokens per call kind and cost per node: this checkout against a baseline commit, in one run.

    python bench/call_tokens.py [--base REV] [--smoke] [--out JSON]

Runs the same scripted run twice — once with the code at ``--base`` (a git worktree; default
``BASELINE_REV``, the commit before issue 28's prompt work) and once with this checkout — each in
its own process, with the realistic workload of ``tests/realistic_workload.py`` (a ~20 kB program
printing ~5 kB, three metrics, two data files, a font cache), default config but for the run's
size and the subprocess sandbox, report on (citations off: no network). Each side runs with its
own defaults (the baseline's fixed 6,000-token budget, this checkout's budget for the configured
model, gpt-4o-mini).

For every request sent (each prompt-log record) it counts the request's tokens with this
checkout's counter for gpt-4o-mini (the same counter for both sides; an image at ``IMAGE_TOKENS``)
and groups them by call kind (the record's phase and label with attempt numbers removed). It prints,
per kind, calls and mean tokens on both sides and the ratio, then the whole run's input tokens
per search node and the USD per node at gpt-4o-mini's list price ($0.15 per million input tokens,
$0.60 per million output tokens; output tokens as the records report them). ``--smoke`` runs
a tiny run (one draft, no report) against this checkout itself (the suite runs it). ``--set
context.max_prompt_tokens=32000`` gives both sides the same budget: then the difference is what
each side sends when nothing has to be cut (the facts added, the waste removed).
Results go to ``bench/results/call_tokens.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "call_tokens.json"
BASELINE_REV = "917f831"  # main before issue 28
INPUT_USD, OUTPUT_USD = 0.15, 0.60  # gpt-4o-mini, per million tokens

SIZE = [
    "agent.stages.stage1_max_iters=4",
    "agent.stages.stage2_max_iters=2",
    "agent.stages.stage3_max_iters=2",
    "agent.stages.stage4_max_iters=2",
    "agent.stages.stage2_good_nodes=2",
    "agent.search.num_drafts=2",
    "agent.multi_seed_eval.num_seeds=2",
    "exec.backend=subprocess",
    "exec.timeout=60",
    "memory.embedding.backend=none",
    "report.citations.enabled=false",
]
SMOKE = [
    "agent.stages.stage1_max_iters=1",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
    "exec.backend=subprocess",
    "exec.timeout=60",
    "memory.embedding.backend=none",
    "report.enabled=false",
]

# runs in the child process, with the side's source first on sys.path and ROOT/tests after it
CHILD = r"""
import json, sys
from argparse import Namespace
from pathlib import Path
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend
from realistic_workload import RealisticResponder

out, idea, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
args = Namespace(config=None, overrides=overrides, idea=idea, resources=None, out=out, name="bench",
                 from_phase=None, run_dir=None, stop_after=None)
run, resources = setup_run(args)
code = execute(run, resources=resources, backend=ScriptedBackend(RealisticResponder(buggy_nodes=())))
print(json.dumps({"code": code, "run_dir": str(run.dir)}))
"""


def _run_side(src: Path, out: Path, overrides: list[str]) -> Path:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT / 'tests'}"}
    env.pop("AI_SCIENTIST_PROMPT_DIR", None)
    idea = src / "examples" / "label_noise" / "idea.md"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), str(idea), json.dumps(overrides)],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the run at {src} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise SystemExit(f"the run at {src} ended with exit {result['code']}: {result['run_dir']}")
    return Path(result["run_dir"])


def call_kind(rec: dict[str, Any]) -> str:
    """``phase/label`` with numbers removed (plot1/plot2 -> plot, step3 -> step)."""
    label = re.sub(r"\d+", "", str(rec.get("label") or ""))
    return f"{rec.get('phase') or 'run'}/{label}".rstrip("/")


def measure(run_dir: Path) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from ai_scientist.context.tokens import counter_for

    sys.path.insert(0, str(ROOT / "bench"))
    from prompt_cache import count_tokens, request_text

    counter = counter_for("gpt-4o-mini")
    kinds: dict[str, list[int]] = defaultdict(list)
    output = 0
    for path in sorted(run_dir.glob("**/prompt_logs/*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        kinds[call_kind(rec)].append(count_tokens(counter, request_text(rec["messages"])))
        output += int(((rec.get("usage") or {}).get("completion_tokens")) or 0)
    ids = {
        json.loads(line)["node"]["id"]
        for line in (run_dir / "journal.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line).get("node", {}).get("operation") != "seed_eval"
    }
    nodes = len(ids)
    total_in = sum(sum(v) for v in kinds.values())
    return {
        "kinds": {
            k: {"calls": len(v), "mean_tokens": round(sum(v) / len(v), 1)} for k, v in sorted(kinds.items())
        },
        "input_tokens": total_in,
        "output_tokens": output,
        "search_nodes": nodes,
        "input_tokens_per_node": round(total_in / max(1, nodes), 1),
        "usd_per_node": round((total_in * INPUT_USD + output * OUTPUT_USD) / 1e6 / max(1, nodes), 6),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASELINE_REV)
    ap.add_argument(
        "--smoke", action="store_true", help="one tiny run of HEAD on both sides; writes no results file"
    )
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for both sides, e.g. context.max_prompt_tokens=32000 (the same budget)",
    )
    a = ap.parse_args(argv)
    overrides = [*(SMOKE if a.smoke else SIZE), *a.set]
    with tempfile.TemporaryDirectory(prefix="call_tokens_") as tmp:
        t = Path(tmp)
        base_src = ROOT
        worktree = None
        if not a.smoke:
            worktree = t / "base_src"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(worktree), a.base],
                check=True,
            )
            base_src = worktree
        try:
            base = measure(_run_side(base_src, t / "base", overrides))
            head = measure(_run_side(ROOT, t / "head", overrides))
        finally:
            if worktree is not None:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False
                )
    report = {
        "base": a.base if not a.smoke else "HEAD (smoke)",
        "overrides": overrides,
        "baseline": base,
        "head": head,
    }
    print(f"{'call kind':32} {'calls':>11} {'mean tokens base':>17} {'head':>8} {'ratio':>6}")
    for kind in sorted(set(base["kinds"]) | set(head["kinds"])):
        b, h = base["kinds"].get(kind), head["kinds"].get(kind)
        ratio = f"{h['mean_tokens'] / b['mean_tokens']:.2f}" if b and h and b["mean_tokens"] else "-"
        calls = f"{b['calls'] if b else 0}/{h['calls'] if h else 0}"
        print(
            f"{kind:32} {calls:>11} {b['mean_tokens'] if b else '-':>17} {h['mean_tokens'] if h else '-':>8} {ratio:>6}"
        )
    for side, m in (("baseline", base), ("head", head)):
        print(
            f"{side:8}: {m['search_nodes']} search nodes, {m['input_tokens']} input tokens "
            f"({m['input_tokens_per_node']} per node), ${m['usd_per_node']:.5f} per node at gpt-4o-mini prices"
        )
    ratio = head["input_tokens_per_node"] / max(1.0, base["input_tokens_per_node"])
    print(f"input tokens per node, head / baseline: {ratio:.2f}")
    report["ratio_input_per_node"] = round(ratio, 3)
    if not a.smoke:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()

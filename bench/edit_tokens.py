"""Tokens per child node: whole-file code answers vs edit lists (issue 17, "edits instead of rewrites").

    python bench/edit_tokens.py [--out JSON] [--keep] [--set KEY=VALUE ...]

Runs the bundled example with the scripted LLM (``testsupport/ai_scientist_testing/scripted.py``'s
ExampleResponder: real experiments in the subprocess sandbox, all four stages), then for every
child node (improve, debug, tune, ablate, ...; drafts and seed re-runs have no parent code to edit)
takes from the run directory:

* ``before``: the phase 2 request as recorded (its prompt-log record: messages, the answer) — the
  prompt tokens and the completion tokens of the whole-file answer (the answer as JSON);
* ``after``: the same answer with ``files`` replaced by the edit list that turns the parent's files
  into the child's (``phases.edits.make_edits``; new files stay whole) — its completion tokens; the
  bench checks that ``expand_answer`` of that answer gives back exactly the child's files.

The prompt is the same in both (the child sees its parent's code as ``prior_code`` either way; the
schema goes natively to the backend); phase 2 does not yet ask for edits, so ``after`` is what an
answer in the edits format costs for the same change, not a recorded call. Tokens are counted with
the run's token counter (``context.tokens.counter_for`` of the code model). The baseline is the
whole-file answer measured in the same run; results go to ``bench/results/edit_tokens.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from argparse import Namespace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
RESULTS = ROOT / "bench" / "results" / "edit_tokens.json"
OVERRIDES = [
    "agent.stages.stage1_max_iters=4",
    "agent.stages.stage2_max_iters=3",
    "agent.stages.stage3_max_iters=2",
    "agent.stages.stage4_max_iters=3",
    "agent.search.num_drafts=2",
    "agent.search.debug_prob=1.0",
    "agent.multi_seed_eval.num_seeds=1",
    "exec.backend=subprocess",
    "exec.timeout=60",
    "memory.embedding.backend=none",
    "report.enabled=false",
]


def scripted_run(workdir: Path, extra: list[str], edits: bool = False) -> Path:
    """The example run; ``edits``: with ``agent.code_edits`` and the scripted LLM answering every
    child with edits against its parent's files (``testing.scripted.EditingResponder``)."""
    from ai_scientist_testing.scripted import EditingResponder, ExampleResponder

    from ai_scientist.cli.commands import execute, setup_run
    from ai_scientist.llm.scripted_backend import ScriptedBackend

    name = "edits" if edits else "whole"
    args = Namespace(
        config=None,
        overrides=[*OVERRIDES, *extra, f"agent.code_edits={str(edits).lower()}"],
        idea=str(IDEA),
        resources=None,
        out=str(workdir),
        name=name,
        from_phase=None,
        run_dir=None,
        stop_after=None,
    )
    run, resources = setup_run(args)
    responder = EditingResponder(Path(workdir) / name) if edits else ExampleResponder()
    assert Path(run.dir) == Path(workdir) / name
    execute(run, resources=resources, backend=ScriptedBackend(responder))
    return Path(run.dir)


def recorded(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per child node: the recorded phase 2 calls (every attempt, repairs included), their prompt
    and completion tokens counted with the run's counter, and whether the answer carried edits."""
    from ai_scientist.base.config import load_config
    from ai_scientist.base.paths import RunPaths
    from ai_scientist.context.tokens import counter_for, messages_tokens

    paths = RunPaths(run_dir)
    counter = counter_for(load_config(paths.config).model_for("code"))
    out: dict[str, dict[str, Any]] = {}
    for nid in paths.node_ids():
        if not paths.node(nid).node_json.is_file():
            continue
        node = json.loads(paths.node(nid).node_json.read_text())
        if not node.get("parent_id") or node["operation"] in ("seed_eval", "draft"):
            continue
        row = {"operation": node["operation"], "calls": 0, "prompt": 0, "completion": 0, "edits": False}
        for p in paths.node(nid).prompt_log_files():
            rec = json.loads(p.read_text(encoding="utf-8"))
            if rec.get("phase") != "phase2":
                continue
            raw = (rec.get("response") or {}).get("raw") or ""
            row["calls"] += 1
            row["prompt"] += messages_tokens(rec["messages"], counter)
            row["completion"] += counter.count(raw)
            row["edits"] = row["edits"] or '"edits"' in raw
        if row["calls"]:
            out[nid] = row
    return out


def compare(whole: dict[str, dict], edits: dict[str, dict]) -> dict[str, Any]:
    """Means per child of each run (their trees may differ), and per node id present in both."""

    def mean(rows: dict[str, dict], key: str) -> float:
        return round(sum(r[key] for r in rows.values()) / (len(rows) or 1), 1)

    both = sorted(set(whole) & set(edits))
    out: dict[str, Any] = {
        "children": {
            "whole": len(whole),
            "edits": len(edits),
            "answered_with_edits": sum(r["edits"] for r in edits.values()),
        },
        "whole": {k: mean(whole, k) for k in ("calls", "prompt", "completion")},
        "edits": {k: mean(edits, k) for k in ("calls", "prompt", "completion")},
        "same_nodes": [{"node": n, "whole": whole[n], "edits": edits[n]} for n in both],
    }
    tw = out["whole"]["prompt"] + out["whole"]["completion"]
    te = out["edits"]["prompt"] + out["edits"]["completion"]
    out["total_whole"], out["total_edits"] = round(tw, 1), round(te, 1)
    out["total_ratio_edits_vs_whole"] = round(te / tw, 3) if tw else None
    cw, ce = out["whole"]["completion"], out["edits"]["completion"]
    out["completion_ratio_edits_vs_whole"] = round(ce / cw, 3) if cw else None
    return out


def _phase2_record(paths: Any, node_id: str) -> dict | None:
    """The node's last answered phase 2 code call (its prompt-log record)."""
    found = None
    for p in paths.node(node_id).prompt_log_files():
        rec = json.loads(p.read_text(encoding="utf-8"))
        if rec.get("phase") == "phase2" and (rec.get("response") or {}).get("raw"):
            found = rec
    return found


def measure(run_dir: Path) -> dict[str, Any]:
    from ai_scientist.base.config import load_config
    from ai_scientist.base.paths import CODE_FILE, RunPaths
    from ai_scientist.context.tokens import counter_for, messages_tokens
    from ai_scientist.phases.edits import expand_answer, make_edits, text_files

    paths = RunPaths(run_dir)
    cfg = load_config(paths.config)
    counter = counter_for(cfg.model_for("code"))
    rows = []
    for nid in paths.node_ids():
        if not paths.node(nid).node_json.is_file():  # the "run" pseudo-node of run-level calls
            continue
        node = json.loads(paths.node(nid).node_json.read_text())
        parent = node.get("parent_id")
        if not parent or node["operation"] in ("seed_eval", "draft"):
            continue
        child_answer_path = paths.node(nid).file(CODE_FILE)
        parent_answer_path = paths.node(parent).file(CODE_FILE)
        rec = _phase2_record(paths, nid)
        if not (child_answer_path.is_file() and parent_answer_path.is_file() and rec):
            continue
        answer = json.loads(rec["response"]["raw"])
        parent_files = text_files(json.loads(parent_answer_path.read_text()))
        child_files = text_files(answer)
        shared = {p: child_files[p] for p in child_files if p in parent_files}
        edits = [e.to_dict() for e in make_edits(parent_files, shared)]
        new_files = [f for f in answer.get("files") or [] if f.get("path") not in parent_files]
        edited = {**{k: v for k, v in answer.items() if k != "files"}, "edits": edits, "files": new_files}
        back = text_files(expand_answer(parent_files, edited))
        assert {p: back[p] for p in child_files} == child_files, f"{nid}: edits do not reproduce the child"
        dropped = sorted(set(parent_files) - set(child_files))  # kept by an edits answer, absent whole
        prompt = messages_tokens(rec["messages"], counter)
        whole = counter.count(json.dumps(answer, ensure_ascii=False))
        after = counter.count(json.dumps(edited, ensure_ascii=False))
        rows.append(
            {
                "node": nid,
                "operation": node["operation"],
                "stage": node["stage"],
                "edits": len(edits),
                "changed_lines": sum(e["text"].count("\n") for e in edits),
                "parent_files_not_in_child": dropped,
                "prompt_tokens": prompt,
                "completion_whole": whole,
                "completion_edits": after,
                "total_whole": prompt + whole,
                "total_edits": prompt + after,
            }
        )
    n = len(rows) or 1
    summary = {
        "children": len(rows),
        "mean_prompt_tokens": round(sum(r["prompt_tokens"] for r in rows) / n, 1),
        "mean_completion_whole": round(sum(r["completion_whole"] for r in rows) / n, 1),
        "mean_completion_edits": round(sum(r["completion_edits"] for r in rows) / n, 1),
        "mean_total_whole": round(sum(r["total_whole"] for r in rows) / n, 1),
        "mean_total_edits": round(sum(r["total_edits"] for r in rows) / n, 1),
    }
    w, e = summary["mean_completion_whole"], summary["mean_completion_edits"]
    tw, te = summary["mean_total_whole"], summary["mean_total_edits"]
    summary["completion_ratio_edits_vs_whole"] = round(e / w, 3) if w else None
    summary["total_ratio_edits_vs_whole"] = round(te / tw, 3) if tw else None
    return {"counter": counter.name, "model": cfg.model_for("code"), "summary": summary, "nodes": rows}


def report(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [f"{s['children']} child nodes, counter {result['counter']} (model {result['model']})"]
    lines.append("node   op        st  edits  prompt  compl.whole  compl.edits  total.whole  total.edits")
    for r in result["nodes"]:
        lines.append(
            f"{r['node']}  {r['operation']:<8}  {r['stage']}   {r['edits']:>5}  {r['prompt_tokens']:>6}  "
            f"{r['completion_whole']:>11}  {r['completion_edits']:>11}  {r['total_whole']:>11}  {r['total_edits']:>11}"
        )
    lines.append(
        f"mean per child: prompt {s['mean_prompt_tokens']}, completion {s['mean_completion_whole']} -> "
        f"{s['mean_completion_edits']} (x{s['completion_ratio_edits_vs_whole']}), prompt+completion "
        f"{s['mean_total_whole']} -> {s['mean_total_edits']} (x{s['total_ratio_edits_vs_whole']})"
    )
    r = result.get("recorded")
    if r:
        lines.append(
            f"recorded runs (agent.code_edits off / on; {r['children']['whole']} / {r['children']['edits']} "
            f"children, {r['children']['answered_with_edits']} answered with edits), mean per child over "
            f"its phase 2 calls: calls {r['whole']['calls']} / {r['edits']['calls']}, prompt "
            f"{r['whole']['prompt']} / {r['edits']['prompt']}, completion {r['whole']['completion']} / "
            f"{r['edits']['completion']} (x{r['completion_ratio_edits_vs_whole']}), prompt+completion "
            f"{r['total_whole']} / {r['total_edits']} (x{r['total_ratio_edits_vs_whole']})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--set", action="append", default=[], help="extra config override KEY=VALUE")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py); writes no results file",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        from ai_scientist_testing.bench_support import SMOKE_RUN

        args.set, args.out = [*SMOKE_RUN, *args.set], os.devnull
    work = Path(tempfile.mkdtemp(prefix="bench-edit-tokens-"))
    run_dir = scripted_run(work, args.set)
    result = measure(run_dir)
    # recorded calls: the same run with agent.code_edits, the scripted children answering with edits
    edits_dir = scripted_run(work, args.set, edits=True)
    result["recorded"] = compare(recorded(run_dir), recorded(edits_dir))
    if args.keep:
        result["run_dir"], result["edits_run_dir"] = str(run_dir), str(edits_dir)
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

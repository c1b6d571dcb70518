"""The real embedded model (SmolLM2-135M via llama.cpp) drives the pipeline end to end.

It is weak: code it writes from scratch usually fails. What must hold is that the pipeline stays
robust to its output and leaves a complete run directory with exit 0 or 3 — and that, given the
bundled example's seed code and answers constrained to what exists (edits against existing
lines, run commands naming existing files, dependencies the sandbox has), it gets a working
stage-1 node and goes on to stage 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from components import needs_llama
from pipeline_support import ONE_REAL_NODE, events, run_args

from ai_scientist.cli.commands import execute, setup_run

pytestmark = needs_llama()


@pytest.mark.slow
def test_local_gguf_model_runs_a_node_end_to_end(tmp_path):
    args = run_args(
        tmp_path,
        "llm.backend=local",
        *ONE_REAL_NODE,
    )
    run, resources = setup_run(args)
    code = execute(run, resources=resources)
    assert code in (0, 3)
    run_dir = run.dir
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == code
    records = [json.loads(p.read_text()) for p in sorted(run_dir.glob("nodes/n0001/prompt_logs/*.json"))]
    assert records, "the local model was called and every call logged"
    assert all(r["backend"] == "local" and r["model"].startswith("local:") for r in records)
    assert all(r["usage"]["estimated"] is False for r in records if r.get("response"))
    # the first call (the draft's plan and code in one answer, agent.merge_calls) got a
    # schema-valid answer or a recorded structured error; the run went on
    assert records[0]["phase"] == "phase2" and records[0]["label"] == "code+plan"
    node = [json.loads(line)["node"] for line in (run_dir / "journal.jsonl").read_text().splitlines()][-1]
    assert node["status"] in ("good", "buggy")
    if node["status"] == "buggy":
        assert node["error"], "a failed node says why"
    assert (run_dir / "tree.html").exists()
    assert any(e["type"] == "run_finished" for e in events(run_dir))


EXAMPLE = Path(__file__).parents[1] / "examples" / "label_noise"


@pytest.mark.slow
@pytest.mark.timeout(3300)  # its run's own limit is 3000 s (the main job's command, cut short)
def test_local_model_reaches_stage_2_from_the_seed_code(tmp_path):
    """The main job's command, cut to one draft and one stage-2 node (greedy decoding, no plots,
    no report): the draft answers with edits against the seed code (or none), its run is good,
    and stage 2 grows a node from it. Everything asserted is read back from the run's files."""
    sets = [
        "agent.stages.stage1_max_iters=1",
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        "agent.multi_seed_eval.num_seeds=1",
        "agent.code.temperature=0",
        "agent.feedback.temperature=0",
        "agent.plots.enabled=false",
        "report.enabled=false",
        "memory.embedding.backend=none",
        "llm.timeout_s=900",  # a loaded CI machine decodes slowly; nothing here waits on it
    ]
    cmd = [sys.executable, "-m", "ai_scientist.cli", "run", str(EXAMPLE / "config.yaml")]
    cmd += ["--idea", str(EXAMPLE / "idea.md"), "--load-code", str(EXAMPLE / "seed_code.py")]
    cmd += ["--out", str(tmp_path), "--name", "run"]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3000)
    run_dir = tmp_path / "run"
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    nodes = {}
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        node = json.loads(line)["node"]
        nodes[node["id"]] = node
    draft = next(n for n in nodes.values() if n["operation"] == "draft")
    assert draft["status"] == "good", draft.get("error")
    answer = json.loads((run_dir / "nodes" / draft["id"] / "code_answer.json").read_text())
    assert "edits" in answer, "the draft answered against the seed code"
    stage2 = [n for n in nodes.values() if n["stage"] == 2 and n["operation"] != "seed_eval"]
    assert stage2, f"no stage-2 node: {sorted((n['id'], n['stage'], n['operation']) for n in nodes.values())}"
    assert stage2[0]["parent_id"] is not None
    logs = sorted((run_dir / "nodes" / stage2[0]["id"] / "prompt_logs").glob("*.json"))
    assert logs and all(json.loads(p.read_text())["backend"] == "local" for p in logs)
    assert proc.returncode == 0 or stage2[0]["status"] == "buggy"

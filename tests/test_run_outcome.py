"""The last lines of a run tell its story: what each stage produced, the figures, the paper, the
review, and the commands to inspect it — every printed value read back from the run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import journal_nodes, start_run


def _outcome_block(err: str) -> list[str]:
    """The outcome block: from its head line to the final ``next:`` line."""
    lines = err.strip().splitlines()
    heads = ("run completed (exit", "run finished without a working experiment (exit")
    start = max(i for i, line in enumerate(lines) if line.startswith(heads))
    block = lines[start:]
    assert block[-1].startswith("next: "), block
    return block


def _expected_stage_lines(run_dir: Path) -> list[str]:
    """Per stage, from the journal (search nodes by status) and state.json (the best node), the best
    node's metric from its node.json."""
    state = json.loads((run_dir / "state.json").read_text())
    nodes = [n for n in journal_nodes(run_dir).values() if n["operation"] != "seed_eval"]
    stages = sorted({n["stage"] for n in nodes} | {int(s) for s in state.get("stages") or {}})
    out = []
    for stage in stages:
        mine = [n for n in nodes if n["stage"] == stage]
        good = sum(n["status"] == "good" and not n.get("incomparable") for n in mine)
        other = sum(n["status"] == "good" and bool(n.get("incomparable")) for n in mine)
        buggy = sum(n["status"] == "buggy" for n in mine)
        text = f"  stage {stage}: {good} of {len(mine)} nodes worked"
        text += (f", {other} not comparable" if other else "") + (f", {buggy} buggy" if buggy else "")
        info = (state.get("stages") or {}).get(str(stage)) or {}
        best = (info.get("best") or {}).get("node_id")
        if not best:
            out.append(text + "; no best node")
            continue
        node = json.loads((run_dir / "nodes" / best / "node.json").read_text())
        text += f"; best {best} {node['metric']['name']}={node['metric']['value']:.4g}"
        if node["stage"] != stage:
            text += f" (kept from stage {node['stage']})"
        agg = (info.get("seeds") or {}).get("aggregate")
        if agg:
            text += f" (over {agg['n']} seed{'' if agg['n'] == 1 else 's'}: mean {agg['mean']:.4g}"
            text += f" ± {agg['stderr']:.2g} s.e.)" if isinstance(agg.get("stderr"), (int, float)) else ")"
        rerank = (info["best"].get("evidence") or {}).get("seed_rerank") or {}
        if rerank.get("changed"):  # the seed re-ranking replaced the metric's choice (issue 30)
            text += f"; chosen over {rerank['node_id']} by the mean over seed re-runs"
        if _tie(rerank):  # kept by a mean within the seed noise of another's (issue 28)
            text += "; a tie within the seed noise (see its stage facts)"
        out.append(text)
    return out


def _tie(rerank: dict) -> bool:
    """The chosen node's seed mean within z x sigma x sqrt(1/n + 1/m) of another node's mean."""
    import math

    means, sigma = rerank.get("means") or {}, (rerank.get("noise") or {}).get("sigma")
    chosen = rerank.get("chosen") or rerank.get("node_id")
    won = means.get(chosen)
    if not won or sigma is None:
        return False
    return any(
        abs(won["mean"] - m["mean"]) <= rerank["noise_z"] * sigma * math.sqrt(1 / won["n"] + 1 / m["n"])
        for nid, m in means.items()
        if m and nid != chosen
    )


def _last_best(run_dir: Path) -> str:
    stages = json.loads((run_dir / "state.json").read_text())["stages"]
    return stages[max(stages, key=int)]["best"]["node_id"]


def test_completed_run_prints_stages_best_nodes_and_next_commands(tmp_path, capsys):
    code, run_dir, _ = start_run(tmp_path)
    assert code == 0
    block = _outcome_block(capsys.readouterr().err)
    assert block[0] == f"run completed (exit 0): {run_dir}"
    stage_lines = _expected_stage_lines(run_dir)
    assert [line.split(":")[0] for line in stage_lines] == [f"  stage {s}" for s in (1, 2, 3, 4)]
    assert block[1 : 1 + len(stage_lines)] == stage_lines
    # report.enabled=false: no figures, no paper, no review — and none claimed
    assert not any(line.startswith(("  figures:", "  paper:", "  review:")) for line in block)
    assert f"  inspect the best node: ai-scientist logs {run_dir} inspect {_last_best(run_dir)}" in block
    assert block[-1] == f"next: ai-scientist view {run_dir}   # or: ai-scientist logs {run_dir} nodes"


def test_failed_run_says_how_many_nodes_failed_per_stage(tmp_path, capsys):
    code, run_dir, _ = start_run(tmp_path, responder=ExampleResponder(always_buggy=True))
    assert code == 3
    block = _outcome_block(capsys.readouterr().err)
    nodes = [n for n in journal_nodes(run_dir).values() if n["stage"] == 1]
    assert nodes and all(n["status"] == "buggy" for n in nodes)
    assert block[1:-1] == [f"  stage 1: 0 of {len(nodes)} nodes worked, {len(nodes)} buggy; no best node"]
    assert block[-1].startswith(f"next: ai-scientist logs {run_dir} nodes")


@pytest.mark.slow
def test_reporting_run_prints_figures_paper_and_review(tmp_path, capsys):
    latex_or_skip()
    matplotlib_or_skip()
    code, run_dir, _ = start_run(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
    )
    assert code == 0
    block = _outcome_block(capsys.readouterr().err)
    stage_lines = _expected_stage_lines(run_dir)
    assert block[1 : 1 + len(stage_lines)] == stage_lines
    pngs = sorted((run_dir / "figures").glob("*.png"))
    assert pngs
    assert f"  figures: {len(pngs)} in {run_dir / 'figures'}" in block
    assert (run_dir / "paper" / "paper.pdf").is_file()
    assert f"  paper: {run_dir / 'paper' / 'paper.pdf'}" in block
    review = json.loads((run_dir / "review.json").read_text())
    overall = review["mean_scores"]["overall"]
    assert f"  review: overall {overall:.3g}/10, decision {review['decision']}" in block
    assert block[-1].startswith(f"next: ai-scientist view {run_dir}")


class NoPaperResponder(ExampleResponder):
    """The example's answers, but the writer's answers are never valid JSON."""

    def __call__(self, messages, schema, ctx):
        if ctx.phase == "writeup":
            return "I cannot write this paper."
        return super().__call__(messages, schema, ctx)


@pytest.mark.slow
def test_a_report_step_that_failed_is_named_with_its_reason(tmp_path, capsys):
    """No paper: the block says so with the writeup's recorded reason, and that the review was
    skipped for it (both read from the run's report_step events), instead of staying silent."""
    matplotlib_or_skip()
    code, run_dir, _ = start_run(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
        responder=NoPaperResponder(),
    )
    assert code == 0
    block = _outcome_block(capsys.readouterr().err)
    steps = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "report_step":
            steps[event["step"]] = event
    assert steps["writeup"]["status"] == "failed" and steps["review"]["status"] == "skipped"
    assert not (run_dir / "paper" / "paper.pdf").exists()
    writeup = steps["writeup"]["reason"].strip().splitlines()[0][:200]
    assert f"  paper: none — failed: {writeup}" in block
    assert f"  review: none — skipped: {steps['review']['reason'].strip().splitlines()[0][:200]}" in block

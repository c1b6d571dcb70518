"""Stage 3 (creative research) proposes research ideas through the run-level proposal call, as
stage 2 proposes tunings and stage 4 ablations: each stage-3 improve node gets its own idea, the
proposal sees what was measured, and a failed or empty proposal leaves the node the brief that
says its direction is its own (issue 28; relay s6 mm2 020, 024).

Everything is read from scripted runs' prompt logs, journal and events."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import RESEARCH_IDEAS, ExampleResponder
from pipeline_support import decisions, events, journal_nodes, prompt_records, record_text, start_run, tree

from ai_scientist.cli.main import main
from ai_scientist.llm.call import CallContext, LLMError

FALLBACK = "No idea was proposed for this node"


class OneResearchIdeaPerCall(ExampleResponder):
    """Answers a research proposal with one idea the prompt does not show yet (so every stage-3
    node asks again and sees the earlier ones); once the pool is spent it repeats the first, which
    the run rejects as tried: nothing fresh."""

    def __init__(self, pool: list[str]):
        super().__init__()
        self.pool = pool

    def _ideas(self, text: str, ctx: CallContext) -> str:
        if ctx.label != "research":
            return super()._ideas(text, ctx)
        fresh = [i for i in self.pool if i not in text]
        return json.dumps({"ideas": fresh[:1] or self.pool[:1]})


class FailingResearchProposal(ExampleResponder):
    def __call__(self, messages, schema, ctx):
        if ctx.phase == "ideas" and ctx.label == "research":
            raise LLMError("scripted: the research proposal failed")
        return super().__call__(messages, schema, ctx)


def _code_brief(run_dir: Path, node_id: str) -> str:
    """The "This call" section of the node's first code prompt."""
    records = [r for r in prompt_records(run_dir) if r["node_id"] == node_id and r["phase"] == "phase2"]
    text = record_text(records[0])
    return text[text.find("## This call\n") :]


def _stage3_improves(nodes: dict[str, dict]) -> list[dict]:
    return sorted(
        (n for n in nodes.values() if n["stage"] == 3 and n["operation"] == "improve"),
        key=lambda n: int(n["id"].lstrip("n")),
    )


@pytest.fixture(scope="module")
def research_run(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("stage3_ideas")
    code, run_dir, _ = start_run(
        tmp, "agent.stages.stage3_max_iters=3", responder=OneResearchIdeaPerCall(RESEARCH_IDEAS[:2])
    )
    assert code == 0
    return tmp, run_dir


def test_the_research_proposal_is_sent_with_what_was_measured(research_run):
    """Each stage-3 proposal shows the metric names the stage's best node reports and, one line
    each, what every stage-3 node selected before it set out to do (its idea, its plan's goal)."""
    from ai_scientist.runloop.stage_inputs import TAKEN_CHARS
    from ai_scientist.treesearch.tried import sentences

    _, run_dir = research_run
    nodes = journal_nodes(run_dir)
    asked = [r for r in prompt_records(run_dir) if r["phase"] == "ideas" and r["label"] == "research"]
    planned = [e for e in events(run_dir) if e["type"] == "ideas_planned" and e["kind"] == "research"]
    assert len(asked) == len(planned) == len(_stage3_improves(nodes)) == 3
    selected_before: list[list[str]] = []  # the stage-3 nodes selected before each proposal
    seen: list[str] = []
    for e in events(run_dir):
        if e["type"] == "ideas_planned" and e["kind"] == "research":
            selected_before.append(list(seen))
        elif e["type"] == "node_selected" and e["stage"] == 3:
            seen.append(e["node_id"])
    for rec, before in zip(asked, selected_before, strict=True):
        brief = record_text(rec)[record_text(rec).find("## This call\n") :]
        best = brief.split("Measured already: the stage's best node so far, ", 1)[1].split(",", 1)[0]
        names = list(dict.fromkeys(m["name"] for m in nodes[best]["metrics"]))
        grown = re.search(r"^Best node so far: (n\d{4}):", brief, re.M).group(1)
        if grown == best:  # its metrics, with their values, are on that line: named once (issue 28, s8)
            assert (
                f'{best}, reports the metrics listed with its values under "Best node so far" below.\n'
                in brief
            )
            line = next(x for x in brief.splitlines() if x.startswith("Best node so far: "))
            assert all(f"{n}=" in line for n in names), line
        else:
            assert f"{best}, reports {', '.join(names)}.\n" in brief, brief
        for nid in before:
            n = nodes[nid]
            what = f"{n['operation']} of {n['parent_id']}" + (f"; idea: {n['idea']}" if n.get("idea") else "")
            goal = json.loads((run_dir / "nodes" / nid / "plan.json").read_text())["goal_summary"]
            assert f"- {nid} ({what}): {sentences(goal, TAKEN_CHARS)}\n" in brief, brief
        assert ("No node of this stage has run yet." in brief) == (not before)
    assert any(selected_before), "a later proposal saw the stage's earlier nodes"


def test_each_stage_3_improve_node_carries_its_own_idea_and_siblings_differ(research_run):
    """A research idea reaches its node's code prompt as a tune or an ablation does; two siblings'
    ideas differ; a proposal offering nothing fresh leaves its node the brief (and the stage
    goes on: stage 3 ends on patience, not on exhausted ideas)."""
    _, run_dir = research_run
    nodes = journal_nodes(run_dir)
    planned = [e for e in events(run_dir) if e["type"] == "ideas_planned" and e["kind"] == "research"]
    proposed = [i for e in planned for i in e["new"]]
    with_idea = [n for n in _stage3_improves(nodes) if n.get("idea")]
    without = [n for n in _stage3_improves(nodes) if not n.get("idea")]
    assert len(with_idea) >= 2 and len(without) >= 1
    ideas = [n["idea"] for n in with_idea]
    assert len(set(ideas)) == len(ideas), ideas
    for n in with_idea:
        assert n["idea"] in proposed
        brief = _code_brief(run_dir, n["id"])
        assert f"This node's idea: {n['idea']}\n" in brief, brief
        assert "Carry out this node's idea" in brief and FALLBACK not in brief
        for other in ideas:
            if other != n["idea"]:
                assert f"This node's idea: {other}\n" not in brief
    # the repeat was rejected as tried: nothing fresh, not exhausted, the node chose its own way
    empty = [e for e in planned if not e["new"]]
    assert empty and all(e["rejected"] and not e["exhausted"] for e in empty)
    for n in without:
        brief = _code_brief(run_dir, n["id"])
        assert FALLBACK in brief and "its direction is yours to choose" in brief, brief
        assert "This node's idea:" not in brief


def test_a_replay_plans_and_hands_out_the_same_research_ideas(research_run, capsys):
    """The ideas are recorded as tune and ablate ideas are (``ideas_planned``, the nodes' ideas):
    a replay of the run builds the same tree and makes the same decisions."""
    tmp, run_dir = research_run
    capsys.readouterr()
    assert main(["replay", str(run_dir), "--out", str(tmp / "replays")]) == 0
    replayed = tmp / "replays" / f"{run_dir.name}.replay"
    assert tree(replayed) == tree(run_dir)
    assert decisions(replayed) == decisions(run_dir)


def test_a_failed_research_proposal_falls_back_to_the_brief(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path, "agent.stages.stage3_max_iters=2", responder=FailingResearchProposal()
    )
    assert code == 0
    failed = [e for e in events(run_dir) if e["type"] == "ideas_failed"]
    improves = _stage3_improves(journal_nodes(run_dir))
    assert len(improves) == 2 and len(failed) == 2
    assert all(e["stage"] == 3 and e["kind"] == "research" for e in failed)
    for n in improves:
        assert not n.get("idea")
        brief = _code_brief(run_dir, n["id"])
        assert FALLBACK in brief and "its direction is yours to choose" in brief, brief


def test_a_tile_as_large_as_the_problem_is_measured_as_no_blocking(tmp_path):
    """An ablation-like metric the proposer is shown: a tile equal to the problem size is the
    unblocked kernel (relay s6 mm2 029: gflops_blocked_tile1024 at n=1024 went unlisted). The size
    comes from the metric names (``speedup_n1024``) or from the code's size constant (``N``)."""
    from ai_scientist.runloop.stage_inputs import measured_ablations, problem_sizes
    from ai_scientist.treesearch.journal import Journal
    from ai_scientist.treesearch.node import Metric

    code = "#include <stdio.h>\n#define N 1024\n#define TILE 64\nint main(void) { return 0; }\n"
    answer = {"files": [{"path": "mm.c", "content": code, "encoding": "utf-8"}]}
    j = Journal(tmp_path / "journal.jsonl")
    for names, given in (
        (("gflops_blocked", "gflops_blocked_tile1024", "gflops_blocked_tile_128", "speedup_n1024"), None),
        (("gflops_blocked", "gflops_blocked_tile1024", "gflops_blocked_tile_128"), answer),
    ):
        node = j.new_node(stage=3, operation="improve")
        metrics = tuple(Metric(n, 1.0 + i) for i, n in enumerate(names))
        node = j.update(node.id, status="good", metric=metrics[0], metrics=metrics)
        sizes = problem_sizes(node, given)
        assert sizes == {1024}, sizes
        found = measured_ablations(node, None, given)
        listed = {m.name for m in metrics[1:] if f"{m.name}={m.value:.6g}" in found}
        untiled = {m.name for m in metrics[1:] if any(f"tile{s}" in m.name for s in sizes)}
        assert listed == untiled == {"gflops_blocked_tile1024"}, found
    # no size known: a tile is only a tile
    bare = j.new_node(stage=3, operation="improve")
    metrics = (Metric("gflops_blocked", 1.0), Metric("gflops_blocked_tile1024", 2.0))
    bare = j.update(bare.id, status="good", metric=metrics[0], metrics=metrics)
    assert measured_ablations(bare) == ""

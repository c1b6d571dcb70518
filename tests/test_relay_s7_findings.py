"""Issue 28, relay runs s6 (ln2, mm2; a capable model answering each request alone): the node-side
gaps their critiques still named. Each test runs a scripted pipeline and reads what the prompts
really carried (prompt logs), checked against the run's own files (plan.json, journal, events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, prompt_records, record_text, start_run


def _section(text: str, heading: str) -> str:
    """The text of a prompt's ``## heading`` section, up to the next ``## `` heading."""
    start = text.find(f"## {heading}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 4)
    return text[start : end if end >= 0 else len(text)]


@pytest.fixture(scope="module")
def default(tmp_path_factory) -> Path:
    """A default scripted run of the bundled example (tunes in stage 2, an improve node in stage 3,
    ablations in stage 4, seed re-runs of each stage's best)."""
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("default"))
    assert code == 0
    return run_dir


def _sentences(text: str, limit: int) -> str:
    """The text cut at its last sentence end within ``limit`` characters (as a design line is)."""
    from ai_scientist.treesearch.tried import sentences

    return sentences(text, limit)


def test_a_nodes_review_and_figure_critique_get_its_own_plan_once(default):
    """The execution review and the figure critique of every search node carry the node's own
    plan in its short form — its goal and strategy as its plan.json has them — once, and never
    its code answer's other fields (relay s6 mm2 006, 021, 025, 027)."""
    from ai_scientist.treesearch.tried import DESIGN_CHARS

    nodes = journal_nodes(default)
    seen: dict[str, int] = {}
    for rec in prompt_records(default):
        if rec.get("phase") not in ("review", "phase5_vlm"):
            continue
        node = nodes[rec["node_id"]]
        text = record_text(rec)
        if node["operation"] == "seed_eval":  # its plan is its parent's: not said as its own
            assert "What it set out to do" not in text
            continue
        plan = json.loads((default / "nodes" / node["id"] / "plan.json").read_text())
        goal = _sentences(plan["goal_summary"], DESIGN_CHARS)
        strategy = _sentences(plan["implementation_strategy"], DESIGN_CHARS)
        said = f"What it set out to do (its plan): goal: {goal} / strategy: {strategy}"
        brief = _section(text, "This call")
        assert said in brief, (rec["node_id"], rec["phase"], brief[:600])
        assert text.count("What it set out to do") == 1 and text.count(goal) == 1, rec["node_id"]
        seen[rec["phase"]] = seen.get(rec["phase"], 0) + 1
    assert seen.get("review", 0) >= 5 and seen.get("phase5_vlm", 0) >= 5, seen


def _reruns(nodes: dict[str, Any], parent_id: str) -> list[dict[str, Any]]:
    return [
        n
        for n in nodes.values()
        if n["operation"] == "seed_eval" and n["parent_id"] == parent_id and n["status"] == "good"
    ]


def test_a_childs_review_gets_its_parents_seed_values_beside_the_search_run(default):
    """A tune's or ablation's review and critique show, beside each parent metric its seed re-runs
    measured too, every re-run's value and their mean — read from the journal's re-runs — so a
    seed-0 gain is not read as real (relay s6 mm1 012, 032; ln2 012, 025)."""
    from ai_scientist.treesearch.seeds import aggregate_seeds

    nodes = journal_nodes(default)
    checked = 0
    for rec in prompt_records(default):
        if rec.get("phase") not in ("review", "phase5_vlm"):
            continue
        node = nodes[rec["node_id"]]
        parent = nodes.get(node["parent_id"] or "")
        if parent is None or node["operation"] not in ("tune", "ablate"):
            continue
        reruns = _reruns(nodes, parent["id"])
        if not reruns:
            continue
        brief = _section(record_text(rec), "This call")
        for m in parent["metrics"]:
            same = [
                x["value"]
                for r in reruns
                for x in r["metrics"]
                if (x["name"], x.get("dataset")) == (m["name"], m.get("dataset"))
            ]
            if not same:
                continue
            line = next(ln for ln in brief.splitlines() if ln.startswith(f"- {m['name']} = "))
            assert line.startswith(f"- {m['name']} = {m['value']:.6g} (search run; "), line
            if len(same) == 1:
                assert f"one seed re-run: {same[0]:.6g}, no spread" in line, line
            else:
                from ai_scientist.treesearch.node import Metric

                agg = aggregate_seeds([Metric(name=m["name"], value=v) for v in same])
                values = ", ".join(f"{v:.6g}" for v in same)
                assert f"seed re-runs {values}: mean {agg.mean:.6g} ± {agg.stderr:.2g} s.e." in line, line
            checked += 1
        # said once: the separate mean line is not repeated under the table
        assert "Over its" not in brief
    assert checked >= 4, checked


def test_an_ablation_is_told_what_its_headline_measures_with_the_baseline_value(default):
    """An ablation's code prompt says its headline metric measures the ablated configuration under
    the protocol and gives the base node's headline value (with its seed re-runs' mean) as the
    baseline; its review and critique say the parent's value is the baseline — each figure read
    from the journal (relay s6 mm2 030, 031)."""
    nodes = journal_nodes(default)
    seen: dict[str, int] = {}
    for rec in prompt_records(default):
        node = nodes.get(rec["node_id"])
        if node is None or node["operation"] != "ablate":
            continue
        parent = nodes[node["parent_id"]]
        m = parent["metric"]
        brief = _section(record_text(rec), "This call")
        if rec.get("phase") == "phase2":
            said = f"Your headline metric {m['name']} measures the ablated configuration"
            assert said in brief, brief
            reruns = [r["metric"]["value"] for r in _reruns(nodes, parent["id"])]
            value = (
                f"{parent['id']}'s value is the baseline it is compared with: {m['name']}={m['value']:.6g}"
            )
            assert value in brief, brief
            if reruns:
                runs = "re-run" if len(reruns) == 1 else "re-runs"
                assert f"is its search run; over its {len(reruns)} seed {runs}: mean " in brief, brief
        elif rec.get("phase") in ("review", "phase5_vlm"):
            said = f"its headline measures the ablated configuration under the evaluation protocol, and {parent['id']}'s {m['name']} above is the baseline"
            assert said in brief, brief
        else:
            continue
        seen[rec["phase"]] = seen.get(rec["phase"], 0) + 1
    assert {"phase2", "review", "phase5_vlm"} <= set(seen), seen
    # a method measured side by side: the stage summary judges it by its own metric in the same run,
    # the review's headline names the configuration of the method the primary metric measures
    # (relay s6 mm2 021, 028)
    for rec in prompt_records(default):
        text = record_text(rec)
        if rec.get("phase") == "summary":
            assert "judged by that metric against the protocol's method in the same run" in text
        elif rec.get("phase") == "review":
            assert "With several methods side by side, the configuration of the method the primary" in text
    # no other operation is told so
    for rec in prompt_records(default):
        node = nodes.get(rec["node_id"])
        if node is not None and node["operation"] != "ablate":
            assert "measures the ablated configuration" not in record_text(rec), rec["node_id"]


# the extra metrics each node's program writes beside its headline: ablation-like conditions of
# the kinds relay runs measured inside a run (no L2, an untiled kernel, a generic build)
_CONDITIONS = ("val_accuracy_l2_0", "val_accuracy_untiled", "val_accuracy_generic")


class InRunAblations(ExampleResponder):
    """Programs that also measure an ablation-like condition inside their own run, a different one
    per node, written to metrics.json beside the headline."""

    def __init__(self) -> None:
        super().__init__()
        self.order: dict[str, int] = {}  # node -> its place among the nodes that wrote code

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        place = self.order.setdefault(ctx.node_id, len(self.order))
        name = _CONDITIONS[place % len(_CONDITIONS)]
        answer["files"][0]["content"] += (
            "\nimport json as _j\n"
            "_m = _j.load(open('metrics.json'))\n"
            f"_m['metrics'].append({{'name': '{name}', 'value': 0.5, 'direction': 'maximize', 'dataset': 'synthetic'}})\n"
            "_j.dump(_m, open('metrics.json', 'w'))\n"
        )
        return json.dumps(answer)


def test_the_ablation_proposal_lists_every_condition_measured_in_the_stage(tmp_path):
    """The ablation-ideas call lists every ablation-like condition the best node measured inside
    its run, and those the other working nodes of its stage measured — each read from the
    journal's metrics, not from one naming pattern (relay s6 mm2 029: only the -O1 build of three
    was listed; ln1 025: val_accuracy_l2_0 missed)."""
    code, run_dir, _ = start_run(tmp_path, responder=InRunAblations())
    assert code == 0
    nodes = journal_nodes(run_dir)
    ablations = [n for n in nodes.values() if n["operation"] == "ablate"]
    assert ablations
    best = nodes[ablations[0]["parent_id"]]
    calls = [r for r in prompt_records(run_dir) if r.get("phase") == "ideas" and r.get("label") == "ablate"]
    assert calls
    text = record_text(calls[0])

    def extra(node: dict[str, Any]) -> list[str]:
        return [
            f"{m['name']}={m['value']:.6g}" for m in node["metrics"] if m["name"] != node["metric"]["name"]
        ]

    line = next(ln for ln in text.splitlines() if ln.startswith("Already measured by the best node"))
    assert extra(best) and all(e in line for e in extra(best)), line
    # the other working nodes since the best node's stage (ablation nodes are in the tried table)
    others = [
        n
        for n in nodes.values()
        if n["stage"] >= best["stage"]
        and n["id"] != best["id"]
        and n["operation"] not in ("seed_eval", "ablate")
        and n["status"] == "good"
    ]
    assert others
    head = "Measured by other nodes since the best node's stage, inside their own runs:\n"
    after = text[text.index(head) + len(head) :].splitlines()
    block = "\n".join(ln for ln in after[: next(i for i, ln in enumerate(after) if not ln.startswith("- "))])
    others.sort(key=lambda n: int(n["id"].lstrip("n")))
    seen = set(extra(best))  # each value once: a line leaves out what a line above showed
    for n in reversed(others[-4:]):  # the latest four, latest first
        fresh = [e for e in extra(n) if e not in seen]
        if fresh:
            assert f"- {n['id']} (stage {n['stage']}): its metrics " + "; ".join(fresh) in block, block
        else:
            assert f"- {n['id']} (stage {n['stage']}): the same values as shown above" in block, block
        seen.update(extra(n))
    assert len(block.splitlines()) == min(4, len(others)), block
    assert "Do not propose these again" in text


def test_a_stage_3_improve_node_without_an_idea_is_told_its_direction_and_what_was_taken(tmp_path):
    """When stage 3's research proposal fails, each improve node of it (no idea) is told the
    direction is its own to choose (what the idea asks that no node measured, or the last
    summary's advice) and what every earlier draft or improve node of the stage set out to do —
    their goals read from their plan.json (relay s6 mm2 020, 024; ln2 016)."""
    from ai_scientist.llm.call import LLMError
    from ai_scientist.runloop.stage_inputs import TAKEN_CHARS
    from ai_scientist.treesearch.tried import sentences

    class NoResearchIdea(ExampleResponder):  # the brief is the fallback of a failed proposal
        def __call__(self, messages, schema, ctx):
            if ctx.phase == "ideas" and ctx.label == "research":
                raise LLMError("scripted: no research idea")
            return super().__call__(messages, schema, ctx)

    code, run_dir, _ = start_run(tmp_path, "agent.stages.stage3_max_iters=3", responder=NoResearchIdea())
    assert code == 0
    nodes = journal_nodes(run_dir)
    said = "No idea was proposed for this node (the stage's idea proposal failed or offered nothing new)"
    checked = listed = 0
    for rec in prompt_records(run_dir):
        node = nodes.get(rec["node_id"])
        if node is None or rec.get("phase") != "phase2":
            continue
        brief = _section(record_text(rec), "This call")
        if not (node["stage"] == 3 and node["operation"] == "improve" and not node.get("idea")):
            assert said not in brief, rec["node_id"]
            continue
        assert said in brief, brief
        earlier = [
            n
            for n in nodes.values()
            if n["stage"] == 3
            and n["operation"] in ("draft", "improve")
            and int(n["id"].lstrip("n")) < int(node["id"].lstrip("n"))
        ]
        for n in earlier:
            goal = json.loads((run_dir / "nodes" / n["id"] / "plan.json").read_text())["goal_summary"]
            assert f"- {n['id']}: {sentences(goal, TAKEN_CHARS)}\n" in brief + "\n", brief
            listed += 1
        assert ("choose something else" in brief) == bool(earlier)
        checked += 1
    assert checked >= 3 and listed >= 3, (checked, listed)

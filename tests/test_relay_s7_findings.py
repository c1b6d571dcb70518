"""Issue 28, relay runs s6 (ln2, mm2; a capable model answering each request alone): the node-side
gaps their critiques still named. Each test runs a scripted pipeline and reads what the prompts
really carried (prompt logs), checked against the run's own files (plan.json, journal, events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
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
    # no other operation is told so
    for rec in prompt_records(default):
        node = nodes.get(rec["node_id"])
        if node is not None and node["operation"] != "ablate":
            assert "measures the ablated configuration" not in record_text(rec), rec["node_id"]

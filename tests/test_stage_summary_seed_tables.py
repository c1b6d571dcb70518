"""Issue 28 (report side, items 1-2): a stage summary call shows every metric of a node that was
re-run over seeds — the primary, then the metrics new relative to its parent (the conditions the
node added), then the rest — as a metric x seed table with each name once, and it names the
stage's number and goal.

A relay run's stage-3 node reported 59 metrics; its re-run cell listed the first 13 and "+46
more", so the re-runs of the conditions it added never reached the summary. Here every draft
reports 15 metrics and every child 15 more of its own (values that move with the seed), and a
child scores a little higher so that the stage ends by re-running it. The expectations are read
from the journal and from the prompt logs of the run.
"""

from __future__ import annotations

import json
import re

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import prompt_records, start_run

from ai_scientist.base.templates import render
from ai_scientist.runloop.stage_facts import SEED_TABLE_CHARS
from ai_scientist.treesearch.journal import Journal
from ai_scientist.treesearch.seeds import num
from ai_scientist.treesearch.stages import STAGES

# appended to the example's program: more metrics, named by the node's kind, moving with SEED
EXTRA = """
import json as _j, os as _o
_m = _j.load(open("metrics.json"))
_s = int(_o.environ.get("SEED", "0"))
{bump}for _k in range({n}):
    _m["metrics"].append({{"name": "{prefix}_condition_{{:02d}}".format(_k), "value": round(0.5 + 0.01 * _k + 0.003 * _s, 6),
                          "direction": "maximize", "dataset": "synthetic"}})
_j.dump(_m, open("metrics.json", "w"))
"""
BUMP = '_m["metrics"][0]["value"] = round(_m["metrics"][0]["value"] + 0.02 + 0.001 * _s, 6)\n'


class ManyMetrics(ExampleResponder):
    """Drafts report 14 extra metrics (``draft_condition_NN``); every child 15 of its own
    (``added_condition_NN``) and a slightly higher val_accuracy, so it becomes its stage's best."""

    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        op = (re.search(r"Operation:\s*(\w+)", text) or [None, "draft"])[1]
        program = answer["files"][0]["content"]
        program += EXTRA.format(prefix="draft", n=14, bump="")
        if op != "draft":
            program += EXTRA.format(prefix="added", n=15, bump=BUMP)
        answer["files"][0]["content"] = program
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("seed_tables"),
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        responder=ManyMetrics(),
    )
    assert code == 0
    return run_dir


def _facts(record: dict) -> str:
    text = "\n".join(m["content"] for m in record["messages"] if isinstance(m.get("content"), str))
    return text.split("## This stage\n", 1)[1]


def test_every_re_run_metric_reaches_the_summary_primary_then_new_then_the_rest(run_dir):
    view = Journal(run_dir / "journal.jsonl")
    checked = 0
    for rec in prompt_records(run_dir):
        if rec["node_id"] != "run" or rec["phase"] != "summary":
            continue
        stage = int(rec["label"].removeprefix("stage"))
        facts = _facts(rec)
        cut = next(e for e in rec["ledger"] if e["layer"] == "stage_facts")["action"]
        for nid in view.ids("search", stage):
            node = view.get(nid)
            reruns = [r for r in view.seed_runs(nid) if r.is_good]
            if not node.is_good or not reruns:
                continue
            head = f"Seed re-runs of {nid} ("
            assert head in facts, (nid, facts[:3000])
            if cut != "kept":
                continue
            table = facts.split(head, 1)[1].split("\n\n", 1)[0]
            rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| metric ")]
            names = [r.split(" | ")[0][2:].split(" [")[0] for r in rows]
            parent = view.get(node.parent_id) if node.parent_id else None
            had = {m.name for m in parent.metrics} if parent is not None else set()
            mine = [m.name for m in node.metrics]
            new = [n for n in mine if n != node.metric.name and n not in had]
            # the parent's metrics this node measured unchanged (search run and every SEED, from
            # the journal) come last; when another table of the prompt showed them, a line names them
            alike = [n for n in mine if n != node.metric.name and _as_parent(view, node, n)]
            rest = [n for n in mine if n != node.metric.name and n in had and n not in alike]
            said = [ln for ln in table.splitlines() if ln.startswith(f"+{len(alike)} metrics as ")]
            if said:
                assert all(n in said[0] for n in alike), said
                alike = []
            # primary, then the new names, then the rest: every one, each named once
            assert names == [node.metric.name, *new, *rest, *alike]
            if parent is not None and new:
                assert f"then the {len(new)} metrics {parent.id} did not report" in table
            by_name = {m.name: m for m in node.metrics}
            for row, name in zip(rows, names, strict=True):
                cells = [c.strip() for c in row.strip("|").split("|")]
                want = [num(by_name[name].value)]
                vals = []
                for r in reruns:
                    v = next(m.value for m in r.metrics if m.name == name)
                    want.append(num(v))
                    vals.append(v)
                assert cells[1 : 2 + len(reruns)] == want, row
                assert cells[-1].startswith(num(sum(vals) / len(vals))), row
            # the labels are said once: the stage table's row names only the primary metric
            stage_row = next(ln for ln in facts.splitlines() if ln.startswith(f"| {nid} |"))
            assert "added_condition_00" not in stage_row and "draft_condition_00" not in stage_row
            assert len(table) <= SEED_TABLE_CHARS
            checked += 1
    assert checked >= 2  # a draft re-run in stage 1, a child (with new metrics) in stage 2


def _as_parent(view, node, name: str) -> bool:
    """Whether ``node`` measured metric ``name`` as its parent did on its search run and on each
    of its good seed re-runs (against the parent's re-run of the same SEED)."""
    parent = view.get(node.parent_id) if node.parent_id else None
    if parent is None:
        return False
    value = {m.name: m.value for m in parent.metrics}.get(name)
    if value is None or value != {m.name: m.value for m in node.metrics}[name]:
        return False
    theirs = {r.seed: r for r in view.seed_runs(parent.id) if r.is_good}
    for r in view.seed_runs(node.id):
        if r.is_good:
            if r.seed not in theirs:
                return False
            a, b = ({m.name: m.value for m in x.metrics} for x in (r, theirs[r.seed]))
            if name not in a or a[name] != b.get(name):
                return False
    return True


def test_a_child_with_new_conditions_was_re_run_and_its_new_metrics_come_first(run_dir):
    view = Journal(run_dir / "journal.jsonl")
    children = [
        view.get(i)
        for i in view.ids("search", 2)
        if view.get(i).is_good and any(r.is_good for r in view.seed_runs(i))
    ]
    assert children, "no stage-2 node was re-run: the test's workload did not make one the best"
    (summary,) = [r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == "stage2"]
    facts = _facts(summary)
    for child in children:
        table = facts.split(f"Seed re-runs of {child.id} (", 1)[1]
        assert table.index("added_condition_00") < table.index("draft_condition_00")
        assert "added_condition_14" in table  # the last of the new conditions, too


def test_the_summary_call_names_the_stage_and_its_goal(run_dir):
    for rec in prompt_records(run_dir):
        if rec["node_id"] != "run" or rec["phase"] != "summary":
            continue
        stage = int(rec["label"].removeprefix("stage"))
        brief = rec["messages"][-1]["content"].split("## This call\n", 1)[1]
        assert f"Stage {stage} ({STAGES[stage].title}) has ended" in brief
        # the goal the stage's nodes were given, as they were given it
        goal = render("phases/stage_goal.j2", stage=stage).strip()
        assert goal and goal in brief
        nodes_told = [
            r for r in prompt_records(run_dir) if r["stage"] == f"stage{stage}" and r["phase"] == "phase2"
        ]
        assert nodes_told and all(
            goal in "\n".join(m["content"] for m in r["messages"] if isinstance(m.get("content"), str))
            for r in nodes_told
        )


def test_the_summary_call_counts_nodes_and_names_the_best_as_the_run_records_them(run_dir):
    """One definition of node counts and of each stage's best (issue 28, "Siblings and history"):
    the stage facts a summary call was sent, the stored summary, the run's state and the writer's
    findings (``writeup.stage_summaries``) say the same; ``tests/test_report_inputs.py`` ties the
    stored summary to the status line and the run's last lines."""
    from ai_scientist.reporting.writeup import stage_summaries

    view = Journal(run_dir / "journal.jsonl")
    state = json.loads((run_dir / "state.json").read_text())
    writer = {row["stage"]: row for row in stage_summaries(run_dir)}
    summaries = {r["label"]: r for r in prompt_records(run_dir) if r["phase"] == "summary"}
    assert summaries
    seen_reruns = False
    for label, rec in summaries.items():
        stage = int(label.removeprefix("stage"))
        stored = json.loads((run_dir / "stage_summaries" / f"{label}.json").read_text())
        search = [view.get(i) for i in view.ids("search", stage)]
        reruns = [n for i in view.ids("all", stage) if (n := view.get(i)).is_seed_eval]
        seen_reruns |= bool(reruns)
        counts = {
            "nodes": len(search),
            "good": sum(n.is_good for n in search),
            "buggy": sum(n.is_buggy for n in search),
            "seed_runs": len(reruns),
            "seed_good": sum(n.is_good for n in reruns),
        }
        assert {k: stored[k] for k in counts} == counts
        assert {k: writer[stage][k] for k in counts} == counts
        line = next(x for x in _facts(rec).splitlines() if x.startswith("Nodes: "))
        want = f"Nodes: {counts['nodes']} ({counts['good']} good, {counts['buggy']} failed)"
        if reruns:
            want += f"; seed re-runs, counted apart: {counts['seed_runs']} ({counts['seed_good']} good)"
        assert line == want + ".", line
        best = state["stages"][str(stage)]["best"]["node_id"]
        assert stored["best_node"] == best == writer[stage]["best_node"]
        # a node kept by a mean within the seed noise is named a tie, not the best (issue 28)
        kept = r"Best node (handed to the next stage|of the run)|Node kept for (the next stage|the run) \(a tie[^)]*\)"
        assert re.search(rf"^(?:{kept}): {best}\b", _facts(rec), re.M)
    assert seen_reruns

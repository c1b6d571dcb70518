"""Issue 28, relay run s8 ln2 (a capable model answering each request alone): node-side findings —
a figure critique given the parent's headline only (014, 021), the edits' newline rules said and
applied as said (011, 018), the stage summary told to name ties rather than told not to restate
the sigma its facts give (009, 015), and a research proposal listing what other nodes of the run
measured (016, 022).

One scripted run with ``agent.code_edits``: every node's program writes a metric of its own
(``probe_<node>``, dataset label ``synthetic_<node>``), so each node reports one metric no other
node does; every child answers with edits, one of them with an anchor ending in a newline and a
text without one, another the other way round. Each test derives what the prompts and files must
hold from the run's files (journal, workspaces, prompt logs, code answers)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import EditingResponder
from pipeline_support import journal_nodes, prompt_records, record_text, start_run

from ai_scientist.phases.edits import EDITS_DESCRIPTION

# appended to every program: a metric only this node reports (seed re-runs keep their parent's)
PROBE = """
import json as _pj
_pm = _pj.load(open("metrics.json"))
_pm["metrics"].append({{"name": "probe_{nid}", "value": 0.5, "direction": "maximize", "dataset": "synthetic_{nid}"}})
_pj.dump(_pm, open("metrics.json", "w"))
"""

# the two new lines each child inserts, one edit written each way round (see NewlineEdits)
NEW_A, NEW_B = "EDIT_A = 1", "EDIT_B = 2"


class NewlineEdits(EditingResponder):
    """Each program gets its probe metric; each child's edits (its parent's files into its own)
    get two more: after the program's first line and after its second, one anchored with a
    trailing newline and text without one, the other anchored without and text with one."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer.get("files") or []:
            if f["path"] == "experiment.py":
                f["content"] += PROBE.format(nid=ctx.node_id)
        return json.dumps(answer)

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: Any) -> str:
        text = super().__call__(messages, schema, ctx)
        if ctx.phase != "phase2" or "edits" not in ((schema or {}).get("properties") or {}):
            return text
        answer = json.loads(text)
        program = self.whole[ctx.node_id]["experiment.py"].split("\n")
        first, second = program[1], program[2]  # the docstring's next two lines: import lines
        answer["edits"] += [
            {"file": "experiment.py", "anchor": first + "\n", "action": "insert_after", "text": NEW_A},
            {"file": "experiment.py", "anchor": second, "action": "insert_after", "text": NEW_B + "\n"},
        ]
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("s8_nodes2")
    code, run_dir, _ = start_run(
        root,
        "agent.code_edits=true",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=2",
        "agent.stages.stage4_max_iters=0",
        responder=NewlineEdits(root / "experiments" / "run"),
    )
    assert code == 0
    return run_dir


def _brief(rec: dict) -> str:
    """The node_brief layer: the prompt from its "## This call" heading on."""
    text = record_text(rec)
    return text[text.rindex("## This call") :]


def test_a_figure_critique_gets_the_parents_headline_with_its_seed_values_only(run):
    """A child's figure critique names its parent's headline metric with its value and its seed
    re-runs' values, and no other parent metric (relay s8 ln2 014: the parent's 13 metrics with
    seed spreads); the child's execution review still compares with all of them."""
    nodes = journal_nodes(run)
    checked = 0
    for rec in prompt_records(run):
        node = nodes.get(rec["node_id"]) or {}
        parent = nodes.get(node.get("parent_id") or "")
        if rec.get("phase") not in ("phase5_vlm", "review") or not parent or node["operation"] == "seed_eval":
            continue
        if not parent.get("metrics"):
            continue
        head, *rest = parent["metrics"]
        assert head["name"] == "val_accuracy" and rest, parent["metrics"]  # the headline, and more
        brief = _brief(rec)
        line = re.search(rf"^- {head['name']} = (\S+)(.*)$", brief[brief.index(parent["id"]) :], re.M)
        assert line and float(line.group(1)) == pytest.approx(head["value"], rel=1e-5), (
            rec["node_id"],
            brief,
        )
        reruns = [
            m["value"]
            for n in nodes.values()
            if n["parent_id"] == parent["id"] and n["operation"] == "seed_eval" and n["status"] == "good"
            for m in n["metrics"]
            if m["name"] == head["name"]
        ]
        for value in reruns:  # beside the headline: its seed re-runs' values
            assert f"{value:.6g}" in line.group(2), (rec["node_id"], line.group(0))
        if rec["phase"] == "phase5_vlm":
            for m in rest:  # the parent's other metrics are not the figure critic's
                assert m["name"] not in brief, (rec["node_id"], m["name"])
            assert "Compare this node's results with its parent's" not in brief
            checked += 1
        else:  # a review still gets them all
            assert all(m["name"] in brief for m in rest), rec["node_id"]
    assert checked >= 2


def test_edits_say_how_newlines_work_and_apply_as_said(run):
    """The edits schema sent says a trailing newline of anchor or text is ignored (whole lines);
    edits written both ways (anchor with a newline and text without; anchor without and text
    with) each put their text as one whole line right after the anchor's line in the files the
    node ran (relay s8 ln2 011, 018)."""
    nodes = journal_nodes(run)
    checked = 0
    for rec in prompt_records(run):
        schema = (rec.get("params") or {}).get("schema") or {}
        edits_schema = (schema.get("properties") or {}).get("edits")
        if rec.get("phase") != "phase2" or not edits_schema or rec.get("error"):
            continue
        description = edits_schema["description"]
        assert description == EDITS_DESCRIPTION
        assert (
            'one newline at the end of anchor or text is ignored, so "x" and "x\\n" are the same one line'
            in description
        )
        nid = rec["node_id"]
        sent = json.loads(rec["response"]["raw"])["edits"]
        ways = [(e["anchor"].endswith("\n"), e["text"].endswith("\n")) for e in sent[-2:]]
        assert ways == [(True, False), (False, True)], sent[-2:]
        if nodes[nid]["status"] != "good":
            continue
        # what the node meant (its parent's files with the diff edits) plus the two lines, each
        # inserted here as one line right after its anchor's line
        intended = _intended(run, nid)
        lines = intended.split("\n")
        for edit in sent[-2:]:
            at = lines.index(edit["anchor"].rstrip("\n"))
            lines.insert(at + 1, edit["text"].rstrip("\n"))
        ran = (run / "nodes" / nid / "workspace" / "experiment.py").read_text()
        assert ran == "\n".join(lines), nid
        checked += 1
    assert checked >= 2


def _intended(run: Path, nid: str) -> str:
    """The program a child meant to write before the two newline edits: its recorded files with
    those two lines taken out again (they are the only lines equal to NEW_A / NEW_B)."""
    rec = json.loads((run / "nodes" / nid / "code_answer.json").read_text())
    text = next(f["content"] for f in rec["files"] if f["path"] == "experiment.py")
    return "\n".join(x for x in text.split("\n") if x not in (NEW_A, NEW_B))


def test_the_stage_summary_is_told_to_name_ties_with_the_noise_its_facts_give(run):
    """Where a stage summary's facts give the seed noise (sigma, the band), its instructions say
    what to do with them — name the ties with their nodes and values — instead of forbidding to
    restate what the facts state (relay s8 ln2 009, 015, 026)."""
    recs = [r for r in prompt_records(run) if r.get("phase") == "summary"]
    with_sigma = [r for r in recs if re.search(r"seed noise sigma \d", record_text(r))]
    assert with_sigma, [r["label"] for r in recs]
    for rec in with_sigma:
        text = " ".join(record_text(rec).split())
        assert "do not restate sigma" not in text
        assert "the facts give the seed noise (sigma, and the band a difference must exceed" in text
        assert "say which differences are ties (name the nodes and their values" in text


def test_a_research_proposal_lists_what_other_nodes_of_the_run_measured(run):
    """A research proposal lists, per good search node of the run but the best, the metrics the
    best does not report, by dataset label (relay s8 ln2 016: a sibling's extra conditions only in
    a stage summary's prose); the best's own are not repeated there."""
    nodes = journal_nodes(run)
    checked = 0
    for rec in prompt_records(run):
        if rec.get("phase") != "ideas" or "Propose research experiments" not in record_text(rec):
            continue
        brief = _brief(rec)
        best = re.search(r"the stage's best node so far, (n\d{4})", brief)
        assert best, brief
        best_keys = {(m["name"], m.get("dataset") or "") for m in nodes[best.group(1)]["metrics"]}
        stage = int(rec["stage"].removeprefix("stage"))
        m = re.search(r"^Measured by other nodes of this run[^\n]*\n((?:- .*\n)+)", brief, re.M)
        assert m, brief
        listed = m.group(1)
        # the nodes finished when the call was made: every earlier stage's, and this stage's its
        # brief lists as done (not "running")
        done = set(re.findall(r"^- (n\d{4}) \([^\n]*\): (?!running$)", brief, re.M))
        others = [
            n
            for n in nodes.values()
            if n["status"] == "good"
            and n["operation"] != "seed_eval"
            and n["id"] != best.group(1)
            and (int(n["stage"]) < stage or (int(n["stage"]) == stage and n["id"] in done))
        ]
        assert others
        for n in others:
            new = [x for x in n["metrics"] if (x["name"], x.get("dataset") or "") not in best_keys]
            if not new:
                continue
            line = re.search(rf"^- {n['id']} \(stage \d\): (.*)$", listed, re.M)
            assert line, (n["id"], listed)
            for x in new:
                assert f"[{x['dataset']}] {x['name']}" in line.group(1), (n["id"], x)
            checked += 1
        for name, label in best_keys:  # the best's own metrics are said elsewhere, not here
            assert f"[{label}] {name}" not in listed
    assert checked >= 1

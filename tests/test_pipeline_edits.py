"""Phase 2 with ``agent.code_edits``: children answer with edits against their parent's files; the
node records the edits and the resulting files; a bad anchor goes back to the model and the retry
applies (issue 17, "edits instead of rewrites")."""

from __future__ import annotations

import json

from ai_scientist_testing.scripted import EditingResponder
from pipeline_support import journal_nodes, start_run

from ai_scientist.phases.edits import Edit, apply_edits, text_files


def test_children_answer_with_edits_and_a_bad_anchor_is_retried(tmp_path):
    responder = EditingResponder(tmp_path / "experiments" / "run", bad_anchor_first=True)
    # re-ranking over seeds off: it may hand on a stage-1 draft, whose scripted stage-3 child
    # writes its parent's files unchanged (no edit to record); this test is about edits
    code, run_dir, _ = start_run(
        tmp_path, "agent.code_edits=true", "agent.multi_seed_eval.rerank_candidates=0", responder=responder
    )
    assert code == 0
    nodes = journal_nodes(run_dir)
    children = [n for n in nodes.values() if n["parent_id"] and n["operation"] not in ("seed_eval",)]
    assert children and set(responder.whole) == {n["id"] for n in children if n["operation"] != "draft"}
    for nid, files in responder.whole.items():
        rec = json.loads((run_dir / "nodes" / nid / "code_answer.json").read_text())
        parent = nodes[nid]["parent_id"]
        parent_files = text_files(json.loads((run_dir / "nodes" / parent / "code_answer.json").read_text()))
        # the node records its edits and the files they give, which are what it meant to write
        assert rec["edits"], nid
        edits = [Edit(**e) for e in rec["edits"]]
        assert text_files(rec) == apply_edits(parent_files, edits) == files, nid
        if nodes[nid]["status"] == "good":  # and the edited files are the ones that ran
            ws = run_dir / "nodes" / nid / "workspace"
            assert {p: (ws / p).read_text() for p in files} == files
    # the bad anchor: refused with the precise message, fed back, the retry applied
    bad = responder.bad_node
    assert bad is not None
    records = [
        json.loads(p.read_text())
        for p in sorted((run_dir / "nodes" / bad / "prompt_logs").glob("*_phase2_*.json"))
    ]
    assert len(records) == 2, [r["label"] for r in records]
    first_edits = json.loads(records[0]["response"]["raw"])["edits"]
    feedback = records[1]["messages"][-1]["content"]
    anchor = first_edits[0]["anchor"].rstrip("\n")
    assert (
        f"edit 1 (replace) in 'experiment.py': anchor not found: {anchor!r}; nearest existing line"
        in feedback
    )
    assert nodes[bad]["status"] == "good"


def test_with_the_flag_off_children_answer_whole_files(tmp_path):
    responder = EditingResponder(tmp_path / "experiments" / "run")
    code, run_dir, _ = start_run(tmp_path, "agent.code_edits=false", responder=responder)
    assert code == 0 and responder.whole == {}
    for nid in journal_nodes(run_dir):
        path = run_dir / "nodes" / nid / "code_answer.json"
        if path.is_file():
            assert "edits" not in json.loads(path.read_text())

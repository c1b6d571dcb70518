"""Issue 28: a fact is said once per prompt. A capable model's code prompts held the best node's
findings three or four times (recall notes, history, ...); each test runs a scripted pipeline and
reads what the prompts really carried."""

from __future__ import annotations

import json
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, prompt_records, record_text, start_run


class LongFindings(ExampleResponder):
    """Reviews whose findings are a few sentences long (a capable model's are), naming the node."""

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["findings"] += (
            f". Node {ctx.node_id} trained for the configured epochs; the loss fell steadily and"
            " the clean validation accuracy is the headline, measured on the held-out split."
        )
        return json.dumps(review)


def test_a_nodes_findings_appear_once_in_each_code_prompt(tmp_path):
    code, run_dir, _ = start_run(tmp_path, responder=LongFindings())
    assert code == 0
    summaries = {
        nid: n["summary"] for nid, n in journal_nodes(run_dir).items() if len(n.get("summary") or "") >= 80
    }
    assert summaries, "no node has findings long enough to test"
    code_calls = [r for r in prompt_records(run_dir) if r.get("phase") == "phase2"]
    referred = 0
    for rec in code_calls:
        text = record_text(rec)
        for nid, summary in summaries.items():
            probe = summary[:80]
            assert text.count(probe) <= 1, f"{rec.get('node_id')}: {nid}'s findings {text.count(probe)}x"
        referred += text.count('its text is under "History so far"')
    # the recall notes that held them now say where they are (derived: some prompt had both)
    assert referred > 0


class TuneChangesCommand(ExampleResponder):
    """Tunings whose run command changes too (``python3 -B``): a build flag's tuning in C."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        if "Operation: tune" in text:
            answer["run"]["commands"] = ["/usr/bin/python3 -B experiment.py"]
        return json.dumps(answer)


def test_a_childs_diff_shows_changed_commands_and_says_so(tmp_path):
    """A review or plotting call that shows a child's program as its diff to the parent's: a
    changed run command is in the diff and the header says so; unchanged commands are the
    parent's, said too. Derived from each node's code answer and its parent's."""
    code, run_dir, _ = start_run(tmp_path, responder=TuneChangesCommand())
    assert code == 0
    nodes = journal_nodes(run_dir)

    def commands(nid: str) -> list[str]:
        answer = json.loads((run_dir / "nodes" / nid / "code_answer.json").read_text())
        return answer["build"]["commands"] + answer["run"]["commands"]

    seen = {True: 0, False: 0}
    for rec in prompt_records(run_dir):
        text = record_text(rec)
        if rec.get("phase") not in ("review", "phase5_plot") or "a unified diff" not in text:
            continue
        nid = rec["node_id"]
        changed = commands(nid) != commands(nodes[nid]["parent_id"])
        seen[changed] += 1
        diff = text[text.index("```diff") : text.index("```", text.index("```diff") + 7)]
        if changed:
            assert "its build or run commands changed too" in text
            for c in commands(nid):
                assert f"+run: {c}" in diff or f" run: {c}" in diff
        else:
            assert "the build and run commands too" in text
            assert "+run:" not in diff
    assert seen[True] and seen[False], seen  # both kinds of child were in the run

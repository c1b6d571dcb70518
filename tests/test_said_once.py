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


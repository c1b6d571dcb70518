"""``run.expected_outputs`` says what an entry is, and a node failed on it says what the run did
write (issue 28: in two relay runs the first draft listed descriptions — "stdout line starting with
SUMMARY" — and failed; the schema had not said that entries are file paths, and the failure
showed only the names listed, so the next draft could not tell a wrong list from a run that wrote
nothing). Expectations come from the run's files: the failed node's workspace, its journal error
and the prompt logs as sent."""

from __future__ import annotations

import json
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import content_text, journal_nodes, prompt_records, start_run

from ai_scientist.base.paths import RunPaths

DESCRIPTION = "stdout line starting with SUMMARY"


class DescribesOutputs(ExampleResponder):
    """The example's answers; the first code answer lists a description as an expected output."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.first: str | None = None

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        if self.first is None and "files" in answer:
            self.first = ctx.node_id
            answer.setdefault("run", {})["expected_outputs"] = ["metrics.json", DESCRIPTION]
        return json.dumps(answer)


def test_a_description_in_expected_outputs_fails_with_what_the_run_wrote(tmp_path):
    responder = DescribesOutputs(buggy_nodes=())
    code, run_dir, _ = start_run(tmp_path, "agent.stages.stage2_max_iters=0", "agent.stages.stage3_max_iters=0",
                                 "agent.stages.stage4_max_iters=0", responder=responder)  # fmt: skip
    assert code == 0 and responder.first
    node = journal_nodes(run_dir)[responder.first]
    assert node["status"] == "buggy"
    error = node["error"]
    assert f"expected outputs missing: {DESCRIPTION}" in error
    workspace = RunPaths(run_dir).node(responder.first).workspace
    written = sorted(p.name for p in workspace.iterdir() if p.is_file())
    assert "metrics.json" in written  # the run did write its metrics: only the list was wrong
    assert f"the working directory has: {', '.join(written[:12])}" in error

    # every code call's schema says what an entry is; a later call shows the failure as recorded
    code_calls = [r for r in prompt_records(run_dir) if r["phase"] == "phase2"]
    for rec in code_calls:
        run_props = rec["params"]["schema"]["properties"]["run"]["properties"]
        assert "file paths relative to the working directory" in run_props["expected_outputs"]["description"]
    later = [r for r in code_calls if r["node_id"] != responder.first]
    assert any(
        "the working directory has:" in content_text(m.get("content")) for r in later for m in r["messages"]
    )

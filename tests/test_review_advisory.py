"""``agent.trust_review``: the execution review's ``is_bug`` makes a node buggy (the default), or
is advice only — recorded in ``review.json`` and the event ``review_advisory`` while a run that
exited 0 with valid metrics stays good."""

from __future__ import annotations

import json

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, start_run

FLAGGED = "n0002"  # a draft whose experiment works; its review says it is a bug anyway


class FlaggingResponder(ExampleResponder):
    def __call__(self, messages, schema, ctx):
        text = super().__call__(messages, schema, ctx)
        if ctx.node_id == FLAGGED and ctx.label.startswith("exec_review"):
            return json.dumps(
                {
                    **json.loads(text),
                    "is_bug": True,
                    "findings": "looks wrong to me",
                    "remarks": "timer too coarse",
                }
            )
        return text


def _flagged_run(tmp_path, *overrides):
    code, run_dir, _ = start_run(
        tmp_path, "agent.stages.stage1_max_iters=2", *overrides, responder=FlaggingResponder()
    )
    return code, run_dir, journal_nodes(run_dir)[FLAGGED]


def test_a_trusted_review_makes_the_node_buggy(tmp_path):
    _, run_dir, node = _flagged_run(tmp_path)
    run = json.loads((run_dir / "nodes" / FLAGGED / "run.json").read_text())
    measured = ", ".join(f"{m['name']}={m['value']}" for m in run["metrics"])
    # the verdict, its reason and what the run measured: the stage's tables can say why it failed
    assert node["status"] == "buggy" and node["error"] == (
        "review: execution review found a bug: looks wrong to me Why a bug: timer too coarse"
        f" (the run measured {measured})"
    )
    assert not [e for e in events(run_dir) if e["type"] == "review_advisory"]


def test_an_advisory_review_is_recorded_and_the_evidence_decides(tmp_path):
    _, run_dir, node = _flagged_run(tmp_path, "agent.trust_review=false")
    run = json.loads((run_dir / "nodes" / FLAGGED / "run.json").read_text())
    assert run["failure"] is None and run["metrics_source"] == "metrics.json"  # the hard evidence
    assert node["status"] == "good" and node["metric"]["value"] == run["metrics"][0]["value"]
    review = json.loads((run_dir / "nodes" / FLAGGED / "review.json").read_text())
    assert review["is_bug"] is True  # the verdict is kept as given
    advisory = [e for e in events(run_dir) if e["type"] == "review_advisory"]
    assert [(e["node_id"], e["summary"]) for e in advisory] == [(FLAGGED, "looks wrong to me")]

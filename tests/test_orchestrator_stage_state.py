"""The stage state flows through the stage loop by return values (issue 12).

Ideas planned by one proposal are handed out by the later picks of the same batch, and a
proposal that brings nothing new ends the stage on the state it produced. Every expectation
is derived from the calls the scripted LLM really received and the journal / events written.
"""

from __future__ import annotations

import json

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, start_run


class TuneIdeas(ExampleResponder):
    """Offers the same fixed list of tuning ideas at every proposal."""

    def __init__(self, offered: list[str]):
        super().__init__()
        self.offered = offered

    def _ideas(self, text, ctx):
        if ctx.label == "tune":
            return json.dumps({"ideas": self.offered})
        return super()._ideas(text, ctx)


def _stage_nodes(run_dir, stage):
    nodes = [n for n in journal_nodes(run_dir).values() if n["stage"] == stage]
    return [n for n in sorted(nodes, key=lambda n: n["id"]) if n["operation"] != "seed_eval"]


def _proposals(responder, kind):
    return [c for c in responder.calls if c[1] == "ideas" and c[2] == kind]


def test_ideas_planned_in_one_proposal_feed_the_later_picks_of_the_batch(tmp_path):
    ideas = ["lr=0.05 l2=0.1", "lr=0.2 l2=0.0"]
    code, run_dir, responder = start_run(
        tmp_path,
        "agent.num_workers=2",
        "agent.stages.stage2_max_iters=2",
        responder=TuneIdeas(ideas),
    )
    assert code == 0
    tuned = [n for n in _stage_nodes(run_dir, 2) if n["operation"] == "tune"]
    # the second pick took the second planned idea from the state the first pick returned
    assert [n["idea"] for n in tuned] == ideas
    assert len(_proposals(responder, "tune")) == 1
    planned = [e for e in events(run_dir) if e["type"] == "ideas_planned" and e["stage"] == 2]
    assert [e["new"] for e in planned] == [ideas]


def test_a_proposal_with_nothing_new_ends_the_stage_on_the_state_it_made(tmp_path):
    idea = "lr=0.05 l2=0.1"
    code, run_dir, responder = start_run(
        tmp_path,
        "agent.stages.stage2_max_iters=5",
        "agent.stages.stage2_good_nodes=3",
        responder=TuneIdeas([idea]),
    )
    assert code == 0
    tuned = [n for n in _stage_nodes(run_dir, 2) if n["operation"] == "tune"]
    assert [n["idea"] for n in tuned] == [idea]
    assert len(_proposals(responder, "tune")) == 2  # the second only repeated the tried idea
    evs = events(run_dir)
    planned = [e for e in evs if e["type"] == "ideas_planned" and e["stage"] == 2]
    assert [(e["new"], e["rejected"], e["exhausted"]) for e in planned] == [
        ([idea], [], False),
        ([], [idea], True),
    ]
    completed = next(e for e in evs if e["type"] == "stage_completed" and e["stage"] == 2)
    good = sum(1 for n in _stage_nodes(run_dir, 2) if n["status"] == "good")
    assert completed["done"] and completed["reason"] == (
        f"no untried hyper-parameter idea left ({good} of 3 good tuning node(s))"
    )
    assert not [e for e in evs if e["type"] == "stage_stalled"]
    # the next stage started from the state the loop handed over, not a stale copy
    assert [e["stage"] for e in evs if e["type"] == "stage_started"] == [1, 2, 3, 4]

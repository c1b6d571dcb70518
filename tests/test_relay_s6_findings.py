"""Issue 28, relay run s6 (label noise, a capable model answering from the request alone): the
node-side gaps its critiques named. Each test runs a scripted pipeline and reads what the prompts
really carried (prompt logs), checked against the run's own files (reviews, journal, events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run


def _section(text: str, heading: str) -> str:
    """The text of a prompt's ``## heading`` section, up to the next ``## `` heading."""
    start = text.find(f"## {heading}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 4)
    return text[start : end if end >= 0 else len(text)]


def _protocol_nodes(run_dir: Path) -> dict[int, str]:
    """Stage -> the node its evaluation protocol was fixed on (the last ``eval_protocol`` event)."""
    return {int(e["stage"]): str(e["node_id"]) for e in events(run_dir) if e["type"] == "eval_protocol"}


class HeadlineReview(ExampleResponder):
    """Reviews that say which configuration of a grid the headline is for (a capable model's
    review of a grid does), naming the node so each protocol node's answer is told apart."""

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["headline"] = f"L2=0.01, lr=0.1 as run by {ctx.node_id}"
        return json.dumps(review)


def test_the_protocol_carries_the_headline_configuration(tmp_path):
    """Every code prompt that shows a stage's evaluation protocol names the configuration the
    protocol node's review gave for its headline (read from its review.json), with its value
    (from the journal), and says how a node reports its own (relay s6: 001, 005, 016, 020)."""
    code, run_dir, _ = start_run(tmp_path, responder=HeadlineReview())
    assert code == 0
    nodes = journal_nodes(run_dir)
    fixed = _protocol_nodes(run_dir)
    assert len(fixed) >= 3, fixed
    checked: dict[int, int] = {}
    for rec in prompt_records(run_dir):
        if rec.get("phase") != "phase2":
            continue
        protocol = _section(record_text(rec), "Evaluation protocol")
        if not protocol:
            continue
        stage = int(nodes[rec["node_id"]]["stage"])
        ref = fixed[stage]
        review = json.loads((run_dir / "nodes" / ref / "review.json").read_text())
        metric = nodes[ref]["metric"]
        said = f"{ref}'s {metric['name']}={metric['value']:.6g} is for {review['headline']}"
        assert said in protocol, (rec["node_id"], protocol[:800])
        assert "Report each node's headline for this configuration" in protocol
        checked[stage] = checked.get(stage, 0) + 1
    assert len(checked) >= 2, checked  # stage 1's later draft and the later stages' nodes

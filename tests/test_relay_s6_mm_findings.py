"""Issue 28, relay run s6 on the compiled-C idea (blocked matrix multiplication, a capable model
answering from the request alone): the node-side gaps its critiques named. Each test runs a scripted
pipeline and reads what the prompts really carried (prompt logs), checked against the run's own
files (journal, events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pipeline_support import journal_nodes, prompt_records, record_text, start_run
from realistic_workload import METRIC_NAMES, RealisticResponder


@pytest.fixture(scope="module")
def realistic(tmp_path_factory) -> Path:
    """A default run of the realistic workload: three metrics a node (two directions)."""
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("mm"), responder=RealisticResponder())
    assert code == 0
    return run_dir


def _metric_line(m: dict[str, Any]) -> str:
    return f"- {m['name']} = {m['value']:.6g}"


def test_a_childs_prompts_show_the_parents_metrics_once_one_a_line(realistic):
    """A child's code, review and critique prompts show every metric its parent measured once, one
    ``- name = value`` line each under one lead, never a run-on ``name=value; ...`` line (relay s6
    mm: 011, 012, 015, 016, 020 pasted 41 metrics as one 3.5 kB line)."""
    nodes = journal_nodes(realistic)
    checked: dict[str, int] = {}
    for rec in prompt_records(realistic):
        node = nodes.get(rec["node_id"])
        if node is None:  # a run-level call (the report's)
            continue
        parent = nodes.get(node["parent_id"] or "")
        if parent is None or node["operation"] == "seed_eval" or not parent["metrics"]:
            continue
        kind = {"phase2": "code", "review": "review", "phase5_vlm": "critique"}.get(rec.get("phase", ""))
        if kind is None or (kind == "code" and rec.get("label") != "code+plan"):
            continue
        text = record_text(rec)
        assert {m["name"] for m in parent["metrics"]} == set(METRIC_NAMES)
        lead = (
            f"Measured by {parent['id']}, the node this one continues"
            if kind == "code"
            else f"Its parent node {parent['id']} measured"
        )
        assert text.count(lead) == 1, (rec["node_id"], kind)
        block = text[text.index(lead) :].split("\n")
        # the head says what is shared; each metric one line below it, its own direction when the
        # metrics differ (val_loss is minimised, val_accuracy maximised)
        assert block[0].endswith(":"), block[0]
        rows = block[1 : 1 + len(parent["metrics"])]
        primary = parent["metric"]
        assert rows[0].startswith(_metric_line(primary)), rows
        for m in parent["metrics"]:
            line = _metric_line(m)
            assert sum(r.startswith(line) for r in rows) == 1, (line, rows)
            assert text.count(f"{line} (") + text.count(f"{line}\n") >= 1
            assert f"{m['name']}={m['value']:.6g}" not in text.split(lead)[1][:2000], m
            if len({x["direction"] for x in parent["metrics"]}) > 1:
                assert any(r.startswith(line) and m["direction"] in r for r in rows), (line, rows)
        checked[kind] = checked.get(kind, 0) + 1
    assert set(checked) == {"code", "review", "critique"}, checked

"""Issue 28 (report side): what a capable model found missing in the report's inputs — every good
node and its seed re-runs reach the aggregation manifest, the stage summary, the writer and the
reviewer, with one seed statistic; every number the writer was given is a source for the number
check; the page-overflow message's word budget fits the measured overflow; the writer's context
shows each node's findings once.

Every expectation is read from a scripted run's own files (journal.jsonl, figures/manifest.json,
paper/*, the prompt logs whose ``messages`` are exactly what was sent), never from constants of
the code under test.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import journal_nodes, prompt_records, record_text, start_run

from ai_scientist.reporting.claims import WRITER_INPUT, extract_numbers, match_claim, run_measurements
from ai_scientist.reporting.manifest import describe_file
from ai_scientist.testing.scripted import PAPER_SECTIONS, ExampleResponder

CAVEAT = "Caveat: {nid} measured one draw of the data, so its value moves with the seed it ran under."


class EveryNodeResponder(ExampleResponder):
    """The example's answers; each review's summary carries a long caveat naming its node (a
    capable model's findings run to several sentences), and the writer states one non-best node's
    seed-re-run mean and standard error, read from its own prompt (as a model reads them), and
    one number the run never produced."""

    def __init__(self) -> None:
        super().__init__()
        self.stated: list[str] = []

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["findings"] = f"{review['findings']}. {CAVEAT.format(nid=ctx.node_id)}"
        return json.dumps(review)

    def _writeup(self, text: str, ctx: Any) -> str:
        if "citation" in ctx.label or ctx.label != "sections":
            return super()._writeup(text, ctx)
        # each node's re-run line: "Its 2 seed re-runs (...), mean ± s.e. ...: [..] name=M ± S (v1, v2)"
        found = re.findall(r"^- (n\d+) [^\n]*\n  Over \d+ seed re-runs \([^)]*\), [^:]*: "
                           r"\w+=([0-9.]+) ± ([0-9.]+)", text, re.M)  # fmt: skip
        assert found, "the writer's prompt shows no node's seed re-runs"
        self.stated = [x for _, mean, se in found for x in (mean, se)]
        results = " ".join(
            f"Over its seed re-runs {nid} reached {mean} $\\pm$ {se}." for nid, mean, se in found
        )
        return json.dumps(
            {**PAPER_SECTIONS, "results": results + " An unmeasured 0.3141 is printed as well."}
        )


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, EveryNodeResponder]:
    latex_or_skip()
    matplotlib_or_skip()
    responder = EveryNodeResponder()
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("every_node"),
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=2",
        "agent.stages.stage4_max_iters=1",
        responder=responder,
    )
    assert code == 0, run_dir
    return run_dir, responder


def _good_search(nodes: dict[str, dict]) -> list[dict]:
    return [n for n in nodes.values() if n["status"] == "good" and n["operation"] != "seed_eval"]


def _reruns(nodes: dict[str, dict], nid: str) -> list[dict]:
    return [n for n in nodes.values() if n["operation"] == "seed_eval" and n["parent_id"] == nid]


def _one(records: list[dict], phase: str, label: str) -> dict:
    (rec,) = [r for r in records if r["phase"] == phase and r["label"] == label]
    return rec


# 1 -------------------------------------------------------------------------------------------


def test_every_good_node_and_its_seed_reruns_reach_the_aggregation_manifest(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    manifest = json.loads((run_dir / "figures" / "manifest.json").read_text())
    listed = {e["node_id"]: e for e in manifest["nodes"]}
    good = _good_search(nodes)
    assert {n["stage"] for n in good} == {1, 2, 3, 4}
    assert any(_reruns(nodes, n["id"]) for n in good if listed.get(n["id"], {}).get("role") == "stage_node")
    for n in good:  # the run has at most 3 good nodes a stage besides its best: all of them
        assert n["id"] in listed, n["id"]
        for r in _reruns(nodes, n["id"]):
            assert listed[r["id"]]["role"] == "seed_run" and listed[r["id"]]["seed_of"] == n["id"]
            assert listed[r["id"]]["seed"] == r["seed"]
    # entries in stage order; a node's metrics as the journal records them (name -> value)
    stages = [e["stage"] for e in manifest["nodes"]]
    assert stages == sorted(stages)
    for e in manifest["nodes"]:
        written = nodes[e["node_id"]]["metrics"] or [nodes[e["node_id"]]["metric"]]
        assert e["metrics"] == {m["name"]: float(f"{m['value']:.6g}") for m in written}
    # the plotter's prompt shows them all, and the one seed statistic
    plot = _one(prompt_records(run_dir), "plots", "aggregate_r0")
    sent = record_text(plot)
    for e in manifest["nodes"]:
        assert f'"node_id": "{e["node_id"]}"' in sent
    assert manifest["seed_statistic"] in plot["messages"][0]["content"]


def test_a_json_structure_every_key_shares_is_described_once(run, tmp_path):
    """The run's nodes' results.json files under one object (as a grid's runs are saved): the
    outline says the structure once, for every key."""
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    files = {nid: run_dir / "nodes" / nid / "workspace" / "results.json" for nid in nodes}
    files = {nid: p for nid, p in files.items() if p.exists()}
    assert len(files) >= 3
    combined = tmp_path / "grid.json"
    combined.write_text(json.dumps({nid: json.loads(p.read_text()) for nid, p in files.items()}))
    one = describe_file(next(iter(files.values())))["structure"]
    structure = describe_file(combined)["structure"]
    ((key, value),) = structure.items()
    assert key == f"<each of {len(files)} keys: {', '.join(files)}>"
    assert value == one
    assert len(json.dumps(structure)) < len(files) * len(json.dumps(one)) / 2


# 2 -------------------------------------------------------------------------------------------


def _stat(values: list[float]) -> tuple[str, str]:
    """mean (4 significant digits) and standard error (2) as the prompts print them: the mean
    over the re-runs only, the sample standard deviation over sqrt(n)."""
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.4g}", f"{se:.2g}"


def test_every_nodes_seed_reruns_reach_the_summary_writer_and_reviewer(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    records = prompt_records(run_dir)
    writer = record_text(_one(records, "writeup", "sections"))
    reviewer = record_text(_one(records, "review", "review_1"))
    summaries = {r["label"]: record_text(r) for r in records if r["phase"] == "summary"}
    checked = 0
    for n in _good_search(nodes):
        reruns = [r for r in _reruns(nodes, n["id"]) if r["status"] == "good"]
        if len(reruns) < 2:
            continue
        mean, se = _stat([r["metric"]["value"] for r in reruns])
        who = ", ".join(f"{r['id']} seed {r['seed']}" for r in reruns)
        stated = f"{n['metric']['name']}={mean} ± {se}"
        # the writer and the reviewer: on the node's own line, with the re-runs named
        head = f"{len(reruns)} seed re-runs ({who})"
        for name, text in (("writer", writer), ("reviewer", reviewer)):
            line = next((x for x in text.splitlines() if head in x), None)
            assert line and stated in line, (name, n["id"], stated)
        # the stage summary's table: in the node's row
        row = next(x for x in summaries[f"stage{n['stage']}"].splitlines() if x.startswith(f"| {n['id']} |"))
        assert head in row and stated in row, row
        checked += 1
    assert checked >= 4  # the drafts' best, the tuning nodes, the stage-3 nodes
    # one seed statistic, said the same way to the writer, the reviewer and the plotter
    manifest = json.loads((run_dir / "figures" / "manifest.json").read_text())
    for text in (writer, reviewer):
        assert f"Every seed statistic here is the {manifest['seed_statistic']}" in text


# 3 -------------------------------------------------------------------------------------------


def test_numbers_the_writer_was_given_are_traced_and_others_are_not(run):
    """The writer states a tuning node's seed-re-run mean and standard error (no single
    measurement: the run's records hold them only as the findings it gave the writer) and a number
    the run never produced: the first round's number check flags only the latter."""
    run_dir, responder = run
    assert responder.stated
    inputs = (run_dir / "paper" / "writer_inputs.md").read_text()
    sent = record_text(_one(prompt_records(run_dir), "writeup", "sections"))
    assert inputs in sent  # the kept inputs are exactly what the writer got
    writeup = json.loads((run_dir / "paper" / "writeup.json").read_text())
    first = writeup["reflections"][0]
    assert first["unmatched"] == ["0.3141"], first
    reflect = record_text(_one(prompt_records(run_dir), "writeup", "reflect_1"))
    assert '"0.3141" in' in reflect and not any(f'"{x}" in' in reflect for x in responder.stated)
    # some of them no measurement of the run matches: only the findings the writer was given
    others = [m for m in run_measurements(run_dir) if m.kind != WRITER_INPUT]
    only_given = [c.text for x in responder.stated for c in extract_numbers(x) if not match_claim(c, others)]
    assert only_given, "every stated number had another source: the run does not test the writer's inputs"


# 5 -------------------------------------------------------------------------------------------


def test_the_writer_sees_each_nodes_findings_once(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    writer = record_text(_one(prompt_records(run_dir), "writeup", "sections"))
    for n in _good_search(nodes):
        caveat = CAVEAT.format(nid=n["id"])
        assert writer.count(caveat) == 1, (n["id"], writer.count(caveat))
    # the notes the agents kept are still there, less what the stage results show
    assert "# Notes the agents kept during the run" in writer
    assert "(its text is in the stage results above)" in writer

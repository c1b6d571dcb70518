"""Issue 28's leftovers from the last relay runs (docs/relay-runs.md, "What the final runs still
missed"), each read from a scripted run's files:

1. the memory protocol says that core and recall notes are per branch — and the run's memory
   snapshots show exactly that (a node's recall holds only its lineage's events, while a sibling's
   events exist);
2. a review may call a valid run's number noisy or not comparable (``measurement``): the node stays
   working, and the concern reaches its summary, the stage's facts and a later sibling's table;
3. the report's figure reviewer of a benchmark gets the machine (caches, vector width) from the
   run's ``environment.json``;
4. every schema'd call states the schema's length limits in its text;
5. the writer's page-overflow message says how much room the figures take;
6. a single seed re-run is said to have no spread (no mean ± s.e.);
7. a child's plotting call is offered its parent's plotting script.

The run: the bundled example with its working programs reporting ``gflops`` (a benchmark's
metric), one seed re-run per best node, the report on (a first paper too long for its pages).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import PAPER_SECTIONS, ExampleResponder
from components import needs_latex
from pipeline_support import journal_nodes, prompt_records, record_text, start_run

from ai_scientist.base.paths import PLOTS_FILE, REVIEW_FILE, RunPaths
from ai_scientist.context.kinds import experiment_kinds
from ai_scientist.context.schema_limits import field_limits
from ai_scientist.execution.environment import cpu_view, machine_text
from ai_scientist.phases.plots import PLOT_SCRIPT
from ai_scientist.phases.schemas import MERGED_CODE_SCHEMA
from ai_scientist.reporting.latex import figure_pages

CONCERN = "the baseline is timed once, so its speed-up is noise-dominated"


class LeftoversResponder(ExampleResponder):
    """Working programs report ``gflops``; the first stage-3 review flags a noisy measurement; the
    first paper is far too long."""

    def __init__(self) -> None:
        super().__init__()
        self.noisy_node: str | None = None
        self.long_paper_sent = False

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            f["content"] = f["content"].replace('"name": "val_accuracy"', '"name": "gflops"')
        return json.dumps(answer)

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        if ctx.stage == "stage3" and self.noisy_node in (None, ctx.node_id):
            self.noisy_node = ctx.node_id
            review["measurement"] = CONCERN
        return json.dumps(review)

    def __call__(self, messages: list, schema: dict | None, ctx: Any) -> str:
        if ctx.phase == "writeup" and ctx.label == "sections" and not self.long_paper_sent:
            # every section as long as the schema lets it be: pages more than the limit
            self.long_paper_sent = True
            props = (schema or {}).get("properties") or {}
            sentence = "A long paragraph that restates the setting once more. "
            long = {
                k: (sentence * (props[k]["maxLength"] // len(sentence)))[: props[k]["maxLength"] - 1]
                for k in PAPER_SECTIONS
                if k in props and k not in ("title", "abstract")
            }
            return json.dumps({**PAPER_SECTIONS, **long})
        return super().__call__(messages, schema, ctx)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, LeftoversResponder]:
    responder = LeftoversResponder()
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("relay_leftovers"),
        "agent.multi_seed_eval.num_seeds=1",
        "agent.stages.stage3_max_iters=2",
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "report.page_limit=4",
        responder=responder,
    )
    assert code == 0, run_dir
    return run_dir, responder


_text = record_text


def _section(record: dict, title: str) -> str | None:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", _text(record), re.S | re.M)
    return m.group(1) if m else None


# 1 -------------------------------------------------------------------------------------------


def test_the_memory_protocol_says_notes_are_per_branch_as_the_run_keeps_them(run):
    run_dir, _ = run
    db = sqlite3.connect(run_dir / "memory.sqlite")
    branch_of = {f"r{i}": b for i, b in db.execute("SELECT id, branch FROM recall")}
    said = hidden = 0
    for r in prompt_records(run_dir):
        protocol = _section(r, "Memory protocol")
        if protocol is None:
            continue
        assert "per branch" in protocol and "never a sibling's" in protocol, protocol
        assert "stage summaries" in protocol and "other nodes" in protocol
        said += 1
        snap = r.get("memory_snapshot") or {}
        lineage, shown = set(snap.get("lineage") or ()), snap.get("recall_ids") or []
        assert all(branch_of[i] in lineage for i in shown), (r["node_id"], shown, lineage)
        # a note of another branch existed when this prompt was built, and it was not shown
        newest = max((int(i[1:]) for i in shown), default=0)
        hidden += any(int(i[1:]) < newest and b not in lineage for i, b in branch_of.items())
    assert said >= 3 and hidden >= 1


# 2 -------------------------------------------------------------------------------------------


def test_a_noisy_measurement_is_no_bug_and_travels_with_the_nodes_result(run):
    run_dir, responder = run
    nid = responder.noisy_node
    assert nid, "no stage-3 review was made"
    node = journal_nodes(run_dir)[nid]
    review = json.loads(RunPaths(run_dir).node(nid).file(REVIEW_FILE).read_text())
    assert review["measurement"] == CONCERN and review["is_bug"] is False
    assert node["status"] == "good" and CONCERN in node["summary"]
    assert node["summary"].startswith("Caveat"), "first: the tables cut a summary at its end"
    # the review's instructions offer the field
    reviews = [r for r in prompt_records(run_dir) if r["label"].startswith("exec_review")]
    assert reviews and all('"measurement"' in (_section(r, "Instructions") or "") for r in reviews)
    # the stage's facts (its summary call) and a later node's table of the stage's other nodes
    facts = [r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == "stage3"]
    assert facts and CONCERN in _text(facts[0])
    later = [
        r
        for r in prompt_records(run_dir)
        if r["stage"] == "stage3" and r["node_id"] > nid and _section(r, "Other nodes of this stage")
    ]
    assert later, "no stage-3 node after the noisy one"
    assert all(CONCERN[:40] in (_section(r, "Other nodes of this stage") or "") for r in later)


# 3 -------------------------------------------------------------------------------------------


@needs_latex()
def test_the_figure_reviewer_of_a_benchmark_sees_the_machine(run):
    run_dir, _ = run
    names = {m["name"] for n in journal_nodes(run_dir).values() for m in n.get("metrics") or []}
    assert experiment_kinds(names) == ["benchmark"]
    env = json.loads(RunPaths(run_dir).environment.read_text())
    cpu = cpu_view(env)
    figure_reviews = [r for r in prompt_records(run_dir) if r["label"].startswith("figure_")]
    assert figure_reviews
    for r in figure_reviews:
        machine = _section(r, "Environment")
        assert machine is not None, "no machine facts in a benchmark's figure review"
        assert f"CPU: {cpu['model']}; {cpu['usable_cores']} usable cores" in machine
        for name in cpu.get("caches") or {}:
            assert f"{name} " in machine
        if cpu.get("vector_bits"):
            assert f"Vectors: {cpu['vector_bits']}-bit" in machine
        assert len(machine) < 600, "a few lines: the machine, not the sandbox"


def test_a_benchmarks_review_and_critique_see_the_machine_not_the_sandbox(run):
    """A relay run's judges called the whole environment block (sandbox, tools, 41 Python packages)
    in every review and figure critique waste: they get the machine's few lines, as the report's
    figure reviewer does."""
    run_dir, _ = run
    env = json.loads(RunPaths(run_dir).environment.read_text())
    expect = machine_text(env)
    assert expect
    cpu = cpu_view(env)
    if cpu.get("vector_bits") and cpu.get("clock") and "fma" in (cpu.get("simd") or []):
        one = round(cpu["clock"]["mhz"] * cpu["vector_bits"] / 32 / 1000, 1)
        assert f"{one} with one unit, {round(2 * one, 1)} with two" in expect  # both peaks said
    judged = [r for r in prompt_records(run_dir) if (r["phase"], r["label"]) in JUDGING_CALLS]
    assert {(r["phase"], r["label"]) for r in judged} == JUDGING_CALLS
    for r in judged:
        system = r["messages"][0]["content"]
        assert "## Environment\n" + expect in system, r["label"]
        assert "Sandbox your code runs in" not in system and "packages installed" not in system


JUDGING_CALLS = {("review", "exec_review"), ("phase5_vlm", "plot_critique")}


# 4 -------------------------------------------------------------------------------------------


def test_every_schema_call_states_its_length_limits(run):
    run_dir, _ = run
    checked = 0
    for r in prompt_records(run_dir):
        limits = field_limits(r["params"].get("schema"))
        fmt = _section(r, "Response format")
        if not limits or fmt is None or "sent with this request" not in fmt:
            continue  # a prompt-only mode shows the schema itself
        said = re.search(r"Length limits of the answer's fields \(.*?\): (.*?)\.(?: |$)", fmt, re.M)
        assert said, (r["node_id"], r["label"])
        own, stated = set(limits.split(", ")), set(said.group(1).split(", "))
        if r["phase"] == "phase2":
            # one text for every code call: the code and plan fields' bounds (the call's own
            # schema narrows some by the environment and adds edits or new packages)
            assert stated == set(field_limits(MERGED_CODE_SCHEMA).split(", "))
            assert {x.split(" ")[0] for x in stated} & {x.split(" ")[0] for x in own}, r["node_id"]
        else:
            assert stated == own, (r["node_id"], r["label"])
        checked += 1
    reviews = [r for r in prompt_records(run_dir) if r["label"].startswith("exec_review")]
    assert "findings 500, remarks 400, measurement 300" in (_section(reviews[0], "Response format") or "")
    assert checked >= 10


# 5 -------------------------------------------------------------------------------------------


@needs_latex()
def test_the_overflow_message_says_how_much_room_the_figures_take(run):
    run_dir, _ = run
    fixes = [r for r in prompt_records(run_dir) if r["phase"] == "writeup" and r["label"].startswith("fix")]
    assert fixes, "the long first paper did not overflow"
    pages, n = figure_pages((RunPaths(run_dir).paper / "paper.log").read_text(errors="replace"))
    assert pages and n == len(json.loads(RunPaths(run_dir).figures_json.read_text())["figures"])
    msg = _text(fixes[0])
    assert re.search(r"the limit is 4 pages, so it is \d+ pages? over", msg)
    assert f"take{'s' if n == 1 else ''} about {pages:.1f} page" in msg, msg[-1500:]
    assert "words in all" in msg


# 6 -------------------------------------------------------------------------------------------


def test_a_single_seed_rerun_is_said_to_have_no_spread(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir).values()
    reruns: dict[str, int] = {}
    for n in nodes:
        if n["operation"] == "seed_eval":
            reruns[n["parent_id"]] = reruns.get(n["parent_id"], 0) + 1
    assert reruns and set(reruns.values()) == {1}
    summaries = [r for r in prompt_records(run_dir) if r["phase"] == "summary"]
    writer = [r for r in prompt_records(run_dir) if r["phase"] == "writeup" and r["label"] == "sections"]
    for r in [*summaries, *writer]:
        text = _text(r)
        seed_lines = [ln for ln in text.splitlines() if re.search(r"over 1 seed re-run", ln, re.I)]
        assert seed_lines, r["label"]
        for ln in seed_lines:
            assert "one re-run: no spread" in ln and "±" not in ln, ln


# 7 -------------------------------------------------------------------------------------------


def test_a_childs_plotting_call_is_offered_its_parents_script(run):
    run_dir, _ = run
    paths = RunPaths(run_dir)
    nodes = journal_nodes(run_dir)
    offered = with_problems = 0
    for r in prompt_records(run_dir):
        if r["phase"] != "phase5_plot":
            continue
        parent = nodes[r["node_id"]]["parent_id"]
        shown = _section(r, "Parent's plotting script")
        plotted = parent and (json.loads(paths.node(parent).file(PLOTS_FILE).read_text()).get("figures"))
        if not plotted:
            assert shown is None, r["node_id"]
            continue
        script = (paths.node(parent).workspace / PLOT_SCRIPT).read_text()
        assert shown is not None and f"parent node {parent}" in shown
        assert script.strip() in shown
        # with the problems the vision model found in the parent's figures, to fix, not copy
        vlm_file = paths.node(parent).file("vlm.json")
        critique = (json.loads(vlm_file.read_text()) if vlm_file.exists() else {}).get("critique") or {}
        for problem in critique.get("problems") or []:
            assert f"- {problem}" in shown
            with_problems += 1
        offered += 1
    assert offered >= 2 and with_problems >= 1

"""What the judging and re-check calls see, and what they no longer pay for (issue 28, continued).

A scripted run with the realistic workload of tests/realistic_workload.py (a ~20 kB program
printing ~5 kB, three metrics, two data files), default config but for the run's size, plots and
the report on. Every expectation is read from the run's own files: each node's frozen stage inputs
(``stage_inputs.json``, what its code prompt was given), the journal's results, the node's and its
parent's code answers, the prompt logs as sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pipeline_support import FAST, ROOT, content_text, events, journal_nodes, prompt_records, run_args
from realistic_workload import RealisticResponder

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

OVERRIDES = [o for o in FAST if not o.startswith("report.")] + [
    "report.enabled=true",
    "report.citations.enabled=false",
    "agent.plots.enabled=true",
]


HEADLINE = "the program's own lr and l2 (one configuration of its sweep)"


class HeadlineResponder(RealisticResponder):
    """The realistic answers; every review also says which configuration the value is for."""

    def _exec_review(self, text, ctx):
        return json.dumps({**json.loads(super()._exec_review(text, ctx)), "headline": HEADLINE})


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("judge")
    r, resources = setup_run(run_args(tmp, *OVERRIDES))
    code = execute(r, resources=resources, backend=ScriptedBackend(HeadlineResponder(buggy_nodes=())))
    assert code == 0, [e for e in events(r.dir) if e["type"] in ("internal_error", "node_failed")]
    return r.dir


def _prompt(rec: dict) -> str:
    return "\n".join(content_text(m.get("content")) for m in rec["messages"])


def _section(text: str, title: str) -> str:
    """The text of the prompt section ``## title`` (up to the next ``## `` heading), "" if absent."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return m.group(1) if m else ""


def _judging_records(run_dir: Path) -> list[dict]:
    return [
        r
        for r in prompt_records(run_dir)
        if str(r.get("label", "")).startswith("exec_review") or r.get("phase") == "phase5_vlm"
    ]


# the frozen stage-input tables and the prompt sections they become
TABLES = {
    "siblings": "Other nodes of this stage",
    "tried_hyperparams": "Hyper-parameters tried",
    "tried_ablations": "Ablations done",
}


def test_reviews_and_critiques_see_the_stages_other_nodes_and_their_results(run):
    nodes = journal_nodes(run)
    compared = 0
    for rec in _judging_records(run):
        nid = rec["node_id"]
        frozen = json.loads((run / "nodes" / nid / "stage_inputs.json").read_text())
        text = _prompt(rec)
        for key, title in TABLES.items():
            rows = frozen.get(key) or []
            listed = [m.group(1) for row in rows for m in [re.search(r"\| (n\d{4}) \|", row)] if m]
            section = _section(text, title)
            if not listed:
                assert not section, (nid, rec["label"], title)
                continue
            compared += 1
            # a judge compares results: no earlier draft's design, no findings' prose
            assert "Design:" not in section and "what it did" not in section
            if key == "siblings":
                assert "Judge whether this node's result is plausible" in section, nid
            for sid in listed:
                assert f"| {sid} |" in section, (nid, sid)
                metric = nodes[sid].get("metric")
                if nodes[sid]["status"] == "good" and metric:
                    assert f"{metric['name']}={metric['value']:.6g}" in section, (nid, sid)
    assert compared >= 4


def _program(run_dir: Path, nid: str) -> str:
    """The node's program as its code answer holds it (every text file under its path heading)."""
    answer = json.loads((run_dir / "nodes" / nid / "code_answer.json").read_text())
    return "\n\n".join(f"### {f['path']}\n{f['content']}" for f in answer.get("files", []))


def test_a_child_that_changed_little_is_reviewed_from_its_diff_to_the_parent(run):
    # (a plotting call gets the program's lines that write its data instead: test_relay_s8_figures)
    nodes = journal_nodes(run)
    diffs = full = 0
    for rec in prompt_records(run):
        if not str(rec.get("label", "")).startswith("exec_review"):
            continue
        nid = rec["node_id"]
        parent = nodes[nid].get("parent_id")
        text = _prompt(rec)
        program = _program(run, nid)
        if not parent:
            assert program in text, nid  # a draft: its whole program
            full += 1
            continue
        before = _program(run, parent)
        mine, theirs = program.splitlines(), before.splitlines()
        added = [ln for ln in mine if ln.strip() and ln not in theirs]
        removed = [ln for ln in theirs if ln.strip() and ln not in mine]
        changed = len("\n".join(added + removed))
        if (
            program != before and changed * 3 < len(program) // 2
        ):  # a small change (the rule's 40 % with room for context)
            diffs += 1
            assert f"its parent node {parent}'s with these changes" in text, (nid, rec["label"])
            assert program not in text  # the whole program is not paid for again
            for line in added:
                assert f"+{line}" in text, (nid, line)
            for line in removed:
                assert f"-{line}" in text, (nid, line)
        elif program == before:  # a seed re-run: whole, the same bytes as its parent's call
            assert program in text, nid
        elif changed > len(program):
            assert program in text, nid
            full += 1
    assert diffs >= 2 and full >= 1


def _environment(run_dir: Path) -> str:
    """The environment block of the run's first code prompt (the system message's "Environment")."""
    rec = next(r for r in prompt_records(run_dir) if r.get("phase") == "phase2")
    system = content_text(rec["messages"][0]["content"])
    return system[system.index("## Environment") :]


def _probed(run_dir: Path) -> tuple[list[str], dict]:
    env = json.loads((run_dir / "environment.json").read_text())
    return sorted((env.get("sandbox") or {}).get("tools") or env.get("compilers") or {}), env.get("cpu") or {}


def test_a_pure_python_task_gets_the_compact_environment_and_a_compiled_one_the_full(run, tmp_path):
    tools, cpu = _probed(run)
    text = _environment(run)  # the bundled label-noise idea: Python only
    assert "not listed (a pure-Python task" in text
    for tool in tools:
        assert not re.search(rf"(?<![\w+-]){re.escape(tool)}(?![\w+-])", text), tool
    assert "MPI there" not in text and "Caches:" not in text and "Vector instructions" not in text
    assert "Python there:" in text and "Limits, each command separately" in text  # what it needs stays

    # the bundled C idea (cache-blocked matrix multiplication): every fact a compiled benchmark needs
    args = run_args(tmp_path, "agent.stages.stage1_max_iters=1", "agent.search.num_drafts=1")
    args.idea = str(ROOT / "examples" / "blocked_matmul" / "idea.md")
    args.overrides += ["agent.stages.stage2_max_iters=0", "agent.stages.stage3_max_iters=0"]
    args.overrides += ["agent.stages.stage4_max_iters=0", "agent.plots.enabled=false"]
    r, resources = setup_run(args)
    execute(r, resources=resources, backend=ScriptedBackend(RealisticResponder(buggy_nodes=())))
    tools, cpu = _probed(r.dir)
    full = _environment(r.dir)
    assert "pure-Python" not in full
    assert tools and all(tool in full for tool in tools if tool != "nvcc" or "GPUs: none" not in full)
    if cpu.get("caches"):
        assert "Caches:" in full
    if cpu.get("simd"):
        assert "Vector instructions" in full


def test_the_memory_protocol_is_sent_once_per_code_call_in_its_short_form(run):
    from ai_scientist.memory.protocol import OPS

    blocks = set()
    for rec in prompt_records(run):
        if rec.get("phase") != "phase2":
            continue
        text = _prompt(rec)
        assert text.count("## Memory protocol") == 1, rec["node_id"]
        block = _section(text, "Memory protocol")
        assert rec["params"].get("schema") and '"memory_update" field' in block
        assert "<memory_update>" not in block  # the free-text block's example is not sent
        for op in OPS:
            assert block.count(op) == 1, op  # each operation named once, its fields in the schema
        blocks.add(block)
    assert len(blocks) == 1  # the same bytes in every code call: cached after the first


def test_a_grids_headline_configuration_travels_with_its_value(run):
    nodes = journal_nodes(run)
    reviewed = [n for n in nodes.values() if n["status"] == "good" and n["operation"] != "seed_eval"]
    assert reviewed
    sentences = {}
    for n in reviewed:
        review = json.loads((run / "nodes" / n["id"] / "review.json").read_text())
        m = n["metric"]
        sentence = f"Headline: {m['name']}={m['value']:.6g} is for {review['headline'].rstrip('.')}."
        assert sentence in n["summary"], n["id"]  # the node's result, as every later table shows it
        sentences[n["id"]] = sentence
    # a later code prompt shows a sibling's value with its configuration; a judge's table too
    later_code = judged = 0
    for rec in prompt_records(run):
        text = _prompt(rec)
        table = _section(text, "Other nodes of this stage")
        for nid, sentence in sentences.items():
            if f"| {nid} |" not in table:
                continue
            if rec.get("phase") == "phase2":
                later_code += sentence in table
            elif str(rec.get("label", "")).startswith("exec_review") or rec.get("phase") == "phase5_vlm":
                m = nodes[nid]["metric"]
                judged += f"{m['name']}={m['value']:.6g} ({m['dataset']}) for {HEADLINE.rstrip('.')}" in table
    assert later_code >= 1 and judged >= 1

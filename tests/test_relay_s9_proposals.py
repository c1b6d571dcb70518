"""Issue 28, relay runs s8 ln2, mm1, mm2, ln3 (a capable model answering each request alone): what
the ablation proposal, the code calls' memory protocol and the ablation stage's summary left out
or repeated.

Two scripted runs of the realistic workload (tests/realistic_workload.py: a ~20 kB program with
dozens of unused helpers): in the first, the program also runs named variants in-run through a
function with a flag argument; in the second, every ablation fails. Each test derives what the
prompts must say from the run's files (the best node's code answer, the journal, the call's
schema), never from constants of its own."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.experiment_template import BUGGY_PROGRAM
from pipeline_support import journal_nodes, prompt_records, record_text, start_run
from realistic_workload import RealisticResponder

# appended to every working program: named variants measured in-run, a flag argument, a mode
VARIANTS = """

def variant_accuracy(variant, use_bias=True):
    scale = 1.0 if use_bias else 0.9
    if variant == "shuffled_labels":
        scale *= 0.5
    return round(_acc * scale, 6)


for _variant in ("full", "shuffled_labels"):
    print(f"variant {_variant}: {variant_accuracy(_variant)}")
"""

PARTS = "Its program's parts (read from its files: ablate one of these or a parameter above):\n"


class VariantsResponder(RealisticResponder):
    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer.get("files") or []:
            if f.get("path") == "experiment.py" and "compute_accuracy()" not in f.get("content", ""):
                f["content"] += VARIANTS
        return json.dumps(answer)


class FailingAblations(RealisticResponder):
    """Every ablation's program fails (the others work)."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        idea = re.search(r"This node's idea:\s*(.+)", text)
        if idea and idea.group(1).startswith("ablation"):
            for f in answer.get("files") or []:
                f["content"] = BUGGY_PROGRAM
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("s9_proposals"), responder=VariantsResponder())
    assert code == 0
    return run_dir


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("s9_failed_ablations"),
        "agent.stages.stage4_max_iters=1",
        responder=FailingAblations(),
    )
    assert code == 0
    return run_dir


def _this_call(rec: dict) -> str:
    text = record_text(rec)
    return text[text.index("## This call\n") :]


def _section(text: str, title: str) -> str | None:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return m.group(1) if m else None


def test_an_ablation_proposal_lists_the_parts_the_best_program_has(run):
    """The ablation proposal lists what the best node's program is made of, read from its saved
    code: every function of it that the program calls (with its arguments), not the helpers it
    never calls (counted), the `if` tests on its boolean constants and on a flag argument, the
    string mode it compares and the named variants it loops over; the tune and research proposals
    do not get the list (relay s8 ln2 027, mm1 030: no inventory of the best experiment's
    components)."""
    checked = 0
    for rec in prompt_records(run):
        if rec.get("phase") != "ideas":
            continue
        brief = _this_call(rec)
        if rec["label"] != "ablate":
            assert PARTS not in brief, rec["label"]
            continue
        best = re.search(r"^Best node so far: (n\d{4}):", brief, re.M).group(1)
        answer = json.loads((run / "nodes" / best / "code_answer.json").read_text())
        program = next(f["content"] for f in answer["files"] if f["path"] == "experiment.py")
        assert PARTS in brief, brief
        parts = brief.split(PARTS, 1)[1].split("\nThe stage may create", 1)[0]
        tree = ast.parse(program)
        defs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
        called = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        for name in sorted(defs):
            args = ", ".join(a.arg for a in defs[name].args.args)
            if name in called:
                assert f"{name}({args})" in parts, (name, parts)
            else:
                assert f"{name}(" not in parts, name
        never = len([n for n in defs if n not in called and n != "main"])
        assert never and f"{never} more defined but never called" in parts
        # the boolean constants the program tests (its parameter list gives their values)
        flags = re.findall(r"^- ([A-Z_]+) = (?:True|False) \[experiment\.py\]$", brief, re.M)
        tested = [f for f in flags if re.search(rf"^\s+if {f}:$", program, re.M)]
        assert tested, flags
        for flag in tested:
            assert f"if {flag} (in main)" in parts, (flag, parts)
        # the flag argument, the compared mode and the loop's variants, as the program writes them
        flag_arg = next(a.arg for a in defs["variant_accuracy"].args.args[1:])
        assert f"if {flag_arg} (in variant_accuracy)" in parts
        mode = re.search(r"^\s+if (variant == \"\w+\"):$", program, re.M).group(1)
        assert f"if {mode} (in variant_accuracy)" in parts
        loop = re.search(r"^for (_variant in \([^)]*\)):$", program, re.M).group(1)
        assert f"variants [experiment.py]: for {loop}" in parts
        # its metrics besides the headline: each named once, with its value where the best-node
        # line has room, else in the list of parts
        node = journal_nodes(run)[best]
        others = [m["name"] for m in node["metrics"] if m["name"] != node["metric"]["name"]]
        assert others
        for name in others:
            assert len(re.findall(rf"\b{name}=", brief)) + parts.count(name) == 1, name
        checked += 1
    assert checked == 1


def test_the_memory_protocol_says_each_rule_once_and_leaves_the_fields_to_the_schema(run):
    """Every code call's memory protocol (a schema call) leaves each operation's fields to the
    schema sent with the call (no list of two or more of its fields), says the per-branch rule
    once, and is the same bytes in every code call (relay s8 ln2, ln3: the paragraph in every
    code call while memory held one note)."""
    blocks = set()
    for rec in prompt_records(run):
        if rec.get("phase") != "phase2":
            continue
        block = _section(record_text(rec), "Memory protocol")
        assert block is not None, rec["node_id"]
        item = rec["params"]["schema"]["properties"]["memory_update"]["items"]["properties"]
        fields = set(item) - {"op"}
        for op in item["op"]["enum"]:  # what the text says of an operation, up to its clause's end
            said = re.search(rf"\b{op}\b[^;\n]*", block)
            assert said, op
            for group in re.findall(r"\(([^()]*)", said.group(0)):
                named = [w for w in re.findall(r"[a-z_]+", group) if w in fields]
                assert len(named) < 2, (op, group, named)
        assert block.count("branch") == 1, block
        blocks.add(block)
    assert len(blocks) == 1


def _stage4_heading(run_dir: Path) -> tuple[list[dict], str, str, list[str]]:
    """The stage-4 search nodes (journal), the stage-4 summary call's best node, the line before
    its node table and the table's rows."""
    nodes = journal_nodes(run_dir)
    stage4 = [n for n in nodes.values() if n["stage"] == 4 and n["operation"] != "seed_eval"]
    rec = next(
        r for r in prompt_records(run_dir) if r.get("phase") == "summary" and r.get("label") == "stage4"
    )
    facts = _section(record_text(rec), "This stage")
    lines = facts.splitlines()
    table = lines.index("| node | operation | idea | result | seed re-runs | summary |")
    best = re.search(r"^Best node of the run: (n\d{4})", facts, re.M).group(1)
    return stage4, best, lines[table - 1], lines[table + 2 :]


def test_the_ablation_heading_stands_over_its_table(run):
    """In the stage-4 summary the heading "Ablations, each measured against <best>" is the line
    right over the node table, whose rows hold the stage's ablations with their results: the
    machine-load block (a timed metric) goes before the heading, not between it and its table
    (relay s8 mm2 036: an "Ablations" heading with nothing under it)."""
    stage4, best, heading, rows = _stage4_heading(run)
    assert stage4 and all(n["operation"] == "ablate" for n in stage4)
    assert heading.startswith(f"Ablations, each measured against {best} "), heading
    good = [n["id"] for n in stage4 if n["status"] == "good"]
    assert good and all(any(row.startswith(f"| {i} | ablate |") for row in rows) for i in good)


def test_the_ablation_stage_summary_says_why_no_ablation_is_measured(failed_run):
    """When no ablation of the stage gave a result, the heading over the stage-4 table says so and
    why, with the journal's count of the stage's failed nodes, instead of announcing ablations
    measured against the best node (relay s8 mm2 036)."""
    stage4, best, heading, rows = _stage4_heading(failed_run)
    buggy = [n for n in stage4 if n["status"] == "buggy"]
    assert stage4 and len(buggy) == len(stage4)
    assert not heading.startswith("Ablations"), heading
    assert heading.startswith(f"No ablation of {best} "), heading
    assert f"({len(buggy)} failed)" in heading, heading
    assert all(any(row.startswith(f"| {n['id']} | ablate |") for row in rows) for n in buggy)


def test_a_c_programs_parts_are_its_functions_and_real_switches():
    """The same list for a C benchmark of the relay's kind (blocked matmul, read as the ablation
    proposal reads a code answer's files): its kernels with their arguments, an ``#ifdef`` and a
    mode the program compares as switches; a default (``#ifndef N`` followed by ``#define N``), an
    include guard and a test on a swept array's value are none."""
    from ai_scientist.treesearch.components import components

    program = (
        "#ifndef MM_H\n#define MM_H\n#endif\n#ifndef N_DEFAULT\n#define N_DEFAULT 1024\n#endif\n"
        "static void\nmatmul_blocked(const double *restrict A, const double *restrict B,\n"
        "               double *restrict C, int n, int tile)\n{\n#ifdef USE_UNROLL\n  unroll(A);\n#endif\n}\n"
        "int main(int argc, char **argv) {\n  int tiles[] = {16, 32, 64};\n"
        '  const char *mode = argc > 2 ? argv[2] : "all";\n'
        '  if (strcmp(mode, "naive") == 0) { }\n  for (int t = 0; t < 3; t++) { if (tiles[t] > 8) continue; }\n'
        "  return 0;\n}\n"
    )
    lines = components({"mm.c": program})
    assert lines[0] == "functions [mm.c]: matmul_blocked(A, B, C, n, tile)", lines
    switches = lines[1]
    assert "#ifdef USE_UNROLL" in switches and 'if (strcmp(mode, "naive") == 0)' in switches, switches
    assert "N_DEFAULT" not in switches and "MM_H" not in switches and "tiles" not in switches, switches

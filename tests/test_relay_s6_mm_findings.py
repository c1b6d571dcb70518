"""Issue 28, relay run s6 on the compiled-C idea (blocked matrix multiplication, a capable model
answering from the request alone): the node-side gaps its critiques named. Each test runs a scripted
pipeline and reads what the prompts really carried (prompt logs), checked against the run's own
files (journal, events)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run
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
        lead = {
            "code": f"Measured by {parent['id']}, the node this one continues",
            "review": f"Its parent node {parent['id']} measured",
            # a figure critique: the parent's headline only (relay s8 ln2 014, test_relay_s8_nodes2)
            "critique": f"Its parent node {parent['id']}'s headline",
        }[kind]
        shown = parent["metrics"][:1] if kind == "critique" else parent["metrics"]
        assert text.count(lead) == 1, (rec["node_id"], kind)
        block = text[text.index(lead) :].split("\n")
        # the head says what is shared; each metric one line below it, its own direction when the
        # metrics differ (val_loss is minimised, val_accuracy maximised)
        assert block[0].endswith(":"), block[0]
        rows = block[1 : 1 + len(shown)]
        primary = parent["metric"]
        assert rows[0].startswith(_metric_line(primary)), rows
        for m in shown:
            line = _metric_line(m)
            assert sum(r.startswith(line) for r in rows) == 1, (line, rows)
            assert text.count(f"{line} (") + text.count(f"{line}\n") >= 1
            assert f"{m['name']}={m['value']:.6g}" not in text.split(lead)[1][:2000], m
            if len({x["direction"] for x in shown}) > 1:
                assert any(r.startswith(line) and m["direction"] in r for r in rows), (line, rows)
        checked[kind] = checked.get(kind, 0) + 1
    assert set(checked) == {"code", "review", "critique"}, checked


@pytest.fixture(scope="module")
def default(tmp_path_factory) -> Path:
    """A default scripted run of the bundled example (tunes in stage 2, ablations in stage 4)."""
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("default"))
    assert code == 0
    return run_dir


def _section(text: str, heading: str) -> str:
    start = text.find(f"## {heading}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 4)
    return text[start : end if end >= 0 else len(text)]


def _id_key(node_id: str) -> int:
    return int(node_id.lstrip("n"))


def test_a_tune_or_ablation_says_it_starts_from_the_base_node_without_its_siblings_changes(default):
    """A tune's (an ablation's) code prompt names the node it starts from — its parent, the stage's
    base node — and the stage's earlier tunes (ablations) of that node whose changes are not in its
    code (relay s6 mm 015: a tune could not tell whether its sibling's tile grid was in place)."""
    nodes = journal_nodes(default)
    checked = {"tune": 0, "ablate": 0, "with_others": 0}
    for rec in prompt_records(default):
        node = nodes.get(rec["node_id"])
        if node is None or rec.get("phase") != "phase2" or node["operation"] not in ("tune", "ablate"):
            continue
        brief = _section(record_text(rec), "This call")
        parent = node["parent_id"]
        others = sorted(
            (
                n["id"]
                for n in nodes.values()
                if n["stage"] == node["stage"]
                and n["operation"] == node["operation"]
                and n["parent_id"] == parent
                and _id_key(n["id"]) < _id_key(node["id"])
            ),
            key=_id_key,
        )
        said = f"This node starts from {parent}, the stage's base node: the code under \"Current code\" is {parent}'s"
        assert said in brief, brief
        kind = "tunings'" if node["operation"] == "tune" else "ablations'"
        if others:
            assert f"the other {kind} changes ({', '.join(others)}) are not in it" in brief, brief
            checked["with_others"] += 1
        else:
            assert "are not in it" not in brief, brief
        checked[node["operation"]] += 1
    assert all(checked.values()), checked


def test_the_tried_tables_ranking_places_the_baseline(default):
    """The ranking line of a tried table ranks the stage's baseline (the node it started from, named
    in the table's head) among the rows by its value, marked "(baseline)" — "Ranked best first:
    n0005" under a baseline n0002 that scored above it read as if n0005 led (relay s6 mm 015, 016)."""
    nodes = journal_nodes(default)
    checked: dict[str, int] = {}
    for rec in prompt_records(default):
        text = record_text(rec)
        for heading in ("Hyper-parameters tried", "Ablations done"):
            table = _section(text, heading)
            head = re.search(r"Baseline \(the node this stage started from\): (n\d{4}) ", table)
            if not head:
                continue
            base = nodes[head.group(1)]
            rows = re.findall(r"^\| (n\d{4}) \|", table, re.M)
            good = [nodes[i] for i in rows if nodes[i]["status"] == "good"] + [base]
            sign = -1 if base["metric"]["direction"] == "maximize" else 1
            want = [
                n["id"] + (" (baseline)" if n is base else "")
                for n in sorted(good, key=lambda n: (sign * n["metric"]["value"], _id_key(n["id"])))
            ]
            ranking = next(ln for ln in table.splitlines() if ln.startswith("Ranked best first: "))
            assert ranking == "Ranked best first: " + ", ".join(want) + ".", (ranking, want)
            checked[heading] = checked.get(heading, 0) + 1
    assert len(checked) == 2, checked


class FlagsOnlyTune(RealisticResponder):
    """A tune that changes nothing in the files: ``"edits": []`` and no ``files`` (relay s6 mm
    015's answer to a build-flags tune)."""

    schema: dict | None = None

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: Any) -> str:
        self.schema = schema
        return super().__call__(messages, schema, ctx)

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        if "Operation: tune" in text and "edits" in ((self.schema or {}).get("properties") or {}):
            answer.pop("files", None)
            answer["edits"] = []
        return json.dumps(answer)


def test_a_tune_without_file_changes_is_told_how_to_answer_and_keeps_the_parents_files(tmp_path):
    """Every code prompt that offers edits says how an answer that changes no file looks
    (``"edits": []`` and no ``files``), and such an answer keeps its parent's files as they were
    (relay s6 mm 015: the rules did not say, the model guessed)."""
    from ai_scientist.base.artifacts import CodeAnswer

    code, run_dir, _ = start_run(tmp_path, responder=FlagsOnlyTune())
    assert code == 0
    nodes = journal_nodes(run_dir)
    told = kept = 0
    for rec in prompt_records(run_dir):
        if rec.get("phase") != "phase2" or "edits" not in json.dumps(rec["params"].get("schema") or {}):
            continue
        assert '`"edits": []` and no `files` keeps the files unchanged' in record_text(rec)  # its brief
        told += 1
        node = nodes[rec["node_id"]]
        sent = json.loads(rec["response"]["raw"])
        if node["operation"] == "tune" and sent.get("edits") == [] and "files" not in sent:
            own = CodeAnswer.from_json(
                json.loads((run_dir / "nodes" / node["id"] / "code_answer.json").read_text())
            )
            parent = CodeAnswer.from_json(
                json.loads((run_dir / "nodes" / node["parent_id"] / "code_answer.json").read_text())
            )
            assert own.text_files() == parent.text_files() and own.text_files()
            assert node["status"] == "good", node
            kept += 1
    assert told and kept, (told, kept)


# the relay run's C program (request 011), cut to what declares its parameters
MM_C = """#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#define MIN(a, b) ((a) < (b) ? (a) : (b))
int main(int argc, char **argv) {
    const char *tag = argc > 1 ? argv[1] : "O3_native";
    const char *se = getenv("SEED");
    const int reps = 3;
    int sizes_full[] = {256, 512, 1024}, sizes_quick[] = {1024};
    int tiles[] = {16, 32, 48, 64, 96, 128, 192, 256, 320, 384, 512};
    return 0;
}
"""


def test_parameters_offered_to_proposals_leave_out_what_is_no_knob(default):
    """The parameters a tune proposal is offered leave out feature-test macros and other names
    starting with ``_``, constants named for a cache that hold one of the machine's cache sizes
    (as the run's environment record reports them) and a constant holding the metric's dataset
    label; the program's real knobs stay (relay s6 mm 010 offered ``_POSIX_C_SOURCE``, ``L1D_KIB``,
    ``DS``)."""
    from ai_scientist.base.paths import RunPaths
    from ai_scientist.treesearch.parameters import code_parameters, machine_sizes, parameters

    env = json.loads(RunPaths(default).environment.read_text())
    caches = {k: v["bytes"] for k, v in (env.get("sandbox", {}).get("cpu") or env["cpu"])["caches"].items()}
    assert caches, "the environment record reports no cache"
    level, size = sorted(caches.items())[0]
    analyze = f'L1D_KIB, L2_KIB = {size // 1024}, 7\nDS = "random_uniform_n1024"\nN = 1024\n'
    files = {"mm.c": MM_C, "analyze.py": analyze}
    every = {p.name for p in parameters(files)}  # what the protocol compares: unchanged
    assert {"_POSIX_C_SOURCE", "L1D_KIB", "DS"} <= every
    shown = code_parameters(files, machine=machine_sizes(env), labels={"random_uniform_n1024"})
    names = [line.split(" ", 1)[0] for line in shown]
    assert "_POSIX_C_SOURCE" not in names and "DS" not in names, shown
    assert "L1D_KIB" not in names, (level, size, shown)  # the machine's own cache size
    assert "L2_KIB" in names  # 7 KiB is no cache of this machine: a choice the code made
    assert {"tiles", "sizes_full", "SEED", "N"} <= set(names), shown
    # the run's own proposals: the example's knobs, nothing private
    offered = 0
    for rec in prompt_records(default):
        if rec.get("phase") != "ideas" or rec.get("label") != "tune":
            continue
        text = record_text(rec)
        start = text.index("Parameters its code exposes")
        listed = re.findall(r"^- (\S+)", text[start : text.find("\n\n", start)], re.M)
        assert listed and not [n for n in listed if n.startswith("_")], listed
        offered += 1
    assert offered


def _pooled(run_dir: Path, parents: list[str]) -> dict:
    """The pooled sigma and degrees of freedom of ``parents``' good seed re-runs, from the journal."""
    groups: dict[str, list[float]] = {p: [] for p in parents}
    for n in journal_nodes(run_dir).values():
        if n["operation"] == "seed_eval" and n["status"] == "good" and n["parent_id"] in groups:
            groups[n["parent_id"]].append(n["metric"]["value"])
    ss = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in groups.values() if len(v) >= 2)
    dof = sum(len(v) - 1 for v in groups.values() if len(v) >= 2)
    return {"sigma": math.sqrt(ss / dof), "dof": dof}


def test_a_sigma_of_few_degrees_of_freedom_is_called_rough(default):
    """Wherever a prompt shows the seed-noise sigma (the evaluation protocol, the re-ranking in the
    stage facts), a sigma pooled with fewer than 3 degrees of freedom is called rough with its
    degrees; one with 3 or more is not — each sigma matched to the ``seed_rerank`` event it comes
    from (its nodes and value) (relay s6 mm 009, 010, 019: a sigma of 2 values read as exact)."""
    from ai_scientist.treesearch.seeds import num

    noises = [e["noise"] for e in events(default) if e["type"] == "seed_rerank" and e["noise"].get("sigma")]
    assert {n["dof"] < 3 for n in noises} == {True, False}, noises  # both cases in this run
    seen: set[tuple[str, bool]] = set()
    for rec in prompt_records(default):
        text = record_text(rec)
        for m in re.finditer(r"seed noise of \S+: sigma (\S+) \(([^)]*)\)", text):
            nodes = re.search(r"over the seed re-runs of ([^;)]+)", m.group(2)).group(1).split(", ")
            noise = next((n for n in noises if sorted(n["groups"]) == sorted(nodes)), None)
            if noise is None:  # a later stage pools a stage's re-runs no re-ranking used: the journal's
                noise = _pooled(default, nodes)
            assert m.group(1) == f"{noise['sigma']:.3g}"
            dof = noise["dof"]
            rough = f"rough: {dof} degree{'s' if dof != 1 else ''} of freedom, "
            assert m.group(2).startswith(rough) == (dof < 3), m.group(0)
            assert (f"{dof} degrees of freedom" in m.group(2)) == (dof >= 3), m.group(0)
            seen.add(("protocol", dof < 3))
        for noise in noises:
            said = f"seed noise sigma {num(noise['sigma'])} ("
            for i in [m.start() for m in re.finditer(re.escape(said), text)]:
                dof = noise["dof"]
                rest = text[i + len(said) : text.find("\n", i)]
                if f"{dof} degree" not in rest:
                    continue  # another stage's sigma of the same value
                assert rest.startswith(f"rough: {dof} degree") == (dof < 3), rest
                seen.add(("rerank", dof < 3))
    assert {("protocol", True), ("rerank", True), ("rerank", False)} <= seen, seen


class LongCritiques(ExampleResponder):
    """Figure critiques with several long problems, as a capable model writes them (relay s6 mm 008:
    five problems of 150-250 characters, each of two sentences)."""

    def _phase5_vlm(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase5_vlm(text, ctx))
        answer["problems"] = [
            f"Fig {i} of {ctx.node_id}: the curve zig-zags by 2x between neighbouring points, which looks like "
            f"timing noise rather than an effect of the method. One seed and no error bars, so the figure "
            f"alone cannot separate the two readings."
            for i in range(1, 5)
        ]
        return json.dumps(answer)


def test_stage_facts_quote_figure_problems_whole(tmp_path):
    """The stage facts' node rows quote a figure review's problems whole (or a first problem cut at
    a sentence end, marked), then count those left out — never a problem cut mid-sentence with "…"
    (relay s6 mm 009, 019: "one seed and no error …"); each problem read from the node's vlm.json."""
    code, run_dir, _ = start_run(tmp_path, responder=LongCritiques())
    assert code == 0
    checked = 0
    for rec in prompt_records(run_dir):
        text = record_text(rec)
        for nid, cell in re.findall(r"^\| (n\d{4}) \|.*? Figure review: (.*?) \|$", text, re.M):
            vlm = json.loads((run_dir / "nodes" / nid / "vlm.json").read_text())
            problems = [p.rstrip(".") for p in vlm["critique"]["problems"]]
            assert "…" not in cell, cell
            shown = cell.split(" (+")[0].split("; ")
            assert shown and all(p in problems for p in shown), (cell, problems)
            more = len(problems) - len(shown)
            assert (f"(+{more} more problem{'s' if more > 1 else ''})" in cell) == (more > 0), cell
            checked += 1
    assert checked, "no stage facts row quoted a figure review"


def test_stage_goals_say_that_another_stages_advice_waits(default):
    """Every stage-2 and stage-4 prompt that shows both the stage's goal and an earlier stage's
    summary with advice for the next stage says that advice of another stage's kind waits: method
    changes for stage 3 in stage 2, tuning and method changes in stage 4 (relay s6 mm 010, 011, 020:
    stage 1's "For the next stage" advised a 2-level block and packing A in a stage that forbids
    method changes)."""
    nodes = journal_nodes(default)
    said = {
        2: "An earlier stage's advice to change the method (a new algorithm, kernel, model or variant) is "
        "for stage 3, creative research: it waits until then.",
        4: "An earlier stage's advice to tune a setting or change the method is for the stages before: "
        "here, only remove or disable.",
    }
    checked: set[int] = set()
    for rec in prompt_records(default):
        node = nodes.get(rec["node_id"])
        stage = node["stage"] if node else int(str(rec.get("stage") or "0").lstrip("stage") or 0)
        text = record_text(rec)
        if stage not in said or "For the next stage:" not in _section(text, "Previous stages"):
            continue
        if f"Stage {stage} of 4" not in text:
            continue
        assert said[stage] in text, (rec["node_id"], rec.get("phase"))
        checked.add(stage)
    assert checked == {2, 4}, checked


def test_the_protocol_says_which_method_the_headline_measures(tmp_path):
    """Every prompt showing the evaluation protocol, except a tune's or an ablation's (one change of
    the base node's method), says that a node measuring several methods keeps the headline metric
    for the one the protocol node's headline measured and names new ones otherwise, and that a
    node replacing the method reports its own; a later draft's says its headline is its own
    method's, measured as the protocol node measures it — metric and node from the run's
    eval_protocol events (relay s6 mm 005, 020: "which kernel, when a node has three?")."""
    code, run_dir, _ = start_run(tmp_path, responder=ExampleResponder(buggy_nodes=()))
    assert code == 0
    nodes = journal_nodes(run_dir)
    fixed = {int(e["stage"]): e for e in events(run_dir) if e["type"] == "eval_protocol"}
    checked: set[str] = set()
    for rec in prompt_records(run_dir):
        protocol = _section(record_text(rec), "Evaluation protocol")
        if not protocol:
            continue
        node = nodes.get(rec["node_id"])
        op = node["operation"] if node else rec.get("label")
        stage = node["stage"] if node else int(str(rec["stage"]).removeprefix("stage"))
        ev = fixed[stage]
        metric, ref = ev["metric"][0], ev["node_id"]
        line = (
            f"- which method the headline measures: a node that measures several methods or kernels side by "
            f"side keeps {metric} for the one {ref}'s headline measured and reports each new one under metric "
            f"names of its own (e.g. {metric}_<method>); a node that replaces the method"
        )
        assert (line in protocol) == (op not in ("tune", "ablate")), (rec["node_id"], op, protocol[:600])
        if op == "draft" and rec.get("phase") == "phase2":  # the code prompt, with the reference code
            assert "as a new draft does" in protocol
            assert (
                f"This draft's {metric} is its own method's result, measured as {ref} measures it."
                in protocol
            )
        checked.add(f"{op} {rec.get('phase')}")
    assert {"draft phase2", "improve phase2", "improve review", "tune phase2", "ablate ideas"} <= checked, (
        checked
    )


def test_a_tunes_code_prompt_cuts_its_parents_output_and_plot_critique(realistic):
    """A tune's code prompt (one setting changed) shows its parent's output cut to the last lines of
    each stream, with the cut stated, and of its plot feedback the figures and the verdict only; an
    improvement's or ablation's prompt keeps both whole — each checked against the parent's run.json
    and vlm.json (relay s6 mm 011, 015: 50 kB prompts for a one-flag change)."""
    from ai_scientist.phases.evidence import TUNE_OUTPUT_LINES

    nodes = journal_nodes(realistic)
    checked: dict[str, int] = {}
    for rec in prompt_records(realistic):
        node = nodes.get(rec["node_id"])
        if (
            node is None
            or rec.get("phase") != "phase2"
            or node["operation"] not in ("tune", "improve", "ablate")
        ):
            continue
        text = record_text(rec)
        output = _section(text, "Execution output")
        feedback = _section(text, "Plot feedback")
        run = json.loads((realistic / "nodes" / node["parent_id"] / "run.json").read_text())
        vlm = json.loads((realistic / "nodes" / node["parent_id"] / "vlm.json").read_text())["critique"]
        stdout = [o["stdout_tail"].rstrip().splitlines() for o in run["outputs"]]
        long = [lines for lines in stdout if len(lines) > TUNE_OUTPUT_LINES]
        assert long, "the realistic workload prints more than a tune is shown"
        if node["operation"] == "tune":
            for lines in long:
                assert "\n".join(lines[-TUNE_OUTPUT_LINES:]) in output
                assert lines[-TUNE_OUTPUT_LINES - 1] not in output.split("[stdout, last lines]")[-1]
            assert f"The last {TUNE_OUTPUT_LINES} lines of each stream only (" in output
            assert vlm["shows"] not in feedback and not any(p in feedback for p in vlm["problems"])
            assert "Result judged valid" in feedback and f"{len(vlm['problems'])} problem" in feedback
        else:
            assert "lines of each stream only" not in output
            assert all(lines[-TUNE_OUTPUT_LINES - 1] in output for lines in long)
            assert vlm["shows"] in feedback and all(p in feedback for p in vlm["problems"])
        checked[node["operation"]] = checked.get(node["operation"], 0) + 1
    assert set(checked) == {"tune", "improve", "ablate"}, checked

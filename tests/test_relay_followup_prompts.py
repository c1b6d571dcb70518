"""Issue 28 follow-up (relay critique): what a capable model still missed in the node prompts.

Read from the prompt logs of a scripted run (FAST: two drafts, every stage) where the fact is in
the run's files, else on the pure functions that build the text:

1. the code instructions speak of a parent's plan only to a node that has one, and of ``edits``
   only when the request's schema offers them;
2. the review instructions name the sections they point at, in a sentence that reads right;
3. a child's review, plotting and critique calls show its parent's metrics (whole), a draft's none;
4. a later draft sees an earlier draft's design (its plan's goal and strategy); result cells
   list metrics whole, primary first, then "(+N more metrics)"; findings are cut at a sentence end;
5. the tuning proposer is told that data/evaluation settings are the protocol, sees hard-coded
   grids; the ablation proposer sees the ablations the idea asks for and those already measured;
6. the ablation plan's header is true in each case (no "0 still to do" beside a new ablation);
7. the plotting instructions say that a figure's ``file`` is the plain name, the folder apart;
8. the memory protocol is one compact block.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pipeline_support import journal_nodes, prompt_records, record_text, start_run

from ai_scientist.base.config import Config
from ai_scientist.base.paths import PLAN_FILE, RunPaths
from ai_scientist.memory.protocol import protocol_instructions
from ai_scientist.runloop.stage_inputs import measured_ablations
from ai_scientist.treesearch.journal import Journal
from ai_scientist.treesearch.node import Metric
from ai_scientist.treesearch.parameters import code_parameters
from ai_scientist.treesearch.tried import ablation_plan, metrics_text, sentences

_text = record_text


def _section(record: dict, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", _text(record), re.S | re.M)
    return m.group(1) if m else ""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("relay_followup"))
    assert code == 0
    return run_dir


def _records(run: Path, phase: str) -> list[dict]:
    return [r for r in prompt_records(run) if r["phase"] == phase]


# 1 -------------------------------------------------------------------------------------------


def test_code_instructions_are_true_for_every_call_and_the_same_bytes(run):
    """The instructions open the prefix every code call shares (docs/context.md, the prefix cache):
    one text for all, true for a draft with no parent and no Plan as for a child; what applies to
    one call alone (the parent's plan as the starting point) is said in its brief."""
    nodes = journal_nodes(run)
    checked, texts = set(), set()
    for r in _records(run, "phase2"):
        node = nodes[r["node_id"]]
        if node["operation"] == "seed_eval":
            continue
        rules = _section(r, "Instructions")
        texts.add(rules)
        assert "parent" not in rules, rules
        has_plan = bool(_section(r, "Plan").strip())
        assert ('The plan under "Plan" is your parent\'s' in _section(r, "This call")) == has_plan
        offers_edits = "edits" in ((r["params"].get("schema") or {}).get("properties") or {})
        assert "Give every file in full under `files`" in rules
        # the edits are explained where the call's schema offers them, in its brief alone
        assert ("offers `edits`" in _section(r, "This call")) == offers_edits
        assert "`edits`" not in rules
        checked.add((node["operation"], offers_edits, has_plan))
    assert len(texts) == 1
    assert {op for op, _, _ in checked} >= {"draft", "tune", "ablate"}
    assert any(op == "draft" and not plan for op, _, plan in checked)  # a draft: no parent, no Plan
    assert any(plan for _, _, plan in checked)  # a child shown its parent's Plan: told so in its brief


# 2 -------------------------------------------------------------------------------------------


def test_review_instructions_read_right(run):
    reviews = _records(run, "review")
    assert reviews
    for r in reviews:
        rules = _section(r, "Instructions")
        assert "the program above them" not in rules
        for title in ("Output (last lines)", "Run result", "Current code"):
            assert f'"{title}"' in rules
            assert _section(r, title).strip(), f"the instructions point at a missing section {title}"


# 3 -------------------------------------------------------------------------------------------


def test_a_childs_review_plot_and_critique_show_its_parents_metrics(run):
    nodes = journal_nodes(run)
    seen = {"draft": 0, "child": 0, "parent_mean": 0}
    for phase in ("review", "phase5_plot", "phase5_vlm"):
        for r in _records(run, phase):
            node = nodes[r["node_id"]]
            brief = _section(r, "This call")
            parent = nodes.get(node["parent_id"] or "")
            if parent is None or node["operation"] == "seed_eval":
                assert "Its parent node" not in brief
                seen["draft"] += 1
                continue
            # a plotting script reads only this node's files: no parent metrics (relay runs: waste)
            if phase == "phase5_plot":
                assert "Its parent node" not in brief and "measured:" not in brief
                continue
            # the parent's metrics as a table after its lead, one a line (relay s6 mm); a figure
            # critique gets the parent's headline only (relay s8 ln2 014: test_relay_s8_nodes2)
            vlm = phase == "phase5_vlm"
            lead = (
                f"Its parent node {parent['id']}'s headline"
                if vlm
                else f"Its parent node {parent['id']} measured"
            )
            line = brief[brief.index(lead) :]
            assert vlm or "Compare this node's results with its parent's" in brief
            for m in parent["metrics"][:1] if vlm else parent["metrics"]:  # whole (a few: no "+N more")
                assert f"\n- {m['name']} = {m['value']:.6g}" in line, (line, m)
            # a parent re-run over seeds (at its stage's end) is shown with its mean beside its search run
            reruns = [
                n["metric"]["value"]
                for n in nodes.values()
                if n["operation"] == "seed_eval" and n["parent_id"] == parent["id"] and n["status"] == "good"
                and n["metric"]["name"] == parent["metric"]["name"]
            ]  # fmt: skip
            if reruns and nodes[r["node_id"]]["stage"] > parent["stage"]:
                mean = sum(reruns) / len(reruns)
                # beside its search-run value: each re-run's value, their mean (issue 28, relay s6 ln2 012)
                values = ", ".join(f"{v:.6g}" for v in reruns)
                said = (
                    f"one seed re-run: {values}, no spread"
                    if len(reruns) == 1
                    else f"seed re-runs {values}: mean {mean:.6g}"
                )
                assert said in line, line
                seen["parent_mean"] += 1
            # the node's own metrics stay in "Run result", not a third list in the brief
            assert "higher is better" not in brief and "Metrics (" not in brief
            seen["child"] += 1
    assert seen["draft"] >= 3 and seen["child"] >= 9 and seen["parent_mean"] >= 3


# 4 -------------------------------------------------------------------------------------------


def test_a_later_draft_sees_the_earlier_drafts_design(run):
    nodes = journal_nodes(run)
    drafts = [r for r in _records(run, "phase2") if nodes[r["node_id"]]["operation"] == "draft"]
    second = drafts[1]
    first_id = drafts[0]["node_id"]
    plan = json.loads(RunPaths(run).node(first_id).file(PLAN_FILE).read_text())
    table = _section(second, "Other nodes of this stage")
    row = next(ln for ln in table.splitlines() if ln.startswith(f"| {first_id} |"))
    assert "Design: goal: " + sentences(plan["goal_summary"], 300) in row
    assert "strategy: " + sentences(plan["implementation_strategy"], 300) in row


def _node_with_metrics(tmp_path, n: int):
    j = Journal(tmp_path / "journal.jsonl")
    node = j.new_node(stage=1, operation="draft")
    grid = [Metric(f"val_accuracy[l2={i / 100},lr=0.01]", 0.87 + i / 1000) for i in range(n)]
    return j.update(node.id, status="good", metric=Metric("val_accuracy", 0.8645), metrics=tuple(grid))


def test_a_result_cell_lists_metrics_whole_primary_first(tmp_path):
    node = _node_with_metrics(tmp_path, 12)
    cell = metrics_text(node)
    assert cell.startswith("val_accuracy=0.8645")
    m = re.search(r" \(\+(\d+) more metrics\)$", cell)
    assert m, cell
    shown = cell[: m.start()].split("; ")
    assert len(shown) + int(m.group(1)) == 13
    names = {mm.name for mm in node.metrics} | {"val_accuracy"}
    assert all(s.rsplit("=", 1)[0] in names for s in shown), shown  # no name cut mid-word
    assert len(cell) <= 240


def test_findings_are_cut_at_a_sentence_end():
    text = "Seed 0 ran cleanly. Clean val accuracy 0.8645 for the headline config. " + "More detail. " * 30
    cut = sentences(text, 80)
    assert cut == "Seed 0 ran cleanly. Clean val accuracy 0.8645 for the headline config. [...]"
    assert sentences("short", 100) == "short"
    words = sentences("a" * 10 + " " + "b" * 200, 60)
    assert words == "a" * 10 + " [...]"


# 5 -------------------------------------------------------------------------------------------


def test_the_tuning_proposer_is_told_the_data_settings_are_the_protocol(run):
    tune = [r for r in _records(run, "ideas") if r["label"] == "tune"]
    assert tune
    brief = _section(tune[0], "This call")
    assert "evaluation protocol" in brief and "no longer comparable" in brief
    # the grid sentence only over a parameter list that has a hard-coded grid (relay s9 ln 010)
    assert ('listed as "a grid hard-coded in a loop"' in brief) == (
        "(a grid hard-coded in a loop) [" in brief
    )


def test_hard_coded_grids_are_listed_as_parameters():
    src = "EPOCHS = 30\nfor l2 in (0.0, 0.01, 0.1):\n    for lr in [0.01, 0.1]:\n        pass\nfor k in ('a', 'b'):\n    pass\n"
    lines = code_parameters({"exp.py": src})
    assert "l2 in (0.0, 0.01, 0.1) (a grid hard-coded in a loop) [exp.py]" in lines
    assert "lr in [0.01, 0.1] (a grid hard-coded in a loop) [exp.py]" in lines
    assert not any(line.startswith("k in") for line in lines)


def test_the_ablation_proposer_sees_what_the_idea_asks_and_what_is_measured(run, tmp_path):
    ablate = [r for r in _records(run, "ideas") if r["label"] == "ablate"]
    assert ablate
    idea = Path(__file__).resolve().parents[1] / "examples" / "label_noise" / "idea.md"
    asked = next(ln for ln in idea.read_text().splitlines() if "Ablations" in ln).strip(" -")
    assert f"The research idea asks for these ablations: {asked}" in _section(ablate[0], "This call")
    j = Journal(tmp_path / "journal.jsonl")
    node = j.new_node(stage=3, operation="improve")
    metrics = (
        Metric("val_accuracy", 0.86),
        Metric("val_accuracy[ablation:no_bias]", 0.875),
        Metric("val_loss", 0.6, "minimize"),
    )
    node = j.update(node.id, status="good", metric=metrics[0], metrics=metrics)
    assert measured_ablations(node) == "its metrics val_accuracy[ablation:no_bias]=0.875"


# 6 -------------------------------------------------------------------------------------------


def test_the_ablation_plan_header_is_true_in_each_case(run, tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    done = j.new_node(stage=4, operation="ablate", idea="ablation no_bias")
    j.update(done.id, status="good", metric=Metric("acc", 0.8))
    new = ablation_plan(
        j.snapshot(), 4, ["ablation no_bias"], current="ablation label noise", iterations_left=1
    )
    assert "0 still to do" not in new[0]
    assert "none still to do: this node runs a new ablation, proposed since (ablation label noise)" in new[0]
    last = ablation_plan(
        j.snapshot(), 4, ["ablation no_bias", "ablation x"], current="ablation x", iterations_left=0
    )
    assert "this node runs the last of them" in last[0] and "still to do" not in last[0]
    # in the run: the first ablation node is told how many nodes the stage may create after it
    cap = Config.model_validate({"agent": {"stages": {"stage4_max_iters": 2}}}).agent.stages.stage4_max_iters
    nodes = journal_nodes(run)
    firsts = [r for r in _records(run, "phase2") if nodes[r["node_id"]]["operation"] == "ablate"]
    header = _section(firsts[0], "Ablation plan").splitlines()[0]
    assert f"the stage may create {cap - 1} more node(s) after this one" in header, header


# 7 -------------------------------------------------------------------------------------------


def test_the_plotting_instructions_say_file_is_the_plain_name(run):
    plots = _records(run, "phase5_plot")
    assert plots
    rules = _section(plots[0], "Instructions")
    assert 'declares "file": "loss.png"' in rules and "`node_plots/loss.png`" in rules
    for nid in {r["node_id"] for r in plots}:
        record = json.loads((RunPaths(run).node(nid).file("plots.json")).read_text())
        assert all("/" not in f["file"] for f in record["figures"])


# 8 -------------------------------------------------------------------------------------------


def test_the_memory_protocol_is_one_compact_block(run):
    cfg = Config().memory
    free = protocol_instructions(cfg)
    assert len(free) < 1400
    for op in ("core_set", "core_delete", "archival_write", "archival_search", "recall_search", "expand"):
        assert op in free
    code = [r for r in _records(run, "phase2") if _section(r, "Memory protocol")]
    assert code
    for r in code:
        block = _section(r, "Memory protocol")
        # the short form (a schema call: the schema gives the fields): every operation named once
        assert len(block) < 900 and block.count("core_set") == 1


def test_a_c_programs_array_of_settings_is_a_parameter():
    """The capable model's C program swept ``int tiles[5] = {16, 32, 64, 128, 0};`` and the
    proposer's parameter list did not name it: an array of values in C is a parameter."""
    from ai_scientist.treesearch.parameters import code_parameters

    src = "#define N 1024\nint main(void) {\n    int tiles[5] = {16, 32, 64, 128, 0};\n    return 0;\n}\n"
    lines = code_parameters({"mm.c": src})
    assert "tiles = {16, 32, 64, 128, 0} (an array of values in the code) [mm.c]" in lines
    assert "N = 1024 [mm.c]" in lines


def test_a_childs_code_call_shows_its_parents_commands_and_run_as_text(run):
    """A child restates its build and run commands: "Current code" ends with its parent's; the
    parent's run is plain text, every command with its exit code and duration (not a JSON string
    with escaped line breaks)."""
    nodes = journal_nodes(run)
    checked = 0
    for r in _records(run, "phase2"):
        node = nodes[r["node_id"]]
        if not node.get("parent_id") or node["operation"] == "seed_eval":
            continue
        parent = node["parent_id"]
        answer = json.loads((run / "nodes" / parent / "code_answer.json").read_text())
        code = _section(r, "Current code")
        assert "### commands (build, then run)" in code
        for cmd in answer["run"]["commands"]:
            assert f"run: {cmd}" in code
        outputs = json.loads((run / "nodes" / parent / "run.json").read_text())["outputs"]
        shown = _section(r, "Execution output")
        assert '"stdout_tail"' not in shown
        for o in outputs:
            assert f"$ {o['command']}  (exit {o['exit_code']}" in shown
        last = outputs[-1]["stdout_tail"].strip().splitlines()[-1]
        assert last in shown
        checked += 1
    assert checked >= 3


def test_run_result_prints_a_metric_without_float_noise():
    """0.9133000000000001 is shown 0.9133 (12 significant digits: the noise of binary floats goes,
    every digit a program printed stays); integers and strings as they are."""
    from ai_scientist.phases.evidence import run_result_text

    metrics = [
        {"name": "acc", "value": 0.9133000000000001, "direction": "maximize", "dataset": None},
        {"name": "se", "value": 0.0002236067977499543, "direction": "minimize", "dataset": None},
        {"name": "n", "value": 123456789012, "direction": "maximize", "dataset": None},
    ]
    text = run_result_text(None, metrics)
    assert "- acc = 0.9133 (" in text and "- se = 0.00022360679775 (" in text
    assert "- n = 123456789012 (" in text


def test_plot_feedback_says_the_verdict_without_an_empty_reason(tmp_path, run_copy):
    """A critique whose reason is empty reads "Result judged valid." (not "valid:" and nothing)."""
    from ai_scientist.phases.plots import plot_feedback

    run = run_copy(tmp_path)
    node = next(
        p.parent for p in sorted(run.glob("nodes/*/vlm.json")) if json.loads(p.read_text()).get("critique")
    )
    vlm = json.loads((node / "vlm.json").read_text())
    vlm["critique"]["reason"] = ""
    (node / "vlm.json").write_text(json.dumps(vlm))
    text = plot_feedback(run, node.name)
    verdict = "valid" if vlm["critique"].get("valid") else "INVALID"
    assert f"Result judged {verdict}." in text and f"Result judged {verdict}:" not in text

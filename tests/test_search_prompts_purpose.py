"""Issue 28: every search call says what it is for and carries what its answer needs.

- a stage-2/3/4 code prompt states the stage's goal (one sentence, ``phases/stage_goal.j2``);
- drafts differ: a later draft sees the earlier ones (result or "running") and no two draft
  prompts of a stage are identical; a node sees what the other nodes of its stage did;
- a child's history carries every metric its parent measured;
- the idea proposer sees the parameters the code exposes and the stage's remaining budget;
- the memory protocol describes only the way the answer carries it.

Expectations come from the run's journal, events and the node's own files (its code, as run),
never from values typed here.
"""

from __future__ import annotations

import ast
import itertools
import json
import re

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, start_run, string_messages_text

from ai_scientist.base.config import Config
from ai_scientist.base.paths import CODE_FILE, RunPaths
from ai_scientist.base.templates import render
from ai_scientist.runloop.protocol import is_protocol_parameter
from ai_scientist.treesearch.journal import Journal
from ai_scientist.treesearch.node import Metric
from ai_scientist.treesearch.parameters import code_parameters
from ai_scientist.treesearch.tried import ablation_plan, sibling_table


def _section(record: dict, title: str) -> str | None:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", string_messages_text(record), re.S | re.M)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # FAST: two drafts (n0001 crashes), then every stage with at least one node
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("purpose"))
    assert code == 0
    return run_dir


def _code_prompts(run_dir, nodes):
    return [
        (r, nodes[r["node_id"]])
        for r in prompt_records(run_dir)
        if r["phase"] == "phase2"
        and r["node_id"] in nodes
        and nodes[r["node_id"]]["operation"] != "seed_eval"
    ]


def test_every_later_stage_code_prompt_states_the_stage_goal(run):
    nodes = journal_nodes(run)
    seen = set()
    for r, me in _code_prompts(run, nodes):
        goal = render("phases/stage_goal.j2", stage=me["stage"]).strip()
        assert goal, f"stage {me['stage']} has no goal sentence"
        brief = _section(r, "This call")
        # the goal sits with the stage's layers (cached across the stage's nodes), the idea in the brief
        stated = _section(r, "This stage's goal")
        assert stated is not None and goal in stated, (
            f"{me['id']} (stage {me['stage']}): no goal in\n{stated}"
        )
        assert goal not in (brief or ""), "the goal is said once"
        if me["idea"]:
            assert f"This node's idea: {me['idea']}" in brief
        seen.add(me["stage"])
    assert {2, 3, 4} <= seen, f"the run reached only stages {sorted(seen)}"


def test_draft_prompts_differ_and_a_later_draft_sees_the_earlier_ones(run):
    nodes = journal_nodes(run)
    evs = events(run)
    drafts = [(r, me) for r, me in _code_prompts(run, nodes) if me["operation"] == "draft"]
    assert len({me["id"] for _, me in drafts}) >= 2
    for (a, _), (b, _) in itertools.combinations(drafts, 2):
        assert a["messages"] != b["messages"], f"identical draft prompts: {a['node_id']} {b['node_id']}"
    first, second = sorted({me["id"] for _, me in drafts})[:2]
    brief = _section(next(r for r, me in drafts if me["id"] == second), "Other nodes of this stage")
    row = next((line for line in brief.splitlines() if f"| {first} |" in line), None)
    assert row is not None, f"the second draft's prompt does not name {first}:\n{brief}"
    # what the first draft was when the second was selected: finished (its result) or in flight
    selected = next(e for e in evs if e["type"] == "node_selected" and e["node_id"] == second)
    earlier = nodes[first]
    if first in (selected.get("waiting") or []):
        assert "running" in row, row
    elif earlier["status"] == "good":
        assert f"{earlier['metric']['name']}={earlier['metric']['value']:.6g}" in row, row
    else:
        assert "failed:" in row and earlier["error"].split()[0] in row, row
    assert "different approach" in brief


def test_a_childs_history_carries_every_metric_of_its_parent(run):
    nodes = journal_nodes(run)
    checked = 0
    for r, me in _code_prompts(run, nodes):
        parent = nodes.get(me["parent_id"]) if me["parent_id"] else None
        if parent is None or parent["status"] != "good":
            continue
        history = _section(r, "History so far")
        if history is None:  # the budget may drop the history; then nothing to check here
            continue
        for m in parent["metrics"]:
            assert f"{m['name']}={m['value']:.6g}" in history, f"{me['id']}: {m['name']} missing"
        checked += 1
    assert checked >= 2


def _module_constants(source: str) -> dict[str, str]:
    """The test's own reading of a Python file: top-level UPPER_CASE names bound to literals."""
    out = {}
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            t = stmt.targets[0]
            if isinstance(t, ast.Name) and t.id.isupper():
                try:
                    ast.literal_eval(stmt.value)
                except ValueError:
                    continue
                out[t.id] = ast.unparse(stmt.value)
    return out


def test_the_idea_proposer_sees_the_codes_parameters_and_the_stage_budget(run):
    props = [r for r in prompt_records(run) if r["phase"] == "ideas"]
    assert props
    for r in props:
        brief = _section(r, "This call")
        best = re.search(r"Best node so far: (n\d{4}):", brief).group(1)
        answer = json.loads(RunPaths(run).node(best).file(CODE_FILE).read_text())
        files = {f["path"]: f["content"] for f in answer["files"]}
        constants = {k: v for src in files.values() for k, v in _module_constants(src).items()}
        envs = {n for src in files.values() for n in re.findall(r"environ\.get\(\"(\w+)\"", src)}
        assert constants and envs, "the scripted experiment has constants and reads SEED"
        for name, value in constants.items():
            assert f"{name} = {value}" in brief, f"{name} missing from\n{brief}"
        for name in envs:
            assert f"{name} (environment variable" in brief
        # the data / noise / seed knobs are marked as the evaluation protocol, the method's are not
        marked = set()
        for name in [*constants, *envs]:
            line = next(ln for ln in brief.splitlines() if ln.startswith(f"- {name} "))
            if "evaluation protocol: keep" in line:
                marked.add(name)
        assert marked == {n for n in [*constants, *envs] if is_protocol_parameter(n)}
        assert marked and marked != {*constants, *envs}
        stage = int(r["stage"].removeprefix("stage"))
        assert "The stage may create" in brief and f"agent.stages.stage{stage}_max_iters" not in brief
        # its design (the plan's goal and strategy): the components an idea can change or remove
        plan_file = RunPaths(run).node(best).file("plan.json")
        plan = json.loads(plan_file.read_text()) if plan_file.exists() else {}
        if not plan.get("goal_summary"):
            plan = answer
        assert plan.get("goal_summary"), "the scripted plan states a goal"
        assert f"Its design: goal: {plan['goal_summary'][:80]}" in brief
        # its build and run commands, whole: what a command-line argument stands for
        assert (answer.get("run") or {}).get("commands")
        for part in ("build", "run"):
            for cmd in (answer.get(part) or {}).get("commands") or []:
                assert f"- {part}: {cmd}" in brief
        # the schema allows as many ideas as the text asks for
        at_most = re.search(r"propose at most (\d+)", brief)
        schema = r["params"]["schema"]["properties"]["ideas"]
        assert schema["maxItems"] == (int(at_most.group(1)) if at_most else 1), (brief, schema)


def test_the_memory_protocol_describes_only_the_answer_field_in_schema_calls(run):
    checked = 0
    for r in prompt_records(run):
        protocol = _section(r, "Memory protocol")
        if protocol is None:
            continue
        assert r["params"].get("schema"), "a free-text call: its protocol is the block's"
        assert '"memory_update" field' in protocol
        assert "<memory_update>" not in protocol, f"{r['node_id']} {r['phase']}: both ways described"
        checked += 1
    assert checked >= 3


def test_no_plan_points_at_a_handle(run):
    for r in prompt_records(run):
        plan = _section(r, "Plan")
        if plan is not None:
            assert "handle" not in plan and "_preview" not in plan, plan


class InventsAPackage(ExampleResponder):
    """The first plan of n0001 lists a package the sandbox does not have."""

    invented = False

    def _phase0(self, text, ctx):
        answer = json.loads(super()._phase0(text, ctx))
        if ctx.node_id == "n0001" and not self.invented:
            self.invented = True
            answer["dependencies"]["pip"] = ["pip-1.2.0"]
        return json.dumps(answer)


def test_prompt_mode_lists_the_packages_once_and_refuses_an_invented_one(tmp_path):
    """In prompt mode the schema is prompt text: its pip list is plain names (the environment
    layer lists the packages), and a name the probe did not find is refused for the repair round.
    (A planning call of its own: the scripted answers merge a plan only into a native schema.)"""
    from pipeline_support import run_args

    from ai_scientist.cli.commands import execute, setup_run
    from ai_scientist.llm.scripted_backend import ScriptedBackend

    responder = InventsAPackage()
    args = run_args(tmp_path, "agent.stages.stage1_max_iters=2", "agent.merge_calls=false")
    run_, resources = setup_run(args)
    code = execute(run_, resources=resources, backend=ScriptedBackend(responder, native_schema=False))
    assert code == 0 and responder.invented
    probed = json.loads((run_.dir / "environment.json").read_text())["sandbox"]["python"]["packages"]
    assert probed
    records = [r for r in prompt_records(run_.dir) if r["phase"] == "phase0"]
    assert records
    for r in records:
        fmt = _section(r, "Response format")
        schema = json.loads(re.search(r"^\{.*\}$", fmt, re.M).group(0))
        pip = schema["properties"]["dependencies"]["properties"]["pip"]
        assert "enum" not in pip["items"], "the package list went into the prompt a second time"
    n1 = [r for r in records if r["node_id"] == "n0001"]
    assert len(n1) >= 2 and "pip-1.2.0 not installed in the sandbox" in string_messages_text(n1[1])
    plan = json.loads((run_.dir / "nodes" / "n0001" / "plan.json").read_text())
    assert plan["dependencies"]["pip"] == []


# ---------------------------------------------------------------- units --


def test_code_parameters_of_a_c_program_with_compile_time_tiles():
    src = (
        "#include <stdlib.h>\n#define TILE_I 64\n#define TILE_J 32 // cache block\n"
        "static const int N = 1024;\n"
        "int main(int argc, char **argv) {\n  int reps = atoi(argv[1]);\n"
        '  const char *t = getenv("OMP_NUM_THREADS");\n  return 0;\n}\n'
    )
    lines = code_parameters({"mm.c": src})
    assert lines[:3] == ["TILE_I = 64 [mm.c]", "TILE_J = 32 [mm.c]", "N = 1024 [mm.c]"]
    assert "OMP_NUM_THREADS (environment variable) [mm.c]" in lines
    assert "argv[1] (command-line argument) [mm.c]" in lines
    assert not any("lr" in line for line in lines)


def test_code_parameters_of_python_options_tuples_and_a_bound():
    src = (
        "import argparse, os\nEPOCHS, LR = 30, 0.05\nname = 'x'\n"
        "p = argparse.ArgumentParser()\np.add_argument('-b', '--batch-size', type=int, default=32)\n"
        "SEED = int(os.environ.get('SEED', '0'))\n"
    )
    lines = code_parameters({"exp.py": src})
    assert "EPOCHS = 30 [exp.py]" in lines and "LR = 0.05 [exp.py]" in lines
    assert "--batch-size (command-line option, default 32) [exp.py]" in lines
    assert "SEED (environment variable, default '0') [exp.py]" in lines
    assert not any(line.startswith("name") for line in lines)
    many = "\n".join(f"K{i} = {i}" for i in range(50))
    bounded = code_parameters({"k.py": many}, limit=10)
    assert len(bounded) == 11 and bounded[-1] == "... 40 more parameters not listed"


def _journal(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    a = j.new_node(stage=1, operation="draft")
    error = 'phase4: run command 1 failed (exit 1)\nstderr tail:\n  File "/tmp/x/experiment.py", line 3\nNameError: f'
    j.update(a.id, status="buggy", error=error)
    b = j.new_node(stage=1, operation="draft")
    j.update(
        b.id,
        status="good",
        summary="SGD baseline",
        metric=Metric("acc", 0.8),
        metrics=(Metric("acc", 0.8), Metric("timer_res_ms", 4.0, "minimize")),
    )
    c = j.new_node(stage=1, operation="draft")  # still running, its code written
    j.update(c.id, status="running", summary="draft: a second program")
    return j, a, b, c


def test_sibling_table_rows_and_exclusions(tmp_path):
    j, a, b, c = _journal(tmp_path)
    table = sibling_table(j.snapshot(), 1, node_id=c.id)
    rows = table[1:]
    assert [re.match(r"\| (n\d{4})", r).group(1) for r in rows] == [a.id, b.id]  # creation order
    # a failure in one line: where it failed and its cause, not the traceback's paths
    assert "failed: phase4: run command 1 failed (exit 1) ... NameError: f |" in rows[0]
    assert "acc=0.8; timer_res_ms=4" in rows[1] and "SGD baseline" in rows[1]
    d = j.new_node(stage=1, operation="debug", parent_id=a.id)
    view = j.snapshot()
    assert all(f"| {a.id} |" not in r for r in sibling_table(view, 1, node_id=d.id, parent_id=a.id)[1:])
    # a running node: what it was created for, never its summary (written at a timing-dependent
    # moment: a replay must see the same table)
    shown = "\n".join(sibling_table(view, 1, node_id=d.id, parent_id=a.id))
    assert f"| {c.id} | draft | - | running (no result yet) | - |" in shown and "second program" not in shown
    assert sibling_table(view, 2) == []


def test_ablation_plan_says_what_will_not_run(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    j.new_node(stage=4, operation="ablate", idea="ablation no_bias")
    plan = ablation_plan(
        j.snapshot(), 4, ["ablation no_bias", "ablation a", "ablation b", "ablation c"], iterations_left=1
    )
    assert (
        "3 still to do; the stage may create 1 more node(s)" in plan[0]
        and "2 planned ablation(s) will not run" in plan[0]
    )


def test_protocol_block_mode_is_unchanged_for_free_text_answers():
    from ai_scientist.memory.protocol import protocol_instructions

    text = protocol_instructions(Config().memory)
    assert "<memory_update>" in text and '"memory_update" field' not in text

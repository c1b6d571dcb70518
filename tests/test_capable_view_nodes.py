"""Issue 28, relay run s4's "still missing" (node-level calls): facts the run had and the prompt
did not show, read from the prompt logs and files of one scripted run (FAST, three stage-3 nodes)
whose experiment

- calls its label-noise level NOISE_RATE (a name whose "rate" once made it a method knob);
- writes ten per-epoch loss lists, and a child one more (its new condition's) after them;
- reports, in its tuning nodes, values that differ only past the 6th significant digit;
- has its stage-1 best node's plotting fail, so the stage-2 children inherit no parent script;
- has three stage-3 improve nodes with the same program (their seed re-runs repeat one draw).

Each test derives what the prompts must say from the run's files (code answers, data files,
journal, events), never from constants of its own.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run

EXTRA_LOSSES = """
import json as _json
with open("results.json") as _fh:
    _res = _json.load(_fh)
for _k in range(10):
    _res[f"cond{{_k}}_loss"] = [v * (1 + _k / 10) for v in _res["train_loss"]]
{child}
with open("results.json", "w") as _fh:
    _json.dump(_res, _fh)
"""
# a tuning node's value, moved past the 6th significant digit by its learning rate
TINY_GAP = """
with open("metrics.json") as _fh:
    _m = _json.load(_fh)
_m["metrics"][0]["value"] = 0.8 + LR * 1e-6
with open("metrics.json", "w") as _fh:
    _json.dump(_m, _fh)
"""
BROKEN_PLOT = "raise SystemExit('plotting failed on purpose')\n"


# stage-3 research ideas that change no setting of the template (the program stays the parent's)
RE_MEASURE_IDEAS = [
    "re-measure the tuned baseline: measures its run-to-run spread",
    "log every epoch's losses: measures when the flipped labels are fitted",
    "report the training accuracy beside the validation one: measures the generalisation gap",
]


class CapableViewResponder(ExampleResponder):
    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        op = re.search(r"^Operation: (\w+)$", text, re.M)
        for f in answer["files"]:
            if f["path"] == "experiment.py" and "results.json" in f["content"]:
                content = f["content"].replace("NOISE", "NOISE_RATE")
                child = ""
                if op and op.group(1) in ("tune", "improve", "ablate"):
                    child = f'_res["{op.group(1)}_extra_loss"] = [0.5 * v for v in _res["train_loss"]]'
                content += EXTRA_LOSSES.format(child=child)
                if op and op.group(1) == "tune":
                    content += TINY_GAP
                f["content"] = content
        return json.dumps(answer)

    def _ideas(self, text: str, ctx: Any) -> str:
        if ctx.label == "research":  # no setting named: each improve node repeats its parent's draw
            return json.dumps({"ideas": RE_MEASURE_IDEAS})
        return super()._ideas(text, ctx)

    def _phase5_plot(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase5_plot(text, ctx))
        if ctx.node_id == "n0002":  # the stage-1 best: every attempt fails
            answer["script"] = BROKEN_PLOT
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("capable_nodes"),
        "agent.stages.stage2_max_iters=3",
        "agent.stages.stage2_good_nodes=3",
        "agent.stages.stage3_max_iters=3",
        responder=CapableViewResponder(),
    )
    assert code == 0
    return run_dir


def _section(rec: dict, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", record_text(rec), re.S | re.M)
    return m.group(1) if m else ""


def _answer(run: Path, node_id: str) -> dict:
    return json.loads((run / "nodes" / node_id / "code_answer.json").read_text())


# 1 -------------------------------------------------------------------------------------------


def _data_constants(program: str) -> dict[str, str]:
    """The module constants the program passes to a data-generating call (a function of its own
    called with the random generator): name -> value as written."""
    tree = ast.parse(program)
    constants = {
        t.id: ast.get_source_segment(program, node.value) or ""
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id.isupper()
    }
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    used: dict[str, str] = {}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in own:
            args = [a.id for a in call.args if isinstance(a, ast.Name)]
            if "rng" in args:
                used.update({a: constants[a] for a in args if a in constants})
    return used


def test_the_protocol_keeps_every_constant_the_data_are_drawn_with(run):
    """NOISE_RATE, passed to the data generator, is in the evaluation protocol every later call
    of the stage sees, with its value."""
    protocol_node = next(ev["node_id"] for ev in events(run) if ev.get("type") == "eval_protocol")
    program = _answer(run, protocol_node)["files"][0]["content"]
    wanted = _data_constants(program)
    assert "NOISE_RATE" in wanted  # the experiment really draws its labels' noise with it
    shown = [_section(r, "Evaluation protocol") for r in prompt_records(run)]
    shown = [s for s in shown if s]
    assert shown
    for text in shown:
        for name, value in wanted.items():
            assert f"{name} = {value}" in text, (name, text)


# 2 -------------------------------------------------------------------------------------------


def test_idea_proposals_name_the_stage_and_its_goal(run):
    """Each idea proposal says the stage it plans for, with the goal the stage's code calls see
    (their "This stage's goal" layer)."""
    nodes = journal_nodes(run)
    goals: dict[int, str] = {}
    for rec in prompt_records(run):
        if rec["node_id"] != "run" and rec["phase"] == "phase2":
            goal = _section(rec, "This stage's goal").strip()
            if goal:
                goals.setdefault(nodes[rec["node_id"]]["stage"], goal)
    planned = [ev for ev in events(run) if ev.get("type") == "ideas_planned"]
    proposals = [r for r in prompt_records(run) if r["node_id"] == "run" and r["phase"] == "ideas"]
    assert len(proposals) == len(planned) >= 2
    for rec, ev in zip(proposals, planned, strict=True):
        assert rec["label"] == ev["kind"]
        assert goals[ev["stage"]] in _section(rec, "This call"), (ev["stage"], _section(rec, "This call"))


# 3 -------------------------------------------------------------------------------------------


def test_where_seeds_are_explained_a_seed_is_said_to_draw_new_data(run):
    """The program draws its data from SEED (its generator is seeded with it before the data are
    made): the code calls and the calls that see the seed noise say a seed is a new dataset and
    that conditions are compared within one."""
    program = _answer(run, "n0002")["files"][0]["content"]
    assert re.search(r"rng = random\.Random\(SEED\)\n\s+xtr, ytr = make\(rng", program)
    code = [r for r in prompt_records(run) if r["phase"] == "phase2"]
    noisy = [r for r in prompt_records(run) if "seed noise of" in _section(r, "Evaluation protocol")]
    assert code and noisy
    for rec in code:
        assert "data drawn from it make each seed a new dataset" in record_text(rec)
    for rec in noisy:
        text = _section(rec, "Evaluation protocol")
        assert "each seed is a new dataset: compare conditions within one run" in text
        # its own line: the code calls are told to keep the protocol, the judges what a change means
        judge = rec["phase"] in ("review", "phase5_plot", "phase5_vlm")
        closing = "A node that changed any of it" if judge else "Keep this protocol"
        assert f"not only the method's.\n{closing}" in text, rec["call_id"]


def test_judges_are_told_what_a_protocol_change_means_and_code_calls_to_keep_it(run):
    """A review, plotting call or figure critique writes no experiment: its protocol section says
    what a change of the protocol means for the judged node; only a code call is told to keep it
    (session 8: "Keep this protocol ..." reached the figure calls)."""
    judged = {"review", "phase5_plot", "phase5_vlm"}
    seen: dict[str, int] = {}
    for rec in prompt_records(run):
        text = _section(rec, "Evaluation protocol")
        if not text:
            continue
        seen[rec["phase"]] = seen.get(rec["phase"], 0) + 1
        if rec["phase"] in judged:
            assert "Keep this protocol" not in text, rec["call_id"]
            assert "is not comparable and is never ranked against the others" in text, rec["call_id"]
        elif rec["phase"] == "phase2":
            assert "Keep this protocol" in text and "A node that changed any of it" not in text, rec[
                "call_id"
            ]
    assert judged <= set(seen) and seen.get("phase2"), seen


class FixedSeedResponder(ExampleResponder):
    """The example's program with its seed fixed in the code: SEED is never read."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            f["content"] = f["content"].replace('int(os.environ.get("SEED", "0"))', "0")
        return json.dumps(answer)


def test_a_program_that_reads_no_seed_is_said_to_repeat_its_draw(tmp_path):
    """When the protocol node's program never reads SEED, the seed-noise line says its re-runs
    draw nothing new (not that each seed is a new dataset)."""
    code, run, _ = start_run(tmp_path, responder=FixedSeedResponder())
    assert code == 0
    noisy = [_section(r, "Evaluation protocol") for r in prompt_records(run)]
    noisy = [t for t in noisy if "seed noise of" in t]
    assert noisy
    for text in noisy:
        node = re.search(r"\((n\d{4})[,)]", text).group(1)  # the node that fixed the protocol
        program = _answer(run, node)["files"][0]["content"]
        assert "SEED" in program and "environ" not in program
        assert f"{node}'s program reads no SEED variable: its re-runs draw nothing new" in text
        assert "each seed is a new dataset" not in text


# 4 -------------------------------------------------------------------------------------------


def _working(run: Path, node_id: str) -> bool:
    plots = run / "nodes" / node_id / "plots.json"
    return plots.exists() and bool(json.loads(plots.read_text()).get("figures"))


def test_a_child_whose_parent_plotting_failed_gets_the_stage_latest_working_script(run):
    """A child's plotting call shows its parent's script when the parent's figures passed, else the
    script of the latest earlier node of its stage whose figures did (one worker: every earlier
    node had finished when it was scheduled), else none."""
    nodes = journal_nodes(run)
    assert not _working(run, "n0002")
    checked = {"parent": 0, "sibling": 0, "none": 0}
    for rec in prompt_records(run):
        nid = rec["node_id"]
        if rec["phase"] != "phase5_plot" or nid == "run" or not nodes[nid].get("parent_id"):
            continue
        node, parent = nodes[nid], nodes[nid]["parent_id"]
        if _working(run, parent):
            source, how = parent, "parent"
        else:
            earlier = [
                n
                for n in nodes.values()
                if n["id"] < nid
                and n["stage"] == node["stage"]
                and n["status"] == "good"
                and n["operation"] != "seed_eval"
                and _working(run, n["id"])
            ]
            source, how = (earlier[-1]["id"], "sibling") if earlier else (None, "none")
        shown = _section(rec, "Parent's plotting script")
        if source is None:
            assert not shown, nid
        else:
            script = (run / "nodes" / source / "workspace" / "plot_node.py").read_text()
            assert script.strip() in shown and f"node {source}" in shown, (nid, source)
        checked[how] += 1
    assert checked["sibling"] and checked["none"], checked


# 5 -------------------------------------------------------------------------------------------


def _loss_keys(path: Path) -> list[str]:
    data = json.loads(path.read_text()) if path.exists() else {}
    return [k for k, v in data.items() if re.search(r"loss|error|residual", k, re.I) and isinstance(v, list)]


def test_a_review_shows_the_child_new_loss_lists(run):
    """A child's review shows the loss lists its parent's data do not have (its new condition's),
    however many the parent's are; the digest still shows no more lists than the first review's."""
    nodes = journal_nodes(run)
    reviews = [r for r in prompt_records(run) if r["phase"] == "review" and r["node_id"] != "run"]
    children = 0
    for rec in reviews:
        nid = rec["node_id"]
        own = _loss_keys(run / "nodes" / nid / "workspace" / "results.json")
        parent = nodes[nid].get("parent_id")
        if not parent or nodes[nid]["operation"] == "seed_eval":
            continue
        # compared with the nearest working ancestor's lists (a fix of a failed node: the node
        # that one started from)
        ref = parent
        while ref and nodes[ref]["status"] != "good" and nodes[ref].get("parent_id"):
            ref = nodes[ref]["parent_id"]
        old = set(_loss_keys(run / "nodes" / ref / "workspace" / "results.json"))
        new = [k for k in own if k not in old]
        if not new:
            continue
        text = _section(rec, "Run result")
        shown = re.findall(r"^- results\.json (\S+) \(", text, re.M)
        assert len(own) > len(shown)  # the digest had to choose
        # every new list is among those shown; the headline condition's first (relay s9 ln 002:
        # its curve was left out), the rest in the file's order (s9 ln 012: an order wrapping
        # from runs[14] to runs[0] hid which were left out)
        assert all(k in shown for k in new), (nid, " ".join(shown), new)
        rest = shown[1:] if shown and shown[0] not in new else shown
        assert rest == sorted(rest, key=own.index), (nid, " ".join(shown))
        children += 1
    assert children >= 3


# 6 -------------------------------------------------------------------------------------------


def _identity(run: Path, node: dict) -> str:
    d = run / "nodes" / node["id"]
    answer = json.loads((d / "code_answer.json").read_text())
    record = json.loads((d / "run.json").read_text())
    program = {k: answer.get(k) for k in ("files", "build", "run")}
    out = [(o.get("stdout_tail"), o.get("stderr_tail"), o.get("exit_code")) for o in record["outputs"]]
    blob = json.dumps([program, node.get("seed"), out, record.get("metrics")], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def test_the_seed_noise_counts_each_draw_once_and_is_one_figure_per_stage(run):
    """The noise estimate a stage's calls see pools the seed re-runs of the earlier stages, a
    re-run repeating another (same program, same SEED, same output) once; every call of the stage
    shows the same figure."""
    nodes = journal_nodes(run)
    z = yaml.safe_load((run / "config.resolved.yaml").read_text())["agent"]["multi_seed_eval"]["noise_z"]
    seeds = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"]
    ids = [_identity(run, n) for n in seeds]
    assert len(set(ids)) < len(ids)  # the improve nodes' re-runs really repeat a draw

    def expected(stage: int) -> str:
        groups: dict[str, list[float]] = {}
        seen: set[str] = set()
        for n, ident in zip(seeds, ids, strict=True):
            if n["stage"] < stage and ident not in seen:
                seen.add(ident)
                groups.setdefault(n["parent_id"], []).append(n["metric"]["value"])
        ss = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in groups.values() if len(v) >= 2)
        dof = sum(len(v) - 1 for v in groups.values() if len(v) >= 2)
        sigma = math.sqrt(ss / dof)
        # a sigma of fewer than 3 degrees of freedom is said to be rough (relay s6 mm)
        rough = f"rough: {dof} degree{'s' if dof != 1 else ''} of freedom, " if dof < 3 else ""
        # the figure, then the band (between them the line may say which node drives the pool:
        # tests/test_noise_s7.py)
        return f"sigma {sigma:.3g} ({rough}pooled standard deviation over the seed re-runs of " + (
            ", ".join(sorted(k for k, v in groups.items() if len(v) >= 2))
            + ("" if rough else f"; {dof} degrees of freedom")
            + f"\x00Two single-seed results closer than {z * sigma * math.sqrt(2):.3g}"
        )

    per_stage: dict[int, set[str]] = {}
    planned = iter(ev["stage"] for ev in events(run) if ev.get("type") == "ideas_planned")
    for rec in prompt_records(run):
        text = _section(rec, "Evaluation protocol")
        if "seed noise of" not in text:
            continue
        if rec["node_id"] == "run":
            stage = next(planned) if rec["phase"] == "ideas" else None
            if stage is None:
                continue
        else:
            stage = nodes[rec["node_id"]]["stage"]
        figure, band = expected(stage).split("\x00")
        assert figure in text and band in text.split(figure, 1)[1], (rec["node_id"], rec["phase"], stage)
        per_stage.setdefault(stage, set()).add(re.search(r"sigma [^ ]+", text).group(0))
    assert 4 in per_stage and all(len(v) == 1 for v in per_stage.values()), per_stage


# 7 -------------------------------------------------------------------------------------------


def test_a_table_tells_apart_values_that_differ_past_six_digits(run):
    """The tuning nodes' values differ at 1e-7: every table of them (the third tuning node's)
    shows as many distinct values as the nodes have."""
    nodes = journal_nodes(run)
    tuned = {
        n["id"]: n["metric"]["value"] for n in nodes.values() if n["operation"] == "tune" and n["metric"]
    }
    assert len(set(tuned.values())) >= 2 and len({f"{v:.6g}" for v in tuned.values()}) == 1
    tables = 0
    for rec in prompt_records(run):
        table = _section(rec, "Hyper-parameters tried")
        rows = {nid: re.search(rf"^\| {nid} \| [^|]*\| val_accuracy=(\S+)", table, re.M) for nid in tuned}
        rows = {nid: m.group(1) for nid, m in rows.items() if m}
        if len(rows) < 2:
            continue
        values = {tuned[nid] for nid in rows}
        assert len(set(rows.values())) == len(values), rows
        for nid, shown in rows.items():
            assert math.isclose(float(shown), tuned[nid], rel_tol=1e-7), (nid, shown)
        tables += 1
    assert tables


# 8 -------------------------------------------------------------------------------------------


def test_a_benchmark_protocol_speaks_of_inputs_not_of_data():
    """The evaluation protocol of a benchmark (its metric's name says so) asks to keep its inputs
    and problem sizes, with no dataset, split or label noise; a training run's keeps those words."""
    from ai_scientist.base.templates import render
    from ai_scientist.context.kinds import experiment_kinds

    base = {"node_id": "n0002", "parameters": [["N", "512"], ["SEED", "(from the environment)"]]}
    for metric, has_data in (("gflops", False), ("val_accuracy", True)):
        kinds = experiment_kinds([metric])
        text = render(
            "context/evaluation_protocol.j2",
            value={**base, "metric": [metric, "maximize", None], "kinds": kinds, "reference_code": "x"},
        )
        assert ("split" in text and "data generation" in text) is has_data, text
        assert ("inputs, problem sizes" in text) is not has_data, text

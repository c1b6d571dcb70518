"""Issue 28, relay run s9 ln (a capable model answering each request alone): the findings on
execution reviews and node plotting calls.

One scripted run whose experiment is the label-noise grid of the relay run: runs named by a format
string (``run(f"grid_l2={lam}_lr={lr}", ...)``), 18 runs with four per-epoch lists each, the
headline's grid cell in the middle of the list (runs[4]) tied on its value with other cells and
named by the file's own ``"headline"`` record, and a results table printed longer than the run
record keeps of stdout. Each test derives what the prompts must say from the run's files
(workspaces, exec records), never from constants of its own."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import prompt_records, record_text, start_run

from ai_scientist.base.nodedata import SETTING_NAME
from ai_scientist.base.paths import RunPaths

PROGRAM = """
import json, os
SEED = int(os.environ.get("SEED", "0"))
EPOCHS = 20
L2_GRID = [0.0, 0.01, 0.1, 1.0]
LR_GRID = [0.01, 0.1, 0.5]
HEAD_L2, HEAD_LR = 0.01, 0.1
SCHEDULE = "inv_epoch"
print("data: 200 training points, 2000 validation points, 20 % of the training labels flipped")
print("training 18 runs of logistic regression, " + str(EPOCHS) + " epochs each")
print("columns: run name, l2, lr0, schedule, final clean validation accuracy, final loss, flipped fit")
runs = []

def run(name, lam, lr, bias=True, schedule=SCHEDULE):
    final = 0.8715 if lam in (0.01, 0.1) and bias else round(0.85 + 0.001 * len(runs), 4)
    h = {"train_loss": [round(0.7 - 0.004 * e - lam * 0.01, 6) for e in range(EPOCHS)],
         "val_acc": [round(final - 0.001 * (EPOCHS - 1 - e), 6) for e in range(EPOCHS)],
         "train_acc": [round(0.7 + 0.001 * e, 6) for e in range(EPOCHS)],
         "lr": [round(lr / (1 + e), 8) for e in range(EPOCHS)]}
    r = {"name": name, "l2": lam, "lr0": lr, "schedule": schedule, "bias": bias,
         "final_val_acc": final, **h}
    runs.append(r)
    print(f"{name:34s} l2={lam:<5} lr0={lr:<5} {schedule:9s} val_acc={final:.4f} "
          f"train_loss={h['train_loss'][-1]:.4f} flipped_fit=0.125 seed={SEED} epochs={EPOCHS} "
          + " ".join(f"acc_ep{e}={v:.4f}" for e, v in enumerate(h["val_acc"][-5:], EPOCHS - 5)))
    return r

grid = {}
for lam in L2_GRID:
    for lr in LR_GRID:
        grid[(lam, lr)] = run(f"grid_l2={lam}_lr={lr}", lam, lr)
head = grid[(HEAD_L2, HEAD_LR)]
run("ablation_no_bias", HEAD_L2, HEAD_LR, bias=False)
run("ablation_no_l2_const", 0.0, HEAD_LR, schedule="const")
for lam in L2_GRID:
    run(f"const_lr_l2={lam}_lr={HEAD_LR}", lam, HEAD_LR, schedule="const")
with open("results.json", "w") as f:
    json.dump({"seed": SEED, "headline": {"l2": HEAD_L2, "lr0": HEAD_LR, "schedule": SCHEDULE},
               "runs": runs}, f)
with open("metrics.json", "w") as f:
    json.dump({"metrics": [{"name": "val_accuracy", "value": head["final_val_acc"],
                            "direction": "maximize", "dataset": "synthetic"}]}, f)
print(f"SUMMARY headline val_accuracy={head['final_val_acc']:.4f}")
"""


class GridResponder(ExampleResponder):
    """The example responder with the label-noise grid program as every node's experiment."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            if f["path"] == "experiment.py":
                f["content"] = PROGRAM
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("s9_views")
    code, run_dir, _ = start_run(
        root,
        "agent.stages.stage1_max_iters=1",
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        responder=GridResponder(),
    )
    assert code == 0
    return run_dir


def _records(run: Path, phase: str) -> list[tuple[dict, Path]]:
    """(prompt record, its node's directory) of every call of ``phase`` whose node wrote
    results.json."""
    out = []
    for rec in prompt_records(run):
        node = RunPaths(run).node(rec["node_id"])
        if rec.get("phase") == phase and (node.workspace / "results.json").is_file():
            out.append((rec, node.root))
    return out


def _expand(text: str) -> set[str]:
    """Key paths named by a "not shown" note: "runs[0-2, 5].lr" -> runs[0].lr ... runs[5].lr."""
    out: set[str] = set()
    for m in re.finditer(r"(\w+)\[([\d, -]+)\]((?:\.\w+)+)", text):
        for part in m.group(2).split(","):
            lo, _, hi = part.strip().partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                out.add(f"{m.group(1)}[{i}]{m.group(3)}")
    return out


def _section(text: str, start: str) -> list[str]:
    """The lines of the prompt's block that starts with the line beginning ``start``, up to the
    next blank line or block."""
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(start))
    out = []
    for line in lines[i + 1 :]:
        if not line.strip() or not (line.startswith("- ") or line.startswith("(")):
            break
        out.append(line)
    return out


def test_a_review_shows_the_headline_conditions_per_step_lists_first_and_names_the_rest(run):
    """Every execution review shows the per-step lists of the headline's condition — the run
    holding the headline value under the metric's name, told from the grid cells tied on it by
    the data file's own headline record — before any other, the others in file order, and names
    each list it does not show (relay s9 ln 006: the headline's val_acc curve was among "30 more
    such lists not shown"; 012: the lists started at runs[14] and wrapped to runs[0])."""
    checked = 0
    for rec, node in _records(run, "review"):
        data = json.loads((node / "workspace" / "results.json").read_text())
        metrics = json.loads((node / "workspace" / "metrics.json").read_text())["metrics"]
        value = metrics[0]["value"]
        want = data["headline"]
        holders = [
            i
            for i, r in enumerate(data["runs"])
            if math.isclose(r["final_val_acc"], value) and all(r.get(k) == v for k, v in want.items())
        ]
        assert len(holders) == 1, holders  # the file itself tells which run is the headline
        head = holders[0]
        tied = [i for i, r in enumerate(data["runs"]) if math.isclose(r["final_val_acc"], value)]
        assert len(tied) > 1  # the value alone does not tell
        steps = {
            f"runs[{i}].{k}"
            for i, r in enumerate(data["runs"])
            for k, v in r.items()
            if isinstance(v, list) and k != "train_loss"
        }
        text = record_text(rec)
        lines = _section(text, "Other per-step series")
        shown = [re.match(r"- results\.json (\S+)", line).group(1) for line in lines if line.startswith("- ")]
        # the headline's measured lists first (a setting's schedule, lr, is the last to get a
        # place: test_relay_s9_lead), shown as one group at the head
        own = [
            p for p in steps if p.startswith(f"runs[{head}].") and not SETTING_NAME.match(p.rsplit(".", 1)[1])
        ]
        prefix = f"runs[{head}]."
        group = list(itertools.takewhile(lambda p, prefix=prefix: p.startswith(prefix), shown))
        assert set(own) <= set(group), shown
        for line in lines[: len(group)]:
            assert data["runs"][head]["name"] in line and "the condition val_accuracy reports" in line, line
        rest = [(int(re.search(r"\[(\d+)\]", p).group(1)), p.rsplit(".", 1)[1]) for p in shown[len(group) :]]
        # the others in file order: by run, then by the record's own key order
        keys = list(data["runs"][0])
        assert rest == sorted(rest, key=lambda x: (x[0], keys.index(x[1]))), rest
        note = next(line for line in lines if "more such lists not shown" in line)
        named = _expand(note)
        assert int(re.search(r"\((\d+) more", note).group(1)) == len(steps) - len(shown)
        assert named == steps - set(shown), sorted(named ^ (steps - set(shown)))
        checked += 1
    assert checked >= 2


def test_a_review_keeps_a_cut_results_table_whole(run):
    """When the run record cut a command's stdout inside a results table, the review's output
    still holds every row of that table as the command's exec record has it, and says how many
    lines before it are left out (relay s9 ln 012: the grid's first cells were cut)."""
    from ai_scientist.phases.evidence import RECORDED_TAIL_CHARS

    checked = 0
    for rec, node in _records(run, "review"):
        run_json = json.loads((node / "run.json").read_text())
        tail = run_json["outputs"][0]["stdout_tail"]
        exec_rec = next(
            json.loads(p.read_text())
            for p in sorted((node / "exec").glob("*_phase4_run1.json"), reverse=True)
        )
        full = exec_rec["stdout"]
        assert len(tail) >= RECORDED_TAIL_CHARS and len(full) > len(tail)  # the record cut it
        data = json.loads((node / "workspace" / "results.json").read_text())
        rows = [line for line in full.splitlines() if line.split(" ")[0] in {r["name"] for r in data["runs"]}]
        assert rows[0] not in tail  # the cut was inside the table
        text = record_text(rec)
        output = text[
            text.index("[stdout") : text.index("## Run result") if "## Run result" in text else None
        ]
        for row in rows:
            assert row in output, row
        before = full[: full.index(rows[0])].splitlines()
        assert f"{len(before)} earlier lines not shown" in output
        checked += 1
    assert checked >= 2


def test_a_plotting_call_lists_the_run_names_and_the_lines_that_build_them(run):
    """Every node plotting call lists the values of the runs' name field (all of them here: few
    and short) beside the other string fields, and shows the program lines whose format strings
    build those names (relay s9 ln 007, 013, 019, 023: the names were left to guess)."""
    checked = 0
    for rec, node in _records(run, "phase5_plot"):
        data = json.loads((node / "workspace" / "results.json").read_text())
        names = [r["name"] for r in data["runs"]]
        text = record_text(rec)
        values = next(
            line for line in text.splitlines() if line.startswith("The values of the string fields")
        )
        field = next(p for p in values.split("; ") if p.split(": ")[0].endswith("name"))
        assert field.split(": ", 1)[1].split(", ") == list(dict.fromkeys(names)), field
        program = (node / "workspace" / "experiment.py").read_text().splitlines()
        builders = [(i + 1, line) for i, line in enumerate(program) if re.search(r'run\(f"', line)]
        assert builders
        for number, line in builders:
            assert re.search(rf"^\s*{number}\| {re.escape(line)}$", text, re.MULTILINE), line
        checked += 1
    assert checked >= 1

"""What a node's plotting call and its figure critique see (issue 28, relay s7 mm2 and ln2).

One scripted run of a benchmark-like program (a ~12 kB Python matrix-multiplication timing whose
data carry special values: ``"tile": 0`` for the unblocked kernel, ``tile = N`` for no blocking,
``"best_s": null`` for a kernel whose result was wrong; a long plan strategy; stage-3 nodes write
their data under another name), default budget. Every expectation is read from the run's files —
each node's program (``code_answer.json``), its data files, its plan, its ``run.json``, the run's
``environment.json``, the source node's plotting script — and checked against the prompt logs,
whose ``messages`` are exactly what was sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import _IDEA, _OP, ExampleResponder
from pipeline_support import content_text, events, prompt_records, start_run

from ai_scientist.base.artifacts import RunRecord, read_artifact
from ai_scientist.context.kinds import experiment_kinds, shows_machine

SIZE = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.stages.stage2_good_nodes=1",
    "agent.multi_seed_eval.num_seeds=1",
    "agent.plots.enabled=true",
    "agent.plots.max_figures=3",
]

# the strategy is longer than the tables' short form (500 characters) and says what a null means
STRATEGY = (
    "One Python program times a naive triple loop and a blocked i-k-j kernel on random N x N "
    "matrices drawn from SEED. Every kernel is first checked against the naive result; a kernel "
    "whose result is wrong is not timed and is written with best_s null. The tiles swept are 8 "
    "and 16, and tile = N is run as the no-blocking ablation. Each timing is the best of three "
    "runs after a warm-up, with time.perf_counter. The per-kernel records go to results.json "
    "and a CSV copy; the headline is the blocked kernel's best speed-up over naive. A deliberately "
    "wrong kernel is kept as a control that the check works. Its record must show best_s null, "
    "never a time."
)

PROGRAM = """import csv
import json
import os
import time
import random

SEED = int(os.environ.get("SEED", "0"))
N = 40  # the matrix size
TILES = [8, 16]
NOTE = {note!r}
{helpers}

def matmul_naive(a, b, n, tile):
    c = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            c[i][j] = sum(a[i][k] * b[k][j] for k in range(n))
    return c


def matmul_blocked(a, b, n, tile):
    c = [[0.0] * n for _ in range(n)]
    for ii in range(0, n, tile):
        for kk in range(0, n, tile):
            for i in range(ii, min(ii + tile, n)):
                for k in range(kk, min(kk + tile, n)):
                    aik = a[i][k]
                    row = b[k]
                    ci = c[i]
                    for j in range(n):
                        ci[j] += aik * row[j]
    return c


def matmul_wrong(a, b, n, tile):
    return [[0.0] * n for _ in range(n)]


rng = random.Random(SEED)
A = [[rng.random() for _ in range(N)] for _ in range(N)]
B = [[rng.random() for _ in range(N)] for _ in range(N)]
REF = matmul_naive(A, B, N, 0)


def run_one(kernel, fn, tile):
    c = fn(A, B, N, tile)
    ok = max(abs(c[i][j] - REF[i][j]) for i in range(N) for j in range(N)) < 1e-9
    best = None
    if ok:
        best = min(_timed(fn, tile) for _ in range(3))
    # a wrong kernel is not timed: best_s and gflops stay null
    return {{"kernel": kernel, "tile": tile, "correct": ok, "best_s": best,
            "gflops": (2 * N ** 3 / best / 1e9) if best else None}}


def _timed(fn, tile):
    t0 = time.perf_counter()
    fn(A, B, N, tile)
    return time.perf_counter() - t0


runs = [run_one("naive", matmul_naive, 0)]  # tile 0: the unblocked kernel
runs += [run_one("blocked", matmul_blocked, t) for t in TILES]
runs.append(run_one("blocked", matmul_blocked, N))  # tile = N: no blocking (the ablation)
runs.append(run_one("wrong", matmul_wrong, 0))  # a control: its result is wrong, never timed
with open({data!r}, "w") as fh:
    json.dump({{"n": N, "seed": SEED, "runs": runs}}, fh)
with open("timings.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["kernel", "tile", "best_s"])
    for r in runs:
        w.writerow([r["kernel"], r["tile"], r["best_s"]])
naive = runs[0]["best_s"]
best_blocked = min(r["best_s"] for r in runs if r["kernel"] == "blocked" and r["tile"] < N)
metrics = [
    {{"name": "speedup_blocked", "value": naive / best_blocked, "direction": "maximize", "dataset": "random_n40"}},
    {{"name": "gflops_naive", "value": runs[0]["gflops"], "direction": "maximize", "dataset": "random_n40"}},
]
with open("metrics.json", "w") as fh:
    json.dump({{"metrics": metrics}}, fh)
print("speedup_blocked", naive / best_blocked)
"""


def _helpers(n: int = 30) -> str:
    """About 9 kB of helper code no data file depends on: what a plotting call need not read."""
    return "".join(
        f'''
def moving_stats_{i}(values, window={i % 5 + 2}):
    """Moving mean, minimum and maximum of block {i} over a window of {i % 5 + 2} values."""
    out = []
    for start in range(0, max(0, len(values) - window + 1)):
        chunk = values[start : start + window]
        out.append((sum(chunk) / len(chunk), min(chunk), max(chunk)))
    return out
'''
        for i in range(n)
    )


# the plotting script: PIL (fast), one bar per timed record; it names its data file by a
# quoted name only when it is results.json (other nodes' data it finds by a glob pattern)
PLOT = """
import glob, json, os
from PIL import Image, ImageDraw
path = "results.json" if os.path.exists("results.json") else sorted(glob.glob("*sweep*"))[0]
runs = [r for r in json.load(open(path))["runs"] if r["best_s"] is not None]
W, H, M = 480, 320, 40
img = Image.new("RGB", (W, H), "white")
d = ImageDraw.Draw(img)
d.line([(M, M), (M, H - M), (W - M, H - M)], fill="black", width=2)
top = max(r["best_s"] for r in runs) or 1.0
for i, r in enumerate(runs):
    x = M + 10 + i * 60
    d.rectangle([x, H - M - r["best_s"] / top * (H - 2 * M), x + 40, H - M], fill=(31, 119, 180))
d.text((W // 2 - 20, H - M + 10), "kernel", fill="black")
img.save("node_plots/timings.png")
"""


class FigureResponder(ExampleResponder):
    """The example's answers with the benchmark above: stage-3 research nodes (operation
    improve) write their data as ``alt_sweep.json``, which the stage's plotting script does not
    name; every plan carries :data:`STRATEGY`."""

    def _phase0(self, text: str, ctx: Any) -> str:
        plan = json.loads(super()._phase0(text, ctx))
        plan["goal_summary"] = "Measure the blocked kernel's speed-up over the naive one."
        plan["implementation_strategy"] = STRATEGY
        return json.dumps(plan)

    def _with_plan(self, code_answer: str, text: str, ctx: Any) -> str:
        answer = json.loads(super()._with_plan(code_answer, text, ctx))
        answer["implementation_strategy"] = STRATEGY
        return json.dumps(answer)

    def _phase2(self, text: str, ctx: Any) -> str:
        op_m, idea_m = _OP.search(text), _IDEA.search(text)
        op = op_m.group(1) if op_m else "draft"
        note = f"{op}: {idea_m.group(1).strip() if idea_m else 'baseline'} ({ctx.node_id})"
        data = "alt_sweep.json" if op == "improve" else "results.json"
        program = PROGRAM.format(note=note, helpers=_helpers(), data=data)
        return json.dumps(
            {
                "summary": note,
                "files": [{"path": "bench.py", "content": program, "encoding": "utf-8"}],
                "build": {"language": "python", "commands": []},
                "run": {"commands": ["/usr/bin/python3 bench.py"], "expected_outputs": ["metrics.json"]},
            }
        )

    def _exec_review(self, text: str, ctx: Any) -> str:
        return json.dumps({"findings": "ran cleanly", "remarks": "", "measurement": "", "is_bug": False})

    def _phase5_plot(self, text: str, ctx: Any) -> str:
        return json.dumps(
            {"script": PLOT, "figures": [{"file": "timings.png", "caption": "Best time per kernel."}]}
        )

    def _phase5_vlm(self, text: str, ctx: Any) -> str:
        return json.dumps(
            {"shows": "bars", "problems": ["no tick labels"], "valid": True, "reason": "plausible"}
        )


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("s8_figures"), *SIZE, responder=FigureResponder())
    assert code == 0, [e for e in events(run_dir) if e["type"] in ("internal_error", "node_failed")]
    return run_dir


def _text(rec: dict) -> str:
    return "\n".join(content_text(m.get("content")) for m in rec["messages"])


def _records(run_dir: Path, phase: str) -> list[dict]:
    return [r for r in prompt_records(run_dir) if r.get("phase") == phase]


def _program(node_dir: Path) -> str:
    files = json.loads((node_dir / "code_answer.json").read_text())["files"]
    return "\n".join(f["content"] for f in files)


def _data_files(node_dir: Path) -> list[str]:
    ws = node_dir / "workspace"
    return sorted(
        p.name
        for p in ws.iterdir()
        if p.is_file() and p.suffix in (".json", ".csv") and p.name != "metrics.json"
    )


def _section(text: str, title: str) -> str:
    """The body of the prompt's ``## title`` section ("" without one)."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return m.group(1).strip() if m else ""


# ------------------------------------------------- 1. what the data mean --


def test_plotting_prompts_carry_the_lines_that_define_the_data(run):
    """The lines of the node's program naming each data file, writing a field of its records,
    naming one of its string values (the call that runs a condition, with its tile argument) and
    defining the headline metric are in the prompt — with the lines around them (the comment
    saying tile 0 is the unblocked kernel sits on the line that runs it)."""
    recs = _records(run, "phase5_plot")
    assert recs
    for rec in recs:
        node_dir = run / "nodes" / rec["node_id"]
        text = _text(rec)
        program = _program(node_dir).splitlines()
        data = json.loads((node_dir / "workspace" / _data_files(node_dir)[0]).read_text())
        values = {r["kernel"] for r in data["runs"]}
        keys = {k for r in data["runs"] for k in r}
        headline = json.loads((node_dir / "workspace" / "metrics.json").read_text())["metrics"][0]["name"]
        wanted = [
            ln
            for ln in program
            if any(f'"{f}"' in ln or f"'{f}'" in ln for f in _data_files(node_dir))
            or any(f'"{v}"' in ln for v in values)
            or any(f'"{k}":' in ln for k in keys)
            or f'"{headline}"' in ln
        ]
        assert len(wanted) >= 8, wanted
        for ln in wanted:
            assert ln.strip() in text, (rec["node_id"], ln)
        # every file is named by a quoted name (the data file's in single quotes): none is said unnamed
        files = _data_files(node_dir)
        assert all(f'"{f}"' in text or f"'{f}'" in text for f in files)
        assert "No line of the program names" not in text, rec["node_id"]
        # a wrong kernel's null: the line and the comment above it
        i = next(i for i, ln in enumerate(program) if '"best_s": best' in ln)
        assert program[i - 1].strip() in text


# ------------------------------------------------------------ 2. waste --


def test_plotting_prompts_leave_out_the_rest_of_the_program(run):
    """The helpers no data file depends on are not sent: the program is not under "Current code",
    and under a fifth of its lines reach the prompt."""
    for rec in _records(run, "phase5_plot"):
        node_dir = run / "nodes" / rec["node_id"]
        text = _text(rec)
        assert "## Current code" not in text
        lines = [ln.strip() for ln in _program(node_dir).splitlines() if len(ln.strip()) > 25]
        shown = [ln for ln in lines if ln in text]
        assert len(shown) < len(lines) / 5, (rec["node_id"], len(shown), len(lines))
        ledger = {e["layer"]: e for e in rec["ledger"]}
        assert ledger["data_files"]["action"] == "kept"


def test_the_parent_plotting_script_is_offered_only_when_it_reads_this_nodes_files(run):
    """A child's plotting call gets the source node's working script when that script names one
    of the child's data files by a quoted name — and not otherwise (the stage-3 nodes' data are
    named otherwise): both cases occur in the run."""
    seen = {True: 0, False: 0}
    for rec in _records(run, "phase5_plot"):
        node_dir = run / "nodes" / rec["node_id"]
        node = json.loads((node_dir / "node.json").read_text())
        if not node.get("parent_id"):
            continue
        source = node["parent_id"]
        src_plots = json.loads((run / "nodes" / source / "plots.json").read_text())
        if not src_plots.get("figures"):
            continue
        script = (run / "nodes" / source / "workspace" / "plot_node.py").read_text()
        reads = any(f'"{f}"' in script for f in _data_files(node_dir))
        offered = "## Parent's plotting script" in _text(rec)
        assert offered == reads, (rec["node_id"], source, _data_files(node_dir))
        seen[reads] += 1
    assert seen[True] and seen[False], seen


# ------------------------------------------- 3. the machine and its load --


def test_benchmark_figure_calls_carry_the_caches_and_the_load(run):
    """A timing experiment's plotting and critique prompts carry the machine's caches (from the
    run's environment.json) and each run command's CPU/wall time and load (from run.json)."""
    env = json.loads((run / "environment.json").read_text())
    caches = (((env.get("sandbox") or {}).get("cpu") or {}).get("caches")) or (env.get("cpu") or {}).get(
        "caches"
    )
    recs = _records(run, "phase5_plot") + _records(run, "phase5_vlm")
    assert {r["phase"] for r in recs} == {"phase5_plot", "phase5_vlm"}
    for rec in recs:
        node_dir = run / "nodes" / rec["node_id"]
        metrics = json.loads((node_dir / "workspace" / "metrics.json").read_text())["metrics"]
        assert shows_machine(experiment_kinds([m["name"] for m in metrics]))
        text = _text(rec)
        if caches:
            assert "Caches:" in text and all(name in text for name in caches), rec["node_id"]
        record = read_artifact(node_dir / "run.json", RunRecord)
        assert record is not None and record.outputs
        for o in record.outputs:
            assert o.usage and o.usage in text, (rec["node_id"], o.usage)


# ------------------------------------------------ 4. the protocol --------


def test_figure_calls_carry_the_stage_protocol_as_the_review_does(run):
    """Wherever the node's execution review had the stage's evaluation protocol, its plotting and
    critique prompts carry the same section (a later draft's reference program left out)."""
    checked = 0
    for rec in _records(run, "phase5_plot") + _records(run, "phase5_vlm"):
        reviews = [
            r
            for r in prompt_records(run)
            if r["node_id"] == rec["node_id"] and r.get("label", "").startswith("exec_review")
        ]
        protocol = _section(_text(reviews[-1]), "Evaluation protocol")
        if not protocol:
            continue
        assert _section(_text(rec), "Evaluation protocol") == protocol, rec["node_id"]
        checked += 1
    assert checked


# ------------------------------------------------------ 5. the plan whole --


def test_review_and_figure_calls_carry_the_nodes_plan_whole(run):
    """The node's plan (plan.json: goal and strategy) is in its review, plotting and critique
    prompts whole — the strategy is longer than the 500 characters a table's short form keeps."""
    checked = 0
    for rec in prompt_records(run):
        if not (
            rec.get("phase") in ("phase5_plot", "phase5_vlm")
            or rec.get("label", "").startswith("exec_review")
        ):
            continue
        node_dir = run / "nodes" / rec["node_id"]
        node = json.loads((node_dir / "node.json").read_text())
        if node.get("operation") == "seed_eval" or not (node_dir / "plan.json").exists():
            continue
        plan = json.loads((node_dir / "plan.json").read_text())
        strategy = " ".join(plan["implementation_strategy"].split())
        assert len(strategy) > 500
        line = next(ln for ln in _text(rec).splitlines() if ln.startswith("What it set out to do"))
        assert strategy in line and "[...]" not in line, rec["node_id"]
        assert " ".join(plan["goal_summary"].split()) in line
        checked += 1
    assert checked


def test_plotting_prompts_list_each_string_fields_values(run):
    """Each string field of a node's data records (the kernel: the conditions a figure separates)
    is listed with its distinct values, as the node's own data file holds them — whatever line
    wrote them (relay s7 ln2 013, 020 read method names written from a variable in the program)."""
    for rec in _records(run, "phase5_plot"):
        node_dir = run / "nodes" / rec["node_id"]
        data_file = next(f for f in _data_files(node_dir) if f.endswith(".json"))
        records = json.loads((node_dir / "workspace" / data_file).read_text())["runs"]
        kernels = list(dict.fromkeys(r["kernel"] for r in records))
        assert len(kernels) >= 3
        line = next(ln for ln in _text(rec).splitlines() if ln.startswith("The values of the string fields"))
        assert f"kernel: {', '.join(kernels)}" in line, (rec["node_id"], line)
        assert "direction:" not in line  # metrics.json's fields are the metrics' own

"""Issue 28, relay runs s7 ln2 and mm2 (a capable model answering each request alone): the
findings on execution reviews, stage summaries, the environment and the code call's schema.

One scripted run whose experiment also writes ``curves.json`` (a loss, an accuracy and a weight
norm per epoch, a two-value weight vector), times itself (``train_time_s``: a benchmark metric,
so its load is judged), and whose stage-3 nodes add a metric of their own to their parent's
program, its headline unchanged (so their finding re-runs repeat the parent's values). Each test
derives what the prompts must say from the run's files (workspaces, run records, journal, events,
environment), never from constants of its own."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run

from ai_scientist.base.artifacts import RunRecord, read_artifact
from ai_scientist.base.paths import RUN_FILE, RunPaths
from ai_scientist.execution.environment import render_environment

# appended to every program: per-epoch lists (one loss-named, two not), a weight vector, a timing
CURVES = """
import json as _cj, math as _cm, os as _co, time as _ct
_cs = int(_co.environ.get("SEED", "0"))
_ce = 15
with open("curves.json", "w") as _cf:
    _cj.dump({"train_loss": [round(1.0 / (_i + 1), 6) for _i in range(_ce)],
              "val_accuracy": [round(0.5 + 0.02 * _i + 0.001 * _cs, 6) for _i in range(_ce)],
              "weight_norm": [round(_cm.sqrt(_i + 1) * 0.3, 6) for _i in range(_ce)],
              "w": [0.25, -0.5]}, _cf)
with open("metrics.json") as _cf:
    _cm_all = _cj.load(_cf)
_cm_all["metrics"].append({"name": "train_time_s", "value": round(_ct.process_time(), 6),
                           "direction": "minimize"})
with open("metrics.json", "w") as _cf:
    _cj.dump(_cm_all, _cf)
"""

# appended in stage 3 to the parent's program: a metric of the node's own, the headline unchanged
CONTROL = """
import json as _j, os as _o
_m = _j.load(open("metrics.json"))
_m["metrics"].append({{"name": "control_{nid}_acc", "value": round(0.61 + 0.013 * int(_o.environ.get("SEED", "0")), 6),
                      "direction": "maximize", "dataset": "synthetic"}})
_j.dump(_m, open("metrics.json", "w"))
"""


class CurvesResponder(ExampleResponder):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        program = next((f for f in answer["files"] if f["path"] == "experiment.py"), None)
        if program is None or "metrics.json" not in program["content"]:
            return json.dumps(answer)
        parent = self._parent_program(ctx.node_id) if ctx.stage == "stage3" else None
        if parent is not None:  # the parent's program as it is, plus a measurement of its own
            program["content"] = parent + CONTROL.format(nid=ctx.node_id)
        else:
            program["content"] += CURVES
        return json.dumps(answer)

    def _parent_program(self, node_id: str) -> str | None:
        from ai_scientist.base.fileio import read_jsonl

        for journal in self.root.rglob("journal.jsonl"):
            parent = None
            for rec in read_jsonl(journal):
                if (rec.get("node") or {}).get("id") == node_id:
                    parent = rec["node"].get("parent_id")
            path = journal.parent / "nodes" / str(parent) / "workspace" / "experiment.py"
            if parent and path.is_file():
                return path.read_text()
        return None


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("s8_nodes")
    code, run_dir, _ = start_run(
        root,
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=2",
        "agent.stages.stage4_max_iters=0",
        "agent.multi_seed_eval.finding_reruns=2",
        responder=CurvesResponder(root),
    )
    assert code == 0
    return run_dir


def _run_record(run: Path, node_id: str) -> RunRecord | None:
    return read_artifact(RunPaths(run).node(node_id).file(RUN_FILE), RunRecord)


def _lists(value: Any, path: str = "") -> list[tuple[str, list[Any]]]:
    """Every list of numbers in a JSON value, with its key path."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            key = f"{path}.{k}" if path else str(k)
            if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
                out.append((key, v))
            else:
                out += _lists(v, key)
        return out
    return []


def _close(text: str, value: float) -> bool:
    return math.isclose(float(text), value, rel_tol=1e-3, abs_tol=1e-9)


def test_a_review_shows_each_per_epoch_series_not_named_like_a_loss_compactly(run):
    """Every execution review of a node whose data file holds per-epoch lists not named like a
    loss (an accuracy, a weight norm: as long as the file's loss list) shows each with its length
    and its first, last, lowest and highest value, as the file has them; a list of another length
    with a name that says no step (a weight vector) is not shown (relay s7 ln2 023: the
    memorisation series never reached the reviewer)."""
    checked = 0
    for rec in prompt_records(run):
        if rec.get("phase") != "review":
            continue
        path = run / "nodes" / rec["node_id"] / "workspace" / "curves.json"
        if not path.is_file():
            continue
        lists = dict(_lists(json.loads(path.read_text())))
        steps = {len(v) for k, v in lists.items() if re.search(r"loss|error|residual", k)}
        expected = {
            k: v for k, v in lists.items() if not re.search(r"loss|error|residual", k) and len(v) in steps
        }
        assert len(expected) >= 2, lists  # the workload's accuracy and weight norm
        text = record_text(rec)
        for key, values in expected.items():
            m = re.search(
                rf"^- curves\.json {re.escape(key)} \((\d+) values\): first (\S+), last (\S+), min (\S+), max (\S+)$",
                text,
                re.M,
            )
            assert m, (rec["node_id"], key)
            assert int(m.group(1)) == len(values)
            for got, want in zip(
                m.groups()[1:], (values[0], values[-1], min(values), max(values)), strict=True
            ):
                assert _close(got, want), (key, got, want)
        for key in set(lists) - set(expected) - {k for k in lists if re.search("loss", k)}:
            assert not re.search(rf"^- curves\.json {re.escape(key)} \(", text, re.M), key
        checked += 1
    assert checked >= 4, checked


def _load_span(record: RunRecord) -> tuple[float, float, int | None]:
    seen = [
        v
        for o in record.outputs
        for v in ((o.load or {}).get("start"), (o.load or {}).get("end"))
        if v is not None
    ]
    others = [
        (o.load or {}).get("others") for o in record.outputs if (o.load or {}).get("others") is not None
    ]
    return min(seen), max(seen), max(others) if others else None


def _span_text(low: float, high: float) -> str:
    return f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}"


def test_a_timing_review_and_the_stage_summary_carry_the_machine_load(run):
    """A review of a run that times itself says the load during its run commands and, for a
    child, during its parent's (from each run.json's recorded load); each stage summary lists every
    node of the stage, seed re-runs included, with the load during its commands (relay s7 mm2 004,
    005, 008, 014, 018, 024: timings under load 6 on 2 cores judged beside idle ones)."""
    nodes = journal_nodes(run)
    reviews = 0
    for rec in prompt_records(run):
        if rec.get("phase") != "review" or rec["node_id"] not in nodes:
            continue
        record = _run_record(run, rec["node_id"])
        metrics = [
            m["name"]
            for m in json.loads((run / "nodes" / rec["node_id"] / "run.json").read_text())["metrics"]
        ]
        assert "train_time_s" in metrics
        low, high, _ = _load_span(record)
        text = record_text(rec)
        line = next(x for x in text.splitlines() if x.startswith("Machine load during the run commands"))
        assert f"this node's {_span_text(low, high)}" in line, line
        parent = nodes[rec["node_id"]].get("parent_id")
        if parent and _run_record(run, parent) is not None:
            plow, phigh, _ = _load_span(_run_record(run, parent))
            assert f"its parent {parent}'s {_span_text(plow, phigh)}" in line, line
        reviews += 1
    assert reviews >= 4, reviews
    summaries = 0
    for rec in prompt_records(run):
        if rec.get("phase") != "summary":
            continue
        stage = int(rec["label"].removeprefix("stage"))
        text = record_text(rec)
        block = text[text.index("Machine load during each node's run commands") :]
        for nid, node in nodes.items():
            record = _run_record(run, nid)
            if node.get("stage") != stage or record is None:
                continue
            low, high, others = _load_span(record)
            seed = f" (seed re-run of {node['parent_id']})" if node.get("operation") == "seed_eval" else ""
            assert re.search(
                rf"^- {nid}{re.escape(seed)}: {re.escape(_span_text(low, high))}\b", block, re.M
            ), nid
        summaries += 1
    assert summaries >= 3, summaries


def test_an_offline_code_call_offers_no_install_note_and_no_gpu_toolchain_without_a_gpu(run):
    """With no network in the sandbox (the run's environment.json), no code or plan call's schema
    offers the phase-1 note ("installing the dependencies"), and with no GPU where the code runs,
    none offers a CUDA toolchain (nvcc) as a compiler or a dependency, nor does the environment
    layer list one — though the sandbox probe found it (relay s7 mm2 001, 005)."""
    env = json.loads((run / "environment.json").read_text())
    sandbox = env["sandbox"]
    assert env["sandbox_network"] is False
    gpu = bool(sandbox.get("gpu_devices") or sandbox.get("gpus") or sandbox["limits"].get("gpus"))
    assert not gpu
    present = {"nvcc", "nvfortran"} & set(sandbox.get("tools") or {})
    checked = 0
    for rec in prompt_records(run):
        schema = (rec.get("params") or {}).get("schema") or {}
        guidance = (schema.get("properties") or {}).get("phase_guidance")
        if guidance is None:
            continue
        assert "phase1" not in guidance["properties"], rec["node_id"]
        assert "phase2" in guidance["properties"]  # the other steps' notes stay
        for name in present:
            assert f'"{name}"' not in json.dumps(schema), (rec["node_id"], name)
        checked += 1
    assert checked >= 3, checked
    layer = render_environment(env)
    tools_line = next(x for x in layer.splitlines() if x.startswith("- Compilers and build tools there:"))
    for name in present:
        assert name not in tools_line
    assert "gcc" in tools_line  # what is usable stays listed


def test_finding_re_runs_identical_to_their_parent_by_construction_are_not_ranked(run):
    """A stage-3 node whose program is its parent's plus a measurement of its own reports its
    parent's headline on its search run and on every seed (read from the journal): the stage
    end's re-ranking ranks one of the two, never both — the child is left out, or the parent when
    the child is the best, which then stands for it — and its decision says so instead of calling
    them "tied" (relay s7 ln2 026: finding re-runs "tied with" their parent by construction)."""
    nodes = journal_nodes(run)

    def seeds(x: str) -> dict[int, float]:
        return {
            n["seed"]: n["metric"]["value"]
            for n in nodes.values()
            if n.get("parent_id") == x and n.get("operation") == "seed_eval" and n.get("metric")
        }

    carried = [e["node_id"] for e in events(run) if e.get("type") == "stage_best" and e.get("stage") == 2]
    pool = {nid for nid, n in nodes.items() if n.get("stage") == 3 and n.get("operation") != "seed_eval"}
    pool |= set(carried[-1:])
    pairs = []
    for nid in pool:
        pid = nodes[nid].get("parent_id")
        if pid not in pool or not seeds(nid) or not seeds(pid):
            continue
        mine, theirs = seeds(nid), seeds(pid)
        if (
            all(theirs.get(k) == v for k, v in mine.items())
            and nodes[nid]["metric"]["value"] == nodes[pid]["metric"]["value"]
        ):
            pairs.append((nid, pid))
    assert pairs, "no stage-3 node repeats its parent's headline over the seeds"
    record = [e for e in events(run) if e.get("type") == "seed_rerank" and e.get("stage") == 3][-1]
    for child, parent in pairs:
        left, other = (parent, child) if child == record["node_id"] else (child, parent)
        assert record["same_as_parent"][left] == other, record.get("same_as_parent")
        assert left not in (record.get("means") or {}) and left not in record.get("measured", [])
        said = rf"\b{left}\b[^;:]* not ranked: [^;]*{other}'s[^;]*identical by construction"
        assert re.search(said, record["decision"]), record["decision"]
        assert not re.search(rf"tied with [^;]*\b{left}\b", record["decision"]), record["decision"]

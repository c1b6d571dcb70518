"""What the execution review, the node's plotting call and its critique see (issue 28).

A scripted run of the realistic workload (tests/realistic_workload.py: a ~20 kB program printing
~5 kB, three metrics, two data files and a matplotlib font cache under ``.cache/``), default
budget: every expectation is read from the run's own files — the metrics.json each node wrote,
the stdout its run command printed (its exec record), the files in its workspace, the journal —
and checked against the prompt logs, whose ``messages`` are exactly what was sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import content_text, events, journal_nodes, prompt_records, start_run
from realistic_workload import CACHE_FILE, DATA_FILES, RealisticResponder

from ai_scientist.base.nodedata import is_node_data
from ai_scientist.context import Budget, assemble, counter_for
from ai_scientist.phases.evidence import experiment_kinds
from ai_scientist.phases.plots import _json_outline, data_files_text

SMALL = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.stages.stage2_good_nodes=1",
    "agent.multi_seed_eval.num_seeds=1",
    "agent.plots.enabled=true",
    "agent.plots.max_figures=3",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("review_plots"), *SMALL, responder=RealisticResponder(buggy_nodes=())
    )
    assert code == 0, [e for e in events(run_dir) if e["type"] in ("internal_error", "node_failed")]
    return run_dir


def _prompt(rec: dict) -> str:
    return "\n".join(content_text(m.get("content")) for m in rec["messages"])


def _records(run_dir: Path, *, label: str = "", phase: str = "") -> list[dict]:
    return [
        r
        for r in prompt_records(run_dir)
        if str(r.get("label", "")).startswith(label) and str(r.get("phase", "")).startswith(phase)
    ]


def _run_stdout(node_dir: Path) -> str:
    """The stdout of the node's experiment command, from its exec record (phase 4, run 1)."""
    recs = sorted((node_dir / "exec").glob("*phase4*.json"))
    assert recs, node_dir
    rec = json.loads(recs[-1].read_text())
    return rec.get("stdout") or rec.get("stdout_tail") or ""


def _shown(value: float, text: str) -> bool:
    return any(form in text for form in {json.dumps(value), repr(value), f"{value:.6g}"})


def _workspace_data(workspace: Path) -> list[str]:
    """The experiment's data files, by an independent walk: data suffixes, no hidden part."""
    out = []
    for p in workspace.rglob("*"):
        rel = p.relative_to(workspace)
        if p.is_file() and p.suffix in (".json", ".csv", ".npy", ".npz", ".tsv") and len(rel.parts) <= 3:
            if not any(part.startswith(".") or part in ("__pycache__", "node_plots") for part in rel.parts):
                out.append(rel.as_posix())
    return out


# ------------------------------------------------------------ the review --


def test_every_review_carries_every_metric_value_and_the_output_tail(run):
    reviews = _records(run, label="exec_review")
    assert reviews
    for rec in reviews:
        node_dir = run / "nodes" / rec["node_id"]
        metrics = json.loads((node_dir / "workspace" / "metrics.json").read_text())["metrics"]
        assert len(metrics) == 3
        text = _prompt(rec)
        for m in metrics:
            assert re.search(rf"\b{re.escape(m['name'])}\b", text) and _shown(m["value"], text), m
        stdout = _run_stdout(node_dir)
        assert len(stdout) > 3000  # several kB: more than a prompt would show whole
        for line in [ln for ln in stdout.splitlines() if ln.strip()][-5:]:
            assert line in text, (rec["node_id"], line)
        ledger = {e["layer"]: e for e in rec["ledger"]}
        assert ledger["run_result"]["action"] == "kept"
        assert "execution_output" not in ledger  # no JSON preview of the output any more


def test_review_keeps_the_output_and_cuts_the_code_first():
    """Under pressure the program is what gets cut; the metrics and the output's tail stay."""
    code = "def f():\n    return 1\n" * 1200  # ~26 kB
    tail = "FINAL val_accuracy=0.8125"
    values = {
        "task": "# Idea\nMeasure X.",
        "instructions": "Review.",
        "response_format": "JSON.",
        "prior_code": code,
        "run_output": "epoch line\n" * 400 + tail,
        "run_result": "Command 1: `python3 x.py` exited 0\nMetrics (1):\n- val_accuracy = 0.8125",
        "node_brief": "Call: review the run of node n0001.",
    }
    p = assemble("exec_review", values, Budget(1500), counter_for("gpt-4o-mini"))
    ledger = {e["layer"]: e for e in p.ledger}
    assert ledger["run_result"]["action"] == "kept"
    # the code is cut to make room; the output keeps its whole configured tail window
    assert ledger["prior_code"]["action"] == "truncated" and "cut to fit" in ledger["prior_code"]["reason"]
    assert "cut to fit" not in ledger["run_output"]["reason"]
    assert ledger["run_output"]["tokens_after"] > 3 * ledger["prior_code"]["tokens_after"]
    user = p.messages[-1]["content"]
    assert "- val_accuracy = 0.8125" in user and tail in user


def test_summary_is_the_findings_and_a_seed_rerun_says_what_it_is(run):
    nodes = journal_nodes(run)
    reviewed = 0
    for rec in _records(run, label="exec_review"):
        node = nodes[rec["node_id"]]
        answer = json.loads(rec["response"]["raw"])
        assert {"findings", "remarks", "is_bug"} <= set(answer)
        if node["status"] == "good":
            assert node["summary"] == answer["findings"][:500]
            reviewed += 1
    assert reviewed
    seeds = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"]
    assert seeds
    for n in seeds:
        parent = nodes[n["parent_id"]]
        assert n["summary"].startswith(f"Seed re-run of node {parent['id']} with seed {n['seed']}:")
        assert parent["summary"] not in n["summary"]
        assert _shown(n["metric"]["value"], n["summary"])


# ------------------------------------------------------- plots, critique --


def test_every_plotting_prompt_names_every_data_file_and_no_cache(run):
    plots = _records(run, phase="phase5_plot")
    assert plots
    for rec in plots:
        workspace = run / "nodes" / rec["node_id"] / "workspace"
        assert (workspace / CACHE_FILE).is_file()  # the cache really was there
        files = _workspace_data(workspace)
        assert set(DATA_FILES) <= set(files)
        text = _prompt(rec)
        for name in files:
            assert re.search(rf"(?<![\w/.]){re.escape(name)}(?![\w])", text), (rec["node_id"], name)
        # (the program that wrote the cache may be shown: every layer but the code names no cache)
        shown = re.sub(r"^## Current code\n.*?(?=^## |\Z)", "", text, flags=re.S | re.M)
        assert "## Data files" in shown and ".cache" not in shown and "fontlist" not in shown
        # the number of figures the text allows is the schema's, from the config
        allowed = re.search(r"At most (\d+) figures", text)
        assert (
            allowed and int(allowed.group(1)) == rec["params"]["schema"]["properties"]["figures"]["maxItems"]
        )
    record = json.loads((run / "nodes" / plots[0]["node_id"] / "plots.json").read_text())
    assert not any(".cache" in f for f in record["data_files"])


def test_calls_say_what_they_are_for(run):
    nodes = journal_nodes(run)
    purposes = {"exec_review": "review the run of", "phase5_plot": "write the plotting script for",
                "phase5_vlm": "critique the figures of"}  # fmt: skip
    seen = set()
    for rec in prompt_records(run):
        key = "exec_review" if str(rec.get("label", "")).startswith("exec_review") else rec.get("phase")
        if key not in purposes:
            continue
        seen.add(key)
        text = _prompt(rec)
        assert "Operation: draft" not in text
        node = nodes[rec["node_id"]]
        assert f"Call: {purposes[key]} node {node['id']} (" in text, (key, rec["node_id"])
        if node["operation"] != "draft":
            assert f"node {node['parent_id']}" in text
    assert seen == set(purposes)


def test_a_critique_states_each_fact_once(run):
    critiques = _records(run, phase="phase5_vlm")
    assert critiques
    for rec in critiques:
        node_dir = run / "nodes" / rec["node_id"]
        figures = json.loads((node_dir / "plots.json").read_text())["figures"]
        text = _prompt(rec)
        for f in figures:
            assert text.count(f["caption"]) == 1 and text.count(f"- {f['file']}") == 1
        for heading in re.findall(r"^## .+$", text, re.M):
            assert text.count(heading + "\n") == 1, heading
        metrics = json.loads((node_dir / "workspace" / "metrics.json").read_text())["metrics"]
        for m in metrics:
            assert _shown(m["value"], text)
        # the workload's metrics name a training run and a timing: both kinds' criteria, no other
        assert "Training:" in text and "Benchmark or timing:" in text and "Numerical simulation:" not in text


class _BenchmarkResponder(ExampleResponder):
    """The example's program, but what it reports is a benchmark's: a speed-up and a rate."""

    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            f["content"] += (
                "\nimport json as _j\n_j.dump({'metrics': [{'name': 'speedup', 'value': 2.5, 'direction': "
                "'maximize'}, {'name': 'gflops', 'value': 3.25, 'direction': 'maximize'}]}, open('metrics.json', 'w'))\n"
            )
        return json.dumps(answer)


def test_the_machine_is_shown_to_a_benchmark_review_only(run, tmp_path):
    """The workload trains and times itself (``val_loss``, ``train_time_s``): its reviews get the
    training and the timing criteria but not the machine; a run reporting a speed-up and a GFLOP/s
    rate is a benchmark: its reviews and critiques see the machine (Environment) to check them."""
    for rec in _records(run, label="exec_review"):
        text = _prompt(rec)
        assert "Benchmark or timing:" in text and "Training:" in text and "## Environment" not in text
    code, bench, _ = start_run(
        tmp_path, *SMALL, "agent.stages.stage1_max_iters=1", responder=_BenchmarkResponder(buggy_nodes=())
    )
    assert code == 0
    calls = _records(bench, label="exec_review") + _records(bench, phase="phase5_vlm")
    assert {r["phase"] for r in calls} == {"review", "phase5_vlm"}
    for rec in calls:
        text = _prompt(rec)
        assert "## Environment" in text and "Benchmark or timing:" in text and "Training:" not in text
        assert "- speedup = 2.5" in text and "- gflops = 3.25" in text


# ------------------------------------------------------------ pure parts --


def test_experiment_kind_from_metrics_then_idea():
    assert experiment_kinds(["val_accuracy"]) == ["training"]
    assert experiment_kinds(["gflops", "speedup_vs_naive", "max_abs_diff"]) == ["benchmark"]
    assert experiment_kinds(["val_loss", "train_time_s"]) == ["training", "benchmark"]
    assert experiment_kinds(["energy_drift"]) == ["simulation"]
    assert experiment_kinds(["score"], "We simulate heat flow with a finite-difference solver.") == [
        "simulation"
    ]
    assert experiment_kinds(["score"], "A study of things.") == []


def test_node_data_rule():
    assert is_node_data("results.json") and is_node_data("data/run1/curves.csv")
    for path in (".cache/matplotlib/fontlist-v330.json", "a/.hidden/x.npy", ".x.json",
                 "__pycache__/x.json", "node_plots/a.json", "plots/a.csv", "x.py", "../x.json"):  # fmt: skip
        assert not is_node_data(path), path


def test_data_files_names_first_each_structure_once():
    per_run = {f"run{i}": {"train_loss": [0.5, 0.4], "acc": 0.9} for i in range(12)}
    outline = _json_outline(per_run)
    keys = ", ".join(per_run)  # every key named: a script indexes them
    assert outline == f'{{<each of 12 keys: {keys}>: {{"train_loss": [2 x float], "acc": float}}}}'
    nested = {"sizes": [{"n": 256, "blocked": [{"tile": 16, "ok": True}]}]}  # deep keys stay visible
    assert _json_outline(nested) == '{"sizes": [1 x {"n": int, "blocked": [1 x {"tile": int, "ok": bool}]}]}'
    files = [
        {"file": f"data/seed{i}/results.json", "bytes": 100 + i, "structure": _json_outline(per_run)}
        for i in range(3)
    ] + [{"file": "curves.csv", "bytes": 40, "header": "epoch,train_loss"}]
    text = data_files_text(files, metrics=None)
    names_end = max(text.index(f["file"]) for f in files)
    assert names_end < text.index("Structures:")
    assert text.count("train_loss") == 2  # the shared structure once, the csv header once
    assert text.count("structure S1") == 3


def test_prompt_layer_settings_name_layers_of_their_prompt():
    from dataclasses import fields

    from ai_scientist.context.layer import Layer
    from ai_scientist.context.spec import LAYERS, PROMPT_LAYERS, PROMPTS, layers_for

    settable = {f.name for f in fields(Layer)} - {"name", "role", "template", "key"}
    for prompt, own in PROMPT_LAYERS.items():
        for layer, settings in own.items():
            assert layer in PROMPTS[prompt], (prompt, layer)
            assert set(settings) <= settable, (prompt, layer)
            got = next(x for x in layers_for(prompt) if x.name == layer)
            assert all(getattr(got, k) == v for k, v in settings.items())
            assert got != LAYERS[layer]  # the setting really differs from the catalogue's

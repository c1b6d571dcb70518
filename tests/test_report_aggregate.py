"""Plot aggregation: manifest, figure checks, reflection on failures, the figure cap."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from PIL import Image
from pipeline_support import journal_nodes
from test_report_support import (
    BLANK_SCRIPT,
    PLOT_SCRIPT,
    ScriptedClient,
    default_responder,
    report_cfg,
)

from ai_scientist.execution.subprocess_backend import SubprocessExecutor
from ai_scientist.reporting.aggregate import aggregate_plots
from ai_scientist.reporting.errors import StepFailed, StepSkipped
from ai_scientist.reporting.images import check_figure
from ai_scientist.reporting.manifest import describe_file


def _executor():
    return SubprocessExecutor(python=sys.executable)


def test_check_figure_reasons(tmp_path):
    assert "not written" in check_figure(tmp_path / "missing.png")
    (tmp_path / "text.png").write_text("not an image")
    assert "not a readable image" in check_figure(tmp_path / "text.png")
    Image.new("RGB", (200, 100), (255, 255, 255)).save(tmp_path / "blank.png")
    assert "blank" in check_figure(tmp_path / "blank.png")
    arr = (np.random.default_rng(0).random((100, 200, 3)) * 255).astype("uint8")
    Image.fromarray(arr).save(tmp_path / "ok.png")
    assert check_figure(tmp_path / "ok.png") is None


def test_describe_file_kinds(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros((3, 4), dtype=np.float32), y=np.arange(5))
    (tmp_path / "b.csv").write_text("epoch,loss\n1,0.5\n2,0.4\n")
    (tmp_path / "c.json").write_text(json.dumps({"runs": [{"loss": 1.0}], "name": "x"}))
    (tmp_path / "d.npy").write_bytes(b"garbage")
    assert describe_file(tmp_path / "a.npz")["arrays"]["x"] == {"shape": [3, 4], "dtype": "float32"}
    csv = describe_file(tmp_path / "b.csv")
    assert csv["columns"] == ["epoch", "loss"] and csv["rows"] == 2
    assert describe_file(tmp_path / "c.json")["structure"] == {
        "runs": {"list_len": 1, "item": {"loss": "float"}},
        "name": "str",
    }
    assert describe_file(tmp_path / "d.npy")["error"].startswith("unreadable")


def test_blank_figure_rejected_then_fixed_by_reflection(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder(plot_scripts=(BLANK_SCRIPT, PLOT_SCRIPT)))
    result = aggregate_plots(run, report_cfg(tmp_path), client, _executor())
    assert [f["file"] for f in result["figures"]] == ["loss_all.png"] and result["rounds_used"] == 2
    second_prompt = client.calls[1]["messages"][-1]["content"]
    assert "empty.png: image is blank" in second_prompt and "Image.new" in second_prompt
    saved = json.loads((run / "figures" / "figures.json").read_text())
    assert saved["figures"][0]["caption"] == "Validation loss."


def test_only_blank_figures_fail_after_bounded_rounds(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder(plot_scripts=(BLANK_SCRIPT,)))
    cfg = report_cfg(tmp_path, plot_reflection_rounds=1, standard_figures=False)
    with pytest.raises(StepFailed, match="no usable figure after 2 round"):
        aggregate_plots(run, cfg, client, _executor())
    assert len(client.calls) == 2
    saved = json.loads((run / "figures" / "figures.json").read_text())
    assert saved["figures"] == [] and "blank" in saved["rejected"][0]["reason"]


def test_script_crash_is_fed_back(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(
        default_responder(plot_scripts=("raise SystemExit('boom: no data')", PLOT_SCRIPT))
    )
    result = aggregate_plots(run, report_cfg(tmp_path), client, _executor())
    assert result["figures"] and "exit code 1" in client.calls[1]["messages"][-1]["content"]
    assert "boom: no data" in client.calls[1]["messages"][-1]["content"]
    records = sorted((run / "figures" / "exec").glob("*_aggregate.json"))
    assert [json.loads(p.read_text())["exit_code"] for p in records] == [1, 0]


def test_max_figures_cap(tmp_path, run_copy):
    run = run_copy(tmp_path)
    many = PLOT_SCRIPT + "\nfor i in range(3):\n    fig.savefig(f'copy{i}.png', dpi=100)\n"

    def respond(messages, schema, ctx, role):
        figs = [{"file": "loss_all.png", "caption": "a"}] + [
            {"file": f"copy{i}.png", "caption": "b"} for i in range(3)
        ]
        return json.dumps({"script": many, "figures": figs})

    result = aggregate_plots(
        run,
        report_cfg(tmp_path, max_figures=2, plot_reflection_rounds=0),
        ScriptedClient(respond),
        _executor(),
    )
    assert len(result["figures"]) == 2
    assert sum(r["reason"] == "over report.max_figures" for r in result["rejected"]) == 2


def test_nothing_to_plot_is_a_skip(tmp_path):
    (tmp_path / "run").mkdir()
    client = ScriptedClient(default_responder())
    with pytest.raises(StepSkipped, match="nothing to plot"):
        aggregate_plots(tmp_path / "run", report_cfg(tmp_path), client, _executor())
    assert client.calls == []


def test_standard_figures_when_every_model_figure_failed(tmp_path, run_copy):
    """The model's figures stay blank through every round: the pipeline draws its own from the
    manifest (in the sandbox), checked like any figure, marked as the pipeline's in figures.json,
    with the model's last problems kept."""
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder(plot_scripts=(BLANK_SCRIPT,)))
    result = aggregate_plots(run, report_cfg(tmp_path, plot_reflection_rounds=1), client, _executor())
    assert len(client.calls) == 2  # the model's rounds ran first
    saved = json.loads((run / "figures" / "figures.json").read_text())
    assert saved == result and saved["source"] == "standard" and saved["script"] == "standard_plots.py"
    assert "blank" in saved["llm_problems"]
    files = [f["file"] for f in saved["figures"]]
    assert files == ["std_metric_by_stage.png", "std_curves.png"]
    for name in files:
        assert check_figure(run / "figures" / name) is None  # a real, non-blank image
    manifest = json.loads((run / "figures" / "manifest.json").read_text())
    best = [e for e in manifest["nodes"] if e["role"] == "best"]
    caption = saved["figures"][1]["caption"]
    best_id = best[-1]["node_id"]
    saved_by_node = json.loads((run / "nodes" / best_id / "workspace" / "results.json").read_text())
    series = [k for k, v in saved_by_node.items() if isinstance(v, list) and len(v) >= 3]  # a curve
    assert series and f"node {best_id}" in caption
    assert all(k in caption for k in series)
    assert journal_nodes(run)[best_id]["metric"]["name"] in saved["figures"][0]["caption"]
    records = sorted((run / "figures" / "exec").glob("*_aggregate.json"))
    assert [json.loads(p.read_text())["exit_code"] for p in records][-1] == 0


def test_standard_figures_read_hostile_data_in_the_sandbox(tmp_path, run_copy):
    """A best node's data file that is not valid JSON, or holds no numeric series: the metric
    figure is still drawn; a run whose nodes have no metric gets no standard figure either."""
    run = run_copy(tmp_path)
    for results in run.glob("nodes/*/workspace/results.json"):
        results.write_text('{"epochs": [1, 2, "x"], "nested": {"v": [NaN, 1, 2]}}')
    client = ScriptedClient(default_responder(plot_scripts=(BLANK_SCRIPT,)))
    result = aggregate_plots(run, report_cfg(tmp_path, plot_reflection_rounds=0), client, _executor())
    assert [f["file"] for f in result["figures"]] == ["std_metric_by_stage.png"]

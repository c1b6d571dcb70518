"""Issue 28, relay run s8 ln2 (report side, second pass): what the aggregation call, the paper's
figure reviews and the writer's reflection rounds are told. Every expectation is read from what a
scripted report really sent (its prompt logs) and the files the run wrote (the idea, the nodes'
metrics.json, the aggregation script, the figure reviews' cache)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from test_report_support import _plot_png, default_responder, report_cfg

from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


def _records(run: Path, before: set[Path]) -> list[dict[str, Any]]:
    logs = sorted(set((run / "nodes").glob("*/prompt_logs/*.json")) - before)
    return [json.loads(p.read_text()) for p in logs]


def _logs(run: Path) -> set[Path]:
    return set((run / "nodes").glob("*/prompt_logs/*.json"))


def _aggregate(run: Path, tmp_path: Path) -> list[dict[str, Any]]:
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots

    answer = default_responder()
    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "plotting"))
    )
    aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    return _records(run, before)


def test_the_aggregation_call_names_the_idea_and_the_metrics_files_layout(tmp_path: Path, run_copy):
    # relay s8 ln2 033: the plotter got neither the research idea (every other call has it) nor the
    # layout of a node's metrics.json ("holds: this entry's metrics"), so it could guess a
    # name -> value object and plot nothing; both are said now, from the run's own files
    run = run_copy(tmp_path)
    rec = next(r for r in _aggregate(run, tmp_path) if r["label"].startswith("aggregate"))
    user = _text(rec["messages"][-1])
    flat = " ".join(user.split())
    # the idea as the run holds it: its title and hypothesis, and what it compares (its experiments)
    idea = (RunPaths(run).idea_md).read_text()
    title = next(x[2:].strip() for x in idea.splitlines() if x.startswith("# "))
    sections = {
        h.split("\n", 1)[0].strip(): " ".join(h.split("\n", 1)[1].split()) for h in idea.split("\n## ")[1:]
    }
    assert f"The research idea the figures are evidence for: {title}" in user, user[-3000:]
    assert f"Hypothesis: {sections['Hypothesis']}" in flat
    assert f"What it compares: {sections['Experiments']}" in flat
    # the layout of a metrics.json the manifest lists, as the node's program really wrote it
    saved = json.loads((RunPaths(run).figures / "manifest.json").read_text())
    path = next(f["path"] for e in saved["nodes"] for f in e["files"] if f["path"].endswith("/metrics.json"))
    data = json.loads((RunPaths(run).figures / path).read_text())
    assert isinstance(data, dict) and list(data) == ["metrics"] and isinstance(data["metrics"], list)
    line = next(x for x in user.splitlines() if x.startswith("A node's metrics.json is"))
    assert '{"metrics": [{' in line and "a list of records" in line, line
    for key in data["metrics"][0]:
        assert f'"{key}":' in line, (key, line)
    # said once, in the manifest's header (before its block), not in the instructions
    assert user.count("A node's metrics.json is") == 1
    assert user.index("A node's metrics.json is") < user.index('{"nodes": [')
    # the stage summaries one a line (ln2 033: "...(0.909, 0.9105).- Stage 2: worked:")
    stages = [x for x in user.splitlines() if x.startswith("- Stage ")]
    assert stages and all(x.count("- Stage ") == 1 for x in stages), stages


def _review(run: Path, tmp_path: Path, file: str, caption: str, respond: Any = None) -> dict[str, Any]:
    """One paper figure review of ``figures/<file>`` with ``caption``; its prompt-log record."""
    from ai_scientist.reporting.vlm import review_figures

    answer = respond or default_responder()
    cfg = report_cfg(tmp_path)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    review_figures(run, cfg, llm, [{"file": file, "caption": caption}], phase="review")
    (rec,) = _records(run, before)
    assert rec["label"].startswith("figure_"), rec["label"]
    return rec


def test_a_second_figure_review_after_a_caption_revision_says_only_the_caption_can_change(
    tmp_path: Path, run_copy
):
    # relay s8 ln2 046: the re-check of a figure whose caption the writer revised did not say the
    # image was unchanged and final, so the reviewer's suggestions about the plot's title went
    # nowhere; it says so now, and what can still change (the caption)
    from ai_scientist.reporting.vlm import REVIEWS_CACHE

    run = run_copy(tmp_path)
    fig_dir = RunPaths(run).figures
    _plot_png(fig_dir / "fig_a.png", seed=5)
    first = _review(run, tmp_path, "fig_a.png", "Validation accuracy per configuration.")
    assert "Reviewed before" not in _text(first["messages"][-1])
    cache = json.loads((fig_dir / REVIEWS_CACHE).read_text())
    earlier = cache["last|fig_a.png"]
    second = _review(run, tmp_path, "fig_a.png", "Clean validation accuracy per configuration (seed 0).")
    user = _text(second["messages"][-1])
    cache = json.loads((fig_dir / REVIEWS_CACHE).read_text())
    now = cache["last|fig_a.png"]
    assert now["key"].split("|")[0] == earlier["key"].split("|")[0]  # the same image bytes
    assert now["caption"] != earlier["caption"]
    line = next(x for x in user.splitlines() if x.startswith("Reviewed before: "))  # a line of its own
    assert "the image is the same file, unchanged; only its caption was revised" in line, line
    assert f'(it was: "{earlier["caption"]}")' in line
    assert f"That review scored it {earlier['review']['score']}" in line
    for issue in earlier["review"]["issues"]:
        assert issue in line, issue
    assert "The image is not redrawn at this point" in line and "only the caption can still change" in line
    # a redrawn image (new bytes): its review says so and does not call the image final
    _plot_png(fig_dir / "fig_a.png", seed=11)
    third = _review(run, tmp_path, "fig_a.png", "Clean validation accuracy per configuration (seed 0).")
    line = next(x for x in _text(third["messages"][-1]).splitlines() if x.startswith("Reviewed before: "))
    assert line.startswith("Reviewed before: the image was redrawn since"), line
    assert "only the caption can still change" not in line

"""Issue 28, relay run s10 ln (session 10, report side, second part): what the report's calls are
told of the run's seeds, of chktex's warnings, of a previous figure review, of round 1's citation
queries, of one SEED's draw and of a benchmark's matrices against the caches. Every expectation is
read from what a scripted report really sent (its prompt logs) and the files the run wrote (the
journal, the resolved config, paper.tex, chktex's output)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from test_report_support import default_responder, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "examples" / "label_noise" / "references.bib"
CONFIG_NAME = re.compile(r"\b(?:agent|exec|report|llm)\.[a-z_]+")  # a config key's dotted name


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


def _logs(run: Path) -> set[Path]:
    return set((run / "nodes").glob("*/prompt_logs/*.json"))


def _records(run: Path, before: set[Path]) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(_logs(run) - before)]


def _run_seeds(run: Path) -> tuple[int, list[int]]:
    """(the search runs' SEED as the run's resolved config holds it, the re-runs' SEEDs as its
    journal holds them)."""
    cfg = yaml.safe_load(RunPaths(run).config.read_text())
    reruns = {
        int(r["node"]["seed"])
        for r in read_jsonl(RunPaths(run).journal)
        if isinstance(r.get("node"), dict) and r["node"].get("operation") == "seed_eval"
    }
    return int(cfg["agent"]["seed"]), sorted(reruns)


def test_the_report_calls_are_told_the_seeds_the_run_used_not_a_config_key(tmp_path: Path, run_copy):
    # relay s10 ln 033: the aggregate plotter's system message said the seed statistic is over
    # "seeds agent.seed+1 .. agent.seed+N", a config key the model never sees; it now names the
    # SEED values of the run's re-runs and of its search runs
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots
    from ai_scientist.reporting.errors import StepFailed

    run = run_copy(tmp_path)
    search, reruns = _run_seeds(run)
    assert reruns
    answer = default_responder()
    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "plotting"))
    )
    try:  # the plotting call is what is checked, whether its script then ran or not
        aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    except StepFailed:
        pass
    recs = _records(run, before)
    assert recs
    for rec in recs:
        text = "\n".join(_text(m) for m in rec["messages"])
        assert not CONFIG_NAME.findall(text), CONFIG_NAME.findall(text)
        line = next(x for x in text.splitlines() if "seed re-runs only" in x)
        said = re.search(r"seed re-runs only \(SEED ([\d, ]+)\)", line)
        assert said and [int(s) for s in said.group(1).split(",")] == reruns, line
        assert f"search run (SEED {search})" in line, line

"""What a capable model sees (issue 28, acceptance): a scripted run with a realistic workload.

The workload (tests/realistic_workload.py): a ~20 kB program printing ~5 kB, writing three metrics,
two data files and a matplotlib font cache. Default config but for the run's size (the small stage
caps of the pipeline tests) and the subprocess sandbox; report on. Every expectation is read from
the run's own files: the metrics each node wrote, the stdout its run command printed (its exec
record), the data files in its workspace, the journal's operations, the prompt logs as sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pipeline_support import FAST, content_text, events, journal_nodes, prompt_records, run_args
from realistic_workload import CACHE_FILE, DATA_FILES, RealisticResponder

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

# FAST without its report switch (the report's calls are checked too) and with plots on
OVERRIDES = [o for o in FAST if not o.startswith("report.")] + [
    "report.enabled=true",
    "report.citations.enabled=false",
    "agent.plots.enabled=true",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("capable")
    responder = RealisticResponder(buggy_nodes=())
    r, resources = setup_run(run_args(tmp, *OVERRIDES))
    code = execute(r, resources=resources, backend=ScriptedBackend(responder))
    assert code == 0, [e for e in events(r.dir) if e["type"] in ("internal_error", "node_failed")]
    return r.dir


def _prompt(rec: dict) -> str:
    return "\n".join(content_text(m.get("content")) for m in rec["messages"])


def _records(run_dir: Path, label_prefix: str) -> list[dict]:
    return [r for r in prompt_records(run_dir) if str(r.get("label", "")).startswith(label_prefix)]


def _stdout_of_run(node_dir: Path) -> str:
    """The stdout of the node's experiment command, from its exec records (the last run record)."""
    out = ""
    for path in sorted((node_dir / "exec").glob("*.json")):
        rec = json.loads(path.read_text())
        if "phase4" in path.name:
            out = rec.get("stdout_tail") or rec.get("stdout") or out
    return out


def _value_shown(value: float, text: str) -> bool:
    return any(form in text for form in {json.dumps(value), repr(value), f"{value:.4f}", f"{value:.6g}"})


def test_every_execution_review_carries_every_metric_value_and_the_stdout_tail(run):
    reviews = _records(run, "exec_review")
    assert reviews
    for rec in reviews:
        node_dir = run / "nodes" / rec["node_id"]
        metrics = json.loads((node_dir / "workspace" / "metrics.json").read_text())["metrics"]
        assert len(metrics) == 3
        text = _prompt(rec)
        for m in metrics:
            assert _value_shown(m["value"], text), (rec["node_id"], m)
        stdout = _stdout_of_run(node_dir)
        last = [ln for ln in stdout.splitlines() if ln.strip()][-3:]
        assert len(stdout) > 4000 and last
        for line in last:
            assert line in text, (rec["node_id"], line)


def _node_data_files(workspace: Path) -> list[str]:
    found = []
    for pat in ("*", "*/*"):
        for p in workspace.glob(pat):
            rel = p.relative_to(workspace)
            if p.is_file() and p.suffix in (".json", ".csv", ".npy", ".npz"):
                if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                    continue
                if rel.parts[0] in ("node_plots", "plots"):
                    continue
                found.append(rel.as_posix())
    return found


def test_every_node_plotting_prompt_names_every_data_file_and_no_cache(run):
    plots = [r for r in prompt_records(run) if r.get("phase") == "phase5_plot"]
    assert plots
    for rec in plots:
        workspace = run / "nodes" / rec["node_id"] / "workspace"
        assert (workspace / CACHE_FILE).is_file()  # the cache really was there
        text = _prompt(rec)
        files = _node_data_files(workspace)
        assert set(DATA_FILES) <= set(files)
        for name in files:
            assert re.search(rf"(?<![\w/.]){re.escape(name)}(?![\w])", text), (rec["node_id"], name)
        assert ".cache" not in text and "fontlist" not in text  # the program's text builds the name


def test_the_reports_data_manifest_lists_no_cache_file(run):
    aggregation = [
        r for r in prompt_records(run) if r.get("node_id") in (None, "run") and "plot" in r.get("phase", "")
    ]
    assert aggregation, sorted({(r.get("node_id"), r.get("phase")) for r in prompt_records(run)})
    for rec in aggregation:
        text = _prompt(rec)
        assert "results.json" in text and ".cache" not in text and "fontlist" not in text


def test_no_two_draft_prompts_of_one_stage_are_identical(run):
    nodes = journal_nodes(run)
    drafts = {nid for nid, n in nodes.items() if n.get("operation") == "draft"}
    assert len(drafts) >= 2
    seen: dict[str, str] = {}
    for rec in prompt_records(run):
        if (
            rec["node_id"] in drafts
            and rec.get("phase") in ("phase0", "phase2")
            and rec.get("attempt", 1) == 1
        ):
            key = json.dumps(rec["messages"], sort_keys=True)
            assert key not in seen or seen[key] == rec["node_id"], (seen.get(key), rec["node_id"])
            seen[key] = rec["node_id"]


def test_no_review_plotting_or_critique_prompt_calls_itself_a_draft(run):
    kinds = ("exec_review", "plot", "vlm", "metrics", "figure", "critique")
    checked = 0
    for rec in prompt_records(run):
        label = f"{rec.get('phase', '')}/{rec.get('label', '')}"
        if any(k in label for k in kinds) and not rec.get("phase", "").startswith("phase2"):
            checked += 1
            assert "Operation: draft" not in _prompt(rec), label
    assert checked


def test_no_prompt_exceeds_its_budget_images_counted(run):
    checked = 0
    for rec in prompt_records(run):
        budget = rec.get("budget") or {}
        limit = budget.get("limit")
        assert limit, f"{rec.get('path')}: no budget recorded"
        assert rec["prompt_tokens_with_images"] <= limit, (
            rec.get("path"),
            rec["prompt_tokens_with_images"],
            limit,
        )
        checked += 1
    assert checked


def test_every_figure_review_names_the_research_question(run):
    idea = json.loads((run / "idea.json").read_text())
    reviews = [r for r in prompt_records(run) if str(r.get("label", "")).startswith("figure_")]
    assert reviews
    for rec in reviews:
        assert f"Research question: {idea['title']}" in _prompt(rec)


def test_every_structured_prompt_says_how_long_its_answer_may_be(run):
    """A relay run's code call asked for a whole C program and its analysis under max_tokens 4096
    without saying so; a JSON answer cut at the limit is lost. Every structured call's text names the
    max_tokens its request was sent with."""
    structured = [r for r in prompt_records(run) if (r.get("params") or {}).get("schema")]
    assert structured
    for rec in structured:
        limit = rec["params"]["max_tokens"]
        assert f"cut off after {limit:,} tokens" in _prompt(rec), (rec["call_id"], rec["label"])


def test_a_judge_gets_the_protocol_without_the_instruction_to_copy_code(run):
    """A later draft's code call carries the protocol node's program and the instruction to copy its
    data and evaluation code; that node's review and figure critique keep the protocol (what must be
    measured alike) but not the program or the writing instruction (a relay run's review got both)."""
    copy = "You write a new program, but its"
    by_node: dict[str, list[dict]] = {}
    for rec in prompt_records(run):
        by_node.setdefault(rec["node_id"], []).append(rec)
    drafts = [
        nid
        for nid, recs in by_node.items()
        if any(r["phase"] == "phase2" and copy in _prompt(r) for r in recs)
    ]
    assert drafts, "no later draft got the protocol node's program"
    for nid in drafts:
        judges = [r for r in by_node[nid] if r["label"].startswith(("exec_review", "plot_critique"))]
        assert judges, nid
        for rec in judges:
            text = _prompt(rec)
            assert copy not in text, (nid, rec["label"])
            if rec["label"].startswith("exec_review"):  # the review judges comparability with it
                assert "## Evaluation protocol" in text, nid


def test_a_stage_summary_carries_what_each_nodes_figure_review_found(run):
    """The issue's "the critiques' findings never reach a later stage": each node's row in its
    stage's summary call says what the figure review of that node found (its problems, as the
    vision model answered them in the node's vlm.json)."""
    summaries = {r["label"]: r for r in prompt_records(run) if r["phase"] == "summary"}
    nodes = journal_nodes(run)
    checked = 0
    for nid, node in nodes.items():
        vlm_path = run / "nodes" / nid / "vlm.json"
        if node["operation"] == "seed_eval" or not vlm_path.exists():
            continue
        critique = json.loads(vlm_path.read_text()).get("critique") or {}
        problems = [p for p in critique.get("problems") or [] if p.strip()]
        rec = summaries.get(f"stage{node['stage']}")
        if not problems or rec is None:
            continue
        row = next(ln for ln in _prompt(rec).splitlines() if ln.startswith(f"| {nid} |"))
        assert f"Figure review: {problems[0][:60]}" in row or "Figure review: not valid" in row, row
        checked += 1
    assert checked >= 2

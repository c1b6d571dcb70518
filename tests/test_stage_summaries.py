"""Stage summaries: the ``summary`` role writes one per finished stage (a logged run-level call),
stored in ``stage_summaries/stage<N>.json``; the later stages' prompts and the writeup's input carry
it; a resume does not ask again; a replay reproduces it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from components import latex_or_skip
from pipeline_support import events, journal_nodes, prompt_records, start_run

from ai_scientist.base.fileio import read_json
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.main import main
from ai_scientist.reporting import prompts as report_prompts
from ai_scientist.reporting.runread import SEED_STATISTIC
from ai_scientist.reporting.writeup import stage_summaries
from ai_scientist.runloop.stage_summary import render_summary, summaries_text

DRIVER = Path(__file__).parent / "drive_run.py"


def _summary_calls(run_dir: Path) -> list[dict]:
    return [r for r in prompt_records(run_dir) if r["node_id"] == "run" and r["phase"] == "summary"]


def _stored(run_dir: Path) -> dict[int, dict]:
    paths = RunPaths(run_dir)
    return {n: read_json(paths.stage_summary(n)) for n in (1, 2, 3, 4) if paths.stage_summary(n).exists()}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("summaries"))
    assert code == 0
    return run_dir


def test_each_finished_stage_has_one_logged_summary_call_and_file(run_dir):
    finished = [e["stage"] for e in events(run_dir) if e["type"] == "stage_completed"]
    stored = _stored(run_dir)
    assert sorted(stored) == sorted(finished) == [1, 2, 3, 4]
    calls = _summary_calls(run_dir)
    assert [c["label"] for c in calls] == [f"stage{n}" for n in finished]
    nodes = journal_nodes(run_dir)
    best = {e["stage"]: e["node_id"] for e in events(run_dir) if e["type"] == "stage_best"}
    state = json.loads((run_dir / "state.json").read_text())
    for call, n in zip(calls, finished, strict=True):
        assert call["role"] == "summary" and call["stage"] == f"stage{n}" and not call["error"]
        s = stored[n]
        # the stored prose is the model's answer; best node and metric come from the journal
        assert s["summary"] == json.loads(call["response"]["raw"])
        assert s["best_node"] == best[n] and s["best_metric"] == nodes[best[n]]["metric"]
        assert state["stages"][str(n)]["summary"] == s["summary"]
        # the call saw the stage's facts: every search node of the stage by id
        facts = next(m["content"] for m in call["messages"] if m["role"] == "user")
        stage_nodes = [i for i, x in nodes.items() if x["stage"] == n and x["operation"] != "seed_eval"]
        assert stage_nodes and all(f"| {i} |" in facts for i in stage_nodes)
        assert {"stage_facts", "stage_summary"} <= {e["layer"] for e in call["ledger"]}


def test_later_stages_prompts_carry_the_earlier_summaries(run_dir):
    stored = _stored(run_dir)
    checked = set()
    for r in prompt_records(run_dir):
        if r["phase"] not in ("phase0", "phase2", "ideas", "summary") or not r["stage"]:
            continue
        stage = int(r["stage"].removeprefix("stage"))
        text = "\n".join(m["content"] for m in r["messages"] if isinstance(m.get("content"), str))
        earlier = [render_summary(stored[k]) for k in sorted(stored) if k < stage]
        entry = next(e for e in r["ledger"] if e["layer"] == "stage_summary")
        if not earlier:
            assert "## Previous stages" not in text and entry["action"] == "dropped"
            continue
        section = re.search(r"^## Previous stages\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        assert section, f"{r['node_id']} {r['phase']}: no stage summaries"
        # the summaries, then (when the call shows the evaluation protocol) the line saying their
        # advice on its settings does not apply
        body, _, advice = section.group(1).strip().partition("\nWhere these summaries advise changing ")
        # (summaries_text: the headings say once why a seed mean leaves the search run out)
        assert body.strip() == summaries_text(run_dir, before=stage)
        assert not advice or "(the evaluation protocol, below), keep them as they are" in advice
        assert entry["action"] == "kept"
        checked.add((stage, r["phase"]))
    assert {(2, "phase2"), (3, "phase2"), (4, "phase2"), (2, "ideas"), (4, "summary")} <= checked


def test_the_writeup_input_has_the_summaries(run_dir):
    stored = _stored(run_dir)
    rows = stage_summaries(run_dir)
    assert {r["stage"]: r.get("account") for r in rows} == {n: s["summary"] for n, s in stored.items()}
    text = report_prompts.render(
        "writeup_user.j2",
        page_limit=4,
        idea="idea",
        stages=rows,
        figures=[],
        figure_problems=[],
        memory_digest="",
        papers=[],
        seed_statistic=SEED_STATISTIC,
    )
    for s in stored.values():
        for key, value in s["summary"].items():
            assert f"- {key}: {value}" in text


def test_replay_reproduces_the_summaries(run_dir, tmp_path, capsys):
    assert main(["replay", str(run_dir), "--out", str(tmp_path / "replays")]) == 0
    replayed = tmp_path / "replays" / f"{run_dir.name}.replay"
    assert _stored(replayed) == _stored(run_dir)
    assert [c["messages"] for c in _summary_calls(replayed)] == [
        c["messages"] for c in _summary_calls(run_dir)
    ]


@pytest.mark.slow
def test_a_resume_reads_the_stored_summary_instead_of_asking_again(tmp_path):
    # killed right after stage 2's summary is stored, before the state says the stage is finished
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AI_SCIENTIST_FAILPOINTS": "stage_summary:2"},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run_dir = tmp_path / "experiments" / "run"
    before = RunPaths(run_dir).stage_summary(2).read_bytes()
    assert [c["label"] for c in _summary_calls(run_dir)] == ["stage1", "stage2"]
    res = subprocess.run(
        [sys.executable, str(DRIVER), "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert [c["label"] for c in _summary_calls(run_dir)] == ["stage1", "stage2", "stage3", "stage4"]
    assert RunPaths(run_dir).stage_summary(2).read_bytes() == before
    # stage 3 started from what stage 2 handed over and its prompts carry the stored summary
    stage3 = [r for r in prompt_records(run_dir) if r["stage"] == "stage3" and r["phase"] == "phase2"]
    carried = summaries_text(run_dir, before=3).split("\n\n")[-1]  # stage 2's, as the layer shows it
    assert carried.startswith("### Stage 2")
    assert stage3 and all(carried in "\n".join(m["content"] for m in r["messages"]) for r in stage3)


class NoSummary(ExampleResponder):
    """Answers every call but the stage summaries, which get text that is no JSON object."""

    def _summary(self, text, ctx):
        return "I would rather not."


def test_a_failed_summary_call_is_recorded_and_the_run_goes_on(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        "llm.max_attempts=1",
        responder=NoSummary(),
    )
    assert code == 0
    stored = _stored(run_dir)
    failed = [e for e in events(run_dir) if e["type"] == "stage_summary_failed"]
    ran = sorted({n["stage"] for n in journal_nodes(run_dir).values() if n["operation"] != "seed_eval"})
    assert ran == [1, 2] and sorted(stored) == [1, 2, 3, 4]
    assert [e["stage"] for e in failed] == ran  # a stage that ran no node is not asked about
    for n, s in stored.items():
        if n in ran:
            assert s["summary"] is None and s["error"] == next(e["reason"] for e in failed if e["stage"] == n)
        else:
            assert (
                s["summary"] is None
                and s["error"] is None
                and s["nodes"] == 0
                and "no summary call" in s["note"]
            )
    asked = {r["label"] for r in prompt_records(run_dir) if r["phase"] == "summary"}
    assert asked == {f"stage{n}" for n in ran}
    # stage 2's code prompts still carry stage 1's headline (from the journal) and why there is no more
    headline = render_summary(stored[1])
    assert headline.startswith("### Stage 1 (Initial implementation)") and "(no summary: " in headline
    stage2 = [r for r in prompt_records(run_dir) if r["stage"] == "stage2" and r["phase"] == "phase2"]
    assert stage2 and all(headline in "\n".join(m["content"] for m in r["messages"]) for r in stage2)


@pytest.mark.slow
def test_the_writeup_prompt_carries_the_summaries(tmp_path):
    latex_or_skip()
    code, run_dir, _ = start_run(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        *(f"agent.stages.stage{n}_max_iters=0" for n in (2, 3, 4)),
    )
    assert code == 0
    steps = {e["step"]: e["status"] for e in events(run_dir) if e["type"] == "report_step"}
    assert steps.get("writeup") == "ok", steps
    stored = _stored(run_dir)
    sections = [r for r in prompt_records(run_dir) if r["phase"] == "writeup" and r["label"] == "sections"]
    assert sections, sorted({(r["phase"], r["label"]) for r in prompt_records(run_dir)})
    text = "\n".join(m["content"] for m in sections[0]["messages"] if isinstance(m.get("content"), str))
    assert stored[1]["summary"]  # stages 2-4 ran no node: skipped, without a call
    assert all(s["summary"] is None and s["nodes"] == 0 for n, s in stored.items() if n > 1)
    for s in stored.values():
        for key, value in (s["summary"] or {}).items():
            assert f"- {key}: {value}" in text


def test_the_stage_facts_name_the_seeds_of_the_re_runs(tmp_path):
    """A capable model read two equal seed re-run values as a seed bug: the facts name the seeds
    (read from the journal's seed_eval nodes) next to the values (issue 28)."""
    from pipeline_support import journal_nodes, prompt_records, start_run

    code, run_dir, _ = start_run(tmp_path, "agent.stages.stage2_max_iters=0", "agent.stages.stage3_max_iters=0",
                                 "agent.stages.stage4_max_iters=0")  # fmt: skip
    assert code == 0
    nodes = journal_nodes(run_dir)
    (summary,) = [r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == "stage1"]
    text = summary["messages"][-1]["content"]
    seeds = sorted(
        n["seed"] for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"
    )
    assert seeds and f"(seeds {', '.join(str(x) for x in seeds)})" in text

"""Issue 28: the writer's inputs are complete and consistent, and the run has one definition of
node counts and of each stage's best.

Every expectation is read from the run's own files (journal.jsonl, state.json, events.jsonl,
stage_summaries/, figures/, paper/writeup.json, the prompt logs whose ``messages`` are exactly
what was sent) or from what the run printed, never from constants of the code under test.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, start_run
from test_report_support import FakeS2, ScriptedClient, default_responder, report_cfg

from ai_scientist.reporting.manifest import build_manifest
from ai_scientist.reporting.reflection import chktex_for_writer, overflow_message
from ai_scientist.reporting.runread import load_run
from ai_scientist.reporting.writeup import ReportOptions, write_paper


def _logs(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("nodes/*/prompt_logs/*.json"))]


def _text(rec: dict) -> str:
    return "\n".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in rec["messages"]
    )


def _journal_counts(run_dir: Path) -> dict[int, dict[str, int]]:
    """Per stage, from journal.jsonl's latest record of each node: search nodes by status, and the
    seed re-runs (operation seed_eval) apart."""
    latest: dict[str, dict] = {}
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        node = json.loads(line).get("node") if line.strip() else None
        if node:
            latest[node["id"]] = node
    out: dict[int, dict[str, int]] = {}
    for n in latest.values():
        c = out.setdefault(n["stage"], {"nodes": 0, "good": 0, "buggy": 0, "seed_runs": 0})
        if n["operation"] == "seed_eval":
            c["seed_runs"] += 1
        else:
            c["nodes"] += 1
            c["good"] += n["status"] == "good"
            c["buggy"] += n["status"] == "buggy"
    return out


@pytest.mark.slow
def test_report_inputs_and_one_definition_of_counts_and_best(tmp_path, capsys):
    latex_or_skip()
    matplotlib_or_skip()
    code, run_dir, _ = start_run(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
    )
    assert code == 0
    err = capsys.readouterr().err
    steps = {e["step"]: e for e in events(run_dir) if e["type"] == "report_step"}
    assert steps["writeup"]["status"] == "ok", steps["writeup"]
    logs = _logs(run_dir)

    # the writer's prompt names each figure's label with its file and caption, and the citation keys
    writeup = json.loads((run_dir / "paper" / "writeup.json").read_text())
    assert writeup["figures"]
    drafts = [r for r in logs if r["phase"] == "writeup" and r["label"] == "sections"]
    assert len(drafts) == 1
    sent = _text(drafts[0])
    for fig in writeup["figures"]:
        assert f"{fig['label']} = figures/{fig['file']}: {fig['caption']}" in sent, fig
    assert writeup["references"] == [] and "no reference was found" in sent  # citations were off

    # each figure is reviewed once per content (image bytes + caption): no two prompts alike, and
    # one call per distinct (image, caption) among the figures the VLM step and the review checked
    reviews = [r for r in logs if r["label"].startswith("figure_")]
    assert reviews
    bodies = [json.dumps(r["messages"], sort_keys=True) for r in reviews]
    assert len(bodies) == len(set(bodies))
    figs = json.loads((run_dir / "figures" / "figures.json").read_text())["figures"]

    def key(fig: dict) -> tuple[str, str]:
        return hashlib.sha256((run_dir / "figures" / fig["file"]).read_bytes()).hexdigest(), fig["caption"]

    assert len(reviews) == len({key(f) for f in figs} | {key(f) for f in writeup["figures"]})

    # node counts: the same numbers in the journal, the stage facts, the findings the writer got,
    # the status line and the run's last lines; seed re-runs counted apart, never as nodes
    counts = _journal_counts(run_dir)
    assert any(c["seed_runs"] for c in counts.values())
    state = json.loads((run_dir / "state.json").read_text())
    for stage, c in counts.items():
        facts = json.loads((run_dir / "stage_summaries" / f"stage{stage}.json").read_text())
        assert {k: facts[k] for k in c} == c, (stage, facts)
        head = f"## Stage {stage} "
        line = next(x for x in sent.splitlines() if x.startswith(head))
        assert re.search(rf": {c['nodes']} nodes?, {c['good']} good, {c['buggy']} buggy", line), line
        assert (f"; {c['seed_runs']} seed re-run" in line) == bool(c["seed_runs"]), line
        status = [x for x in err.splitlines() if f"] stage {stage} | nodes" in x][-1]
        assert f"good {c['good']} / buggy {c['buggy']}" in status, status
        assert (f"(+{c['seed_runs']} seed re-runs)" in status) == bool(c["seed_runs"]), status
        last = next(x for x in err.splitlines() if x.startswith(f"  stage {stage}: "))
        assert f"{c['good']} of {c['nodes']} nodes worked" in last, last
        # each stage's best: the stage end's choice, the same in every place
        best = state["stages"][str(stage)]["best"]["node_id"]
        assert facts["best_node"] == best
        assert f"best {best}" in last, last
        assert f"Best node {best}" in sent.split(head, 1)[1].split("\n## Stage", 1)[0]

    # in stage 4 the status line's best is the node the ablations are measured against
    carried = state["stages"]["3"]["best"]["node_id"]
    assert f"({carried}) |" in [x for x in err.splitlines() if "] stage 4 | nodes" in x][-1]

    # the reviewer is framed for the configured venue and gets each figure's caption
    cfg = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())
    (first,) = [r for r in logs if r["phase"] == "review" and r["label"] == "review_1"]
    assert cfg["report"]["template"] in first["messages"][0]["content"] and "NeurIPS" not in _text(first)
    for fig in writeup["figures"]:
        assert f"{fig['label']} = figures/{fig['file']}: {fig['caption']}" in _text(first)

    # the aggregation manifest lists no file under a hidden or cache directory
    manifest = json.loads((run_dir / "figures" / "manifest.json").read_text())
    paths = [f["path"] for e in manifest["nodes"] for f in e["files"]]
    assert not [p for p in paths if any(s.startswith(".") or s == "__pycache__" for s in p.split("/"))]


def test_writer_gets_citation_keys_and_every_good_node(tmp_path, run_copy):
    latex_or_skip()
    server = FakeS2()
    try:
        run = run_copy(tmp_path)
        client = ScriptedClient(default_responder())
        summary = write_paper(
            run, report_cfg(tmp_path), client, options=ReportOptions(s2_base_url=server.url, environ={})
        )
    finally:
        server.close()
    draft = next(c for c in client.calls if c["role"] == "writeup" and c["ctx"].label == "sections")
    sent = "\n".join(m["content"] for m in draft["messages"] if isinstance(m["content"], str))
    assert summary["references"]
    for key in summary["references"]:
        assert f"- {key}: " in sent
    # every good search node of every stage reaches the writer with its metrics, not only the best
    view = load_run(run)
    for stage in view.by_stage():
        for node in view.ranked_good(stage):
            assert node["id"] in sent, node["id"]
    # and the program of the run's best node (the last stage's best), for the Method's details
    best = str(list(view.best_per_stage().values())[-1]["id"])
    answer = json.loads((run / "nodes" / best / "code_answer.json").read_text())
    assert f"# The program of the run's best node ({best})" in sent
    for f in answer["files"]:
        assert f"{f['path']}:\n```\n{f['content'][:300]}" in sent


def test_manifest_skips_hidden_and_cache_dirs(tmp_path, run_copy):
    run = run_copy(tmp_path)
    view = load_run(run)
    best = next(iter(view.best_per_stage().values()))
    ws = view.node_dir(best["id"]) / "workspace"
    (ws / ".cache" / "matplotlib").mkdir(parents=True)
    (ws / ".cache" / "matplotlib" / "fontlist-v330.json").write_text('{"fonts": []}')
    (ws / "__pycache__").mkdir()
    (ws / "__pycache__" / "x.json").write_text("{}")
    (ws / "sub").mkdir()
    (ws / "sub" / "kept.json").write_text('{"a": [1, 2, 3]}')
    manifest = build_manifest(view, tmp_path / "fig")
    files = [f["path"] for e in manifest["nodes"] if e["node_id"] == best["id"] for f in e["files"]]
    assert f"data/{best['id']}/sub/kept.json" in files
    assert not [f for f in files if "/." in f or "__pycache__" in f], files


def test_page_overflow_says_by_how_much_and_protects_caveats():
    sections = {"introduction": "word " * 1200, "results": "word " * 800}
    msg = overflow_message(6, 4, {k: v.strip() for k, v in sections.items()})
    assert "2 pages over" in msg and "2000 words" in msg
    budget = int(re.search(r"to at most (\d+) words", msg).group(1))
    assert budget < 2000 * 4 / 6 and "keep every caveat" in msg


def test_a_cut_that_did_not_move_the_texts_end_is_said():
    """A relay run's second length repair asked for another word cut although the first (127 words)
    left the text ending at the same place (the floats set it): the message now says so."""
    sections = {"introduction": "word " * 700, "results": "word " * 600}
    sections = {k: v.strip() for k, v in sections.items()}
    stuck = overflow_message(5, 4, sections, 1.5, 3, 0.07, before=(1427, 5, 0.07))
    assert "from 1427 to 1300 words, yet the text still ends on page 5 (7% full then, 7% now)" in stuck
    assert "omit_figures" in stuck.split("yet the text still ends")[1]
    # a cut that gained room, or a first overrun, says nothing of the kind
    assert "yet the text" not in overflow_message(5, 4, sections, 1.5, 3, 0.07, before=(1427, 5, 0.6))
    assert "yet the text" not in overflow_message(5, 4, sections, 1.5, 3, 0.07)


def test_chktex_warnings_show_the_writers_line_and_drop_the_templates():
    tex = "\\documentclass{article}\n\\usepackage{x} ...\nHello , world.\n\\end{document}\n"
    warnings = [
        "paper.tex:2:16:11:You should use \\ldots to achieve an ellipsis.",
        "paper.tex:3:6:26:You ought to remove spaces in front of punctuation.",
    ]
    shown = chktex_for_writer(warnings, tex, ["Hello , world."])
    assert shown == [
        'on the line "Hello , world.": column 6: You ought to remove spaces in front of punctuation'
    ]


def test_view_shows_the_plan_merged_into_the_code_answer(tmp_path, run_copy):
    from ai_scientist.reporting.viewer import build_view_data

    run = run_copy(tmp_path)
    plan = {
        "goal_summary": "measure warm-up",
        "implementation_strategy": "one script",
        "plan_source": "merged",
    }
    (run / "nodes" / "n0003" / "plan.json").write_text(json.dumps(plan))
    shown = build_view_data(run)["nodes"]["n0003"]["plan"]
    assert "measure warm-up" in shown and "one script" in shown and "from the code answer" in shown


def test_status_line_tokens_move_with_every_call():
    import io

    from ai_scientist.reporting.progress import Progress

    total = {"prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0}
    p = Progress(stream=io.StringIO(), usage=lambda: total)
    total.update(prompt_tokens=1200, completion_tokens=300)  # a report call was answered
    p.attempt_started("run", "writeup", "sections", 1)
    assert p.fields["tokens"] == 1500
    total.update(prompt_tokens=2000)
    p.attempt_ended()
    assert p.fields["tokens"] == 2300
    p.close()


def test_a_warning_on_the_title_line_is_the_writers():
    tex = "\\title{A title the writer chose}\n\\maketitle\n"
    shown = chktex_for_writer(
        ["paper.tex:1:9:1:Command terminated with space."], tex, ["A title the writer chose"]
    )
    assert shown == [
        'on the line "\\title{A title the writer chose}": column 9: Command terminated with space'
    ]


def test_the_aggregation_schema_allows_the_figures_the_text_states():
    """The report's plotting text says "at most report.max_figures"; its schema allowed 12."""
    from ai_scientist.base.config import load_config
    from ai_scientist.base.images import plot_schema
    from ai_scientist.reporting import prompts

    cfg = load_config(None, ["report.max_figures=5"])
    assert plot_schema(cfg.report.max_figures)["properties"]["figures"]["maxItems"] == 5
    assert "at most 5 figures" in prompts.render(
        "plotting_system.j2", max_figures=cfg.report.max_figures, manifest={"data_root": "data", "nodes": []}
    )


def test_a_norm_in_inline_math_is_typeset_and_the_writer_is_told_what_math_may_hold(tmp_path):
    """A capable writer's "$\\frac{\\lambda}{2}\\|w\\|^2$" came out as escaped text: ``\\|`` (a norm)
    was refused. It passes now, and the writer's system message lists the commands math may use
    (read from the prompt log of a scripted run with the report on)."""
    import re

    from ai_scientist.reporting.latex import MATH_COMMANDS, safe_math

    assert safe_math(r"\frac{\lambda}{2}\|w\|^2") and not safe_math(r"\input{/etc/passwd}")
    assert not safe_math(r"\|w\|\write18")
    latex_or_skip(("pdflatex",))
    matplotlib_or_skip()
    code, run_dir, _ = start_run(tmp_path, "report.enabled=true", "report.citations.enabled=false",
                                 "report.num_reviews=0", "agent.stages.stage2_max_iters=0",
                                 "agent.stages.stage3_max_iters=0", "agent.stages.stage4_max_iters=0")  # fmt: skip
    assert code == 0
    logs = [
        json.loads(p.read_text()) for p in sorted((run_dir / "nodes" / "run" / "prompt_logs").glob("*.json"))
    ]
    writer = next(r for r in logs if r["phase"] == "writeup" and r["label"] != "citation_queries")
    system = writer["messages"][0]["content"]
    listed = set(re.findall(r"\\([A-Za-z]+)", system.split("these commands only:")[1].split("—")[0]))
    assert listed == set(MATH_COMMANDS)


def test_a_repeated_file_layout_is_described_once(tmp_path, run_copy):
    """Seed re-runs and children save the same files: each layout is described once, a repeat
    names the file that has it (a capable model's manifest repeated one outline eight times)."""
    from ai_scientist.reporting.manifest import describe_file

    run = run_copy(tmp_path)
    manifest = build_manifest(load_run(run), tmp_path / "fig")
    files = [f for e in manifest["nodes"] for f in e["files"]]
    by_path = {f["path"]: f for f in files}
    repeats = [f for f in files if "same_structure_as" in f]
    assert repeats, "the scripted run's nodes save files of one layout"
    for f in repeats:
        first = by_path[f["same_structure_as"]]
        assert "same_structure_as" not in first and files.index(first) < files.index(f)
        # the layout really is the same: described from the copied files themselves
        again = describe_file(tmp_path / "fig" / f["path"])
        origin = describe_file(tmp_path / "fig" / first["path"])
        assert {k: v for k, v in again.items() if k != "bytes"} == {
            k: v for k, v in origin.items() if k != "bytes"
        }
        assert not {"structure", "columns", "arrays"} & set(f)
    # every node the manifest lists keeps its files, and the manifest is smaller than undeduplicated
    full = sum(len(json.dumps(describe_file(tmp_path / "fig" / f["path"]))) for f in files)
    assert len(json.dumps(files)) < full


def test_omit_figures_is_each_answers_whole_list():
    """A relay run's writer asked whether a figure left out in one repair stays out: the schema
    says each answer gives the whole list, and the paper follows the latest answer alone."""
    from ai_scientist.reporting.writeup import kept_figures, writeup_schema

    figs = [{"label": "fig:1", "file": "a.png"}, {"label": "fig:2", "file": "b.png"}]
    described = writeup_schema(labels=["fig:1", "fig:2"])["properties"]["omit_figures"]["description"]
    assert "whole list" in described and "comes back" in described
    assert [f["label"] for f in kept_figures({"omit_figures": ["fig:2"]}, figs)] == ["fig:1"]
    assert [f["label"] for f in kept_figures({}, figs)] == ["fig:1", "fig:2"]  # the next answer
